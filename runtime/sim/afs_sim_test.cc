// The AFS baseline (core/policy/afs_planner.h) in the simulator: its throughput model, and each of
// its actions in a scenario built to need it (growth into idle devices, also of one type while a
// job of another waits; a shrink for a waiting job that has had far less service) and not where
// none is needed.
#include <gtest/gtest.h>

#include "core/policy/afs_planner.h"
#include "runtime/sim/fleet_generator.h"
#include "runtime/sim/sim_test_util.h"
#include "runtime/sim/simulator.h"

namespace orrery::sim {
namespace {

using orrery::sim::testing::one_node;
using orrery::sim::testing::job;

using core::policy::AfsPlanner;

// Attained service reaches the core at checkpoints.
SimOptions opts() { return orrery::sim::testing::small_case_options(600); }

TEST(AfsPlanner, ThroughputModelAndSteps) {
  EXPECT_DOUBLE_EQ(AfsPlanner::throughput(8, 8), 1.0);
  EXPECT_DOUBLE_EQ(AfsPlanner::throughput(8, 4), 0.5 * (1 - AfsPlanner::kSpliceOverhead));
  EXPECT_DOUBLE_EQ(AfsPlanner::step_weight(8, 0, 2), 1.0);  // a first step
  // 4 -> 8 devices: (1 - 0.495) / 1 per device added, over 4 devices.
  EXPECT_DOUBLE_EQ(AfsPlanner::step_weight(8, 4, 8), (1 - 0.495) / 4);
  EXPECT_GT(AfsPlanner::step_weight(8, 1, 2), AfsPlanner::step_weight(8, 4, 8));  // the poorer job first
  EXPECT_EQ(AfsPlanner::next_count(8, 1, 8, 4), 8);
  EXPECT_EQ(AfsPlanner::next_count(8, 1, 8, 1), 2);
  EXPECT_EQ(AfsPlanner::next_count(6, 1, 6, 2), 3);
  EXPECT_EQ(AfsPlanner::next_count(16, 1, 16, 0), 2);  // 16 workers on 1 device: beyond the splice limit
  EXPECT_EQ(AfsPlanner::next_count(8, 1, 8, 8), -1);
}

TEST(AfsPlanner, GrowsIntoDevicesThatFallIdle) {
  // A rigid 4-device job holds half the node for 100 s; an elastic job of 8 workers starts on the
  // other 4 and grows to 8 when they fall idle.
  Workload w;
  w.tenants = {"all"};
  w.jobs = {job(0, 100, 4, spec::Tier::kStandard, 4), job(1, 3600, 8, spec::Tier::kStandard, 1)};
  auto r = simulate(one_node(8), w, "afs", opts());
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->completed, 2);
  EXPECT_GE(r->resizes, 1);
  EXPECT_EQ(r->preemptions, 0);
  EXPECT_EQ(r->rejected_proposals, 0u);
  // Rigid, the same two jobs give it nothing to grow.
  w.jobs[1].min_devices = 8;
  auto rigid = simulate(one_node(8), w, "afs", opts());
  ASSERT_TRUE(rigid.ok()) << rigid.reason();
  EXPECT_EQ(rigid->resizes, 0);
  EXPECT_EQ(rigid->preemptions, 0);
  EXPECT_GT(rigid->avg_jct_s, r->avg_jct_s);  // it waited for the first job instead
}

TEST(AfsPlanner, GrowsIntoATypeNoJobWaitsForWhileAnotherTypesJobWaits) {
  // Two nodes of 4: A100s and H100s. A premium job holds the H100s for 3,000 s, and a standard
  // one waits for 2 of them from 50 s (it may not cut the premium job). On the A100s a rigid job
  // holds 2 for 100 s and an elastic basic one (world 4, 3,600 s of work on 4) starts on the
  // other 2: it grows when they fall idle, though a job of the other type waits (its JCT about
  // 3,660 s; growing only once nothing at all waited, after 3,000 s, it took about 5,100 s).
  const auto fleet = *core::Fleet::parse(
      "premium_reserve 8\nregion r0\ncluster c0\n"
      "node a host_mem_mib=262144\ndevices A100-80G count=4 mem_mib=81920\n"
      "node h host_mem_mib=262144\ndevices H100-80G count=4 mem_mib=81920\n");
  Workload w;
  w.tenants = {"all"};
  w.device_types = {"A100-80G", "H100-80G"};
  w.jobs = {job(0, 3000, 4, spec::Tier::kPremium), job(0, 100, 2, spec::Tier::kStandard),
            job(1, 3600, 4, spec::Tier::kBasic, 1), job(50, 500, 2, spec::Tier::kStandard)};
  for (std::size_t j : {0, 3}) w.jobs[j].device_types = 2;  // H100
  for (std::size_t j : {1, 2}) w.jobs[j].device_types = 1;  // A100
  auto r = simulate(fleet, w, "afs", opts());
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->completed, 4);
  EXPECT_GE(r->resizes, 1);
  EXPECT_EQ(r->preemptions, 0);
  EXPECT_EQ(r->rejected_proposals, 0u);
  EXPECT_GT(r->tiers[1].max_queue_s, 2900);  // the standard job waited for the premium one
  EXPECT_LT(r->tiers[2].avg_jct_s, 4000);
}

TEST(AfsPlanner, ShrinksALongRunningJobForAWaitingOne) {
  // An elastic job holds all 8 devices for hours; a 4-device job arriving after 2 h (16 GPU-hours
  // later) gets half of them by a shrink, not a preemption, and the first grows back after.
  Workload w;
  w.tenants = {"all"};
  w.jobs = {job(0, 5 * 3600, 8, spec::Tier::kStandard, 2), job(2 * 3600, 600, 4, spec::Tier::kStandard, 4)};
  auto r = simulate(one_node(8), w, "afs", opts());
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->completed, 2);
  EXPECT_EQ(r->preemptions, 0);
  EXPECT_GE(r->resizes, 2);  // down for the waiting job, up when it is done
  EXPECT_LT(r->tiers[1].max_queue_s, 700);  // it waited for a checkpoint and the cut, not hours
  EXPECT_GT(r->actions[2].stalled_gpu_s, 0);
  EXPECT_EQ(r->rejected_proposals, 0u);
  // A job that arrives while the running one has had less than the threshold more service (80 GPU-s
  // at 10 s) waits: nothing is cut for it then. AFS asks for a round when the running job will have
  // had the threshold more (3,600 GPU-s on 8 devices: at 450 s; reaches_service_at), as orrery-core,
  // planning every 100 ms, would find it then; the running job, rigid, is preempted at that round,
  // not at once and not at its end (1,000 s).
  w.jobs = {job(0, 1000, 8, spec::Tier::kStandard, 8), job(10, 600, 4, spec::Tier::kStandard, 4)};
  auto early = simulate(one_node(8), w, "afs", opts());
  ASSERT_TRUE(early.ok()) << early.reason();
  EXPECT_EQ(early->resizes, 0);
  EXPECT_EQ(early->preemptions, 1);
  EXPECT_GE(early->tiers[1].max_queue_s, 440);  // not before 450 s
  EXPECT_LT(early->tiers[1].max_queue_s, 500);  // a round and the cut after it
}

}  // namespace
}  // namespace orrery::sim
