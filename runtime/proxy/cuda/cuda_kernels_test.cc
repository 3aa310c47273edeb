// The device kernels against the host ones (runtime/proxy/kernels.cc), bit for bit: every
// registry kernel on several shapes (non-multiples of 32 among them), inputs with both signs,
// signed zeros and subnormals, and every buffer the kernel can touch compared with memcmp.
// The GPU tests skip, saying so, where no CUDA device is usable (CI, the build machines); the
// tests that need no device (the tables agree, the comparison and the inputs are sensitive
// enough to catch a one-ulp change) run everywhere.
#include "runtime/proxy/cuda/cuda_kernels.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "runtime/proxy/cuda/gpu_test_util.h"
#include "runtime/proxy/kernels.h"

namespace orrery::runtime::cuda {
namespace {

using u64 = std::uint64_t;

#define ASSERT_CUDA(expr)                                                          \
  do {                                                                             \
    const cudaError_t err_ = (expr);                                               \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_);     \
  } while (0)

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) { err_ = cudaMalloc(&p_, bytes == 0 ? 4 : bytes); }
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  cudaError_t error() const { return err_; }
  float* get() const { return static_cast<float*>(p_); }
  u64 addr() const { return static_cast<u64>(reinterpret_cast<std::uintptr_t>(p_)); }

 private:
  void* p_ = nullptr;
  cudaError_t err_ = cudaSuccess;
};

u64 addr(const float* p) { return static_cast<u64>(reinterpret_cast<std::uintptr_t>(p)); }

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Equal bit patterns, element by element; on failure names the first differing index with both
// values in hex (a one-ulp difference shows as hex digits one apart).
::testing::AssertionResult bitwise_equal(const std::vector<float>& want,
                                         const std::vector<float>& got) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << want.size() << " vs " << got.size();
  }
  if (want.empty() || std::memcmp(want.data(), got.data(), want.size() * 4) == 0) {
    return ::testing::AssertionSuccess();
  }
  std::size_t first = want.size(), differing = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (bits(want[i]) != bits(got[i])) {
      if (first == want.size()) first = i;
      ++differing;
    }
  }
  std::ostringstream m;
  m << differing << " of " << want.size() << " elements differ; first at index " << first
    << ": host 0x" << std::hex << std::setw(8) << std::setfill('0') << bits(want[first])
    << " (" << std::setprecision(9) << want[first] << "), device 0x" << std::setw(8)
    << bits(got[first]) << " (" << got[first] << ")";
  return ::testing::AssertionFailure() << m.str();
}

