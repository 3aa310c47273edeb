#include "runtime/proxy/cuda/nccl_allreduce.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/proxy/cuda/cuda_kernels.h"
#include "runtime/proxy/cuda/nccl_api.h"

namespace orrery::runtime::cuda {
namespace {

using u64 = std::uint64_t;

// Only after nccl_api() answered (create() and make_local_comms() check it first).
const NcclApi& nccl() { return *nccl_api(); }

Status nccl_missing() {
  std::string why;
  if (nccl_api(&why) != nullptr) return Status::Ok();
  return Status::Error(why);
}

Status cuda_error(const std::string& call, cudaError_t err) {
  return Status::Error(call + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                       ")");
}

Status nccl_error(const std::string& call, ncclResult_t res, ncclComm_t comm) {
  std::string reason = call + ": " + nccl().ncclGetErrorString(res);
  // The last error's details (which peer, which transport); may be empty.
  if (const char* last = nccl().ncclGetLastError(comm); last != nullptr && last[0] != '\0') {
    reason += " (" + std::string(last) + ")";
  }
  return Status::Error(reason);
}

// Makes `device` current for the calling thread and restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) {
      const cudaError_t err = cudaSetDevice(device);
      if (err != cudaSuccess) {
        status_ = cuda_error("cudaSetDevice(" + std::to_string(device) + ")", err);
        previous_ = -1;
      } else {
        changed_ = true;
      }
    }
  }
  ~DeviceScope() {
    if (changed_ && previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  bool changed_ = false;
  Status status_;
};

// Shard e of `count` elements over D devices: [e*count/D, (e+1)*count/D). The caller guarantees
// count * D fits in 64 bits (count <= max_count, checked in create()).
u64 shard_begin(u64 count, int devices, int e) {
  return count * static_cast<u64>(e) / static_cast<u64>(devices);
}
u64 shard_size(u64 count, int devices, int e) {
  return shard_begin(count, devices, e + 1) - shard_begin(count, devices, e);
}

bool overlaps(const float* a, const float* b, u64 count) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a);
  const auto pb = reinterpret_cast<std::uintptr_t>(b);
  const std::uintptr_t bytes = static_cast<std::uintptr_t>(count) * sizeof(float);
  return pa < pb + bytes && pb < pa + bytes;
}

Status check_placement(const std::vector<std::vector<int>>& placement, int* world) {
  if (placement.empty()) return Status::Error("placement has no devices");
  u64 total = 0;
  for (const auto& ranks : placement) total += ranks.size();
  if (total == 0) return Status::Error("placement has no ranks");
  if (total > static_cast<u64>(std::numeric_limits<int>::max())) {
    return Status::Error("placement has too many ranks");
  }
  const int w = static_cast<int>(total);
  std::vector<int> seen(static_cast<std::size_t>(w), -1);
  for (std::size_t e = 0; e < placement.size(); ++e) {
    for (int r : placement[e]) {
      if (r < 0 || r >= w) {
        return Status::Error("placement: rank " + std::to_string(r) + " on device " +
                             std::to_string(e) + " is outside 0.." + std::to_string(w - 1) +
                             " (the ranks must be a permutation of 0..W-1)");
      }
      if (seen[static_cast<std::size_t>(r)] >= 0) {
        return Status::Error("placement: rank " + std::to_string(r) + " appears on device " +
                             std::to_string(seen[static_cast<std::size_t>(r)]) + " and on device " +
                             std::to_string(e));
      }
      seen[static_cast<std::size_t>(r)] = static_cast<int>(e);
    }
  }
  *world = w;
  return Status::Ok();
}

}  // namespace

