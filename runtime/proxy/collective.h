// The job's allreduce within one machine: a POSIX shm segment per job incarnation, named by
// LaunchSpec::collective, where the proxies of all the job's ranks meet (the first to arrive
// creates it). Each rank writes its contribution into its own slot, chunk by chunk
// (collective_chunks.h), and counts each chunk in; a chunk that every rank has written is
// summed in rank order ((r0 + r1) + r2) + ... by whichever participant claims it first: the
// contributors, and every participant waiting in result()/wait(), which help before they sleep.
// So W processes sum different chunks at once, and the first chunks are summed while the last
// ones are still being copied in (a reduce-scatter over claimers, pipelined with the copies);
// the sums land in the phase's result buffer, which every rank then reads (the all-gather). Each
// chunk is still exactly the rank-ordered sum, so the result never depends on which proxy or
// which arrival order produced it. The OR of all ranks' flags is published with the result
// (checkpoint / stop requests ride on the same exchange). Two phases (step parity): a rank
// contributes step s+1 only after reading the result of s, so the result of s stays readable
// until every rank has it; per-chunk counters carry their step (tagged::), so none is reset.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/proxy/ring.h"

namespace orrery::runtime {

// What the proxy needs of a job's allreduce group, whatever carries it.
class CollectiveGroup {
 public:
  virtual ~CollectiveGroup() = default;
  // Adds rank's contribution for `step` with its flags.
  virtual Status contribute(int rank, std::int64_t step, const float* data, std::uint64_t count,
                            std::uint64_t flags) = 0;
  // contribute(), and the group may assemble the sum of `step` straight in `into` (count floats,
  // which result() then returns) instead of a buffer of its own, and read `data` until then
  // instead of copying it, sparing the caller copies. Only for a caller that contributes one
  // rank and leaves `data` and `into` untouched until it has read the result (`into` may be
  // `data` itself: what the group still needs of `data` is read first).
  // By default the sum stays where result() finds it anyway.
  virtual Status contribute_into(int rank, std::int64_t step, const float* data,
                                 std::uint64_t count, std::uint64_t flags, float* into) {
    (void)into;
    return contribute(rank, step, data, count, flags);
  }
  // The rank-ordered sum of `step` once every rank has contributed, else nullptr; `flags` gets
  // the OR of all ranks' flags. Valid until the contribution of step + 2.
  virtual const float* result(std::int64_t step, std::uint64_t* flags) = 0;
  // Sleeps until the result of `step` may be there, at most timeout_ns.
  virtual void wait(std::int64_t step, long timeout_ns) = 0;
  // An error once the group can no longer complete a step (a peer proxy's connection lost, the
  // group never formed): a waiting rank fails its allreduce with it instead of waiting forever.
  virtual Status health() const { return Status::Ok(); }
};

// Opens a job incarnation's group by name: "tcp://HOST:PORT/ID" is the TCP variant
// (tcp_collective.h; the proxy holding rank 0 serves the rendezvous at HOST:PORT), anything else
// a shared-memory segment of that name on this machine. `ranks`: those this proxy contributes.
Result<std::unique_ptr<CollectiveGroup>> open_collective_group(const std::string& name, int world,
                                                               std::uint64_t capacity,
                                                               const std::vector<int>& ranks);

class Collective final : public CollectiveGroup {
 public:
  // Opens (or creates) the segment for `world` ranks and buffers of up to `capacity` floats.
  static Result<Collective> open(const std::string& name, int world, std::uint64_t capacity);
  static void unlink(const std::string& name);

  Status contribute(int rank, std::int64_t step, const float* data, std::uint64_t count,
                    std::uint64_t flags) override;
  const float* result(std::int64_t step, std::uint64_t* flags) override;
  void wait(std::int64_t step, long timeout_ns) override;

  int world() const;
  static std::size_t header_size();
  std::uint64_t capacity() const;

 private:
  struct Header;
  struct ChunkState;
  Header* h() const { return static_cast<Header*>(map_.data()); }
  ChunkState* chunks(int parity) const;
  float* slot(int parity, int rank) const;
  float* result_buf(int parity) const;
  // Sums every chunk of `step` that all ranks have written and nobody has claimed; publishes
  // the result when the last chunk is summed. Never waits.
  void help(std::int64_t step);
  void publish(std::int64_t step);
  void wake(int parity);
  ShmMapping map_;
};

}  // namespace orrery::runtime