// Deterministic inputs: mostly values of both signs spread over 2^-3 .. 2^4 with full 24-bit
// mantissas (so sums round, and an order or contraction change shows), plus signed zeros and
// subnormals (a flush-to-zero build shows). No NaN or infinity: their bit patterns are the one
// documented difference (cuda_kernels.cu).
u64 splitmix(u64& s) {
  u64 z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<float> random_floats(std::size_t n, u64 seed) {
  std::vector<float> v(n);
  u64 s = seed;
  for (float& f : v) {
    const u64 r = splitmix(s);
    switch (r & 31) {
      case 0: f = 0.f; break;
      case 1: f = -0.f; break;
      case 2: {  // subnormal: exponent field 0, nonzero mantissa, either sign
        const std::uint32_t u =
            static_cast<std::uint32_t>(((r >> 8) & 0x7fffff) | 1) | ((r >> 40) & 1u) << 31;
        std::memcpy(&f, &u, 4);
        break;
      }
      default: {
        const float unit =
            static_cast<float>(static_cast<std::int64_t>(r >> 40) - (1 << 23)) / float(1 << 23);
        f = std::ldexp(unit, static_cast<int>((r >> 5) & 7) - 3);
      }
    }
  }
  return v;
}

// One call of a registry kernel: its arguments with pointer slots left 0 (the kernel's extents
// say which those are and how large).
struct Case {
  std::string label;
  std::vector<u64> args;
};

std::map<std::string, std::vector<Case>> cases() {
  std::map<std::string, std::vector<Case>> c;
  for (const auto& [B, din, dout, seed, rank, step] :
       std::vector<std::array<u64, 6>>{{1, 1, 1, 0, 0, 0},
                                       {64, 32, 8, 42, 0, 0},
                                       {33, 17, 5, 42, 3, 7},
                                       {7, 100, 3, 0xdeadbeefcafeull, 1, 123456},
                                       {5, 1000, 33, 9, 2, 1}}) {
    c["gen_batch"].push_back({"B=" + std::to_string(B) + " din=" + std::to_string(din) +
                                  " dout=" + std::to_string(dout),
                              {0, 0, B, din, dout, seed, rank, step}});
  }
  for (const auto& [B, din, H, dout] : std::vector<std::array<u64, 4>>{{1, 1, 1, 1},
                                                                       {64, 32, 128, 8},
                                                                       {33, 17, 65, 5},
                                                                       {5, 100, 31, 3},
                                                                       {3, 257, 7, 40}}) {
    const std::string shape = "B=" + std::to_string(B) + " din=" + std::to_string(din) +
                              " H=" + std::to_string(H) + " dout=" + std::to_string(dout);
    c["mlp_forward"].push_back({shape, {0, 0, 0, 0, B, din, H, dout}});
    c["mlp_backward"].push_back({shape, {0, 0, 0, 0, 0, 0, B, din, H, dout}});
  }
  for (const auto& [n, lr, world] : std::vector<std::tuple<u64, float, u64>>{
           {1, 0.01f, 1}, {1000, 0.05f, 3}, {4099, -0.3f, 7}, {300, 1e-3f, 4096}}) {
    c["sgd"].push_back({"n=" + std::to_string(n) + " world=" + std::to_string(world),
                        {0, 0, n, float_arg(lr), world}});
  }
  for (u64 n : {1, 31, 1000, 70001}) c["mse"].push_back({"n=" + std::to_string(n), {0, 0, 0, n}});
  const std::uint32_t quiet_nan_with_payload = 0x7fc01234u, subnormal = 0x80000123u;
  for (const auto& [n, value] : std::vector<std::pair<u64, u64>>{{0, float_arg(1.f)},
                                                                  {1, float_arg(-1.5f)},
                                                                  {1000, float_arg(-0.f)},
                                                                  {4097, subnormal},
                                                                  {33, quiet_nan_with_payload}}) {
    c["fill"].push_back({"n=" + std::to_string(n), {0, n, value}});
  }
  return c;
}

// Host buffers for a case: every pointer argument gets its extent's worth of random floats,
// outputs included (so an element the device leaves unwritten differs from the host's).
struct HostRun {
  std::vector<PointerExtent> extents;
  std::vector<std::vector<float>> initial;  // per extent, before the kernel
  std::vector<std::vector<float>> result;   // per extent, after run_host
};

HostRun run_on_host(const KernelDef& def, const Case& c, u64 seed) {
  HostRun run;
  const Status st = def.extents(c.args.data(), &run.extents);
  EXPECT_TRUE(st) << def.name << " " << c.label << ": " << st.reason();
  std::vector<u64> args = c.args;
  for (std::size_t e = 0; e < run.extents.size(); ++e) {
    run.initial.push_back(random_floats(run.extents[e].bytes / 4, seed + 1000 * e));
  }
  run.result = run.initial;
  for (std::size_t e = 0; e < run.extents.size(); ++e) {
    args[run.extents[e].arg] = addr(run.result[e].data());
  }
  def.run_host(args.data());
  return run;
}

void check_case(const KernelDef& def, const Case& c, u64 seed) {
  SCOPED_TRACE(std::string(def.name) + " " + c.label);
  const HostRun host = run_on_host(def, c, seed);
  std::vector<u64> args = c.args;
  std::vector<std::unique_ptr<DeviceBuffer>> dev;
  for (std::size_t e = 0; e < host.extents.size(); ++e) {
    dev.push_back(std::make_unique<DeviceBuffer>(host.extents[e].bytes));
    ASSERT_CUDA(dev.back()->error());
    ASSERT_CUDA(cudaMemcpy(dev.back()->get(), host.initial[e].data(), host.extents[e].bytes,
                           cudaMemcpyHostToDevice));
    args[host.extents[e].arg] = dev.back()->addr();
  }
  const Status st = launch_kernel(def.name, args.data(), def.nargs, cudaStream_t{});
  ASSERT_TRUE(st) << st.reason();
  ASSERT_CUDA(cudaDeviceSynchronize());
  for (std::size_t e = 0; e < host.extents.size(); ++e) {
    std::vector<float> got(host.extents[e].bytes / 4);
    ASSERT_CUDA(cudaMemcpy(got.data(), dev[e]->get(), host.extents[e].bytes,
                           cudaMemcpyDeviceToHost));
    EXPECT_TRUE(bitwise_equal(host.result[e], got)) << "argument " << host.extents[e].arg;
  }
}

TEST(CudaKernels, EveryRegistryKernelMatchesTheHostBitForBit) {
  SKIP_WITHOUT_DEVICE();
  const auto all = cases();
  for (const KernelDef& def : all_kernels()) {
    const auto it = all.find(std::string(def.name));
    ASSERT_NE(it, all.end()) << "no test cases for registry kernel " << def.name;
    u64 seed = 1;
    for (const Case& c : it->second) {
      check_case(def, c, seed++);
      if (HasFatalFailure()) return;
    }
  }
}

// The training step as the workload runs it, each kernel on the previous one's device outputs
// (not on fresh random inputs): realistic h (relu output, many exact zeros) into the backward.
TEST(CudaKernels, ATrainingStepMatchesTheHostBitForBit) {
  SKIP_WITHOUT_DEVICE();
  const MlpShape m{37, 19, 70, 6};
  std::vector<float> params = random_floats(m.params(), 77);
  std::vector<float> x(m.batch * m.din), y(m.batch * m.dout), h(m.batch * m.hidden),
      out(m.batch * m.dout), grads(m.params()), loss(1);
  std::vector<float>* bufs[] = {&params, &x, &y, &h, &out, &grads, &loss};
  std::vector<std::unique_ptr<DeviceBuffer>> dev;
  for (std::vector<float>* b : bufs) {
    dev.push_back(std::make_unique<DeviceBuffer>(b->size() * 4));
    ASSERT_CUDA(dev.back()->error());
    ASSERT_CUDA(cudaMemcpy(dev.back()->get(), b->data(), b->size() * 4, cudaMemcpyHostToDevice));
  }
  // Argument lists over buffer indices into bufs/dev (the high bit marks an index).
  constexpr u64 kBuf = 1ull << 63;
  const std::vector<std::pair<std::string, std::vector<u64>>> steps = {
      {"gen_batch", {kBuf | 1, kBuf | 2, m.batch, m.din, m.dout, 5, 1, 3}},
      {"mlp_forward", {kBuf | 0, kBuf | 1, kBuf | 3, kBuf | 4, m.batch, m.din, m.hidden, m.dout}},
      {"mse", {kBuf | 4, kBuf | 2, kBuf | 6, m.batch * m.dout}},
      {"mlp_backward",
       {kBuf | 0, kBuf | 1, kBuf | 3, kBuf | 4, kBuf | 2, kBuf | 5, m.batch, m.din, m.hidden,
        m.dout}},
      {"sgd", {kBuf | 0, kBuf | 5, m.params(), float_arg(0.05f), 3}},
  };
  for (const auto& [name, proto] : steps) {
    std::vector<u64> host_args = proto, dev_args = proto;
    for (std::size_t i = 0; i < proto.size(); ++i) {
      if ((proto[i] & kBuf) == 0) continue;
      host_args[i] = addr(bufs[proto[i] & ~kBuf]->data());
      dev_args[i] = dev[proto[i] & ~kBuf]->addr();
    }
    const KernelDef* def = find_kernel(name);
    ASSERT_NE(def, nullptr) << name;
    def->run_host(host_args.data());
    const Status st = launch_kernel(name, dev_args.data(), def->nargs, cudaStream_t{});
    ASSERT_TRUE(st) << st.reason();
  }
  ASSERT_CUDA(cudaDeviceSynchronize());
  const char* names[] = {"params", "x", "y", "h", "out", "grads", "loss"};
  for (std::size_t b = 0; b < dev.size(); ++b) {
    std::vector<float> got(bufs[b]->size());
    ASSERT_CUDA(cudaMemcpy(got.data(), dev[b]->get(), got.size() * 4, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(bitwise_equal(*bufs[b], got)) << names[b];
  }
}

TEST(CudaKernels, SumInRankOrderMatchesTheHostBitForBit) {
  SKIP_WITHOUT_DEVICE();
  // 32 ranks fit one launch; 33 and 70 continue the chain in later launches.
  for (int ranks : {1, 2, 3, 7, 32, 33, 70}) {
    for (u64 count : {u64{1}, u64{1000}, u64{4099}}) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE("ranks=" + std::to_string(ranks) + " count=" + std::to_string(count) +
                     (in_place ? " in place" : ""));
        std::vector<std::vector<float>> in;
        std::vector<const float*> host_in;
        std::vector<std::unique_ptr<DeviceBuffer>> dev;
        std::vector<const float*> dev_in;
        for (int r = 0; r < ranks; ++r) {
          in.push_back(random_floats(count, 500 + r));
          dev.push_back(std::make_unique<DeviceBuffer>(count * 4));
          ASSERT_CUDA(dev.back()->error());
          ASSERT_CUDA(
              cudaMemcpy(dev.back()->get(), in[r].data(), count * 4, cudaMemcpyHostToDevice));
          dev_in.push_back(dev.back()->get());
        }
        for (const auto& v : in) host_in.push_back(v.data());
        std::vector<float> want(count);
        sum_in_rank_order(host_in.data(), ranks, count, want.data());

        DeviceBuffer out(count * 4);
        ASSERT_CUDA(out.error());
        // Prefilled with noise, so an element the device does not write differs.
        const std::vector<float> noise = random_floats(count, 99);
        ASSERT_CUDA(cudaMemcpy(out.get(), noise.data(), count * 4, cudaMemcpyHostToDevice));
        float* dst = in_place ? dev[0]->get() : out.get();
        const Status st = launch_sum_in_rank_order(dev_in.data(), ranks, count, dst, nullptr);
        ASSERT_TRUE(st) << st.reason();
        ASSERT_CUDA(cudaDeviceSynchronize());
        std::vector<float> got(count);
        ASSERT_CUDA(cudaMemcpy(got.data(), dst, count * 4, cudaMemcpyDeviceToHost));
        EXPECT_TRUE(bitwise_equal(want, got));
      }
    }
  }
}

// --- Tests that need no device -------------------------------------------------------------

// Splice dedup trusts the device's chunk hashes to equal the host reference's (chunk_hash.h).
TEST(CudaKernels, ChunkHashesMatchTheHostReference) {
  SKIP_WITHOUT_DEVICE();
  // Three full chunks and a short one; the bytes are position-dependent.
  const std::uint64_t n = 3 * kHashChunk + 65536;
  std::vector<unsigned char> host(n);
  for (std::uint64_t i = 0; i < n; ++i) host[i] = static_cast<unsigned char>(i * 131 + (i >> 11));
  void* dev = nullptr;
  Hash128* out = nullptr;
  const std::uint64_t nc = (n + kHashChunk - 1) / kHashChunk;
  ASSERT_CUDA(cudaMalloc(&dev, n));
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&out), nc * sizeof(Hash128)));
  ASSERT_CUDA(cudaMemcpy(dev, host.data(), n, cudaMemcpyHostToDevice));
  ASSERT_TRUE(launch_chunk_hashes(dev, n, out, nullptr).ok());
  std::vector<Hash128> got(nc);
  ASSERT_CUDA(cudaMemcpy(got.data(), out, nc * sizeof(Hash128), cudaMemcpyDeviceToHost));
  for (std::uint64_t c = 0; c < nc; ++c) {
    const std::uint64_t len = std::min<std::uint64_t>(kHashChunk, n - c * kHashChunk);
    const Hash128 want = chunk_hash_host(host.data() + c * kHashChunk, len);
    EXPECT_EQ(got[c].a, want.a) << "chunk " << c;
    EXPECT_EQ(got[c].b, want.b) << "chunk " << c;
  }
  EXPECT_NE(got[0], got[1]);
  cudaFree(dev);
  cudaFree(out);
}

