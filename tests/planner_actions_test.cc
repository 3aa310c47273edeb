// The orrery planner's actions, each in a small simulated scenario built to need it, beside one
// that does not (or the same scenario with the mechanism switched off), so that each test fails if
// the mechanism goes: the LAS levels' thresholds, growth into idle devices, a shrink inside a tier
// for a job of a lower LAS level, the cost rule that delays a cut until the waiting job has waited
// what it costs, the starvation cap (and a gang past it cutting as many jobs of its tier as it
// needs, a larger one as many as max_same_tier_victims), the overdue cap and its quantum, the
// tier order under overload (also beyond the premium reserve), and premium's own round budgets,
// and another device type for a job whose spec allows several (for every planner); backfill of a
// small job behind gangs that fit nowhere (every planner but FIFO); cuts that free only what a
// gang lacks beside the free devices (every planner that preempts). (Shrink for a higher tier,
// preemption of a lower tier and defragmentation by migration: runtime/sim/simulator_test.cc; the
// cheapest victims: tests/victim_choice_test.cc.) docs/scheduling.md.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/policy/orrery_planner.h"
#include "runtime/sim/fleet_generator.h"
#include "runtime/sim/fleet_types.h"
#include "runtime/sim/sim_test_util.h"
#include "runtime/sim/simulator.h"

