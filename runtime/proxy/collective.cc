#include "runtime/proxy/collective.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/proxy/collective_chunks.h"
#include "runtime/proxy/tcp_collective.h"
#include "spec/limits.h"

namespace orrery::runtime {

inline constexpr std::uint32_t kCollectiveMagic = 0x4f52434d;  // "ORCM": chunked layout
inline constexpr std::size_t kHeaderBytes = 4096;

struct Collective::Header {
  std::uint32_t magic;
  std::atomic<std::uint32_t> ready;
  std::int32_t world;
  std::uint64_t capacity;
  struct alignas(64) Phase {
    // ((step + 1) << 30 | count): the step's element count, set by its first contributor; a later
    // contributor with another count (a flags-only contribution of a failing proxy) follows it.
    std::atomic<std::uint64_t> geometry;
    std::atomic<std::uint64_t> flags;
    std::atomic<std::uint64_t> result_flags;
    std::atomic<std::int64_t> done_step;
    std::atomic<std::uint64_t> summed;     // tagged: chunks of the step summed
    std::atomic<std::uint32_t> gen;        // futex word: a chunk became summable, or the result
    std::atomic<std::uint32_t> sleepers;   // waiters on gen (a wake costs a syscall only then)
  } phase[2];
};

// Per chunk and phase, in the segment after the header.
struct Collective::ChunkState {
  std::atomic<std::uint64_t> arrived;  // tagged: ranks that have written this chunk
  std::atomic<std::int64_t> claimed;   // the last step whose sum of this chunk was claimed
};

namespace {
constexpr int kGeomBits = 30;
static_assert((static_cast<unsigned __int128>(spec::kMaxSteps) + 1) << kGeomBits <= ~std::uint64_t{0},
              "a step's geometry tag must hold every step a job may have (spec/limits.h)");
std::size_t round_page(std::size_t n) { return (n + 4095) / 4096 * 4096; }
std::size_t chunk_area(std::uint64_t cap) {
  return round_page(2 * max_chunks(cap) * 16);
}
std::size_t bytes_for(int world, std::uint64_t cap) {
  return kHeaderBytes + chunk_area(cap) +
         (2 * static_cast<std::size_t>(world) + 2) * cap * sizeof(float);
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
      ph.geometry.store(0);
      ph.flags.store(0);
      ph.result_flags.store(0);
      ph.done_step.store(-1);
      ph.summed.store(0);
      ph.gen.store(0);
      ph.sleepers.store(0);
    }
    // ftruncate zero-fills: every chunk counter starts at (step 0, 0) and claimed at 0, so the
    // claims of step 0 need the -1 below.
    static_assert(sizeof(ChunkState) == 16);
    for (int p = 0; p < 2; ++p) {
      for (std::uint64_t k = 0; k < max_chunks(capacity); ++k) c.chunks(p)[k].claimed.store(-1);
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

Collective::ChunkState* Collective::chunks(int parity) const {
  auto* base = reinterpret_cast<ChunkState*>(static_cast<char*>(map_.data()) + kHeaderBytes);
  return base + static_cast<std::size_t>(parity) * max_chunks(h()->capacity);
}

float* Collective::slot(int parity, int rank) const {
  auto* base = reinterpret_cast<float*>(static_cast<char*>(map_.data()) + kHeaderBytes +
                                        chunk_area(h()->capacity));
  return base + (static_cast<std::size_t>(parity) * h()->world + rank) * h()->capacity;
}

// Not in place in a slot: rank 0 may contribute step s+2 (the same phase) as soon as it has read
// the result of s (a negotiation's skipped second round skips s+1), while other ranks still read
// it; the result of s is overwritten only by sums of s+2, which need every rank's s+2 data.
float* Collective::result_buf(int parity) const {
  return slot(0, 0) + (2 * static_cast<std::size_t>(h()->world) + parity) * h()->capacity;
}

void Collective::wake(int parity) {
  auto& ph = h()->phase[parity];
  ph.gen.fetch_add(1, std::memory_order_seq_cst);
  if (ph.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake(&ph.gen);
}

Status Collective::contribute(int rank, std::int64_t step, const float* data, std::uint64_t count,
                              std::uint64_t flags) {
  Header* hd = h();
  if (rank < 0 || rank >= hd->world) return Status::Error("collective: rank out of range");
  if (count == 0 || count > hd->capacity) {
    return Status::Error("collective: buffer empty or larger than the segment's");
  }
  if (step < 0 || step >= (1ll << 33)) return Status::Error("collective: step out of range");
  const int p = static_cast<int>(step & 1);
  auto& ph = hd->phase[p];
  // The step's geometry: ours if we are first, else the first contributor's.
  std::uint64_t n = count;
  std::uint64_t g = ph.geometry.load(std::memory_order_acquire);
  const std::uint64_t mine = (static_cast<std::uint64_t>(step + 1) << kGeomBits) | count;
  for (;;) {
    const auto tag = static_cast<std::int64_t>(g >> kGeomBits) - 1;
    if (tag == step) {
      n = g & ((1ull << kGeomBits) - 1);
      break;
    }
    if (tag > step) return Status::Error("collective: a contribution to a finished step");
    if (ph.geometry.compare_exchange_weak(g, mine, std::memory_order_acq_rel)) break;
  }
  // Flags before any chunk: when the last chunk is summed, every rank's flags are in.
  ph.flags.fetch_or(flags, std::memory_order_acq_rel);
  const std::uint64_t cf = chunk_floats(n, hd->world), nch = chunk_count(n, hd->world);
  const std::uint64_t have = std::min(count, n);
  float* dst = slot(p, rank);
  ChunkState* cs = chunks(p);
  for (std::uint64_t c = 0; c < nch; ++c) {
    const std::uint64_t lo = c * cf;
    if (lo < have) std::memcpy(dst + lo, data + lo, (std::min(lo + cf, have) - lo) * sizeof(float));
    if (tagged::add(cs[c].arrived, step) == static_cast<std::uint64_t>(hd->world)) wake(p);
  }
  help(step);
  return Status::Ok();
}

void Collective::help(std::int64_t step) {
  Header* hd = h();
  const int p = static_cast<int>(step & 1);
  auto& ph = hd->phase[p];
  const std::uint64_t g = ph.geometry.load(std::memory_order_acquire);
  if (static_cast<std::int64_t>(g >> kGeomBits) - 1 != step) return;
  if (ph.done_step.load(std::memory_order_acquire) == step) return;
  const std::uint64_t n = g & ((1ull << kGeomBits) - 1);
  const int w = hd->world;
  const std::uint64_t cf = chunk_floats(n, w), nch = chunk_count(n, w);
  ChunkState* cs = chunks(p);
  std::vector<const float*> in(w);
  for (std::uint64_t c = 0; c < nch; ++c) {
    if (tagged::count(cs[c].arrived.load(std::memory_order_acquire), step) !=
        static_cast<std::uint64_t>(w)) {
      continue;
    }
    std::int64_t prev = cs[c].claimed.load(std::memory_order_relaxed);
    if (prev >= step ||
        !cs[c].claimed.compare_exchange_strong(prev, step, std::memory_order_acq_rel)) {
      continue;
    }
    const std::uint64_t lo = c * cf, k = std::min(cf, n - lo);
    for (int r = 0; r < w; ++r) in[r] = slot(p, r) + lo;
    sum_chunk_in_rank_order(in.data(), w, k, result_buf(p) + lo);
    if (tagged::add(ph.summed, step) == nch) publish(step);
  }
}

void Collective::publish(std::int64_t step) {
  auto& ph = h()->phase[step & 1];
  ph.result_flags.store(ph.flags.exchange(0, std::memory_order_acq_rel), std::memory_order_relaxed);
  ph.done_step.store(step, std::memory_order_release);
  wake(static_cast<int>(step & 1));
}

const float* Collective::result(std::int64_t step, std::uint64_t* flags) {
  const auto& ph = h()->phase[step & 1];
  if (ph.done_step.load(std::memory_order_acquire) != step) {
    help(step);
    if (ph.done_step.load(std::memory_order_acquire) != step) return nullptr;
  }
  if (flags != nullptr) *flags = ph.result_flags.load(std::memory_order_relaxed);
  return result_buf(static_cast<int>(step & 1));
}

void Collective::wait(std::int64_t step, long timeout_ns) {
  auto& ph = h()->phase[step & 1];
  help(step);
  const std::uint32_t g = ph.gen.load(std::memory_order_seq_cst);
  if (ph.done_step.load(std::memory_order_acquire) == step) return;
  ph.sleepers.fetch_add(1, std::memory_order_seq_cst);
  futex_wait(&ph.gen, g, timeout_ns);
  ph.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

Result<std::unique_ptr<CollectiveGroup>> open_collective_group(const std::string& name, int world,
                                                               std::uint64_t capacity,
                                                               const std::vector<int>& ranks) {
  if (name.rfind("tcp://", 0) == 0) {
    const bool rank0 = std::find(ranks.begin(), ranks.end(), 0) != ranks.end();
    return open_tcp_collective(name, world, capacity, rank0, ranks);
  }
  auto c = Collective::open(name, world, capacity);
  if (!c) return c.status();
  return std::unique_ptr<CollectiveGroup>(new Collective(std::move(c.value())));
}

}  // namespace orrery::runtime