TEST(CudaKernels, EveryRegistryKernelHasADeviceVersion) {
  for (const KernelDef& def : all_kernels()) EXPECT_TRUE(has_kernel(def.name)) << def.name;
  EXPECT_FALSE(has_kernel("no_such_kernel"));
  // Both rejected before anything reaches CUDA, so they hold without a device too.
  const u64 args[kMaxKernelArgs] = {};
  EXPECT_FALSE(launch_kernel("no_such_kernel", args, 3, nullptr));
  EXPECT_FALSE(launch_kernel("fill", args, 2, nullptr));
  EXPECT_FALSE(launch_sum_in_rank_order(nullptr, 0, 1, nullptr, nullptr));
}

// The comparison catches a one-ulp difference and a zero's sign, and names the place.
TEST(CudaKernels, TheComparisonCatchesOneUlp) {
  const std::vector<float> want = random_floats(100, 3);
  std::vector<float> got = want;
  EXPECT_TRUE(bitwise_equal(want, got));
  got[37] = std::nextafter(got[37], INFINITY);
  const ::testing::AssertionResult r = bitwise_equal(want, got);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("index 37"), std::string::npos) << r.message();
  got = {0.f};
  EXPECT_FALSE(bitwise_equal({-0.f}, got));
}

// The inputs are sensitive: on the very cases the GPU test runs, summing in another order or
// contracting a multiply-add into an FMA changes the bits, so a device kernel doing either fails
// that test rather than passing by luck.
TEST(CudaKernels, TheInputsExposeOrderAndContractionChanges) {
  const KernelDef* mse = find_kernel("mse");
  ASSERT_NE(mse, nullptr);
  const Case mse_case{"n=1000", {0, 0, 0, 1000}};
  const HostRun run = run_on_host(*mse, mse_case, 3);  // seed 3: its index + 1 in cases()["mse"]
  float reversed = 0.f;
  const std::vector<float>& o = run.initial[0];
  const std::vector<float>& y = run.initial[1];
  for (std::size_t i = o.size(); i-- > 0;) reversed += (o[i] - y[i]) * (o[i] - y[i]);
  reversed /= 1000.f;
  EXPECT_FALSE(bitwise_equal(run.result[2], {reversed})) << "mse: reversed order went unseen";

  const KernelDef* fwd = find_kernel("mlp_forward");
  ASSERT_NE(fwd, nullptr);
  const Case fwd_case{"B=64 din=32 H=128 dout=8", {0, 0, 0, 0, 64, 32, 128, 8}};
  const HostRun f = run_on_host(*fwd, fwd_case, 2);  // seed 2: its index + 1 in cases()
  const u64 B = 64, din = 32, H = 128;
  const std::vector<float>& p = f.initial[0];
  const std::vector<float>& x = f.initial[1];
  std::vector<float> h_fma(B * H);
  for (u64 b = 0; b < B; ++b) {
    for (u64 k = 0; k < H; ++k) {
      float acc = p[din * H + k];
      for (u64 i = 0; i < din; ++i) acc = std::fma(x[b * din + i], p[i * H + k], acc);
      h_fma[b * H + k] = acc > 0.f ? acc : 0.f;
    }
  }
  EXPECT_FALSE(bitwise_equal(f.result[2], h_fma)) << "mlp_forward: FMA contraction went unseen";
}

}  // namespace
}  // namespace orrery::runtime::cuda