namespace orrery::sim {
namespace {

using orrery::sim::testing::one_node;
using orrery::sim::testing::job;

// Attained service reaches the core (the LAS levels need it).
SimOptions quiet() { return orrery::sim::testing::small_case_options(50); }

SimResult run(const Workload& w, const SimOptions& o, int devices = 4) {
  auto r = simulate(one_node(devices), w, "orrery", o);
  EXPECT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->rejected_proposals, 0u);
  EXPECT_EQ(r->completed, static_cast<std::int64_t>(w.jobs.size()));
  return *r;
}

TEST(PlannerActions, AJobReachesTheNextLasLevelAtEachThreshold) {
  // Thresholds 1 GPU-hour x 4^k (k = 0, 1, 2) for the default 4 levels.
  core::policy::PlannerOptions o;
  const core::policy::OrreryPlanner p(o);
  const std::int64_t h = o.las_threshold_gpu_ms;
  EXPECT_EQ(p.las_level(0), 0);
  EXPECT_EQ(p.las_level(h - 1), 0);
  EXPECT_EQ(p.las_level(h), 1);
  EXPECT_EQ(p.las_level(4 * h - 1), 1);
  EXPECT_EQ(p.las_level(4 * h), 2);
  EXPECT_EQ(p.las_level(16 * h), 3);
  EXPECT_EQ(p.las_level(INT64_MAX), 3);  // the last level holds the rest
  o.las_levels = 2;
  EXPECT_EQ(core::policy::OrreryPlanner(o).las_level(16 * h), 1);
}

TEST(PlannerActions, GrowsIntoIdleDevicesWhenThereAreSome) {
  // 4 devices. X holds 2 for 100 s; the elastic E (world 4, 2 to 4 devices, 1,000 s of work on 4)
  // starts on the other 2 and grows to 4 when X ends.
  Workload w;
  w.jobs = {job(0, 100, 2, spec::Tier::kStandard), job(0, 1000, 4, spec::Tier::kBasic, /*min_dev=*/2)};
  auto grown = run(w, quiet());
  EXPECT_EQ(grown.resizes, 1);
  EXPECT_LT(grown.tiers[2].avg_jct_s, 1300);  // about 100 s at half speed, then 950 s on 4
  // Without growth it runs on 2 devices to the end: twice as long.
  auto o = quiet();
  o.planner.max_grows_per_round = 0;
  auto rigid = run(w, o);
  EXPECT_EQ(rigid.resizes, 0);
  EXPECT_GT(rigid.tiers[2].avg_jct_s, 1900);
  // Where X holds its 2 devices for longer than E runs, there is nothing to grow into.
  w.jobs[0].duration_s = 5000;
  EXPECT_EQ(run(w, quiet()).resizes, 0);
}

// E (standard, elastic: world 4, 1 to 4 devices, 20,000 s of work) runs alone on 4 devices; W
// (standard, 2 devices, 100 s) arrives at `w_at`.
Workload elastic_and_newcomer(double w_at) {
  Workload w;
  w.jobs = {job(0, 20000, 4, spec::Tier::kStandard, /*min_dev=*/1), job(w_at, 100, 2, spec::Tier::kStandard)};
  return w;
}

TEST(PlannerActions, ShrinksInsideATierForAJobOfALowerLasLevel) {
  // At 2,000 s E has had 8,000 GPU-s of service, past the first LAS threshold (one GPU-hour); W,
  // with none, is a level below it. E is shrunk to 2 devices (nothing lost: same world, more
  // splicing) once W has waited what the re-splice costs (E's 4 GiB cut and restored at 1 GiB/s,
  // 4 s on 4 devices: 8 s of W's 2), and grows back when W ends. Nothing is preempted.
  auto r = run(elastic_and_newcomer(2000), quiet());
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_EQ(r.resizes, 2);
  EXPECT_LT(r.tiers[1].max_queue_s, 30);
  EXPECT_GT(r.tiers[1].max_queue_s, 5);  // the cost rule: not before W has waited ~8 s
}

// E and W on the same LAS level for good (a threshold of 1,000 GPU-hours).
SimOptions one_level() {
  auto o = quiet();
  o.planner.las_threshold_gpu_ms = 1000LL * 3'600'000;
  return o;
}

TEST(PlannerActions, NoCutInsideATierForAnEqualWithoutTheCap) {
  // W waits for E's end: equals are not cut for each other (and no starvation cap here).
  auto o = one_level();
  o.planner.starvation_cap_ms = {0, 0, 0};
  auto r = run(elastic_and_newcomer(10), o);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_EQ(r.resizes, 0);
  EXPECT_GT(r.tiers[1].max_queue_s, 15000);
}

TEST(PlannerActions, TheStarvationCapBoundsTheWait) {
  // The same, with standard's cap of 30 min: past it W goes ahead of its tier and may take
  // devices from a job of its tier with more service that has run at least the cap: E is shrunk.
  auto o = one_level();
  o.planner.starvation_cap_ms[1] = 1'800'000;
  auto r = run(elastic_and_newcomer(10), o);
  EXPECT_GE(r.tiers[1].max_queue_s, 1800);
  EXPECT_LT(r.tiers[1].max_queue_s, 1900);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_EQ(r.resizes, 2);
}

TEST(PlannerActions, StarvingJobsOfATierTakeTurnsThatDouble) {
  // One device, three standard jobs of 5,000 s at once, with a starvation cap of 2 min for the
  // tier (premium's: but premium jobs beyond the reserve may not cut those within it): the tier's
  // demand never fits. Past the cap each waiting job cuts the running one, but only one with more
  // than twice its own service: every job gets its first turn within minutes, and the turns grow
  // geometrically. With any job that has had more service a victim (as before), they took turns
  // every 2 min or so: 56 cuts.
  Workload w;
  for (int i = 0; i < 3; ++i) w.jobs.push_back(job(0, 5000, 1, spec::Tier::kStandard));
  auto o = quiet();
  o.planner.starvation_cap_ms[1] = 120'000;
  auto r = run(w, o, 1);
  EXPECT_EQ(r.completed, 3);
  EXPECT_LT(r.tiers[1].max_queue_s, 400);
  EXPECT_GT(r.preemptions, 2);
  EXPECT_LT(r.preemptions, 15) << r.preemptions;  // 6
  EXPECT_EQ(r.rejected_proposals, 0u);
}

TEST(PlannerActions, PastTheCapTheLeastAttainedServiceGoesFirst) {
  // One device; standard's cap 2 min. A (5,000 s) runs from 0 and is cut for a premium job of
  // 200 s arriving at 50 s (at 110 s: A's periodic checkpoint was in flight at 50 s, and the
  // search backs off for 60 s); B (5,000 s) arrives at 150 s. When the premium job ends (312 s),
  // both are past the cap: B, with no service, starts first, though A has waited longer. Oldest
  // first, A started, and B waited until A had run the cap and B could cut it (451 s).
  Workload w;
  w.jobs = {job(0, 5000, 1, spec::Tier::kStandard), job(50, 200, 1, spec::Tier::kPremium),
            job(150, 5000, 1, spec::Tier::kStandard)};
  auto o = quiet();
  o.planner.starvation_cap_ms[1] = 120'000;
  auto r = run(w, o, 1);
  EXPECT_EQ(r.completed, 3);
  EXPECT_LT(r.tiers[1].max_queue_s, 200);  // B: from 150 s to the premium job's end
  EXPECT_GT(r.tiers[1].max_queue_s, 150);
  EXPECT_EQ(r.rejected_proposals, 0u);
}

TEST(PlannerActions, ACutInsideATierWaitsUntilItPays) {
  // E's state is 4 x 64 GiB: a re-splice keeps its 4 devices idle for 256 s (cut and restore at
  // 1 GiB/s), 1,024 device-seconds, which W's 2 devices repay after 512 s of waiting. W then waits
  // for E's cut too (256 GiB at 2 GB/s: 128 s).
  auto w = elastic_and_newcomer(2000);
  w.jobs[0].mem_mib = 65536;
  // (E restores on 2 devices until after W has ended, and nothing calls a round after that: it
  // grows back at the next change, so only the shrink is counted here.)
  auto r = run(w, quiet());
  EXPECT_GE(r.resizes, 1);
  EXPECT_GT(r.tiers[1].max_queue_s, 512 + 128);
  EXPECT_LT(r.tiers[1].max_queue_s, 512 + 128 + 20);
  // Weighing no cost (cut_gib_per_s = 0), E is shrunk in W's first round: W waits for the cut.
  auto o = quiet();
  o.planner.cut_gib_per_s = 0;
  auto eager = run(w, o);
  EXPECT_GE(eager.resizes, 1);
  EXPECT_LT(eager.tiers[1].max_queue_s, 128 + 20);
}

TEST(PlannerActions, TiersHoldUnderOverload) {
  // 4 devices, 120 one-device jobs of 100 s, 40 per tier, the lower tiers arriving first: a
  // backlog of 30 rounds of work. orrery orders by tier whatever the arrival order (average waits
  // premium <= standard <= basic); a planner without tiers (tiresias) serves them as they came.
  Workload w;
  for (int i = 0; i < 40; ++i) w.jobs.push_back(job(i, 100, 1, spec::Tier::kBasic));
  for (int i = 0; i < 40; ++i) w.jobs.push_back(job(40 + i, 100, 1, spec::Tier::kStandard));
  for (int i = 0; i < 40; ++i) w.jobs.push_back(job(80 + i, 100, 1, spec::Tier::kPremium));
  auto r = run(w, quiet());
  EXPECT_LT(r.tiers[0].avg_queue_s, r.tiers[1].avg_queue_s);
  EXPECT_LT(r.tiers[1].avg_queue_s, r.tiers[2].avg_queue_s);
  auto t = simulate(one_node(4), w, "tiresias", quiet());
  ASSERT_TRUE(t.ok()) << t.reason();
  EXPECT_GT(t->tiers[0].avg_queue_s, t->tiers[2].avg_queue_s);
}

TEST(PlannerActions, NoJobWaitsPastTheOverdueCapWhateverItsTier) {
  // 4 devices; a premium job of 4 devices and 500 s arrives every 400 s for 10,000 s: premium
  // alone asks more than the fleet has, and its queue only grows. A basic job of 1 device and
  // 600 s arrives at 10 s. By the tiers alone it waits for the premium backlog to end (past
  // 12,000 s). With an overdue cap of 1,000 s it is placed first once a premium job ends after
  // that, and runs its 600 s uncut (a quantum of 800 s), though premium jobs wait for its device
  // all along: its wait stays within the cap and one premium job's run.
  Workload w;
  for (int i = 0; i < 25; ++i) w.jobs.push_back(job(400.0 * i, 500, 4, spec::Tier::kPremium));
  w.jobs.insert(w.jobs.begin() + 1, job(10, 600, 1, spec::Tier::kBasic));  // in arrival order
  auto o = quiet();
  o.planner.overdue_cap_ms = 1'000'000;
  o.planner.overdue_quantum_ms = 800'000;
  auto capped = run(w, o);
  EXPECT_GE(capped.tiers[2].max_queue_s, 1000);
  EXPECT_LT(capped.tiers[2].max_queue_s, 1000 + 500 + 30);
  EXPECT_LT(capped.tiers[2].avg_jct_s, 1000 + 500 + 30 + 600 + 10);  // not cut within its quantum
  // With a quantum of 200 s a premium job cuts it once it has run that (4,010 s on 2026-11-29;
  // 8,381 s with no quantum at all).
  o.planner.overdue_quantum_ms = 200'000;
  auto short_quantum = run(w, o);
  EXPECT_GT(short_quantum.preemptions, 0);
  EXPECT_GT(short_quantum.tiers[2].avg_jct_s, 1000 + 500 + 30 + 600 + 10 + 500);
  o.planner.overdue_cap_ms = 0;
  auto tiers_only = run(w, o);
  EXPECT_GT(tiers_only.tiers[2].max_queue_s, 12000);
}

TEST(PlannerActions, PremiumBeyondTheReserveRunsAheadOfTheLowerTiers) {
  // The same backlog with a premium reserve of 2 of the 4 devices: the premium jobs beyond it are
  // admitted spare (INV-ADMIT) and still go ahead of standard and basic. (Before spare admission
  // they waited in Submitted while the lower tiers ran: premium waited longest.)
  Workload w;
  for (int i = 0; i < 40; ++i) w.jobs.push_back(job(i, 100, 1, spec::Tier::kBasic));
  for (int i = 0; i < 40; ++i) w.jobs.push_back(job(40 + i, 100, 1, spec::Tier::kStandard));
  for (int i = 0; i < 40; ++i) w.jobs.push_back(job(80 + i, 100, 1, spec::Tier::kPremium));
  auto o = quiet();
  o.premium_share = 0.5;
  auto r = run(w, o);
  EXPECT_LT(r.tiers[0].avg_queue_s, r.tiers[1].avg_queue_s);
  EXPECT_LT(r.tiers[1].avg_queue_s, r.tiers[2].avg_queue_s);
}

TEST(PlannerActions, APremiumBurstIsServedPastTheRoundBudgets) {
  // 256 devices held by 256 basic jobs; 200 premium one-device jobs arrive at once at 100 s. Each
  // needs a cut; with premium's own budgets (premium_round_budget, and a burst share of the fleet
  // large enough for all of them: 200 of 256 devices) a round or two serves them all, where the
  // budgets of the other tiers (32 failed tries a type, 16 searches a round) take a dozen rounds
  // of 10 s.
  Workload w;
  for (int i = 0; i < 256; ++i) w.jobs.push_back(job(0, 5000, 1, spec::Tier::kBasic));
  for (int i = 0; i < 200; ++i) w.jobs.push_back(job(100, 100, 1, spec::Tier::kPremium));
  auto o = quiet();
  o.round_s = 10;
  o.planner.premium_burst_share = 0.8;
  auto burst = run(w, o, 256);
  EXPECT_LT(burst.tiers[0].max_queue_s, 45);
  // With no burst share, premium's searches stop at max_cuts_per_round like the others'.
  o.planner.premium_burst_share = 0;
  auto capped = run(w, o, 256);
  EXPECT_GT(capped.tiers[0].max_queue_s, 90);
}

// Two nodes of 4 devices, A100s and H100s; the workload names both types (bit 0 A100, bit 1 H100).
core::Fleet two_types() {
  return *core::Fleet::parse(
      "region r0\ncluster c0\n"
      "node a host_mem_mib=262144\ndevices A100-80G count=4 mem_mib=81920\n"
      "node h host_mem_mib=262144\ndevices H100-80G count=4 mem_mib=81920\n");
}

// The workload bit of the type the simulator submits job `j` with first (its hashed choice).
std::uint64_t first_choice_bit(const Workload& w, const core::Fleet& f, int j) {
  const int type = FleetTypes(w, f).choose(w, j).type;
  return f.device_types[static_cast<std::size_t>(type)] == w.device_types[0] ? 1u : 2u;
}

SimResult run_on(const core::Fleet& f, const Workload& w, const SimOptions& o, const std::string& policy) {
  auto r = simulate(f, w, policy, o);
  EXPECT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->rejected_proposals, 0u);
  EXPECT_EQ(r->completed, static_cast<std::int64_t>(w.jobs.size()));
  return *r;
}

