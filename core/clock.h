// The injected clock. The core never reads time itself: main() passes a SystemClock, tests and the
// simulator a ManualClock, so every run of the core is a deterministic function of its inputs.
#pragma once

#include <chrono>
#include <cstdint>

namespace orrery::core {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since an arbitrary fixed origin; never decreases.
  virtual std::int64_t now_ms() const = 0;
};

class SystemClock final : public Clock {
 public:
  std::int64_t now_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_ms = 0) : now_(start_ms) {}
  std::int64_t now_ms() const override { return now_; }
  // Time only moves forward; a negative step is ignored.
  void advance(std::int64_t ms) {
    if (ms > 0) now_ += ms;
  }

 private:
  std::int64_t now_;
};

}  // namespace orrery::core
