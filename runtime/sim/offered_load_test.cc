// The offered load (offered_load.h): its definition on hand-made workloads, scaling to a load, the
// repeats a workload too small for its fleet needs, and the simulator's steady-state utilization
// meeting the stated load; what each planner action cost and the completion statistics'
// percentiles (sim_metrics.h).
#include "runtime/sim/offered_load.h"

#include <gtest/gtest.h>

#include "runtime/sim/fleet_generator.h"
#include "runtime/sim/sim_test_util.h"
#include "runtime/sim/sim_metrics.h"
#include "runtime/sim/simulator.h"
#include "runtime/sim/synthetic_workload.h"

namespace orrery::sim {
namespace {

using orrery::sim::testing::h100_fleet;
using orrery::sim::testing::job;

TEST(OfferedLoad, SteadyWindowTrimsATenthAtEachEnd) {
  EXPECT_EQ(steady_window(100).first, 10u);
  EXPECT_EQ(steady_window(100).last, 89u);
  EXPECT_EQ(steady_window(5).first, 0u);  // too few to trim
  EXPECT_EQ(steady_window(5).last, 4u);
  EXPECT_EQ(steady_window(1).last, 0u);
}

TEST(OfferedLoad, CountsWhatEachJobWouldHoldInsideTheWindow) {
  // Five jobs at 0, 10, 20, 30, 40 s: the window is [0, 40] (too few to trim). On 4 devices:
  //   job 0: 2 devices for 20 s   -> 40 GPU-s inside
  //   job 1: 1 device for 100 s   -> 30 inside (10..40: it runs past the window's end)
  //   job 2: 4 devices for 5 s    -> 20
  //   job 3: 1 device for 0 s     -> 0
  //   job 4: 8 devices (arrives at the end) -> 0
  // 90 GPU-s of 4 x 40 = 160.
  Workload w;
  w.tenants = {"all"};
  w.jobs = {job(0, 20, 2), job(10, 100, 1), job(20, 5, 4), job(30, 0, 1), job(40, 10, 8)};
  EXPECT_DOUBLE_EQ(offered_load(w, 4), 90.0 / 160.0);
  // Not counted (unschedulable): job 1.
  EXPECT_DOUBLE_EQ(offered_load(w, 4, {1, 0, 1, 1, 1}), 60.0 / 160.0);
  // Limit: every job with work runs from its arrival past the end: 2x40 + 1x30 + 4x20 = 190.
  EXPECT_DOUBLE_EQ(offered_load_limit(w, 4), 190.0 / 160.0);
  // By group, each over its own devices: jobs 0 and 2 (60 GPU-s) over 4 devices, job 1 (30) over
  // 2; job 3 and 4 in none.
  const auto by = offered_load_by_group(w, {0, 1, 0, -1, -1}, [](int g) { return g == 0 ? 4 : 2; });
  ASSERT_EQ(by.size(), 2u);
  EXPECT_DOUBLE_EQ(by.at(0), 60.0 / 160.0);
  EXPECT_DOUBLE_EQ(by.at(1), 30.0 / 80.0);
}

TEST(OfferedLoad, AJobThatArrivedBeforeTheWindowCountsOnlyItsPartInside) {
  // Ten jobs at 0, 10, ..., 90 s: the window is [10, 80] (a tenth trimmed at each end). Job 0
  // holds 1 device from 0 to 30 s: 20 GPU-s inside, not 30; the others have no work. On 1 device:
  // 20 GPU-s of 70.
  Workload w;
  w.tenants = {"all"};
  for (int i = 0; i < 10; ++i) w.jobs.push_back(job(10.0 * i, i == 0 ? 30 : 0, 1));
  EXPECT_DOUBLE_EQ(offered_load(w, 1), 20.0 / 70.0);
}

TEST(OfferedLoad, ScalingReachesTheLoadWithHeavyTailedDurations) {
  // 1,000 one-device jobs a second apart, 2% of them running 100 times longer than all arrivals
  // take: the arrival rate x mean GPU-seconds would overstate the load inside the window 40-fold.
  Workload w;
  w.tenants = {"all"};
  for (int i = 0; i < 1000; ++i) w.jobs.push_back(job(i, i % 50 == 0 ? 100000 : 60, 1 + i % 4));
  for (double load : {0.3, 0.6, 0.9, 1.5}) {
    Workload x = w;
    auto s = scale_to_load(x, 64, load, 0);
    ASSERT_TRUE(s.ok()) << s.reason();
    EXPECT_EQ(s->copies, 1);
    EXPECT_NEAR(offered_load(x, 64), load, 1e-6 * load);
    EXPECT_EQ(x.jobs.size(), w.jobs.size());
  }
}

TEST(OfferedLoad, RepeatsAWorkloadTooSmallForTheFleet) {
  // 100 one-device jobs can never hold more than about half of 100 devices on average over the
  // window (their limit); to offer 0.9, and twice that to spare, it takes copies.
  Workload w;
  w.tenants = {"all"};
  for (int i = 0; i < 100; ++i) w.jobs.push_back(job(i * 10, 50, 1));
  EXPECT_LT(offered_load_limit(w, 100), 0.9);
  Workload x = w;
  auto s = scale_to_load(x, 100, 0.9, 0);
  ASSERT_TRUE(s.ok()) << s.reason();
  EXPECT_GT(s->copies, 1);
  EXPECT_GE(s->limit, 1.8);
  EXPECT_EQ(x.jobs.size(), w.jobs.size() * static_cast<std::size_t>(s->copies));
  EXPECT_NEAR(offered_load(x, 100), 0.9, 1e-6);
  for (std::size_t i = 1; i < x.jobs.size(); ++i) ASSERT_LE(x.jobs[i - 1].arrival_s, x.jobs[i].arrival_s);
  // Copies follow each other a mean gap apart: jobs at 5, 15 and 25 s repeat at 35, 45 and 55 s.
  Workload three;
  three.jobs = {job(5, 1, 1), job(15, 1, 1), job(25, 1, 1)};
  const Workload twice = repeat_workload(three, 2);
  ASSERT_EQ(twice.jobs.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(twice.jobs[i].arrival_s, 5.0 + 10.0 * static_cast<double>(i));
  // With the copies asked for and too few of them: an error that says so.
  Workload y = w;
  EXPECT_FALSE(scale_to_load(y, 100, 0.9, 1).ok());
}

// The load definition end to end: synthetic jobs of known durations (log-normal, median 10 min)
// and gangs up to 8, on 512 devices (so no gang is large beside the fleet), scaled to a load;
// every policy's utilization over the steady-state window is within 10% of that load (relative).
TEST(OfferedLoad, StatedLoadGivesThatUtilization) {
  const auto fleet = h100_fleet(1, 64, 8);
  SyntheticOptions so;
  so.jobs = 2500;
  so.max_gang = 8;
  so.duration_median_s = 600;
  so.duration_sigma = 1.0;
  so.device_types = {{"H100-80G", 81920, 1}};
  so.tenants = 1;
  SimOptions o;
  o.premium_share = 1;
  for (double load : {0.3, 0.6, 0.9}) {
    so.arrival_rate_per_s = arrival_rate_for_load(so, fleet.num_devices(), load);
    auto w = generate_synthetic(so);
    ASSERT_TRUE(w.ok()) << w.reason();
    auto s = scale_to_load(*w, fleet.num_devices(), load, 1);
    ASSERT_TRUE(s.ok()) << s.reason();
    for (const char* p : {"fifo", "tiresias", "afs", "orrery"}) {
      auto r = simulate(fleet, *w, p, o);
      ASSERT_TRUE(r.ok()) << r.reason();
      EXPECT_NEAR(r->offered_load, load, 1e-6) << p;
      EXPECT_NEAR(r->utilization, load, 0.1 * load) << p << " at load " << load;
      EXPECT_GT(r->steady_to_s, r->steady_from_s) << p;
      EXPECT_EQ(r->rejected_proposals, 0u) << p;
      EXPECT_EQ(r->completed, 2500) << p;
    }
  }
}

TEST(ActionLedger, ChargesTheDevicesHeldUntilTheJobRunsAgain) {
  using spec::EventKind;
  using spec::JobState;
  ActionLedger l;
  // Preempted at 0 on 4 devices; its cut is stored at 10 s (Suspended, no devices); resumed at
  // 100 s on 2 devices, restoring until 105 s: 4 x 10 + 2 x 5 = 50 GPU-s.
  l.committed(0, EventKind::kPreempt, JobState::kCheckpointing, 4, 0);
  l.committed(0, EventKind::kCheckpointDone, JobState::kSuspended, 4, 10'000);
  l.committed(0, EventKind::kResume, JobState::kRestoring, 0, 100'000);
  l.committed(0, EventKind::kRestoreDone, JobState::kRunning, 2, 105'000);
  l.committed(0, EventKind::kProgress, JobState::kRunning, 2, 200'000);  // over: nothing more
  // A migration of job 1 on 8 devices for 30 s, with 5 GPU-s of a requeue job's work thrown away.
  l.committed(1, EventKind::kMigrate, JobState::kMigrating, 8, 0);
  l.redone(1, 5);
  l.committed(1, EventKind::kRestoreDone, JobState::kRunning, 8, 30'000);
  const auto& c = l.costs();
  EXPECT_EQ(c[0].count, 1);
  EXPECT_DOUBLE_EQ(c[0].stalled_gpu_s, 50);
  EXPECT_EQ(c[1].count, 1);
  EXPECT_DOUBLE_EQ(c[1].stalled_gpu_s, 240);
  EXPECT_DOUBLE_EQ(c[1].redone_gpu_s, 5);
  EXPECT_EQ(c[2].count, 0);
}

TEST(JobStats, PercentilesAreNearestRankPerTierAndOverall) {
  // 100 standard jobs with JCTs 1..100 s (in a shuffled order) and one premium job of 7 s; queue
  // times a tenth of each JCT. Nearest rank: the q-quantile of n sorted values is the ceil(q n)-th.
  JobStats st(1);
  for (int i = 0; i < 100; ++i) {
    const double jct = 1 + (i * 37) % 100;
    st.completed(spec::Tier::kStandard, 0, jct, jct / 10, 300, /*gang=*/jct > 90);
  }
  st.completed(spec::Tier::kPremium, 0, 7, 0.5, 300, false);
  const auto s = st.summarize();
  // Overall, 101 values (1..100 and 7): ceil(0.5 x 101) = 51st is 50, ceil(0.95 x 101) = 96th
  // is 95, ceil(0.99 x 101) = 100th is 99.
  EXPECT_DOUBLE_EQ(s.p50_jct_s, 50);
  EXPECT_DOUBLE_EQ(s.p95_jct_s, 95);
  EXPECT_DOUBLE_EQ(s.p99_jct_s, 99);
  EXPECT_DOUBLE_EQ(s.avg_jct_s, (5050.0 + 7) / 101);
  const auto& std_tier = s.tiers[1];
  EXPECT_EQ(std_tier.jobs, 100);
  EXPECT_DOUBLE_EQ(std_tier.p50_jct_s, 50);
  EXPECT_DOUBLE_EQ(std_tier.p99_jct_s, 99);
  EXPECT_DOUBLE_EQ(std_tier.p99_queue_s, 9.9);
  EXPECT_DOUBLE_EQ(std_tier.max_queue_s, 10);
  EXPECT_DOUBLE_EQ(std_tier.avg_queue_s, 5.05);
  // The ten gangs (JCT 91..100) and the 90 others apart.
  EXPECT_EQ(std_tier.gang_jobs, 10);
  EXPECT_DOUBLE_EQ(std_tier.avg_queue_gang_s, 9.55);
  EXPECT_NEAR(std_tier.avg_queue_one_s, 4.55, 1e-12);
  // One value is every quantile.
  EXPECT_DOUBLE_EQ(s.tiers[0].p50_jct_s, 7);
  EXPECT_DOUBLE_EQ(s.tiers[0].p99_jct_s, 7);
  EXPECT_EQ(s.tiers[2].jobs, 0);
  EXPECT_DOUBLE_EQ(s.tiers[2].p99_jct_s, 0);
}

}  // namespace
}  // namespace orrery::sim