// On two_types(): X (premium, `x_devices` for `x_s`) and two standard gangs of 4 devices (at 5 s,
// 100 s each), all three pinned to the type the simulator submits `y` with first; `y` (the last
// job) may take either type.
Workload behind_two_gangs(const core::Fleet& f, int x_devices, double x_s, const SimJob& y) {
  Workload w;
  w.device_types = {"A100-80G", "H100-80G"};
  w.jobs = {job(0, x_s, x_devices, spec::Tier::kPremium), job(5, 100, 4, spec::Tier::kStandard),
            job(5, 100, 4, spec::Tier::kStandard), y};
  w.jobs[3].device_types = 3;
  const std::uint64_t first = first_choice_bit(w, f, 3);
  for (int j = 0; j < 3; ++j) w.jobs[static_cast<std::size_t>(j)].device_types = first;
  return w;
}

TEST(PlannerActions, PastTheCapAGangCutsAsManyJobsOfItsTierAsItNeeds) {
  // On two_types(), everything pinned to the A100 node (4 devices): 4 premium one-device jobs of
  // 20,000 s from 0 s keep it full; a premium gang of 4 arrives at 100 s (within the reserve: the
  // H100s count in it). Past premium's cap (2 min) the gang, which one node holds, may cut jobs of
  // its tier with more than twice its service that have run the cap: all four, though a cut
  // inside a tier takes one job at most otherwise (max_same_tier_victims). Before, it waited for them all to end (19,900
  // s). The four, past the cap in turn, take their turns back by the same rule, each at least
  // doubling the service between two cuts: a few cuts, not a churn.
  const auto f = two_types();
  Workload w;
  w.device_types = {"A100-80G", "H100-80G"};
  for (int i = 0; i < 4; ++i) w.jobs.push_back(job(0, 20000, 1, spec::Tier::kPremium));
  w.jobs.push_back(job(100, 1000, 4, spec::Tier::kPremium));
  for (auto& j : w.jobs) j.device_types = 1;
  auto o = quiet();
  ASSERT_EQ(o.planner.max_same_tier_victims, 1);
  auto r = run_on(f, w, o, "orrery");
  EXPECT_LT(r.tiers[0].max_queue_s, 1000) << "the gang waited for the one-device jobs' end";
  EXPECT_GE(r.preemptions, 4);
  EXPECT_LT(r.preemptions, 40) << r.preemptions;
  // Without the cap nothing of its tier is cut for it: it waits for the four to end.
  o.planner.starvation_cap_ms = {0, 0, 0};
  auto plain = run_on(f, w, o, "orrery");
  EXPECT_GT(plain.tiers[0].max_queue_s, 19000);
  EXPECT_EQ(plain.preemptions, 0);
}

