// The job's allreduce across D devices over NCCL, bit-identical to the host's rank-ordered sum
// (orrery::runtime::sum_in_rank_order) for ANY placement of the W ranks on the D devices.
//
// Why not ncclAllReduce: its reduction order follows the ring/tree NCCL picks and depends on D;
// and a spliced device holds several ranks, whose contributions NCCL would see pre-summed. The
// weights would then depend on the placement. Here every element is summed by one device, in
// global rank order ((in[0] + in[1]) + in[2]) + ..., by the same kernel as the single-device
// backend (launch_sum_in_rank_order, bit-identical to the host).
//
// Algorithm (deterministic reduce-scatter + allgather). The `count` elements are split into D
// contiguous shards, shard e = [e*count/D, (e+1)*count/D) (lengths differ by at most one); device
// e owns shard e.
//   1. one ncclGroupStart/End: device d ncclSends shard e of each of its Wd local contributions
//      to device e (e != d, in ranks_by_device[d] order) and ncclRecvs shard d of each
//      contribution of every other device f into its scratch (one row per remote rank). NCCL
//      executes the calls between one pair of peers in order, so the k-th receive from f gets
//      f's k-th contribution: ranks_by_device[f][k].
//   2. launch_sum_in_rank_order over W rows in GLOBAL rank order 0..W-1 (a remote rank's row is
//      its scratch row, a local rank's row is read in place from its contribution: no copy to
//      self) into out's shard d.
//   3. allgather of the D summed shards into `out` on every device. count % D == 0: shards are
//      equal, ncclAllGather in place into out (no extra bytes, no extra pass). count % D != 0:
//      shards are padded to P = ceil(count/D) in a gather buffer, ncclAllGather of P per device,
//      then D device-local copies compact them into out. Cost of that choice: < D padding
//      floats on the wire (nothing) plus D device-local copies totalling N bytes (2N bytes of
//      HBM traffic: at ~3.3 TB/s HBM against ~0.45 TB/s NVLink per direction that is ~30% of
//      the allgather phase's time for D = 8 and ~55% for D = 2 within a node, a few % across
//      nodes over a 50 GB/s NIC), and it keeps one collective that NCCL tunes (ring, NVLS,
//      CollNet) for the data movement. The alternatives are D grouped ncclBroadcasts (D
//      collectives, ring pipelines only, each with its own latency) or grouped send/recv to
//      every peer (exact bytes, no compaction, but an all-to-all pattern that loads rings
//      unevenly off NVSwitch); neither is measured yet.
//      Sizes that are multiples of D (powers of two for D a power of two) take the in-place path.
//
// Cost per device against a plain ncclAllReduce of N bytes (ring: sends and receives
// 2*N*(D-1)/D):
//   sends     Wd * N*(D-1)/D   (phase 1: each local contribution minus the shard kept)
//           +      N*(D-1)/D   (phase 3: allgather, ring)
//   receives  (W - Wd) * N/D   (phase 1)  +  N*(D-1)/D   (phase 3)
// With W = D (one rank per device, Wd = 1) that is exactly the ring's 2*N*(D-1)/D. With
// splicing, Wd > 1 multiplies the first term: a device's contributions cannot be summed on it
// first without changing the rounding (the only partial sums of the rank-order chain are its
// prefixes in[0] + ... + in[k]). An uneven placement loads devices
// unevenly: the busiest device (largest Wd for sends, smallest Wd for receives) sets the time.
// Plus one kernel pass per device reading W*N/D and writing N/D bytes (the ring fuses its
// additions into the transfer), and, when count % D != 0, the compaction pass above.
// Latency: 2 collective phases (a grouped send/recv, an allgather) with a kernel between them,
// no pipelining across chunks yet (the sum waits for the whole reduce-scatter, the allgather
// for the whole sum); for small N that is ~2 collective latencies + 1 kernel launch against
// NCCL's single (tree/LL) allreduce.
// Memory per device: (W - Wd) * ceil(max_count/D) floats of scratch, plus D * ceil(max_count/D)
// floats of gather buffer when D > 1, allocated once in create().
#pragma once

