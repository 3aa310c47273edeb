#include "runtime/proxy/collective.h"

#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/proxy/kernels.h"
#include "runtime/proxy/tcp_collective.h"
#include "spec/limits.h"

namespace orrery::runtime {

inline constexpr std::uint32_t kCollectiveMagic = 0x4f52434c;  // "ORCL"
inline constexpr std::size_t kHeaderBytes = 4096;

struct Collective::Header {
  std::uint32_t magic;
  std::atomic<std::uint32_t> ready;
  std::int32_t world;
  std::uint64_t capacity;
  struct alignas(64) Phase {
    std::atomic<std::uint32_t> count;
    std::atomic<std::uint64_t> flags;
    std::atomic<std::uint64_t> result_flags;
    std::atomic<std::int64_t> done_step;
    std::atomic<std::uint32_t> gen;  // futex word
  } phase[2];
};


namespace {
std::size_t bytes_for(int world, std::uint64_t cap) {
  return kHeaderBytes + (2 * static_cast<std::size_t>(world) + 2) * cap * sizeof(float);
}
}  // namespace

Result<Collective> Collective::open(const std::string& name, int world, std::uint64_t capacity) {
  if (world <= 0 || world > spec::kMaxRunWorld) return Status::Error("collective: bad world size");
  if (capacity == 0 || capacity > (1ull << 28)) return Status::Error("collective: bad buffer size");
  Collective c;
  auto created = ShmMapping::create(name, bytes_for(world, capacity));
  if (created.ok()) {
    c.map_ = std::move(created.value());
    Header* h = c.h();
    h->magic = kCollectiveMagic;
    h->world = world;
    h->capacity = capacity;
    for (auto& ph : h->phase) {
      ph.count.store(0);
      ph.flags.store(0);
      ph.done_step.store(-1);
      ph.gen.store(0);
    }
    h->ready.store(1, std::memory_order_release);
    return c;
  }
  // Someone else creates it: wait until it is sized and initialised.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto head = ShmMapping::open(name, kHeaderBytes);
    if (head.ok()) {
      auto* h = static_cast<Header*>(head->data());
      if (h->ready.load(std::memory_order_acquire) == 1) {
        if (h->magic != kCollectiveMagic) return Status::Error("collective " + name + ": bad magic");
        if (h->world != world) {
          return Status::Error("collective " + name + ": world " + std::to_string(h->world) +
                               " there, " + std::to_string(world) + " asked");
        }
        if (h->capacity < capacity) {
          return Status::Error("collective " + name + ": buffers of " +
                               std::to_string(h->capacity) + " floats, " +
                               std::to_string(capacity) + " asked");
        }
        auto full = ShmMapping::open(name, bytes_for(world, h->capacity));
        if (!full.ok()) return full.status();
        c.map_ = std::move(full.value());
        return c;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::Error("collective " + name + ": not initialised within 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Collective::unlink(const std::string& name) { ::shm_unlink(name.c_str()); }

std::size_t Collective::header_size() {
  static_assert(sizeof(Header) <= kHeaderBytes);
  return kHeaderBytes;
}

int Collective::world() const { return h()->world; }
std::uint64_t Collective::capacity() const { return h()->capacity; }

float* Collective::slot(int parity, int rank) const {
  auto* base = reinterpret_cast<float*>(static_cast<char*>(map_.data()) + kHeaderBytes);
  return base + (static_cast<std::size_t>(parity) * h()->world + rank) * h()->capacity;
}
float* Collective::result_buf(int parity) const {
  return slot(0, 0) + (2 * static_cast<std::size_t>(h()->world) + parity) * h()->capacity;
}

Status Collective::contribute(int rank, std::int64_t step, const float* data, std::uint64_t count,
                              std::uint64_t flags) {
  Header* hd = h();
  if (rank < 0 || rank >= hd->world) return Status::Error("collective: rank out of range");
  if (count > hd->capacity) return Status::Error("collective: buffer larger than the segment's");
  const int p = static_cast<int>(step & 1);
  auto& ph = hd->phase[p];
  std::memcpy(slot(p, rank), data, count * sizeof(float));
  ph.flags.fetch_or(flags, std::memory_order_acq_rel);
  if (ph.count.fetch_add(1, std::memory_order_acq_rel) + 1 ==
      static_cast<std::uint32_t>(hd->world)) {
    std::vector<const float*> in(hd->world);
    for (int r = 0; r < hd->world; ++r) in[r] = slot(p, r);
    sum_in_rank_order(in.data(), hd->world, count, result_buf(p));
    ph.result_flags.store(ph.flags.exchange(0), std::memory_order_relaxed);
    ph.count.store(0, std::memory_order_relaxed);
    ph.done_step.store(step, std::memory_order_release);
    ph.gen.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&ph.gen);
  }
  return Status::Ok();
}

const float* Collective::result(std::int64_t step, std::uint64_t* flags) {
  const auto& ph = h()->phase[step & 1];
  if (ph.done_step.load(std::memory_order_acquire) != step) return nullptr;
  if (flags != nullptr) *flags = ph.result_flags.load(std::memory_order_relaxed);
  return result_buf(static_cast<int>(step & 1));
}

void Collective::wait(std::int64_t step, long timeout_ns) {
  auto& ph = h()->phase[step & 1];
  const std::uint32_t g = ph.gen.load(std::memory_order_seq_cst);
  if (ph.done_step.load(std::memory_order_acquire) == step) return;
  futex_wait(&ph.gen, g, timeout_ns);
}

Result<std::unique_ptr<CollectiveGroup>> open_collective_group(const std::string& name, int world,
                                                               std::uint64_t capacity,
                                                               bool holds_rank0) {
  if (name.rfind("tcp://", 0) == 0) return open_tcp_collective(name, world, capacity, holds_rank0);
  auto c = Collective::open(name, world, capacity);
  if (!c) return c.status();
  return std::unique_ptr<CollectiveGroup>(new Collective(std::move(c.value())));
}

}  // namespace orrery::runtime