TEST(PlannerActions, PastTheCapAGangLargerThanANodeCutsOneJobOfItsTierAtMost) {
  // The same on two A100 nodes of 4 (and 8 H100s, so that the reserve holds everything): 8
  // premium one-device jobs and a premium gang of 8, more than one node holds. Such gangs (of
  // hundreds, on synthetic workloads) cutting dozens of jobs each churned: it waits for their end.
  const auto f = *core::Fleet::parse(
      "region r0\ncluster c0\n"
      "node a0 host_mem_mib=262144\ndevices A100-80G count=4 mem_mib=81920\n"
      "node a1 host_mem_mib=262144\ndevices A100-80G count=4 mem_mib=81920\n"
      "node h host_mem_mib=262144\ndevices H100-80G count=8 mem_mib=81920\n");
  Workload w;
  w.device_types = {"A100-80G", "H100-80G"};
  for (int i = 0; i < 8; ++i) w.jobs.push_back(job(0, 20000, 1, spec::Tier::kPremium));
  w.jobs.push_back(job(100, 1000, 8, spec::Tier::kPremium));
  for (auto& j : w.jobs) j.device_types = 1;
  auto r = run_on(f, w, quiet(), "orrery");
  EXPECT_GT(r.tiers[0].max_queue_s, 19000);
  EXPECT_EQ(r.preemptions, 0);
  // The limit counts victims: with 4 of its tier allowed it still may not cut the 8 it needs,
  // and with 8 it does.
  auto o = quiet();
  o.planner.max_same_tier_victims = 4;
  auto four = run_on(f, w, o, "orrery");
  EXPECT_GT(four.tiers[0].max_queue_s, 19000);
  EXPECT_EQ(four.preemptions, 0);
  o.planner.max_same_tier_victims = 8;
  auto eight = run_on(f, w, o, "orrery");
  EXPECT_LT(eight.tiers[0].max_queue_s, 1000);
  EXPECT_GE(eight.preemptions, 8);
}