Result<RankOrderedAllreduce> RankOrderedAllreduce::create(
    ncclComm_t comm, int device_rank, std::vector<std::vector<int>> ranks_by_device,
    std::uint64_t max_count, cudaStream_t stream) {
  if (auto st = nccl_missing(); !st) return st;
  if (comm == nullptr) return Status::Error("RankOrderedAllreduce: null NCCL communicator");
  int world = 0;
  if (auto st = check_placement(ranks_by_device, &world); !st) {
    return Status::Error("RankOrderedAllreduce: " + st.reason());
  }
  const int devices = static_cast<int>(ranks_by_device.size());
  if (device_rank < 0 || device_rank >= devices) {
    return Status::Error("RankOrderedAllreduce: device rank " + std::to_string(device_rank) +
                         " outside 0.." + std::to_string(devices - 1));
  }
  if (max_count > std::numeric_limits<u64>::max() / static_cast<u64>(devices) / sizeof(float)) {
    return Status::Error("RankOrderedAllreduce: max_count " + std::to_string(max_count) +
                         " too large");
  }

  int comm_size = 0;
  if (ncclResult_t res = nccl().ncclCommCount(comm, &comm_size); res != ncclSuccess) {
    return nccl_error("ncclCommCount", res, comm);
  }
  if (comm_size != devices) {
    return Status::Error("RankOrderedAllreduce: the communicator has " +
                         std::to_string(comm_size) + " ranks, the placement " +
                         std::to_string(devices) + " devices");
  }
  int comm_rank = -1;
  if (ncclResult_t res = nccl().ncclCommUserRank(comm, &comm_rank); res != ncclSuccess) {
    return nccl_error("ncclCommUserRank", res, comm);
  }
  if (comm_rank != device_rank) {
    return Status::Error("RankOrderedAllreduce: device rank " + std::to_string(device_rank) +
                         " but the communicator's rank is " + std::to_string(comm_rank));
  }
  int cuda_device = -1;
  if (ncclResult_t res = nccl().ncclCommCuDevice(comm, &cuda_device); res != ncclSuccess) {
    return nccl_error("ncclCommCuDevice", res, comm);
  }

  RankOrderedAllreduce a;
  a.comm_ = comm;
  a.d_ = device_rank;
  a.world_ = world;
  a.cuda_device_ = cuda_device;
  a.max_count_ = max_count;
  a.shard_cap_ = (max_count + static_cast<u64>(devices) - 1) / static_cast<u64>(devices);
  a.stream_ = stream;
  a.local_index_.assign(static_cast<std::size_t>(world), -1);
  a.remote_row_.assign(static_cast<std::size_t>(world), -1);
  int remote = 0;
  for (int e = 0; e < devices; ++e) {
    const auto& ranks = ranks_by_device[static_cast<std::size_t>(e)];
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      if (e == device_rank) {
        a.local_index_[static_cast<std::size_t>(ranks[k])] = static_cast<int>(k);
      } else {
        a.remote_row_[static_cast<std::size_t>(ranks[k])] = remote++;
      }
    }
  }
  a.placement_ = std::move(ranks_by_device);
  a.rows_.resize(static_cast<std::size_t>(world));

  DeviceScope scope(cuda_device);
  if (!scope.status()) return Status::Error("RankOrderedAllreduce: " + scope.status().reason());
  const u64 scratch_bytes = static_cast<u64>(remote) * a.shard_cap_ * sizeof(float);
  if (devices > 1 && scratch_bytes > 0) {
    void* p = nullptr;
    if (cudaError_t err = cudaMallocAsync(&p, scratch_bytes, stream); err != cudaSuccess) {
      return cuda_error("cudaMallocAsync(" + std::to_string(scratch_bytes) +
                            " bytes of scratch on device " + std::to_string(cuda_device) + ")",
                        err);
    }
    a.scratch_ = static_cast<float*>(p);
  }
  const u64 gather_bytes = static_cast<u64>(devices) * a.shard_cap_ * sizeof(float);
  if (devices > 1 && gather_bytes > 0) {
    void* p = nullptr;
    if (cudaError_t err = cudaMallocAsync(&p, gather_bytes, stream); err != cudaSuccess) {
      return cuda_error("cudaMallocAsync(" + std::to_string(gather_bytes) +
                            " bytes of gather buffer on device " + std::to_string(cuda_device) +
                            ")",
                        err);
    }
    a.gather_ = static_cast<float*>(p);
    // The padding travels in the allgather but is never read: zero it once so that nothing
    // uninitialized is ever sent (and memory checkers stay quiet).
    if (cudaError_t err = cudaMemsetAsync(p, 0, gather_bytes, stream); err != cudaSuccess) {
      return cuda_error("cudaMemsetAsync(gather buffer)", err);
    }
  }
  return a;
}

RankOrderedAllreduce::RankOrderedAllreduce(RankOrderedAllreduce&& other) noexcept {
  *this = std::move(other);
}

RankOrderedAllreduce& RankOrderedAllreduce::operator=(RankOrderedAllreduce&& other) noexcept {
  if (this != &other) {
    release();
    comm_ = other.comm_;
    d_ = other.d_;
    world_ = other.world_;
    cuda_device_ = other.cuda_device_;
    placement_ = std::move(other.placement_);
    max_count_ = other.max_count_;
    shard_cap_ = other.shard_cap_;
    stream_ = other.stream_;
    local_index_ = std::move(other.local_index_);
    remote_row_ = std::move(other.remote_row_);
    scratch_ = std::exchange(other.scratch_, nullptr);
    gather_ = std::exchange(other.gather_, nullptr);
    rows_ = std::move(other.rows_);
    other.comm_ = nullptr;
  }
  return *this;
}

