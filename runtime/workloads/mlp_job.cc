#include "runtime/workloads/mlp_job.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "spec/limits.h"

namespace orrery::runtime {
namespace {

std::vector<float> initial_params(const MlpConfig& c) {
  const MlpShape& m = c.shape;
  std::vector<float> p(m.params(), 0.f);
  std::uint64_t x = c.seed * 0x9E3779B97F4A7C15ull + 12345;
  auto next = [&x] {  // splitmix64
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<std::int64_t>(z >> 40) - (1 << 23)) / float(1 << 23);
  };
  const float s1 = 1.f / std::sqrt(static_cast<float>(m.din));
  const float s2 = 1.f / std::sqrt(static_cast<float>(m.hidden));
  std::size_t i = 0;
  for (; i < m.din * m.hidden; ++i) p[i] = next() * s1;
  i += m.hidden;  // b1 = 0
  for (std::size_t k = 0; k < m.hidden * m.dout; ++k, ++i) p[i] = next() * s2;
  return p;  // b2 = 0
}

// The host state a rank registers: everything besides device memory that it needs to go on.
struct HostState {
  std::int64_t next_step = 0;
  std::uint64_t seed = 0;
  std::uint64_t params = 0;
};

std::uint64_t P(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

std::uint64_t fnv1a64(const void* data, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

Result<MlpConfig> parse_mlp_args(const std::vector<std::string>& args) {
  MlpConfig c;
  for (const std::string& a : args) {
    auto eq = a.find('=');
    const std::string key = a.substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : a.substr(eq + 1);
    auto num = [&](std::uint64_t lo, std::uint64_t hi) -> Result<std::uint64_t> {
      char* end = nullptr;
      unsigned long long v = std::strtoull(val.c_str(), &end, 10);
      if (val.empty() || *end != '\0' || v < lo || v > hi) {
        return Status::Error(key + ": expected an integer in " + std::to_string(lo) + ".." +
                             std::to_string(hi) + ", got '" + val + "'");
      }
      return static_cast<std::uint64_t>(v);
    };
    Result<std::uint64_t> v = std::uint64_t{0};
    if (key == "--steps") { v = num(1, spec::kMaxSteps); if (v) c.steps = static_cast<std::int64_t>(*v); }
    else if (key == "--seed") { v = num(0, ~0ull); if (v) c.seed = *v; }
    else if (key == "--batch") { v = num(1, 4096); if (v) c.shape.batch = *v; }
    else if (key == "--din") { v = num(1, 4096); if (v) c.shape.din = *v; }
    else if (key == "--hidden") { v = num(1, 8192); if (v) c.shape.hidden = *v; }
    else if (key == "--dout") { v = num(1, 4096); if (v) c.shape.dout = *v; }
    else if (key == "--world") { v = num(1, spec::kMaxRunWorld); if (v) c.world = static_cast<int>(*v); }
    else if (key == "--step-delay-us") { v = num(0, 10'000'000); if (v) c.step_delay_us = static_cast<std::int64_t>(*v); }
    else if (key == "--lr") {
      char* end = nullptr;
      c.lr = std::strtof(val.c_str(), &end);
      if (val.empty() || *end != '\0' || !(c.lr > 0.f) || c.lr > 10.f) {
        return Status::Error("--lr: expected a number in (0, 10], got '" + val + "'");
      }
    } else if (key == "--reference" && val.empty()) {
      c.reference = true;
    } else {
      return Status::Error("unknown argument '" + a + "'");
    }
    if (!v) return v.status();
  }
  if (c.shape.params() * sizeof(float) > kDataBytes * 64) {
    return Status::Error("model too large for this workload (at most 64 MiB of parameters)");
  }
  return c;
}

Result<MlpResult> run_mlp_worker(Worker& w, const MlpConfig& cfg) {
  const MlpShape& m = cfg.shape;
  const std::uint64_t np = m.params();
  // The same allocation sequence on every run: after a restore the proxy hands back the same
  // addresses with their contents.
  DevPtr bufs[8];
  const std::uint64_t sizes[8] = {np, np, m.batch * m.din, m.batch * m.dout, m.batch * m.hidden,
                                  m.batch * m.dout, 1, 1};
  for (int i = 0; i < 8; ++i) {
    auto a = w.alloc(sizes[i] * sizeof(float));
    if (!a) return a.status();
    bufs[i] = *a;
  }
  const DevPtr params = bufs[0], grads = bufs[1], x = bufs[2], y = bufs[3], h = bufs[4],
               out = bufs[5], loss = bufs[6];
  HostState st;
  if (auto s = w.register_host_state(&st, sizeof st); !s) return s;
  MlpResult res;
  if (w.restored()) {
    if (st.seed != cfg.seed || st.params != np) {
      return Status::Error("the checkpoint is of another configuration (seed or model shape)");
    }
    res.restored = true;
    res.restored_from = w.restored_step();
  } else {
    const std::vector<float> init = initial_params(cfg);
    if (auto s = w.copy_h2d(params, init.data(), init.size() * sizeof(float)); !s) return s;
    st = HostState{0, cfg.seed, np};
  }
  while (st.next_step < cfg.steps) {
    const std::int64_t s = st.next_step;
    Status k = w.launch("gen_batch", {x, y, m.batch, m.din, m.dout, cfg.seed,
                                      static_cast<std::uint64_t>(w.rank()), static_cast<std::uint64_t>(s)});
    if (k) k = w.launch("mlp_forward", {params, x, h, out, m.batch, m.din, m.hidden, m.dout});
    if (k) k = w.launch("mse", {out, y, loss, m.batch * m.dout});
    if (k) k = w.launch("mlp_backward", {params, x, h, out, y, grads, m.batch, m.din, m.hidden, m.dout});
    if (!k) return k;
    auto flags = w.allreduce(grads, np, s);
    if (!flags) return flags.status();
    k = w.launch("sgd", {params, grads, np, float_arg(cfg.lr), static_cast<std::uint64_t>(w.world())});
    if (!k) return k;
    st.next_step = s + 1;
    auto b = w.step_boundary(st.next_step);
    if (!b) return b.status();
    if (cfg.step_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(cfg.step_delay_us));
    if (b->stop) {
      res.stopped = true;
      break;
    }
  }
  res.steps_done = st.next_step;
  std::vector<float> final_params(np);
  if (auto s = w.copy_d2h(final_params.data(), params, np * sizeof(float)); !s) return s;
  res.digest = fnv1a64(final_params.data(), np * sizeof(float));
  if (auto s = w.copy_d2h(&res.loss, loss, sizeof(float)); !s) return s;
  return res;
}

MlpResult run_mlp_reference(const MlpConfig& cfg) {
  const MlpShape& m = cfg.shape;
  const std::uint64_t np = m.params();
  std::vector<float> params = initial_params(cfg);
  const int W = cfg.world;
  std::vector<std::vector<float>> grads(W, std::vector<float>(np));
  std::vector<float> x(m.batch * m.din), y(m.batch * m.dout), h(m.batch * m.hidden),
      out(m.batch * m.dout), sum(np);
  float loss0 = 0;
  const KernelDef* gen = find_kernel("gen_batch");
  const KernelDef* fwd = find_kernel("mlp_forward");
  const KernelDef* mse = find_kernel("mse");
  const KernelDef* bwd = find_kernel("mlp_backward");
  const KernelDef* sgd = find_kernel("sgd");
  for (std::int64_t s = 0; s < cfg.steps; ++s) {
    for (int r = 0; r < W; ++r) {
      float loss = 0;
      const std::uint64_t g[] = {P(x.data()), P(y.data()), m.batch, m.din, m.dout, cfg.seed,
                                 static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(s)};
      gen->run_host(g);
      const std::uint64_t f[] = {P(params.data()), P(x.data()), P(h.data()), P(out.data()),
                                 m.batch, m.din, m.hidden, m.dout};
      fwd->run_host(f);
      const std::uint64_t l[] = {P(out.data()), P(y.data()), P(&loss), m.batch * m.dout};
      mse->run_host(l);
      const std::uint64_t b[] = {P(params.data()), P(x.data()), P(h.data()), P(out.data()),
                                 P(y.data()), P(grads[r].data()), m.batch, m.din, m.hidden, m.dout};
      bwd->run_host(b);
      if (r == 0) loss0 = loss;
    }
    std::vector<const float*> in(W);
    for (int r = 0; r < W; ++r) in[r] = grads[r].data();
    sum_in_rank_order(in.data(), W, np, sum.data());
    const std::uint64_t u[] = {P(params.data()), P(sum.data()), np, float_arg(cfg.lr),
                               static_cast<std::uint64_t>(W)};
    sgd->run_host(u);
  }
  MlpResult res;
  res.digest = fnv1a64(params.data(), np * sizeof(float));
  res.loss = loss0;
  res.steps_done = cfg.steps;
  return res;
}

std::string mlp_result_line(const MlpResult& r, int rank, int world) {
  char b[200];
  std::snprintf(b, sizeof b, "%s rank=%d world=%d steps=%lld loss=%.6g digest=%016llx%s",
                r.stopped ? "stopped" : "done", rank, world, static_cast<long long>(r.steps_done),
                static_cast<double>(r.loss), static_cast<unsigned long long>(r.digest),
                r.restored ? (" restored_from=" + std::to_string(r.restored_from)).c_str() : "");
  return b;
}

}  // namespace orrery::runtime