TEST(PlannerActions, AJobThatAllowsSeveralTypesIsPlacedOnAnotherWithRoom) {
  // X (pinned) holds all 4 devices of Y's first type for 1,000 s; Y (2 devices, 100 s, either
  // type) arrives at 10 s and runs at once on the other type, with every planner. Submitted
  // with its first type only (--pin-types), it waits for X: for its end, or under tiresias and
  // afs for its first GPU-hour (900 s on 4 devices), when it is cut for Y.
  const auto f = two_types();
  Workload w;
  w.device_types = {"A100-80G", "H100-80G"};
  w.jobs = {job(0, 1000, 4, spec::Tier::kStandard), job(10, 100, 2, spec::Tier::kStandard)};
  w.jobs[1].device_types = 3;
  w.jobs[0].device_types = first_choice_bit(w, f, 1);
  for (const char* policy : {"fifo", "tiresias", "afs", "orrery"}) {
    SCOPED_TRACE(policy);
    auto moved = run_on(f, w, quiet(), policy);
    EXPECT_LT(moved.tiers[1].max_queue_s, 5);
    EXPECT_EQ(moved.preemptions, 0);
    auto pinned_o = quiet();
    pinned_o.pin_types = true;
    auto pinned = run_on(f, w, pinned_o, policy);
    EXPECT_GT(pinned.tiers[1].max_queue_s, 880);
  }
}

