// Device versions of the registry kernels in runtime/proxy/kernels.cc. The host code there is
// the contract: every output element here is computed by one thread with the same IEEE float
// operations, in the same order, starting from the same value as the host's loop for that
// element. Only independent output elements run in parallel; sums are never split or reordered.
// Where the host keeps an intermediate (dout_b, dh in the backward pass) a thread recomputes the
// value it needs with the host's operations: the same inputs give the same bits, and there is no
// scratch buffer argument to keep them in.
//
// Needs --fmad=false (a * b + c must stay two roundings: the host's x86-64 SSE code has no FMA)
// and no fast math: IEEE division (--prec-div=true) and denormals kept (--ftz=false), which are
// nvcc's defaults. NaN *bit patterns* are the one exception to bit-identity: a GPU operation
// that yields NaN returns the canonical 0x7fffffff where x86 propagates an input's payload or
// returns 0xffc00000; finite inputs never produce NaN in these kernels.
#include "runtime/proxy/cuda/cuda_kernels.h"

#include <cstring>
#include <string>

#include <cuda_runtime.h>

#include "runtime/proxy/kernels.h"

namespace orrery::runtime::cuda {
namespace {

using u64 = std::uint64_t;

constexpr int kThreads = 256;
constexpr u64 kMaxBlocks = 1u << 16;  // grid-stride loops cover the rest

unsigned blocks_for(u64 n) {
  const u64 b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

template <class T>
T* ptr(u64 a) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(a));
}

float bits_to_float(u64 a) {  // kernels.cc's arg_float, without a link dependency on it
  const std::uint32_t u = static_cast<std::uint32_t>(a);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

__device__ u64 first_index() { return u64{blockIdx.x} * blockDim.x + threadIdx.x; }
__device__ u64 grid_stride() { return u64{gridDim.x} * blockDim.x; }

Status launched(std::string_view name) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status::Ok();
  return Status::Error("kernel " + std::string(name) + ": launch failed: " +
                       cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

// ---- gen_batch ------------------------------------------------------------------------------
// Copies of kernels.cc's mix() and unit() (that file is the source of truth; it keeps its own
// in an anonymous namespace). Integer-only apart from unit()'s final int64 -> float conversion,
// which is exact (|value| <= 2^23) and the division by 2^23, which is exact too.
__host__ __device__ u64 mix(u64 x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__host__ __device__ float unit(u64 h) {
  return static_cast<float>(static_cast<std::int64_t>(h >> 40) - (1 << 23)) / float(1 << 23);
}

// Host: x[b*din + i] = unit(mix(base ^ mix(b*din + i))); idx is exactly b*din + i.
__global__ void gen_batch_x(float* x, u64 n, u64 base) {
  for (u64 idx = first_index(); idx < n; idx += grid_stride()) x[idx] = unit(mix(base ^ mix(idx)));
}

// Host, per y[b][j]: acc = 0.f; for i ascending: acc += (x[b][i] * teacher(i, j)) * 0.5f (the
// product is left-associative); then acc > 0.f ? acc : 0.1f * acc. x is read back from memory as
// the host does (written by gen_batch_x, ordered before this launch on the stream);
// mix(seed ^ 0x7ea) is loop-invariant, hoisted here, recomputed per i there: same integer.
__global__ void gen_batch_y(const float* x, float* y, u64 B, u64 din, u64 dout, u64 seed) {
  const u64 teacher = mix(seed ^ 0x7ea);
  for (u64 idx = first_index(); idx < B * dout; idx += grid_stride()) {
    const u64 b = idx / dout, j = idx % dout;
    float acc = 0.f;
    for (u64 i = 0; i < din; ++i) {
      acc += x[b * din + i] * unit(mix(teacher ^ (i * dout + j))) * 0.5f;
    }
    y[idx] = acc > 0.f ? acc : 0.1f * acc;
  }
}

Status gen_batch(const u64* a, cudaStream_t s) {
  float* x = ptr<float>(a[0]);
  float* y = ptr<float>(a[1]);
  const u64 B = a[2], din = a[3], dout = a[4], seed = a[5], rank = a[6], step = a[7];
  const u64 base = mix(mix(mix(seed) ^ rank) ^ step);
  if (B * din == 0) return Status::Ok();
  gen_batch_x<<<blocks_for(B * din), kThreads, 0, s>>>(x, B * din, base);
  if (auto st = launched("gen_batch"); !st) return st;
  if (B * dout == 0) return Status::Ok();
  gen_batch_y<<<blocks_for(B * dout), kThreads, 0, s>>>(x, y, B, din, dout, seed);
  return launched("gen_batch");
}

// ---- mlp_forward ----------------------------------------------------------------------------
// params = [W1 (din*H) | b1 (H) | W2 (H*dout) | b2 (dout)], as MlpShape says.

// Host, per h[b][k]: acc = b1[k]; for i ascending: acc += x[b][i] * W1[i][k]; then
// acc > 0.f ? acc : 0.f (NaN and -0.f become +0.f on both sides). nvcc emits the relu as PTX
// max.f32(acc, 0), which is the same function: it returns the non-NaN operand and orders
// +0.0 > -0.0 (PTX ISA, "max").
__global__ void forward_hidden(const float* p, const float* x, float* h, u64 B, u64 din, u64 H) {
  const float* W1 = p;
  const float* b1 = W1 + din * H;
  for (u64 idx = first_index(); idx < B * H; idx += grid_stride()) {
    const u64 b = idx / H, k = idx % H;
    float acc = b1[k];
    for (u64 i = 0; i < din; ++i) acc += x[b * din + i] * W1[i * H + k];
    h[idx] = acc > 0.f ? acc : 0.f;
  }
}

// Host, per out[b][j]: acc = b2[j]; for k ascending: acc += h[b][k] * W2[k][j], h read back
// after the relu (ordered after forward_hidden on the stream).
__global__ void forward_out(const float* p, const float* h, float* o, u64 B, u64 din, u64 H,
                            u64 dout) {
  const float* W2 = p + din * H + H;
  const float* b2 = W2 + H * dout;
  for (u64 idx = first_index(); idx < B * dout; idx += grid_stride()) {
    const u64 b = idx / dout, j = idx % dout;
    float acc = b2[j];
    for (u64 k = 0; k < H; ++k) acc += h[b * H + k] * W2[k * dout + j];
    o[idx] = acc;
  }
}

Status mlp_forward(const u64* a, cudaStream_t s) {
  const float* p = ptr<const float>(a[0]);
  const float* x = ptr<const float>(a[1]);
  float* h = ptr<float>(a[2]);
  float* o = ptr<float>(a[3]);
  const u64 B = a[4], din = a[5], H = a[6], dout = a[7];
  if (B * H != 0) {
    forward_hidden<<<blocks_for(B * H), kThreads, 0, s>>>(p, x, h, B, din, H);
    if (auto st = launched("mlp_forward"); !st) return st;
  }
  if (B * dout == 0) return Status::Ok();
  forward_out<<<blocks_for(B * dout), kThreads, 0, s>>>(p, h, o, B, din, H, dout);
  return launched("mlp_forward");
}

// ---- mlp_backward ---------------------------------------------------------------------------
// Host: grads memset to 0, scale = 2.f / float(B * dout) (computed on the host here, by the same
// expression), and per batch row b ascending:
//   dout_b[j] = scale * (o[b][j] - y[b][j])
//   dh[k]     = h[b][k] > 0.f ? (0.f + W2[k][0]*dout_b[0] + W2[k][1]*dout_b[1] + ...) : 0.f
//   gW2[k][j] += h[b][k] * dout_b[j];  gb2[j] += dout_b[j]
//   gW1[i][k] += x[b][i] * dh[k];      gb1[k] += dh[k]
// So every gradient element is 0.f plus its per-row terms for b ascending, which is what each
// thread below accumulates (starting from 0.f, not from the first term: 0.f + -0.f is +0.f).

__device__ float delta_out(const float* o, const float* y, float scale, u64 idx) {
  return scale * (o[idx] - y[idx]);
}

// dh[b][k] as the host computes it. The host sums even when h <= 0 and then discards the sum;
// skipping it gives the same 0.f.
__device__ float delta_hidden(const float* W2, const float* h, const float* o, const float* y,
                              float scale, u64 b, u64 k, u64 H, u64 dout) {
  if (!(h[b * H + k] > 0.f)) return 0.f;
  float acc = 0.f;
  for (u64 j = 0; j < dout; ++j) acc += W2[k * dout + j] * delta_out(o, y, scale, b * dout + j);
  return acc;
}

// gW2 (H*dout elements) and gb2 (dout elements): one thread per element, b ascending.
__global__ void backward_out(const float* h, const float* o, const float* y, float* g, u64 B,
                             u64 din, u64 H, u64 dout, float scale) {
  float* gW2 = g + din * H + H;
  float* gb2 = gW2 + H * dout;
  for (u64 idx = first_index(); idx < H * dout + dout; idx += grid_stride()) {
    if (idx < H * dout) {
      const u64 k = idx / dout, j = idx % dout;
      float acc = 0.f;
      for (u64 b = 0; b < B; ++b) acc += h[b * H + k] * delta_out(o, y, scale, b * dout + j);
      gW2[idx] = acc;
    } else {
      const u64 j = idx - H * dout;
      float acc = 0.f;
      for (u64 b = 0; b < B; ++b) acc += delta_out(o, y, scale, b * dout + j);
      gb2[j] = acc;
    }
  }
}

// gW1 (din*H) and gb1 (H). One thread per hidden unit k and run of kRows input rows i: it
// computes dh[b][k] once per b and adds it into kRows independent accumulators (each one still
// a b-ascending sum from 0.f), so dh is recomputed din/kRows times rather than din times. The
// threads of the first run also sum gb1[k].
constexpr u64 kRows = 16;

__global__ void backward_hidden(const float* p, const float* x, const float* h, const float* o,
                                const float* y, float* g, u64 B, u64 din, u64 H, u64 dout,
                                float scale) {
  const float* W2 = p + din * H + H;
  float* gW1 = g;
  float* gb1 = gW1 + din * H;
  const u64 runs = (din + kRows - 1) / kRows;
  for (u64 idx = first_index(); idx < H * runs; idx += grid_stride()) {
    const u64 k = idx % H;  // adjacent threads, adjacent k: coalesced gW1 stores
    const u64 i0 = (idx / H) * kRows;
    float acc[kRows];
#pragma unroll
    for (u64 r = 0; r < kRows; ++r) acc[r] = 0.f;
    float acc_b = 0.f;
    for (u64 b = 0; b < B; ++b) {
      const float dh = delta_hidden(W2, h, o, y, scale, b, k, H, dout);
#pragma unroll
      for (u64 r = 0; r < kRows; ++r) {
        if (i0 + r < din) acc[r] += x[b * din + i0 + r] * dh;
      }
      if (i0 == 0) acc_b += dh;
    }
#pragma unroll
    for (u64 r = 0; r < kRows; ++r) {
      if (i0 + r < din) gW1[(i0 + r) * H + k] = acc[r];
    }
    if (i0 == 0) gb1[k] = acc_b;
  }
}

Status mlp_backward(const u64* a, cudaStream_t s) {
  const float* p = ptr<const float>(a[0]);
  const float* x = ptr<const float>(a[1]);
  const float* h = ptr<const float>(a[2]);
  const float* o = ptr<const float>(a[3]);
  const float* y = ptr<const float>(a[4]);
  float* g = ptr<float>(a[5]);
  const u64 B = a[6], din = a[7], H = a[8], dout = a[9];
  const float scale = 2.f / static_cast<float>(B * dout);  // kernels.cc's expression, verbatim
  const u64 n_out = H * dout + dout;
  if (n_out != 0) {
    backward_out<<<blocks_for(n_out), kThreads, 0, s>>>(h, o, y, g, B, din, H, dout, scale);
    if (auto st = launched("mlp_backward"); !st) return st;
  }
  const u64 n_hidden = H * ((din + kRows - 1) / kRows);
  if (n_hidden == 0) return Status::Ok();
  backward_hidden<<<blocks_for(n_hidden), kThreads, 0, s>>>(p, x, h, o, y, g, B, din, H, dout,
                                                            scale);
  return launched("mlp_backward");
}

// ---- sgd ------------------------------------------------------------------------------------
// Host: inv_world = 1.f / float(world) (computed on the host here, by the same expression), then
// per element p[i] = p[i] - lr * (g[i] * inv_world).
__global__ void sgd_kernel(float* p, const float* g, u64 n, float lr, float inv_world) {
  for (u64 i = first_index(); i < n; i += grid_stride()) p[i] -= lr * (g[i] * inv_world);
}

Status sgd(const u64* a, cudaStream_t s) {
  const u64 n = a[2];
  const float lr = bits_to_float(a[3]);
  const float inv_world = 1.f / static_cast<float>(a[4]);
  if (n == 0) return Status::Ok();
  sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(ptr<float>(a[0]), ptr<const float>(a[1]), n, lr,
                                                inv_world);
  return launched("sgd");
}

// ---- mse ------------------------------------------------------------------------------------
// Host: acc = 0.f; for i ascending: acc += (o[i] - y[i]) * (o[i] - y[i]); loss = acc / float(n).
// The sum is one sequential chain, so one thread adds; the block only computes the squared
// terms (independent) kThreads at a time into shared memory ahead of it. The division is IEEE
// (div.rn) given --prec-div=true; float(n) is a correctly rounded u64 -> f32 on both sides.
__global__ void mse_kernel(const float* o, const float* y, float* loss, u64 n) {
  __shared__ float sq[kThreads];
  float acc = 0.f;  // meaningful in thread 0 only
  for (u64 base = 0; base < n; base += kThreads) {
    const u64 i = base + threadIdx.x;
    if (i < n) sq[threadIdx.x] = (o[i] - y[i]) * (o[i] - y[i]);
    __syncthreads();
    if (threadIdx.x == 0) {
      const u64 m = n - base < kThreads ? n - base : kThreads;
      for (u64 t = 0; t < m; ++t) acc += sq[t];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) loss[0] = acc / static_cast<float>(n);
}

Status mse(const u64* a, cudaStream_t s) {
  mse_kernel<<<1, kThreads, 0, s>>>(ptr<const float>(a[0]), ptr<const float>(a[1]),
                                    ptr<float>(a[2]), a[3]);
  return launched("mse");
}

// ---- fill -----------------------------------------------------------------------------------
// Stores the value's 32 bits as an integer: no float register in between to quiet a signalling
// NaN (the host's float copy keeps it too on x86-64 SSE).
__global__ void fill_kernel(std::uint32_t* d, u64 n, std::uint32_t bits) {
  for (u64 i = first_index(); i < n; i += grid_stride()) d[i] = bits;
}

Status fill(const u64* a, cudaStream_t s) {
  if (a[1] == 0) return Status::Ok();
  fill_kernel<<<blocks_for(a[1]), kThreads, 0, s>>>(ptr<std::uint32_t>(a[0]), a[1],
                                                   static_cast<std::uint32_t>(a[2]));
  return launched("fill");
}

// ---- the table ------------------------------------------------------------------------------
struct DeviceKernel {
  std::string_view name;
  int nargs;
  Status (*launch)(const u64* args, cudaStream_t stream);
};

// Names and argument counts as in kernels.cc's all_kernels(); cuda_kernels_test checks that the
// tables agree.
constexpr DeviceKernel kKernels[] = {
    {"gen_batch", 8, gen_batch}, {"mlp_forward", 8, mlp_forward},
    {"mlp_backward", 10, mlp_backward}, {"sgd", 5, sgd},
    {"mse", 4, mse}, {"fill", 3, fill},
};

const DeviceKernel* find(std::string_view name) {
  for (const DeviceKernel& k : kKernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// ---- sum_in_rank_order ----------------------------------------------------------------------
// Host: out = in[0] (memcpy), then out[i] += in[r][i] for r = 1, 2, ... So per element:
// ((in0 + in1) + in2) + ... A launch takes up to kRanksPerLaunch pointers by value (no device
// copy of the pointer array); a later launch continues the same chain from out[i], and a float
// stored and reloaded keeps its bits, so chaining launches does not change the sum.
constexpr int kRanksPerLaunch = 32;
struct RankPointers {
  const float* p[kRanksPerLaunch];
};

__global__ void sum_ranks(RankPointers in, int n, bool continue_from_out, u64 count, float* out) {
  for (u64 i = first_index(); i < count; i += grid_stride()) {
    float acc = continue_from_out ? out[i] : in.p[0][i];
    for (int r = continue_from_out ? 0 : 1; r < n; ++r) acc += in.p[r][i];
    out[i] = acc;
  }
}

}  // namespace

Status launch_kernel(std::string_view name, const std::uint64_t* args, int nargs,
                     cudaStream_t stream) {
  const DeviceKernel* k = find(name);
  if (k == nullptr) return Status::Error("no device kernel named '" + std::string(name) + "'");
  if (nargs != k->nargs) {
    return Status::Error("kernel " + std::string(name) + " takes " + std::to_string(k->nargs) +
                         " arguments, got " + std::to_string(nargs));
  }
  return k->launch(args, stream);
}

Status launch_sum_in_rank_order(const float* const* in, int ranks, std::uint64_t count,
                                float* out, cudaStream_t stream) {
  if (ranks < 1) return Status::Error("sum_in_rank_order: " + std::to_string(ranks) + " ranks");
  if (count == 0) return Status::Ok();
  for (int first = 0; first < ranks; first += kRanksPerLaunch) {
    const int n = ranks - first < kRanksPerLaunch ? ranks - first : kRanksPerLaunch;
    RankPointers chunk{};
    for (int r = 0; r < n; ++r) chunk.p[r] = in[first + r];
    sum_ranks<<<blocks_for(count), kThreads, 0, stream>>>(chunk, n, first != 0, count, out);
    if (auto st = launched("sum_in_rank_order"); !st) return st;
  }
  return Status::Ok();
}

bool has_kernel(std::string_view name) { return find(name) != nullptr; }

}  // namespace orrery::runtime::cuda
