// The allreduce across machines: the TCP variant of CollectiveGroup, named
// "tcp://HOST:PORT/ID". The job's proxies form a full mesh of TCP connections (tcp_mesh.h: a
// rendezvous at HOST:PORT, served by the proxy holding rank 0, hands out the table). Then it is a
// reduce-scatter and an all-gather, chunk-parallel and pipelined, with no hub:
//   - the buffer is cut into chunks by collective_chunks.h's plan (a function of (count, W) only,
//     the shm collective's plan), and chunk c is owned by rank c mod W, i.e. summed by the proxy
//     holding that rank;
//   - a contribution sends each chunk straight to its owner's proxy (chunks it owns itself are
//     copied into place; with contribute_into they are summed straight from the caller's buffer
//     into it and sent from there, and the result waits until they are sent), so every link
//     carries its share and every proxy sums its own chunks;
//   - an owner sums a chunk as soon as all W ranks' pieces are in, in rank order with
//     sum_in_rank_order_chunk (the same expression ((x0 + x1) + x2) + ... whoever sums it, so
//     the bits never depend on placement), and sends the sum to every other proxy at once.
// Per peer one thread receives (straight into the slot or result buffer the header names) and one
// sends (from a queue of pointers: no copy), so a proxy always drains its sockets while it sends
// and large buffers cannot deadlock. The OR of the flags rides on every message.
//
// Steps of one parity share a phase, whose inputs and result turn over separately, each by the
// step its messages name: links are independent, so a peer's pieces of s + 2 may arrive before
// an owner's sum of s (a job's first allreduce after a start or restore at s negotiates at s and
// sends its data at s + 2); that sum is still taken. Judging a sum by the inputs' step dropped
// it, and the whole job hung at its first data step (an 8-rank job restored across two nodes).
//
// Failure is an answer, never a hang: a lost connection (a dead proxy, or a vanished machine,
// found by TCP keepalive), a mesh that does not form, or ranks of one step contributing different
// counts (a proxy failing its part sends one float of flags) fail the step: health() says why,
// and a mismatched step is published with kFlagReduceFailed to every proxy.
//
// Wire format (native byte order: the job's machines are one architecture): a 48-byte header
// {u32 magic "ORTC", u32 kind (1 contribution, 2 sum, 3 failed step), i32 rank, u32 0,
// i64 step, u64 flags, u64 count, u32 offset (in chunks), u32 floats} and that many floats.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/proxy/collective.h"

namespace orrery::runtime {

// `ranks`: those this proxy contributes (its splice order); `serve_rendezvous` on the proxy
// holding rank 0. The mesh forms in the background: contributions made before it is up are
// kept and sent once it is.
Result<std::unique_ptr<CollectiveGroup>> open_tcp_collective(const std::string& name, int world,
                                                             std::uint64_t capacity,
                                                             bool serve_rendezvous,
                                                             const std::vector<int>& ranks);

}  // namespace orrery::runtime