TEST(PlannerActions, AJobThatAllowsSeveralTypesIsOfferedTheOthersWhenItsOwnRanOutOfTries) {
  // X (premium, pinned) holds all 4 devices of Y's first type for 1,000 s; P1 and P2 (standard,
  // pinned there too) wait ahead of Y and use up the type's 2 tries a round. Y (basic, 2 devices,
  // either type) is never tried on its own type, and is offered the other, empty one: it runs at
  // once. (Before, it waited behind P1 and P2 for X to end.) Every planner that backfills.
  const auto f = two_types();
  const Workload w = behind_two_gangs(f, 4, 1000, job(10, 100, 2, spec::Tier::kBasic));
  auto o = quiet();
  o.planner.max_failed_tries_per_type = 2;
  for (const char* policy : {"tiresias", "afs", "orrery"}) {
    SCOPED_TRACE(policy);
    auto r = run_on(f, w, o, policy);
    EXPECT_LT(r.tiers[2].max_queue_s, 30);
  }
}

TEST(PlannerActions, ASmallJobBehindGangsThatFitNowhereIsBackfilled) {
  // X (premium) holds 3 of the node's 4 devices for 1,000 s. G1 and G2 (standard, 4 devices
  // each) wait ahead of S (basic, 1 device, 100 s) and use up the type's 2 tries a round; nothing
  // of X may be cut for them. S fits the one open device and runs at once: the round's backfill
  // offers it after the tries ran out (every planner but FIFO, whose order is strict). T (basic, 2
  // devices) fits no open devices and waits for X. Without backfill (PlannerOptions::backfill)
  // S waits behind G1 and G2 until X ends.
  Workload w;
  w.jobs = {job(0, 1000, 3, spec::Tier::kPremium), job(5, 100, 4, spec::Tier::kStandard),
            job(5, 100, 4, spec::Tier::kStandard), job(10, 100, 1, spec::Tier::kBasic)};
  auto o = quiet();
  o.planner.max_failed_tries_per_type = 2;
  auto with_t = w;
  with_t.jobs.back() = job(10, 100, 2, spec::Tier::kBasic);
  for (const char* policy : {"tiresias", "afs", "orrery"}) {
    SCOPED_TRACE(policy);
    auto r = run_on(one_node(4), w, o, policy);
    EXPECT_LT(r.tiers[2].max_queue_s, 30);
    EXPECT_EQ(r.preemptions, 0);
    auto t = run_on(one_node(4), with_t, o, policy);
    EXPECT_GT(t.tiers[2].max_queue_s, 900);
    auto off = o;
    off.planner.backfill = false;
    auto without = run_on(one_node(4), w, off, policy);
    EXPECT_GT(without.tiers[2].max_queue_s, 900);
  }
  auto fifo = run_on(one_node(4), w, o, "fifo");
  EXPECT_GT(fifo.tiers[2].max_queue_s, 900);
}