RankOrderedAllreduce::~RankOrderedAllreduce() { release(); }

void RankOrderedAllreduce::release() {
  if (scratch_ == nullptr && gather_ == nullptr) return;
  DeviceScope scope(cuda_device_);
  // Stream-ordered (allocated on the stream in create()): after the work queued on them, and
  // without cudaFree's wait for the whole device, where another communicator's kernels may be
  // waiting for a peer that waits for this thread.
  if (scratch_ != nullptr) cudaFreeAsync(scratch_, stream_);
  if (gather_ != nullptr) cudaFreeAsync(gather_, stream_);
  scratch_ = nullptr;
  gather_ = nullptr;
}

Status RankOrderedAllreduce::allreduce(const std::vector<const float*>& local_contribs,
                                       float* out, std::uint64_t count) {
  if (comm_ == nullptr) return Status::Error("RankOrderedAllreduce: used after move");
  const int devices = static_cast<int>(placement_.size());
  const auto& mine = placement_[static_cast<std::size_t>(d_)];
  if (local_contribs.size() != mine.size()) {
    return Status::Error("RankOrderedAllreduce: device " + std::to_string(d_) + " holds " +
                         std::to_string(mine.size()) + " ranks, got " +
                         std::to_string(local_contribs.size()) + " contributions");
  }
  if (count > max_count_) {
    return Status::Error("RankOrderedAllreduce: count " + std::to_string(count) +
                         " exceeds max_count " + std::to_string(max_count_));
  }
  if (count == 0) return Status::Ok();
  if (out == nullptr) return Status::Error("RankOrderedAllreduce: null output buffer");
  for (std::size_t k = 0; k < local_contribs.size(); ++k) {
    if (local_contribs[k] == nullptr) {
      return Status::Error("RankOrderedAllreduce: null contribution for rank " +
                           std::to_string(mine[k]));
    }
    if (overlaps(local_contribs[k], out, count)) {
      return Status::Error("RankOrderedAllreduce: the output overlaps the contribution of rank " +
                           std::to_string(mine[k]));
    }
  }

  DeviceScope scope(cuda_device_);
  if (!scope.status()) return Status::Error("RankOrderedAllreduce: " + scope.status().reason());

  const u64 my_begin = shard_begin(count, devices, d_);
  const u64 my_size = shard_size(count, devices, d_);
  const bool equal_shards = count % static_cast<u64>(devices) == 0;
  const u64 padded = (count + static_cast<u64>(devices) - 1) / static_cast<u64>(devices);

  // Phase 1: reduce-scatter's transfer. Both ends of a pair compute the same shard sizes, so a
  // skipped empty shard (count < D) is skipped on both.
  if (devices > 1) {
    Status first;
    auto keep = [&first](Status st) {
      if (first.ok() && !st.ok()) first = std::move(st);
    };
    if (ncclResult_t res = nccl().ncclGroupStart(); res != ncclSuccess) {
      return nccl_error("ncclGroupStart", res, comm_);
    }
    for (int e = 0; e < devices && first.ok(); ++e) {
      if (e == d_) continue;
      const u64 begin = shard_begin(count, devices, e);
      const u64 size = shard_size(count, devices, e);
      if (size == 0) continue;
      for (std::size_t k = 0; k < local_contribs.size() && first.ok(); ++k) {
        if (ncclResult_t res = nccl().ncclSend(local_contribs[k] + begin, size, ncclFloat, e, comm_,
                                        stream_);
            res != ncclSuccess) {
          keep(nccl_error("ncclSend(rank " + std::to_string(mine[k]) + "'s shard " +
                              std::to_string(e) + " to device " + std::to_string(e) + ")",
                          res, comm_));
        }
      }
    }
    if (my_size > 0) {
      for (int f = 0; f < devices && first.ok(); ++f) {
        if (f == d_) continue;
        for (int r : placement_[static_cast<std::size_t>(f)]) {
          float* row = scratch_ + static_cast<u64>(remote_row_[static_cast<std::size_t>(r)]) *
                                      shard_cap_;
          if (ncclResult_t res = nccl().ncclRecv(row, my_size, ncclFloat, f, comm_, stream_);
              res != ncclSuccess) {
            keep(nccl_error("ncclRecv(rank " + std::to_string(r) + "'s shard " +
                                std::to_string(d_) + " from device " + std::to_string(f) + ")",
                            res, comm_));
            break;
          }
        }
      }
    }
    // Always close the group, even after a failed call inside it.
    if (ncclResult_t res = nccl().ncclGroupEnd(); res != ncclSuccess) {
      keep(nccl_error("ncclGroupEnd (send/recv of the shards)", res, comm_));
    }
    if (!first.ok()) return first;
  }

  // Phase 2: this device's shard, summed over the W rows in global rank order.
  float* sum_out = (devices == 1 || equal_shards)
                       ? out + my_begin
                       : gather_ + static_cast<u64>(d_) * padded;
  if (my_size > 0) {
    for (int r = 0; r < world_; ++r) {
      const int local = local_index_[static_cast<std::size_t>(r)];
      rows_[static_cast<std::size_t>(r)] =
          local >= 0 ? local_contribs[static_cast<std::size_t>(local)] + my_begin
                     : scratch_ + static_cast<u64>(remote_row_[static_cast<std::size_t>(r)]) *
                                      shard_cap_;
    }
    if (auto st = launch_sum_in_rank_order(rows_.data(), world_, my_size, sum_out, stream_);
        !st) {
      return Status::Error("RankOrderedAllreduce: " + st.reason());
    }
  }
  if (devices == 1) return Status::Ok();

  // Phase 3: allgather of the summed shards.
  if (equal_shards) {
    // In place: device d's shard already sits at out + d*count/D.
    if (ncclResult_t res = nccl().ncclAllGather(out + my_begin, out,
                                                count / static_cast<u64>(devices), ncclFloat,
                                                comm_, stream_);
        res != ncclSuccess) {
      return nccl_error("ncclAllGather (in place, " +
                            std::to_string(count / static_cast<u64>(devices)) +
                            " floats per device)",
                        res, comm_);
    }
    return Status::Ok();
  }
  if (ncclResult_t res = nccl().ncclAllGather(sum_out, gather_, padded, ncclFloat, comm_, stream_);
      res != ncclSuccess) {
    return nccl_error("ncclAllGather (padded, " + std::to_string(padded) + " floats per device)",
                      res, comm_);
  }
  for (int e = 0; e < devices; ++e) {
    const u64 size = shard_size(count, devices, e);
    if (size == 0) continue;
    if (cudaError_t err = cudaMemcpyAsync(out + shard_begin(count, devices, e),
                                          gather_ + static_cast<u64>(e) * padded,
                                          size * sizeof(float), cudaMemcpyDeviceToDevice, stream_);
        err != cudaSuccess) {
      return cuda_error("cudaMemcpyAsync (compacting shard " + std::to_string(e) + ")", err);
    }
  }
  return Status::Ok();
}

