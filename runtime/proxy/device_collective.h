// The job's allreduce kept on the device: the contributions, the rank-ordered sum and the result
// stay in device memory (CUDA: summed by the bit-identical kernel, across devices over NCCL,
// cuda/cuda_collective.h). The proxy still exchanges each step's flags (checkpoint, stop) over
// the host CollectiveGroup, which also carries the negotiation (collective_negotiation.h) that
// decides, identically on every proxy of a job incarnation, whether the data goes this way.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "base/result.h"

namespace orrery::runtime {

using CollectiveId = std::array<unsigned char, 128>;  // NCCL's ncclUniqueId, opaque here

// What a proxy's backend offers the job's other proxies.
struct CollectiveOffer {
  bool across_devices = false;           // can join an allreduce across devices (NCCL loaded)
  std::array<unsigned char, 16> uuid{};  // the device's identity (two proxies on one GPU: same)
};

// What the job's proxies agreed, the same on each of them.
struct DeviceCollectiveSetup {
  int world = 0;
  std::vector<std::vector<int>> ranks_by_device;  // the ranks each proxy holds, ascending
  int device_rank = 0;                            // this proxy's index in ranks_by_device
  CollectiveId id{};                              // bootstrap of the communicator (devices > 1)
  std::uint64_t count = 0;                        // floats per allreduce, fixed for the job
};

class DeviceCollective {
 public:
  virtual ~DeviceCollective() = default;
  // The bound worker's (`rank`'s) contribution for `step`: `count` floats at device address
  // `addr`, read in stream order after the worker's queued work; the proxy may park the rank
  // right after. Once every rank of this device has contributed, the sum is started.
  virtual Status contribute(int rank, std::int64_t step, std::uint64_t addr,
                            std::uint64_t count) = 0;
  // Whether the sum of `step` is there; an error when it failed.
  virtual Result<bool> ready(std::int64_t step) = 0;
  // Writes the sum of `step` to `addr` of the bound worker (`rank`), ordered before the
  // worker's later work.
  virtual Status deliver(int rank, std::int64_t step, std::uint64_t addr, std::uint64_t count) = 0;
};

}  // namespace orrery::runtime
