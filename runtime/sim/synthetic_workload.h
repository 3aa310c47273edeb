// A seeded synthetic workload: Poisson arrivals, heavy-tailed durations, gang sizes 1 to 1024
// (powers of two weighted toward small ones), a tier mix, elastic ranges, device types and
// memory, tenants with a skewed share of the jobs. Up to millions of jobs, made one at a time
// (SyntheticGenerator, constant memory) or all at once (generate_synthetic, 56 bytes a job).
//
// Each job, in this order of draws from one xoshiro256** stream (rng.h), so that a seed gives the
// same workload on every machine:
//   arrival_s    the previous job's arrival + Exp(arrival_rate_per_s) (the first: 0 + Exp)
//   world        2^k with P(k) proportional to gang_decay^k, k = 0 .. log2(max_gang)
//   duration_s   log-normal (median duration_median_s, log-sd duration_sigma) or Pareto
//                (scale pareto_min_s, shape pareto_alpha), clamped to
//                [duration_min_s, duration_max_s]: seconds at full size (one device a worker)
//   tier         premium / standard / basic with weights tier_weights
//   elastic      with probability elastic_fraction, when world >= 2: max_devices = world and
//                min_devices = world / 2^s, s uniform in 1 .. min(3, log2 world) (at most
//                2^3 = spec::kSpliceLimit workers a device); otherwise min = max = world
//   device type  one of device_types by weight (a job allows exactly one type)
//   mem_mib      uniform integer in [worker_mem_mib_min, worker_mem_mib_max], both capped at
//                the type's device memory
//   tenant       t0 .. t(tenants-1), P(ti) proportional to 1 / (i + 1)^tenant_zipf (0: uniform)
// Every job takes the same ten draws, needed or not (the elastic shift of a rigid job, the second
// uniform of a Pareto duration), so that options changing one field leave the others as they were:
// with the same seed, two workloads differing only in, say, elastic_fraction have the same
// arrivals, sizes, durations and tiers (common random numbers for comparing settings).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/sim/fleet_generator.h"
#include "runtime/sim/rng.h"
#include "runtime/sim/workload.h"

namespace orrery::sim {

enum class DurationDist { kLogNormal, kPareto };

struct SyntheticOptions {
  std::uint64_t seed = 1;
  std::int64_t jobs = 1'000'000;
  double arrival_rate_per_s = 1.0;
  DurationDist duration = DurationDist::kLogNormal;
  double duration_median_s = 1800;  // log-normal
  double duration_sigma = 1.5;      // log-normal
  double pareto_min_s = 300;        // Pareto scale x_m
  double pareto_alpha = 1.5;        // Pareto shape (heavier tail as it nears 1)
  double duration_min_s = 1;
  double duration_max_s = 30 * 86400.0;
  int max_gang = 1024;     // a power of two, at most 2^20
  double gang_decay = 0.5;  // in (0, 1]: 1 makes every power of two equally likely
  std::array<double, 3> tier_weights = {0.2, 0.5, 0.3};  // premium, standard, basic
  double elastic_fraction = 0.5;
  std::vector<DeviceMixEntry> device_types = default_device_mix();  // name, device memory, weight
  std::int64_t worker_mem_mib_min = 4096;
  std::int64_t worker_mem_mib_max = 40960;
  int tenants = 100;
  double tenant_zipf = 1.0;
};

// The options are usable: the reason otherwise.
Status check_options(const SyntheticOptions& o);

class SyntheticGenerator {
 public:
  static Result<SyntheticGenerator> create(const SyntheticOptions& options);

  bool done() const { return made_ >= options_.jobs; }
  // The next job (done() must be false).
  SimJob next();
  std::int64_t made() const { return made_; }

  // The names the jobs' fields index: device types in options order, tenants t0, t1, ...
  const std::vector<std::string>& device_types() const { return device_types_; }
  const std::vector<std::string>& tenants() const { return tenants_; }

 private:
  explicit SyntheticGenerator(const SyntheticOptions& o);
  double draw_duration();

  SyntheticOptions options_;
  Rng rng_;
  WeightedChoice gang_, tier_, type_, tenant_;
  std::vector<std::string> device_types_, tenants_;
  double clock_s_ = 0;
  std::int64_t made_ = 0;
};

// All options.jobs jobs in one Workload (its vector sized exactly).
Result<Workload> generate_synthetic(const SyntheticOptions& options);

// Analytical means of the distributions above, for sizing a run and for the tests:
double expected_gang(const SyntheticOptions& o);        // E[world]
double expected_duration_s(const SyntheticOptions& o);  // E[duration_s], clamping included
// Offered load on `devices` devices: arrival rate x E[world] x E[duration] / devices.
double offered_load(const SyntheticOptions& o, std::int64_t devices);
// The arrival rate that offers `load` (e.g. 0.9) on `devices` devices.
double arrival_rate_for_load(const SyntheticOptions& o, std::int64_t devices, double load);

}  // namespace orrery::sim
