#include "runtime/proxy/kernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "spec/limits.h"

namespace orrery::runtime {
namespace {

constexpr std::uint64_t kMaxDim = 1u << 20;

float* fp(std::uint64_t a) { return reinterpret_cast<float*>(static_cast<std::uintptr_t>(a)); }

// A stateless 64-bit mix (splitmix64's finaliser): synthetic data is a pure function of its
// coordinates, so every rank, device and the reference generate the same batch.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
float unit(std::uint64_t h) {  // [-1, 1), exactly representable steps of 2^-23
  return static_cast<float>(static_cast<std::int64_t>(h >> 40) - (1 << 23)) / float(1 << 23);
}

Status dims(const std::uint64_t* a, std::initializer_list<int> idx) {
  for (int i : idx) {
    if (a[i] == 0 || a[i] > kMaxDim) {
      return Status::Error("argument " + std::to_string(i) + " = " + std::to_string(a[i]) +
                           " is not a dimension in 1.." + std::to_string(kMaxDim));
    }
  }
  return Status::Ok();
}

std::uint64_t f32(std::uint64_t n) { return n * sizeof(float); }

// gen_batch(x, y, B, din, dout, seed, rank, step): x uniform in [-1,1), y a fixed leaky-linear
// teacher of x (teacher weights from the seed only, so all ranks learn the same function).
Status gen_batch_ext(const std::uint64_t* a, std::vector<PointerExtent>* out) {
  if (auto s = dims(a, {2, 3, 4}); !s) return s;
  out->push_back({0, f32(a[2] * a[3])});
  out->push_back({1, f32(a[2] * a[4])});
  return Status::Ok();
}
void gen_batch(const std::uint64_t* a) {
  float* x = fp(a[0]);
  float* y = fp(a[1]);
  const std::uint64_t B = a[2], din = a[3], dout = a[4], seed = a[5], rank = a[6], step = a[7];
  const std::uint64_t base = mix(mix(mix(seed) ^ rank) ^ step);
  for (std::uint64_t b = 0; b < B; ++b) {
    for (std::uint64_t i = 0; i < din; ++i) x[b * din + i] = unit(mix(base ^ mix(b * din + i)));
  }
  for (std::uint64_t b = 0; b < B; ++b) {
    for (std::uint64_t j = 0; j < dout; ++j) {
      float acc = 0.f;
      for (std::uint64_t i = 0; i < din; ++i) {
        acc += x[b * din + i] * unit(mix(mix(seed ^ 0x7ea) ^ (i * dout + j))) * 0.5f;
      }
      y[b * dout + j] = acc > 0.f ? acc : 0.1f * acc;
    }
  }
}

// mlp_forward(params, x, h, out, B, din, hidden, dout): h = relu(x W1 + b1), out = h W2 + b2.
Status forward_ext(const std::uint64_t* a, std::vector<PointerExtent>* out) {
  if (auto s = dims(a, {4, 5, 6, 7}); !s) return s;
  MlpShape m{a[4], a[5], a[6], a[7]};
  out->push_back({0, f32(m.params())});
  out->push_back({1, f32(m.batch * m.din)});
  out->push_back({2, f32(m.batch * m.hidden)});
  out->push_back({3, f32(m.batch * m.dout)});
  return Status::Ok();
}
void forward(const std::uint64_t* a) {
  const float* p = fp(a[0]);
  const float* x = fp(a[1]);
  float* h = fp(a[2]);
  float* o = fp(a[3]);
  const std::uint64_t B = a[4], din = a[5], H = a[6], dout = a[7];
  const float* W1 = p;
  const float* b1 = W1 + din * H;
  const float* W2 = b1 + H;
  const float* b2 = W2 + H * dout;
  for (std::uint64_t b = 0; b < B; ++b) {
    float* hb = h + b * H;
    for (std::uint64_t k = 0; k < H; ++k) hb[k] = b1[k];
    for (std::uint64_t i = 0; i < din; ++i) {
      const float xi = x[b * din + i];
      const float* w = W1 + i * H;
      for (std::uint64_t k = 0; k < H; ++k) hb[k] += xi * w[k];
    }
    for (std::uint64_t k = 0; k < H; ++k) hb[k] = hb[k] > 0.f ? hb[k] : 0.f;
    float* ob = o + b * dout;
    for (std::uint64_t j = 0; j < dout; ++j) ob[j] = b2[j];
    for (std::uint64_t k = 0; k < H; ++k) {
      const float hk = hb[k];
      const float* w = W2 + k * dout;
      for (std::uint64_t j = 0; j < dout; ++j) ob[j] += hk * w[j];
    }
  }
}

// mlp_backward(params, x, h, out, y, grads, B, din, hidden, dout): gradients of the mean squared
// error into grads (same layout as params).
Status backward_ext(const std::uint64_t* a, std::vector<PointerExtent>* out) {
  if (auto s = dims(a, {6, 7, 8, 9}); !s) return s;
  MlpShape m{a[6], a[7], a[8], a[9]};
  out->push_back({0, f32(m.params())});
  out->push_back({1, f32(m.batch * m.din)});
  out->push_back({2, f32(m.batch * m.hidden)});
  out->push_back({3, f32(m.batch * m.dout)});
  out->push_back({4, f32(m.batch * m.dout)});
  out->push_back({5, f32(m.params())});
  return Status::Ok();
}
void backward(const std::uint64_t* a) {
  const float* p = fp(a[0]);
  const float* x = fp(a[1]);
  const float* h = fp(a[2]);
  const float* o = fp(a[3]);
  const float* y = fp(a[4]);
  float* g = fp(a[5]);
  const std::uint64_t B = a[6], din = a[7], H = a[8], dout = a[9];
  const float* W2 = p + din * H + H;
  float* gW1 = g;
  float* gb1 = gW1 + din * H;
  float* gW2 = gb1 + H;
  float* gb2 = gW2 + H * dout;
  std::memset(g, 0, f32(MlpShape{B, din, H, dout}.params()));
  const float scale = 2.f / static_cast<float>(B * dout);
  std::vector<float> dout_b(dout), dh(H);
  for (std::uint64_t b = 0; b < B; ++b) {
    for (std::uint64_t j = 0; j < dout; ++j) dout_b[j] = scale * (o[b * dout + j] - y[b * dout + j]);
    const float* hb = h + b * H;
    for (std::uint64_t k = 0; k < H; ++k) {
      float acc = 0.f;
      const float* w = W2 + k * dout;
      float* gw = gW2 + k * dout;
      for (std::uint64_t j = 0; j < dout; ++j) {
        gw[j] += hb[k] * dout_b[j];
        acc += w[j] * dout_b[j];
      }
      dh[k] = hb[k] > 0.f ? acc : 0.f;
    }
    for (std::uint64_t j = 0; j < dout; ++j) gb2[j] += dout_b[j];
    for (std::uint64_t i = 0; i < din; ++i) {
      const float xi = x[b * din + i];
      float* gw = gW1 + i * H;
      for (std::uint64_t k = 0; k < H; ++k) gw[k] += xi * dh[k];
    }
    for (std::uint64_t k = 0; k < H; ++k) gb1[k] += dh[k];
  }
}

// sgd(params, grads, n, lr_bits, world): params -= lr * grads / world (grads are the sum).
Status sgd_ext(const std::uint64_t* a, std::vector<PointerExtent>* out) {
  if (a[2] == 0 || a[2] > (1ull << 32)) return Status::Error("argument 2 (n) out of range");
  if (a[4] == 0 || a[4] > static_cast<std::uint64_t>(spec::kMaxRunWorld)) return Status::Error("argument 4 (world) out of range");
  if (!std::isfinite(arg_float(a[3]))) return Status::Error("argument 3 (lr) is not finite");
  out->push_back({0, f32(a[2])});
  out->push_back({1, f32(a[2])});
  return Status::Ok();
}
void sgd(const std::uint64_t* a) {
  float* p = fp(a[0]);
  const float* g = fp(a[1]);
  const float lr = arg_float(a[3]);
  const float inv_world = 1.f / static_cast<float>(a[4]);
  for (std::uint64_t i = 0; i < a[2]; ++i) p[i] -= lr * (g[i] * inv_world);
}

// mse(out, y, loss, n): loss[0] = mean of (out - y)^2, summed in index order.
Status mse_ext(const std::uint64_t* a, std::vector<PointerExtent>* out) {
  if (a[3] == 0 || a[3] > (1ull << 32)) return Status::Error("argument 3 (n) out of range");
  out->push_back({0, f32(a[3])});
  out->push_back({1, f32(a[3])});
  out->push_back({2, f32(1)});
  return Status::Ok();
}
void mse(const std::uint64_t* a) {
  const float* o = fp(a[0]);
  const float* y = fp(a[1]);
  float acc = 0.f;
  for (std::uint64_t i = 0; i < a[3]; ++i) acc += (o[i] - y[i]) * (o[i] - y[i]);
  fp(a[2])[0] = acc / static_cast<float>(a[3]);
}

// fill(dst, n, value_bits): a device memset for floats.
Status fill_ext(const std::uint64_t* a, std::vector<PointerExtent>* out) {
  if (a[1] > (1ull << 32)) return Status::Error("argument 1 (n) out of range");
  out->push_back({0, f32(a[1])});
  return Status::Ok();
}
void fill(const std::uint64_t* a) {
  float* d = fp(a[0]);
  const float v = arg_float(a[2]);
  for (std::uint64_t i = 0; i < a[1]; ++i) d[i] = v;
}

}  // namespace

std::uint64_t float_arg(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float arg_float(std::uint64_t a) {
  const std::uint32_t u = static_cast<std::uint32_t>(a);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

const std::vector<KernelDef>& all_kernels() {
  static const std::vector<KernelDef> kTable = {
      {"gen_batch", 8, gen_batch_ext, gen_batch},
      {"mlp_forward", 8, forward_ext, forward},
      {"mlp_backward", 10, backward_ext, backward},
      {"sgd", 5, sgd_ext, sgd},
      {"mse", 4, mse_ext, mse},
      {"fill", 3, fill_ext, fill},
  };
  return kTable;
}

const KernelDef* find_kernel(std::string_view name) {
  for (const KernelDef& k : all_kernels()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

void sum_in_rank_order(const float* const* in, int ranks, std::uint64_t count, float* out) {
  std::memcpy(out, in[0], count * sizeof(float));
  for (int r = 1; r < ranks; ++r) {
    const float* s = in[r];
    for (std::uint64_t i = 0; i < count; ++i) out[i] += s[i];
  }
}

}  // namespace orrery::runtime
