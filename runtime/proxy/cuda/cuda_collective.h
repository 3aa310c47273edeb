// The cuda backend's DeviceCollective (device_collective.h): the job's allreduce without a trip
// through host memory.
//
// Per device: one contribution slot per rank the device holds, and one result buffer, in device
// memory outside the job's window (stream-ordered allocations: splicing never parks them, and
// freeing them never waits for the whole device). A rank's contribution is copied into its slot
// on its own stream, so the proxy may park the rank at once: the park's copy-out is ordered
// after it. The sum is started by ready(), which the proxy asks once every proxy's flags for the
// step are in (so every device has its contributions queued), on the sum's stream after those
// copies:
// - one device (every rank of the job here): launch_sum_in_rank_order over the slots, the
//   kernel that is bit-identical to the host's sum;
// - D devices: RankOrderedAllreduce (nccl_allreduce.h) over a communicator of the D proxies,
//   bootstrapped with the negotiated id. ncclCommInitRank blocks until all D proxies join, and
//   NCCL connects send/recv peers at their first use, blocking the caller until the peer does
//   too: both run on a thread of its own, with a warm-up allreduce of a few floats, so the
//   proxy's thread never waits for a peer (it serves other jobs, whose NCCL kernels may wait for
//   it). Not formed within ORRERY_NCCL_INIT_TIMEOUT_S seconds (300): an error, and the job's
//   allreduce fails on every proxy (kFlagReduceFailed) instead of hanging.
// deliver() copies the result into the rank's buffer on the rank's stream, after the sum.
//
// One slot set and one result buffer suffice: a rank contributes step s+1 only after the result
// of s was delivered to it on the same stream, and the sum of s+1 waits for every contribution.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>

#include "base/result.h"
#include "runtime/proxy/device_collective.h"

namespace orrery::runtime::cuda {

struct CudaCollectiveEnv {
  int device = 0;
  // The bound worker's stream, made to wait for copies that brought its memory back.
  std::function<cudaStream_t()> worker_stream;
  // A runtime call's status (the backend's: it remembers errors that break the context).
  std::function<Status(cudaError_t, const char*)> rt;
};

// Whether this build and machine can join an allreduce across devices (NCCL loaded); why not.
bool can_reduce_across_devices(std::string* why = nullptr);
// A fresh communicator bootstrap id (ncclGetUniqueId).
Result<CollectiveId> new_nccl_id();

Result<std::unique_ptr<DeviceCollective>> open_cuda_collective(const DeviceCollectiveSetup& setup,
                                                               CudaCollectiveEnv env);

}  // namespace orrery::runtime::cuda