Result<std::vector<ncclComm_t>> make_local_comms(int ndev) {
  if (auto st = nccl_missing(); !st) return st;
  int visible = 0;
  if (cudaError_t err = cudaGetDeviceCount(&visible); err != cudaSuccess) {
    return cuda_error("cudaGetDeviceCount", err);
  }
  if (ndev < 1 || ndev > visible) {
    return Status::Error("make_local_comms: asked for " + std::to_string(ndev) + " devices, " +
                         std::to_string(visible) + " visible");
  }
  std::vector<int> devlist(static_cast<std::size_t>(ndev));
  for (int i = 0; i < ndev; ++i) devlist[static_cast<std::size_t>(i)] = i;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ndev), nullptr);
  if (ncclResult_t res = nccl().ncclCommInitAll(comms.data(), ndev, devlist.data());
      res != ncclSuccess) {
    return Status::Error("ncclCommInitAll(" + std::to_string(ndev) +
                         " devices): " + nccl().ncclGetErrorString(res));
  }
  return comms;
}

Status destroy_comms(const std::vector<ncclComm_t>& comms) {
  if (auto st = nccl_missing(); !st) return st;
  Status first;
  for (std::size_t i = 0; i < comms.size(); ++i) {
    if (comms[i] == nullptr) continue;
    if (ncclResult_t res = nccl().ncclCommDestroy(comms[i]); res != ncclSuccess && first.ok()) {
      first = Status::Error("ncclCommDestroy(communicator " + std::to_string(i) +
                            "): " + nccl().ncclGetErrorString(res));
    }
  }
  return first;
}

}  // namespace orrery::runtime::cuda
