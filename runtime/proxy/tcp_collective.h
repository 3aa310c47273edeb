// The allreduce across machines: the TCP variant of CollectiveGroup, named
// "tcp://HOST:PORT/ID". The proxy holding rank 0 serves a hub at HOST:PORT (a thread of its own);
// every proxy of the job, on every machine, connects to it and sends its ranks' raw
// contributions. The hub sums all W in rank order with sum_in_rank_order, exactly as the shm
// segment does, and sends the result and the OR of the flags back to every connection: results
// stay independent of placement, splicing and machine count. Both ends use non-blocking sockets
// and keep reading while they write, so large buffers cannot deadlock the pair.
//
// Wire format (native byte order: the job's machines are one architecture): a 40-byte header
// {u32 magic "ORTC", u32 kind (1 contribution, 2 result), i32 rank, u32 0, i64 step, u64 flags,
// u64 count} and count floats. ID only tells incarnations apart in logs; the port must be one the
// rank-0 node can bind (the node agent derives it from (job, epoch)).
#pragma once

#include <memory>
#include <string>

#include "runtime/proxy/collective.h"

namespace orrery::runtime {

Result<std::unique_ptr<CollectiveGroup>> open_tcp_collective(const std::string& name, int world,
                                                             std::uint64_t capacity,
                                                             bool serve_hub);

}  // namespace orrery::runtime
