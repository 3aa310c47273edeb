// The worker library's host memory shared with its proxy: the bulk window (large copies, the
// host allreduce across machines) and the reduce buffer (Worker::host_buffer), and the host
// allreduce that uses them (Worker::allreduce_host; worker.h says what each path costs).
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "runtime/proxy/collective.h"
#include "runtime/worker/worker.h"

namespace orrery::runtime {

// A shm object of `size` bytes, mapped here and by the proxy (Op::kWindow: `which` 0 the bulk
// window, 1 the reduce buffer), its name unlinked once both sides hold their mapping.
Result<ShmMapping> Worker::map_shared(std::uint64_t size, std::uint64_t which) {
  // The job and rank too: workers of one process (tests, a host of several ranks) never collide.
  const std::string name = "/orrery-win-" + std::to_string(::getpid()) + "-" +
                           std::to_string(env_.job) + "-" + std::to_string(env_.rank) + "-" +
                           std::to_string(window_gen_++);
  auto m = ShmMapping::create(name, size);
  if (!m) return Status::Error(m.reason());
  std::memcpy(ring_->data(), name.c_str(), name.size() + 1);
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kWindow);
  r.a[0] = size;
  r.a[1] = which;
  Status st = status_of(call(r), which == 0 ? "bulk window" : "reduce buffer");
  ::shm_unlink(name.c_str());  // both sides hold their mapping; nothing to clean up later
  if (!st) return st;
  return std::move(m.value());
}

// The window grows to the largest transfer asked (a power of two, at most kMaxWindowBytes: larger
// transfers go in window-sized pieces). Host memory outside the device's allocation sequence:
// nothing a restore must repeat.
Status Worker::ensure_window(std::uint64_t bytes) {
  constexpr std::uint64_t kMaxWindowBytes = 1ull << 30;
  bytes = std::min(bytes, kMaxWindowBytes);
  if (window_.size() >= bytes) return Status::Ok();
  std::uint64_t size = 4ull << 20;
  while (size < bytes) size *= 2;
  auto m = map_shared(size, 0);
  if (!m) return Status::Error("bulk window: " + m.reason());
  window_ = std::move(m.value());
  return Status::Ok();
}

// Its own mapping, not the bulk window: large copies stage through that one, and they must
// never overwrite the gradients a job keeps here between its steps.
Result<float*> Worker::host_buffer(std::uint64_t count) {
  if (count == 0 || count > (1ull << 28)) return Status::Error("host_buffer: bad count");
  const std::uint64_t bytes = (count * sizeof(float) + 4095) / 4096 * 4096;
  if (reduce_buf_.size() < bytes) {
    auto m = map_shared(bytes, 1);
    if (!m) return Status::Error("host_buffer: " + m.reason());
    if (reduce_buf_.size() > 0) std::memcpy(m->data(), reduce_buf_.data(), reduce_buf_.size());
    reduce_buf_ = std::move(m.value());
  }
  return static_cast<float*>(reduce_buf_.data());
}

Result<std::uint64_t> Worker::allreduce_host(float* data, std::uint64_t count,
                                             std::int64_t step) {
  if (count == 0 || count > (1ull << 28)) return Status::Error("allreduce_host: bad count");
  if (env_.collective.rfind("tcp://", 0) == 0) return allreduce_window(data, count, step);
  if (!host_coll_ || count > host_cap_) {
    // Every rank makes the same calls, so every rank takes the same capacity and name.
    int log2 = 18;
    while ((1ull << log2) < count) ++log2;
    auto c = Collective::open(env_.collective + "-h" + std::to_string(log2), env_.world,
                              1ull << log2);
    if (!c) return Status::Error("allreduce_host: " + c.reason());
    host_coll_ = std::make_unique<Collective>(std::move(c.value()));
    host_cap_ = 1ull << log2;
    host_name_ = env_.collective + "-h" + std::to_string(log2);
    host_seq_ = 0;
    host_unlinked_ = false;
  }
  // The safe point's one-float device buffer, allocated at the first call: orrery.torch's
  // allocation log counts on this allocation (python/orrery/_allocs.py, WORKER_FLAG_BYTES), so a
  // restore repeats the same device allocation sequence whatever path this incarnation takes.
  if (flag_buf_ == 0) {
    auto b = alloc(64);
    if (!b) return Status::Error("allreduce_host: " + b.reason());
    flag_buf_ = b.value();
  }
  const std::int64_t seq = host_seq_++;
  if (auto st = host_coll_->contribute(env_.rank, seq, data, count, 0); !st) {
    return Status::Error("allreduce_host: " + st.reason());
  }
  auto flags = allreduce(flag_buf_, 1, step);  // the safe point
  if (!flags) return flags.status();
  // Every rank's data is in (each contributes before its safe point): help sum, then copy out.
  const float* res = nullptr;
  while ((res = host_coll_->result(seq, nullptr)) == nullptr) host_coll_->wait(seq, 1'000'000);
  std::memcpy(data, res, count * sizeof(float));
  if (!host_unlinked_) {  // every rank has it open: its name can go
    Collective::unlink(host_name_);
    host_unlinked_ = true;
  }
  return flags;
}

// Across machines: the proxy sums over the TCP collective straight from shared memory and leaves
// the sum there; no device memory involved (orrery.torch does not call allreduce_host across
// machines: it reduces through its own state area). Data in the reduce buffer (host_buffer) is
// summed where it lies; anything else is copied into the bulk window and back.
Result<std::uint64_t> Worker::allreduce_window(float* data, std::uint64_t count,
                                               std::int64_t step) {
  const std::uint64_t bytes = count * sizeof(float);
  const auto* base = static_cast<const unsigned char*>(reduce_buf_.data());
  const auto* at = reinterpret_cast<const unsigned char*>(data);
  if (base != nullptr && at >= base && at + bytes <= base + reduce_buf_.size() &&
      (at - base) % sizeof(float) == 0) {
    return safe_point(count, step, 1 + static_cast<std::uint64_t>(at - base) / sizeof(float));
  }
  if (auto st = ensure_window(bytes); !st) return st;
  if (window_.size() < bytes) return Status::Error("allreduce_host: buffer too large");
  std::memcpy(window_.data(), data, bytes);
  auto flags = safe_point(count, step, 0);
  if (!flags) return flags.status();
  std::memcpy(data, window_.data(), bytes);
  return flags;
}

Result<std::uint64_t> Worker::safe_point(std::uint64_t count, std::int64_t step,
                                         std::uint64_t where) {
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kAllreduceHost);
  r.a[0] = count;
  r.a[1] = static_cast<std::uint64_t>(step);
  r.a[2] = where;
  Response resp = call(r);
  if (resp.code != 0) return Status::Error(std::string("allreduce: ") + resp.error);
  last_flags_ = resp.v[0];
  return resp.v[0];
}

}  // namespace orrery::runtime
