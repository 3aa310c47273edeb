#include "runtime/sim/synthetic_workload.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>

#include "runtime/sim/fleet_builder.h"

namespace orrery::sim {

namespace {

bool finite_nonneg(double v) { return std::isfinite(v) && v >= 0; }

Status bad(const std::string& what) { return Status::Error("synthetic workload: " + what); }

// Weights that WeightedChoice can take: finite, >= 0, positive sum.
bool usable_weights(const std::vector<double>& w) {
  double sum = 0;
  for (double x : w) {
    if (!finite_nonneg(x)) return false;
    sum += x;
  }
  return sum > 0 && std::isfinite(sum);
}

std::vector<double> gang_weights(const SyntheticOptions& o) {
  std::vector<double> w;
  const int levels = std::countr_zero(static_cast<unsigned>(o.max_gang)) + 1;
  double p = 1;
  for (int k = 0; k < levels; ++k, p *= o.gang_decay) w.push_back(p);
  return w;
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

}  // namespace

Status check_options(const SyntheticOptions& o) {
  if (o.jobs < 0 || o.jobs > std::int64_t{1} << 31) return bad("jobs must be in [0, 2^31]");
  if (!(std::isfinite(o.arrival_rate_per_s) && o.arrival_rate_per_s > 0))
    return bad("arrival_rate_per_s must be finite and > 0");
  if (!(std::isfinite(o.duration_median_s) && o.duration_median_s > 0))
    return bad("duration_median_s must be finite and > 0");
  if (!(std::isfinite(o.duration_sigma) && o.duration_sigma > 0))
    return bad("duration_sigma must be finite and > 0");
  if (!(std::isfinite(o.pareto_min_s) && o.pareto_min_s > 0))
    return bad("pareto_min_s must be finite and > 0");
  if (!(std::isfinite(o.pareto_alpha) && o.pareto_alpha > 0))
    return bad("pareto_alpha must be finite and > 0");
  if (!finite_nonneg(o.duration_min_s) || !finite_nonneg(o.duration_max_s) ||
      o.duration_min_s > o.duration_max_s)
    return bad("need 0 <= duration_min_s <= duration_max_s, both finite");
  if (o.max_gang < 1 || o.max_gang > spec::kMaxWorld || !std::has_single_bit(static_cast<unsigned>(o.max_gang)))
    return bad("max_gang must be a power of two in [1, 2^20]");
  if (!(std::isfinite(o.gang_decay) && o.gang_decay > 0)) return bad("gang_decay must be finite and > 0");
  if (!usable_weights(gang_weights(o))) return bad("gang_decay too large: gang weights overflow");
  if (!usable_weights({o.tier_weights.begin(), o.tier_weights.end()}))
    return bad("tier_weights must be finite, >= 0, with a positive sum");
  if (!(o.elastic_fraction >= 0 && o.elastic_fraction <= 1)) return bad("elastic_fraction must be in [0, 1]");
  if (o.device_types.empty() || o.device_types.size() > kMaxWorkloadDeviceTypes)
    return bad("device_types must name 1 to 64 types");
  std::vector<double> tw;
  for (const auto& t : o.device_types) {
    if (!valid_fleet_name(t.type)) return bad("device type \"" + t.type + "\": bad name");
    if (t.mem_mib < 1 || t.mem_mib > spec::kMaxMemMib)
      return bad("device type " + t.type + ": mem_mib must be in [1, 2^40]");
    for (const auto& u : o.device_types)
      if (&u != &t && u.type == t.type) return bad("device type " + t.type + " listed twice");
    tw.push_back(t.weight);
  }
  if (!usable_weights(tw)) return bad("device type weights must be finite, >= 0, with a positive sum");
  if (o.worker_mem_mib_min < 1 || o.worker_mem_mib_min > o.worker_mem_mib_max ||
      o.worker_mem_mib_max > spec::kMaxMemMib)
    return bad("need 1 <= worker_mem_mib_min <= worker_mem_mib_max <= 2^40");
  if (o.tenants < 1 || o.tenants > 10'000'000) return bad("tenants must be in [1, 10^7]");
  if (!finite_nonneg(o.tenant_zipf)) return bad("tenant_zipf must be finite and >= 0");
  return Status::Ok();
}

SyntheticGenerator::SyntheticGenerator(const SyntheticOptions& o) : options_(o), rng_(o.seed) {
  gang_ = WeightedChoice(gang_weights(o));
  tier_ = WeightedChoice({o.tier_weights.begin(), o.tier_weights.end()});
  std::vector<double> tw;
  for (const auto& t : o.device_types) {
    tw.push_back(t.weight);
    device_types_.push_back(t.type);
  }
  type_ = WeightedChoice(tw);
  std::vector<double> zipf;
  zipf.reserve(static_cast<std::size_t>(o.tenants));
  tenants_.reserve(static_cast<std::size_t>(o.tenants));
  for (int i = 0; i < o.tenants; ++i) {
    zipf.push_back(1.0 / std::pow(i + 1.0, o.tenant_zipf));
    tenants_.push_back("t" + std::to_string(i));
  }
  tenant_ = WeightedChoice(zipf);
}

Result<SyntheticGenerator> SyntheticGenerator::create(const SyntheticOptions& o) {
  if (auto st = check_options(o); !st.ok()) return st;
  return SyntheticGenerator(o);
}

double SyntheticGenerator::draw_duration() {
  // Two uniforms either way (see the header: a fixed number of draws per job).
  const double u1 = rng_.uniform_pos(), u2 = rng_.uniform();
  double d;
  if (options_.duration == DurationDist::kLogNormal) {
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    d = options_.duration_median_s * std::exp(options_.duration_sigma * z);
  } else {
    d = options_.pareto_min_s * std::pow(u1, -1.0 / options_.pareto_alpha);
  }
  return std::clamp(d, options_.duration_min_s, options_.duration_max_s);
}

SimJob SyntheticGenerator::next() {
  const auto& o = options_;
  SimJob j;
  clock_s_ += rng_.exponential(o.arrival_rate_per_s);
  j.arrival_s = clock_s_;
  const int k = gang_(rng_);
  j.world = std::int32_t{1} << k;
  j.duration_s = draw_duration();
  j.tier = static_cast<spec::Tier>(tier_(rng_));
  const bool elastic = rng_.uniform() < o.elastic_fraction;
  const int shift = static_cast<int>(rng_.uniform_int(1, 3));  // drawn whether used or not
  j.max_devices = j.world;
  j.min_devices = (elastic && k >= 1) ? j.world >> std::min(shift, k) : j.world;
  const int type = type_(rng_);
  j.device_types = std::uint64_t{1} << type;
  const std::int64_t cap = o.device_types[static_cast<std::size_t>(type)].mem_mib;
  const std::int64_t lo = std::min(o.worker_mem_mib_min, cap), hi = std::min(o.worker_mem_mib_max, cap);
  j.mem_mib = rng_.uniform_int(lo, hi);
  j.tenant = tenant_(rng_);
  ++made_;
  return j;
}

Result<Workload> generate_synthetic(const SyntheticOptions& o) {
  auto g = SyntheticGenerator::create(o);
  if (!g) return g.status();
  Workload w;
  w.device_types = g->device_types();
  w.tenants = g->tenants();
  w.jobs.reserve(static_cast<std::size_t>(o.jobs));
  while (!g->done()) w.jobs.push_back(g->next());
  return w;
}

double expected_gang(const SyntheticOptions& o) {
  const auto w = gang_weights(o);
  double sum = 0, mean = 0;
  for (std::size_t k = 0; k < w.size(); ++k) {
    sum += w[k];
    mean += w[k] * std::ldexp(1.0, static_cast<int>(k));
  }
  return mean / sum;
}

double expected_duration_s(const SyntheticOptions& o) {
  const double a = o.duration_min_s, b = o.duration_max_s;
  if (a >= b) return a;
  if (o.duration == DurationDist::kLogNormal) {
    // E[clamp(X, a, b)] = a P(X < a) + E[X; a <= X <= b] + b P(X > b), X = exp(mu + sigma Z).
    const double mu = std::log(o.duration_median_s), s = o.duration_sigma;
    const double za = a > 0 ? (std::log(a) - mu) / s : -INFINITY;
    const double zb = (std::log(b) - mu) / s;
    return a * normal_cdf(za) +
           std::exp(mu + s * s / 2) * (normal_cdf(zb - s) - normal_cdf(za - s)) +
           b * (1 - normal_cdf(zb));
  }
  // Pareto: E[clamp(X, a, b)] = a + integral from a to b of P(X > t) dt, where P(X > t) is 1
  // below x_m and (x_m / t)^alpha above.
  const double xm = o.pareto_min_s, al = o.pareto_alpha;
  double e = a + std::max(0.0, std::min(b, xm) - a);
  const double lo = std::max(a, xm);
  if (lo < b) {
    e += al == 1 ? xm * std::log(b / lo)
                 : std::pow(xm, al) * (std::pow(b, 1 - al) - std::pow(lo, 1 - al)) / (1 - al);
  }
  return e;
}

double offered_load(const SyntheticOptions& o, std::int64_t devices) {
  return o.arrival_rate_per_s * expected_gang(o) * expected_duration_s(o) / static_cast<double>(devices);
}

double arrival_rate_for_load(const SyntheticOptions& o, std::int64_t devices, double load) {
  return load * static_cast<double>(devices) / (expected_gang(o) * expected_duration_s(o));
}

}  // namespace orrery::sim