#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "base/result.h"

namespace orrery::runtime::cuda {

class RankOrderedAllreduce {
 public:
  // comm: one NCCL rank per device, ncclCommCount == ranks_by_device.size() == D, and this
  // device's rank ncclCommUserRank(comm) == device_rank. NOT owned: the caller keeps it alive
  // while this object is used and destroys it afterwards (a communicator is expensive to build
  // and serves other collectives too). The CUDA device is the communicator's
  // (ncclCommCuDevice); `stream` must belong to it (or be 0, its legacy default stream).
  // ranks_by_device[e]: the global worker ranks on device e, in the order their contributions
  // are passed to allreduce() there; together a permutation of 0..W-1 (a device may hold none).
  // Every device must build its object with the same placement. max_count: the largest count
  // allreduce() will be called with; the device scratch is allocated here, once, on `stream`
  // (cudaMallocAsync), and freed on it when the object goes: `stream` must outlive it.
  static Result<RankOrderedAllreduce> create(ncclComm_t comm, int device_rank,
                                             std::vector<std::vector<int>> ranks_by_device,
                                             std::uint64_t max_count, cudaStream_t stream);

  RankOrderedAllreduce(RankOrderedAllreduce&& other) noexcept;
  RankOrderedAllreduce& operator=(RankOrderedAllreduce&& other) noexcept;
  RankOrderedAllreduce(const RankOrderedAllreduce&) = delete;
  RankOrderedAllreduce& operator=(const RankOrderedAllreduce&) = delete;
  ~RankOrderedAllreduce();

  // out[i] = sum over global ranks r = 0..W-1, in that order, of contribution_r[i], for i <
  // count, on every device. local_contribs: device pointers to `count` floats, one per rank of
  // this device, in ranks_by_device[device_rank] order; left unchanged. out: device pointer to
  // `count` floats that must not overlap any contribution. Every device calls it with the same
  // count (<= max_count).
  // Asynchronous on the stream: the result is there, and the contributions may be reused, once
  // the stream's work completes. Sets the calling thread's current device to the
  // communicator's for the call and restores it. Must NOT be called inside a caller's
  // ncclGroupStart/End (it issues two dependent NCCL phases with a kernel between them, which a
  // group would defer): drive several devices from one host thread each.
  // Not thread-safe for one object (one object per device and thread).
  Status allreduce(const std::vector<const float*>& local_contribs, float* out,
                   std::uint64_t count);

  int device_rank() const { return d_; }
  int devices() const { return static_cast<int>(placement_.size()); }
  int world() const { return world_; }
  int cuda_device() const { return cuda_device_; }
  std::uint64_t max_count() const { return max_count_; }

 private:
  RankOrderedAllreduce() = default;
  void release();

  ncclComm_t comm_ = nullptr;
  int d_ = 0;
  int world_ = 0;
  int cuda_device_ = 0;
  std::vector<std::vector<int>> placement_;
  std::uint64_t max_count_ = 0;
  std::uint64_t shard_cap_ = 0;     // ceil(max_count / D): a scratch row's length in floats
  cudaStream_t stream_ = nullptr;
  // Global rank -> index into the local contributions (local rank) or -1.
  std::vector<int> local_index_;
  // Global rank -> scratch row (remote rank) or -1.
  std::vector<int> remote_row_;
  float* scratch_ = nullptr;        // (W - Wd) rows of shard_cap_ floats
  float* gather_ = nullptr;         // D * shard_cap_ floats (D > 1 only)
  std::vector<const float*> rows_;  // per call: the W rows in global rank order
};

// Communicators for devices 0..ndev-1 of this machine, one NCCL rank per device, by
// ncclCommInitAll (single process; for tests and benchmarks). Release with destroy_comms.
Result<std::vector<ncclComm_t>> make_local_comms(int ndev);
// ncclCommDestroy on each (null entries skipped); the first error, after trying them all.
Status destroy_comms(const std::vector<ncclComm_t>& comms);

}  // namespace orrery::runtime::cuda
