// Persists staged checkpoint shards on a thread of their own, so that a periodic cut stalls a
// rank only for the copy of its state into host memory (snapshot, then persist: CheckFreq,
// FAST'21, and PyTorch DCP's async_save do the same). The shard is written, checksummed,
// fdatasync'ed and renamed there; only then is it reported done. The proxy publishes a done shard
// to the node runtime (WorkerSlot::checkpointed), which reports it to the core: a checkpoint the
// core hears of is always durable, whether it was persisted here or in line.
//
// Staged bytes are bounded (budget_bytes): a shard that does not fit is written in line by the
// caller, as before. One thread, one FIFO: shards are persisted in the order they were staged.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "runtime/proxy/shard.h"

namespace orrery::runtime {

// Whose shard it is: the slot and incarnation to publish it to once it is durable.
struct ShardOwner {
  int job = -1, rank = -1, slot = -1;
  std::int64_t epoch = 0, step = -1;
};

struct StagedShard {
  ShardOwner owner;
  std::string path;
  ShardMeta meta;
  std::unique_ptr<char[]> bytes;  // the allocations' bytes in table order, then the states'
  std::uint64_t size = 0;
};

struct PersistedShard {
  ShardOwner owner;
  std::string path;
  Status status;            // why it is not there, if it is not
  std::uint64_t bytes = 0;  // the file's size
  std::uint64_t ns = 0;     // the time it took to persist
};

class ShardPersister {
 public:
  // wake: called on the persister's thread after each shard is done (rings the proxy's doorbell).
  ShardPersister(std::uint64_t budget_bytes, std::function<void()> wake);
  // Persists whatever is still staged, then stops: a graceful stop loses no staged shard.
  ~ShardPersister();
  ShardPersister(const ShardPersister&) = delete;
  ShardPersister& operator=(const ShardPersister&) = delete;

  // Memory for a shard of n bytes, within the budget; null if it does not fit now (or n is 0).
  std::unique_ptr<char[]> reserve(std::uint64_t n);
  // Gives back a reservation that will not be submitted.
  void release(std::uint64_t n);
  // Queues a shard whose bytes came from reserve(); it counts against the budget until done.
  void submit(StagedShard shard);
  // The shards done since the last call, in order. Cheap when there are none (the proxy asks on
  // every turn of its loop): no lock is taken.
  std::vector<PersistedShard> take_done();
  // Waits until every submitted shard is done (and its wake-up called).
  void drain();
  std::uint64_t staged_bytes() const;

 private:
  void loop();

  const std::uint64_t budget_;
  std::function<void()> wake_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StagedShard> queue_;
  std::vector<PersistedShard> done_;
  std::atomic<bool> any_done_{false};  // done_ is not empty
  std::uint64_t staged_ = 0;  // reserved and not yet persisted
  std::uint64_t busy_ = 0;    // submitted and not yet done
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace orrery::runtime
