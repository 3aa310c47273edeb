// The synthetic workload generator: determinism by seed, common random numbers across options,
// every job valid for the core, and each distribution against its analytical mean or share.
// Tolerances are about 4 standard errors or more of the statistic at the sample size used (the
// comment on each says which); the seeds are fixed, so a pass or failure is reproducible.
#include "runtime/sim/synthetic_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

namespace orrery::sim {
namespace {

bool same_job(const SimJob& a, const SimJob& b) {
  return a.arrival_s == b.arrival_s && a.duration_s == b.duration_s && a.mem_mib == b.mem_mib &&
         a.device_types == b.device_types && a.world == b.world && a.min_devices == b.min_devices &&
         a.max_devices == b.max_devices && a.tenant == b.tenant && a.tier == b.tier;
}

Workload gen(const SyntheticOptions& o) {
  auto w = generate_synthetic(o);
  EXPECT_TRUE(w.ok()) << w.reason();
  return w.ok() ? std::move(*w) : Workload{};
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

TEST(SyntheticWorkloadTest, SameSeedSameJobsOtherSeedOtherJobs) {
  SyntheticOptions o;
  o.jobs = 20000;
  const auto a = gen(o), b = gen(o);
  o.seed = 7;
  const auto c = gen(o);
  ASSERT_EQ(a.jobs.size(), 20000u);
  ASSERT_EQ(b.jobs.size(), 20000u);
  ASSERT_EQ(c.jobs.size(), 20000u);
  for (std::size_t i = 0; i < a.jobs.size(); ++i) ASSERT_TRUE(same_job(a.jobs[i], b.jobs[i])) << i;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.jobs.size(); ++i) differ += !same_job(a.jobs[i], c.jobs[i]);
  EXPECT_EQ(differ, a.jobs.size());  // arrival times alone differ for every job
  // The streaming generator makes the same jobs.
  auto g = SyntheticGenerator::create(SyntheticOptions{.jobs = 20000});
  ASSERT_TRUE(g.ok());
  for (std::size_t i = 0; i < a.jobs.size(); ++i) ASSERT_TRUE(same_job(g->next(), a.jobs[i])) << i;
  EXPECT_TRUE(g->done());
}

// Options that change one field leave the others as they were (a fixed number of draws a job).
TEST(SyntheticWorkloadTest, CommonRandomNumbersAcrossOptions) {
  SyntheticOptions o;
  o.jobs = 10000;
  o.elastic_fraction = 0;
  const auto rigid = gen(o);
  o.elastic_fraction = 1;
  o.tier_weights = {1, 0, 0};
  const auto elastic = gen(o);
  std::size_t shrinkable = 0;
  for (std::size_t i = 0; i < rigid.jobs.size(); ++i) {
    const auto &r = rigid.jobs[i], &e = elastic.jobs[i];
    ASSERT_EQ(r.arrival_s, e.arrival_s);
    ASSERT_EQ(r.world, e.world);
    ASSERT_EQ(r.duration_s, e.duration_s);
    ASSERT_EQ(r.mem_mib, e.mem_mib);
    ASSERT_EQ(r.device_types, e.device_types);
    ASSERT_EQ(r.tenant, e.tenant);
    ASSERT_EQ(e.tier, spec::Tier::kPremium);
    ASSERT_EQ(r.min_devices, r.world);
    ASSERT_EQ(e.min_devices < e.world, e.world >= 2);
    shrinkable += e.elastic();
  }
  EXPECT_GT(shrinkable, 4000u);
}

TEST(SyntheticWorkloadTest, DistributionsMatchTheirMeans) {
  SyntheticOptions o;
  o.jobs = 200000;
  o.arrival_rate_per_s = 2.5;
  const auto w = gen(o);
  ASSERT_EQ(w.jobs.size(), 200000u);
  EXPECT_EQ(w.device_types, (std::vector<std::string>{"H100-80G", "A100-80G", "A100-40G"}));
  ASSERT_EQ(w.tenants.size(), 100u);
  const double n = static_cast<double>(w.jobs.size());
  double prev = 0, gap_sum = 0, gap_sq = 0, gang_sum = 0, dur_sum = 0;
  std::vector<double> durations;
  std::vector<std::int64_t> gang_count(11), tier_count(3), type_count(3), tenant0 = {0};
  std::int64_t elastic = 0, multi = 0;
  for (const auto& j : w.jobs) {
    ASSERT_TRUE(check_job(j, w).ok()) << check_job(j, w).reason();
    const double gap = j.arrival_s - prev;
    ASSERT_GT(gap, 0);
    prev = j.arrival_s;
    gap_sum += gap;
    gap_sq += gap * gap;
    gang_sum += j.world;
    ASSERT_TRUE(j.world >= 1 && j.world <= 1024 && (j.world & (j.world - 1)) == 0) << j.world;
    ++gang_count[std::countr_zero(static_cast<unsigned>(j.world))];
    dur_sum += j.duration_s;
    durations.push_back(j.duration_s);
    ASSERT_GE(j.duration_s, 1);
    ++tier_count[static_cast<int>(j.tier)];
    const int type = std::countr_zero(j.device_types);
    ASSERT_EQ(j.device_types, std::uint64_t{1} << type);
    ++type_count[type];
    ASSERT_GE(j.mem_mib, 4096);
    ASSERT_LE(j.mem_mib, 40960);
    tenant0[0] += j.tenant == 0;
    if (j.world >= 2) {
      ++multi;
      elastic += j.elastic();
      ASSERT_GE(j.min_devices * 8, j.world);  // at most 8 workers a device
    }
  }
  // Inter-arrival gaps Exp(2.5): mean 0.4 s (standard error 0.22 %: 1 % is 4.5 of them), and a
  // coefficient of variation of 1, as a Poisson process has.
  const double mean_gap = gap_sum / n;
  EXPECT_NEAR(mean_gap, 0.4, 0.004);
  const double cv = std::sqrt(gap_sq / n - mean_gap * mean_gap) / mean_gap;
  EXPECT_NEAR(cv, 1.0, 0.02);
  // Gang sizes: P(2^k) = 0.5^k / sum; P(1) = 0.50024 (standard error 0.0011).
  EXPECT_NEAR(gang_count[0] / n, 0.5 / (1 - std::ldexp(1.0, -11)), 0.005);
  EXPECT_NEAR(gang_count[3] / n, 0.0625 / (1 - std::ldexp(1.0, -11)), 0.003);
  EXPECT_GT(gang_count[10], 0);  // about 98 jobs of 1,024
  // Mean gang 5.50 (standard deviation about 32: standard error 0.07; 5 % is 0.27).
  EXPECT_NEAR(gang_sum / n, expected_gang(o), 0.05 * expected_gang(o));
  EXPECT_NEAR(expected_gang(o), 11 * 0.5 / (1 - std::ldexp(1.0, -11)), 1e-9);
  // Log-normal durations: median 1800 s (standard error 0.42 %; 2 % allowed), and mean
  // 1800 e^(1.5^2 / 2) = 5547 s less the clamp's share (standard error 0.65 %; 3 % allowed).
  EXPECT_NEAR(median(durations), 1800, 36);
  EXPECT_NEAR(expected_duration_s(o), 1800 * std::exp(1.125), 1);  // the 30-day cap barely bites
  EXPECT_NEAR(dur_sum / n, expected_duration_s(o), 0.03 * expected_duration_s(o));
  // Tiers 0.2 / 0.5 / 0.3, device types 0.5 / 0.3 / 0.2 (standard errors about 0.001).
  EXPECT_NEAR(tier_count[0] / n, 0.2, 0.006);
  EXPECT_NEAR(tier_count[1] / n, 0.5, 0.006);
  EXPECT_NEAR(tier_count[2] / n, 0.3, 0.006);
  EXPECT_NEAR(type_count[0] / n, 0.5, 0.006);
  EXPECT_NEAR(type_count[1] / n, 0.3, 0.006);
  EXPECT_NEAR(type_count[2] / n, 0.2, 0.006);
  // Elastic: half the jobs of two workers or more.
  EXPECT_NEAR(static_cast<double>(elastic) / static_cast<double>(multi), 0.5, 0.01);
  // Tenants Zipf(1) over 100: P(t0) = 1 / H(100) = 0.19280.
  double h = 0;
  for (int i = 1; i <= 100; ++i) h += 1.0 / i;
  EXPECT_NEAR(tenant0[0] / n, 1 / h, 0.006);
}

TEST(SyntheticWorkloadTest, ClampedAndParetoDurations) {
  SyntheticOptions o;
  o.jobs = 200000;
  o.duration_min_s = 600;
  o.duration_max_s = 3600;  // clamps about 23 % below and 32 % above: the formula's terms all count
  auto w = gen(o);
  double sum = 0, at_min = 0, at_max = 0;
  for (const auto& j : w.jobs) {
    ASSERT_GE(j.duration_s, 600);
    ASSERT_LE(j.duration_s, 3600);
    sum += j.duration_s;
    at_min += j.duration_s == 600;
    at_max += j.duration_s == 3600;
  }
  const double n = static_cast<double>(w.jobs.size());
  // P(X < 600) = Phi(ln(1/3) / 1.5) = 0.2320; P(X > 3600) = 1 - Phi(ln 2 / 1.5) = 0.3220.
  EXPECT_NEAR(at_min / n, 0.2320, 0.006);
  EXPECT_NEAR(at_max / n, 0.3220, 0.006);
  EXPECT_NEAR(sum / n, expected_duration_s(o), 0.01 * expected_duration_s(o));

  o.duration = DurationDist::kPareto;
  o.duration_min_s = 1;
  o.duration_max_s = 86400;
  w = gen(o);
  sum = 0;
  std::vector<double> d;
  for (const auto& j : w.jobs) {
    ASSERT_GE(j.duration_s, 300);  // the Pareto scale
    sum += j.duration_s;
    d.push_back(j.duration_s);
  }
  // Median x_m 2^(1/alpha) = 476.2 s; clamped mean 300 + 2 * 300^1.5 * (300^-0.5 - 86400^-0.5)
  // = 864.7 s (standard error 0.6 %; 3 % allowed).
  EXPECT_NEAR(median(d), 300 * std::pow(2.0, 1 / 1.5), 10);
  EXPECT_NEAR(expected_duration_s(o), 300 + 2 * std::pow(300, 1.5) * (std::pow(300, -0.5) - std::pow(86400, -0.5)), 1e-6);
  EXPECT_NEAR(sum / n, expected_duration_s(o), 0.03 * expected_duration_s(o));
}

// A million jobs: made quickly, compactly, in arrival order, offering the load asked for.
TEST(SyntheticWorkloadTest, MillionJobs) {
  SyntheticOptions o;
  o.arrival_rate_per_s = arrival_rate_for_load(o, 100000, 0.9);
  EXPECT_NEAR(offered_load(o, 100000), 0.9, 1e-12);
  const auto t0 = std::chrono::steady_clock::now();
  const auto w = gen(o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("generated %zu jobs in %.3f s (%zu bytes a job, %.1f MB)\n", w.jobs.size(), secs,
              sizeof(SimJob), static_cast<double>(w.jobs.capacity() * sizeof(SimJob)) / 1e6);
  RecordProperty("generate_1m_seconds", std::to_string(secs));
  ASSERT_EQ(w.jobs.size(), 1000000u);
  EXPECT_EQ(w.jobs.capacity(), w.jobs.size());
  EXPECT_TRUE(std::is_sorted(w.jobs.begin(), w.jobs.end(),
                             [](const SimJob& a, const SimJob& b) { return a.arrival_s < b.arrival_s; }));
  // GPU-seconds offered over the arrival span: 0.9 of 100,000 GPUs. The sum is dominated by
  // large, long jobs (per-job relative deviation about 12.6, standard error 1.3 % at 10^6 jobs).
  double gpu_s = 0;
  for (const auto& j : w.jobs) gpu_s += j.world * j.duration_s;
  EXPECT_NEAR(gpu_s / (w.jobs.back().arrival_s * 100000), 0.9, 0.05);
}

TEST(SyntheticWorkloadTest, BadOptions) {
  auto err = [](auto edit) {
    SyntheticOptions o;
    o.jobs = 1;
    edit(o);
    auto w = generate_synthetic(o);
    return w.ok() ? std::string("ok") : w.reason();
  };
  EXPECT_EQ(err([](auto&) {}), "ok");
  EXPECT_NE(err([](auto& o) { o.jobs = -1; }).find("jobs"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.arrival_rate_per_s = 0; }).find("arrival_rate_per_s"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.duration_sigma = NAN; }).find("duration_sigma"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.duration_min_s = 10; o.duration_max_s = 5; }).find("duration_min_s"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.max_gang = 1000; }).find("power of two"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.max_gang = 1 << 21; }).find("power of two"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.tier_weights = {0, 0, 0}; }).find("tier_weights"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.elastic_fraction = 1.5; }).find("elastic_fraction"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.device_types.clear(); }).find("device_types"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.device_types[1].type = "H100-80G"; }).find("listed twice"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.worker_mem_mib_min = 0; }).find("worker_mem_mib_min"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.tenants = 0; }).find("tenants"), std::string::npos);
}

}  // namespace
}  // namespace orrery::sim
