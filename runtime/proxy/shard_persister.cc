#include "runtime/proxy/shard_persister.h"

#include <chrono>
#include <new>

namespace orrery::runtime {
namespace {

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// Writes a whole staged shard (write, CRC, fdatasync, rename, directory fsync); the file's size.
Result<std::uint64_t> persist_shard(const std::string& path, const ShardMeta& meta,
                                    const char* bytes, std::uint64_t size) {
  auto w = ShardWriter::open(path, meta);
  if (!w) return w.status();
  if (auto s = w->append(bytes, size); !s) return s;
  return w->finish();
}

}  // namespace

ShardPersister::ShardPersister(std::uint64_t budget_bytes, std::function<void()> wake)
    : budget_(budget_bytes), wake_(std::move(wake)), thread_([this] { loop(); }) {}

ShardPersister::~ShardPersister() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::unique_ptr<char[]> ShardPersister::reserve(std::uint64_t n) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (n == 0 || n > budget_ || staged_ > budget_ - n) return nullptr;
    staged_ += n;
  }
  // Not value-initialised: every byte is overwritten by the snapshot.
  std::unique_ptr<char[]> p(new (std::nothrow) char[n]);
  if (!p) {
    std::lock_guard<std::mutex> l(mu_);
    staged_ -= n;
  }
  return p;
}

void ShardPersister::release(std::uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  staged_ -= n;
}

void ShardPersister::submit(StagedShard shard) {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++busy_;
    queue_.push_back(std::move(shard));
  }
  cv_.notify_all();
}

std::vector<PersistedShard> ShardPersister::take_done() {
  std::vector<PersistedShard> out;
  if (!any_done_.load(std::memory_order_acquire)) return out;
  std::lock_guard<std::mutex> l(mu_);
  out.swap(done_);
  any_done_.store(false, std::memory_order_relaxed);
  return out;
}

void ShardPersister::drain() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return busy_ == 0; });
}

std::uint64_t ShardPersister::staged_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return staged_;
}

void ShardPersister::loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing is left to persist
    StagedShard s = std::move(queue_.front());
    queue_.pop_front();
    l.unlock();
    const std::uint64_t t0 = steady_ns();
    auto w = persist_shard(s.path, s.meta, s.bytes.get(), s.size);
    PersistedShard d{s.owner, s.path, w ? Status::Ok() : w.status(), w ? *w : 0, steady_ns() - t0};
    s.bytes.reset();
    l.lock();
    staged_ -= s.size;
    done_.push_back(std::move(d));
    any_done_.store(true, std::memory_order_release);
    if (wake_) {
      l.unlock();
      wake_();
      l.lock();
    }
    --busy_;  // after the wake-up: drain() returns once every shard is done and announced
    cv_.notify_all();
  }
}

}  // namespace orrery::runtime