TEST(PlannerActions, BackfillOffersAJobThatAllowsSeveralTypesTheOthersAndTheFasterFirst) {
  // As above, X (premium) holds 1 of the first type's 4 devices and G1, G2 (standard, 4 devices,
  // pinned there) use up its 2 tries. Y (basic, world 4, down to 3 devices, either type) passes
  // the count (3 open), but no count in [3, 4] that divides 4 is 3: it fails there, and backfill
  // offers it the other, empty type, as the walk would. (It waited 1,000 s for X when backfill
  // tried it on its own type only.)
  const auto f = two_types();
  const Workload w = behind_two_gangs(f, 1, 1000, job(10, 100, 4, spec::Tier::kBasic, 3));
  auto o = quiet();
  o.planner.max_failed_tries_per_type = 2;
  // Z (basic, 2 devices, 1,000 s, either type) fits the first type's 2 open devices beside a
  // 2-device X; the other type runs twice as fast and is empty: backfill puts it there first
  // (about 500 s), as the walk does (PlannerOptions::type_speed).
  const Workload z = behind_two_gangs(f, 2, 5000, job(10, 1000, 2, spec::Tier::kBasic));
  auto fast = o;
  fast.planner.type_speed = {{z.jobs[0].device_types == 1 ? "H100-80G" : "A100-80G", 2.0}};
  for (const char* policy : {"tiresias", "afs", "orrery"}) {
    SCOPED_TRACE(policy);
    EXPECT_LT(run_on(f, w, o, policy).tiers[2].max_queue_s, 30);
    EXPECT_LT(run_on(f, z, fast, policy).tiers[2].avg_jct_s, 600);
  }
}

TEST(PlannerActions, AJobThatAllowsSeveralTypesCutsWhereALowerTierHoldsDevices) {
  // Y's first type is full of a premium job, which it may not cut before it has waited its tier's
  // starvation cap (2 min); the other type is full of a basic job. Y (premium, either type) moves
  // there and cuts the basic job at once; pinned to its first type it waits the cap, then cuts
  // the premium job (which has had more service), and the basic job runs uncut.
  const auto f = two_types();
  Workload w;
  w.device_types = {"A100-80G", "H100-80G"};
  w.jobs = {job(0, 5000, 4, spec::Tier::kPremium), job(0, 5000, 4, spec::Tier::kBasic),
            job(10, 100, 2, spec::Tier::kPremium)};
  w.jobs[2].device_types = 3;
  w.jobs[0].device_types = first_choice_bit(w, f, 2);
  w.jobs[1].device_types = 3 - w.jobs[0].device_types;
  auto moved = run_on(f, w, quiet(), "orrery");
  EXPECT_EQ(moved.preemptions, 1);
  EXPECT_LT(moved.tiers[0].max_queue_s, 60);
  auto pinned_o = quiet();
  pinned_o.pin_types = true;
  auto pinned = run_on(f, w, pinned_o, "orrery");
  EXPECT_EQ(pinned.preemptions, 1);
  EXPECT_GE(pinned.tiers[0].max_queue_s, 120);
  EXPECT_LT(pinned.tiers[0].max_queue_s, 200);
  // The basic job waits out Y's 100 s only where it was cut for Y.
  EXPECT_GT(moved.tiers[2].avg_jct_s, pinned.tiers[2].avg_jct_s + 90);
}

TEST(PlannerActions, AJobThatAllowsSeveralTypesRunsOnTheFastestWithRoom) {
  // Y (1,000 s of work at speed 1, either type) arrives alone. With its other type twice as fast
  // it runs there, in 500 s; without speeds on its first type, in 1,000 s; with its own type the
  // faster, there. Every planner.
  const auto f = two_types();
  Workload w;
  w.device_types = {"A100-80G", "H100-80G"};
  w.jobs = {job(0, 1000, 2, spec::Tier::kStandard)};
  w.jobs[0].device_types = 3;
  const std::uint64_t first = first_choice_bit(w, f, 0);
  const std::string own = first == 1 ? "A100-80G" : "H100-80G", other = first == 1 ? "H100-80G" : "A100-80G";
  for (const char* policy : {"fifo", "tiresias", "afs", "orrery"}) {
    SCOPED_TRACE(policy);
    EXPECT_NEAR(run_on(f, w, quiet(), policy).avg_jct_s, 1000, 20);
    auto faster_other = quiet();
    faster_other.planner.type_speed = {{other, 2.0}};
    EXPECT_NEAR(run_on(f, w, faster_other, policy).avg_jct_s, 500, 20);
    auto faster_own = quiet();
    faster_own.planner.type_speed = {{own, 2.0}, {other, 1.5}};
    EXPECT_NEAR(run_on(f, w, faster_own, policy).avg_jct_s, 500, 20);
  }
}

TEST(PlannerActions, CutsFreeOnlyWhatAGangLacks) {
  // 8 devices: P (premium) holds `p` of them and two basic jobs one each, all for 20,000 s; S
  // (standard, a gang of 4, 100 s) arrives at 4,000 s, when the basic jobs have had more than a
  // GPU-hour. With P on 4 devices, 2 are free: S needs only the 2 basic jobs cut (before, the
  // victims had to cover its whole gang alone, and it waited for P's end). With P on 5, free and
  // cuttable devices add up to 3: nothing is cut (a cut that cannot make room would keep devices
  // reserved for a job that cannot start). Every planner that preempts.
  for (const char* policy : {"tiresias", "afs", "orrery"}) {
    SCOPED_TRACE(policy);
    for (const int p : {4, 5}) {
      Workload w;
      w.jobs = {job(0, 20000, p, spec::Tier::kPremium), job(0, 20000, 1, spec::Tier::kBasic),
                job(0, 20000, 1, spec::Tier::kBasic), job(4000, 100, 4, spec::Tier::kStandard)};
      auto r = run_on(one_node(8), w, quiet(), policy);
      if (p == 4) {
        EXPECT_EQ(r.preemptions, 2);
        EXPECT_LT(r.tiers[1].max_queue_s, 60);
      } else {
        EXPECT_EQ(r.preemptions, 0);
        EXPECT_GT(r.tiers[1].max_queue_s, 15000);
      }
    }
  }
}

// A fleet of regions (each one cluster) of nodes of H100s: `regions[r]` lists region r's nodes'
// device counts.
core::Fleet regions_fleet(const std::vector<std::vector<int>>& regions) {
  std::string t;
  int n = 0;
  for (std::size_t r = 0; r < regions.size(); ++r) {
    t += "region r" + std::to_string(r) + "\ncluster c0\n";
    for (int devs : regions[r])
      t += "node n" + std::to_string(n++) + " host_mem_mib=262144\ndevices H100-80G count=" + std::to_string(devs) +
           " mem_mib=81920\n";
  }
  return *core::Fleet::parse(t);
}

TEST(PlannerActions, CutsAreCountedInARegionThatCanHoldTheGangAndFallBackToTheWholeGang) {
  // A gang never spans regions, so free devices count only with victims in the same region.
  for (const char* policy : {"tiresias", "afs", "orrery"}) {
    SCOPED_TRACE(policy);
    {
      // Region 0 has 4 devices, all free; region 1 two nodes of 8, 14 of them held by a basic
      // job. A standard gang of 8 cannot use region 0 however free it is: it counts region 1's 2
      // free devices and cuts the basic job there.
      Workload w;
      w.jobs = {job(0, 20000, 14, spec::Tier::kBasic), job(5000, 100, 8, spec::Tier::kStandard)};
      auto r = run_on(regions_fleet({{4}, {8, 8}}), w, quiet(), policy);
      EXPECT_EQ(r.preemptions, 1);
      EXPECT_LT(r.tiers[1].max_queue_s, 60);
    }
    {
      // Two regions of 8: a premium job holds 3 of region 0 (5 free), a basic job all of region
      // 1. Region 0 has the most free but nothing the gang may cut: it cuts the whole gang's
      // worth where it can, the basic job in region 1.
      Workload w;
      w.jobs = {job(0, 20000, 3, spec::Tier::kPremium), job(0, 20000, 8, spec::Tier::kBasic),
                job(5000, 100, 8, spec::Tier::kStandard)};
      auto r = run_on(regions_fleet({{8}, {8}}), w, quiet(), policy);
      EXPECT_EQ(r.preemptions, 1);
      EXPECT_LT(r.tiers[1].max_queue_s, 60);
    }
  }
}

TEST(PlannerActions, FreeDevicesAreCountedForOneGangARound) {
  // 12 devices, 6 held by one-device basic jobs, 6 free; two standard gangs of 8 arrive together.
  // The first counts the 6 free devices and cuts 2 basic jobs; the second may not count the same
  // 6 again (it would cut 2 more and keep them reserved, idle, until the first ends): 2 cuts.
  for (const char* policy : {"tiresias", "afs", "orrery"}) {
    SCOPED_TRACE(policy);
    Workload w;
    for (int i = 0; i < 6; ++i) w.jobs.push_back(job(0, 20000, 1, spec::Tier::kBasic));
    w.jobs.push_back(job(5020, 100, 8, spec::Tier::kStandard));  // between periodic checkpoints
    w.jobs.push_back(job(5020, 100, 8, spec::Tier::kStandard));
    auto r = run_on(one_node(12), w, quiet(), policy);
    EXPECT_EQ(r.preemptions, 2);
  }
}

}  // namespace
}  // namespace orrery::sim
