// The simulator with the real core and planners: small hand-made workloads whose outcome is known,
// determinism, failures, and the journal replayed through the invariant checker.
#include "runtime/sim/simulator.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "checker/replay.h"
#include "runtime/sim/fleet_generator.h"
#include "runtime/sim/offered_load.h"
#include "runtime/sim/sim_test_util.h"
#include "runtime/sim/synthetic_workload.h"

namespace orrery::sim {
namespace {

using orrery::sim::testing::h100_fleet;
using orrery::sim::testing::one_node;
using orrery::sim::testing::job;

SimOptions quiet() { return orrery::sim::testing::small_case_options(); }

TEST(Simulator, FifoBlocksBehindTheHeadOrreryBackfills) {
  // 4 devices. A 3-device job runs for 100 s, a 4-device job waits for it, then a 1-device job
  // arrives: one device is free, and only a backfilling policy gives it to the small job.
  Workload w;
  w.jobs = {job(0, 100, 3, spec::Tier::kStandard), job(1, 100, 4, spec::Tier::kStandard),
            job(2, 10, 1, spec::Tier::kStandard)};
  auto fifo = simulate(one_node(4), w, "fifo", quiet());
  auto orrery = simulate(one_node(4), w, "orrery", quiet());
  ASSERT_TRUE(fifo.ok()) << fifo.reason();
  ASSERT_TRUE(orrery.ok()) << orrery.reason();
  EXPECT_EQ(fifo->completed, 3);
  EXPECT_EQ(orrery->completed, 3);
  // FIFO: the small job starts after the second big one (at ~100 s, ends ~200 s; then 210 s);
  // orrery: at once on the free device (ends ~12 s).
  EXPECT_GT(fifo->tiers[1].avg_queue_s, orrery->tiers[1].avg_queue_s + 50);
  EXPECT_LT(orrery->avg_jct_s, fifo->avg_jct_s);
  // The longest wait: FIFO's small job, about 200 s; orrery's 4-device job, about 100 s.
  EXPECT_GT(fifo->tiers[1].max_queue_s, 150);
  EXPECT_LT(orrery->tiers[1].max_queue_s, 120);
  EXPECT_GE(fifo->tiers[1].max_queue_s, fifo->tiers[1].p99_queue_s);
  // The waits apart by size: two gangs (3 and 4 devices) and one one-device job. The small job
  // waits FIFO's ~200 s against orrery's round; the gangs, in both, 0 and ~100 s (~50 s average).
  for (const auto* r : {&*fifo, &*orrery}) {
    EXPECT_EQ(r->tiers[1].gang_jobs, 2);
    EXPECT_GT(r->tiers[1].avg_queue_gang_s, 40);
    EXPECT_LT(r->tiers[1].avg_queue_gang_s, 60);
  }
  EXPECT_GT(fifo->tiers[1].avg_queue_one_s, 150);
  EXPECT_LT(orrery->tiers[1].avg_queue_one_s, 10);
  EXPECT_LE(fifo->p50_jct_s, fifo->p95_jct_s);
  EXPECT_LE(fifo->p95_jct_s, fifo->p99_jct_s);
  EXPECT_GT(fifo->tiers[1].avg_jct_s, orrery->tiers[1].avg_jct_s);
  EXPECT_EQ(fifo->rejected_proposals, 0u);
  EXPECT_EQ(orrery->rejected_proposals, 0u);
}

// A job the fleet cannot take is not submitted, and it is counted with its reason: nothing is
// dropped silently (orrery-sim prints them as a warning, and in --json).
TEST(Simulator, JobsTheFleetCannotTakeAreCountedWithTheirReason) {
  Workload w;
  w.device_types = {"H100-80G", "T4"};
  auto t4 = job(0, 10, 1, spec::Tier::kStandard);
  t4.device_types = 1u << 1;  // T4 only: the fleet has none
  auto wide = job(0, 10, 8, spec::Tier::kStandard);  // 8 devices on a fleet of 4
  auto h100 = job(0, 10, 1, spec::Tier::kStandard);
  h100.device_types = 1u << 0;
  auto big = job(0, 10, 1, spec::Tier::kStandard);
  big.mem_mib = 100000;  // more than an H100 has
  // 32 workers on 4 devices swap 7 x 80,000 MiB a device, 2.24 million MiB for the 4, where the
  // node has 2 TiB (2,097,152 MiB); on more devices than 4, no node. A premium job like it,
  // submitted, stopped every job behind it for good (the planner cut for it and kept the devices;
  // the placer had it as "retry later").
  auto spliced = job(0, 10, 32, spec::Tier::kPremium, /*min_dev=*/4);
  spliced.mem_mib = 80000;
  w.jobs = {job(0, 10, 1, spec::Tier::kStandard), t4, wide, h100, big, spliced, job(1, 10, 4, spec::Tier::kBasic)};
  for (const char* p : {"fifo", "tiresias", "afs", "orrery"}) {
    auto r = simulate(one_node(4), w, p, quiet());
    ASSERT_TRUE(r.ok()) << r.reason();
    EXPECT_EQ(r->completed, 3) << p;
    EXPECT_EQ(r->unfinished, 0) << p;
    EXPECT_EQ(r->unschedulable, 4) << p;
    EXPECT_EQ(r->unschedulable_why,
              (std::map<std::string, std::int64_t>{
                  {"its gpu_spec allows no device type the fleet has", 1},
                  {"more devices of an allowed type than one region has", 1},
                  {"no device of an allowed type has the memory for a worker", 1},
                  {"no region's nodes have the host memory for its spliced-out workers", 1}}))
        << p;
  }
}

TEST(Simulator, PremiumPreemptsBasicWhichResumesFromItsCheckpoint) {
  Workload w;
  w.jobs = {job(0, 1000, 4, spec::Tier::kBasic), job(10, 50, 4, spec::Tier::kPremium)};
  auto opts = quiet();
  auto orrery = simulate(one_node(4), w, "orrery", opts);
  auto fifo = simulate(one_node(4), w, "fifo", opts);
  ASSERT_TRUE(orrery.ok()) << orrery.reason();
  ASSERT_TRUE(fifo.ok()) << fifo.reason();
  EXPECT_EQ(orrery->preemptions, 1);
  EXPECT_EQ(fifo->preemptions, 0);
  EXPECT_EQ(orrery->completed, 2);
  // The premium job waits a round and the victim's checkpoint (4 x 1 GiB at 2 GB/s: 2 s), not
  // the basic job's 1000 s.
  EXPECT_LT(orrery->tiers[0].avg_queue_s, 10);
  EXPECT_GT(fifo->tiers[0].avg_queue_s, 900);
  // The basic job loses nothing: suspended at its cut, resumed from it (its JCT: 1000 s of work,
  // the premium job's 50 s, checkpoint and restore).
  EXPECT_LT(orrery->tiers[2].avg_jct_s, 1000 + 50 + 20);
  EXPECT_EQ(orrery->lost_gpu_s, 0);
}

TEST(Simulator, CutsRestoresAndSplicingCostWhatTheCostModelSays) {
  // The same preemption with the basic job's state 4 x 16 GiB, written at 8 and read back at 1
  // (--checkpoint-gbps, --restore-gbps; the cost model counts its state in GiB): 8 s and 64 s. The
  // basic job's JCT is its 1,000 s of work, the premium job's 50 s, the cut and the restore.
  Workload w;
  w.jobs = {job(0, 1000, 4, spec::Tier::kBasic), job(10, 50, 4, spec::Tier::kPremium)};
  w.jobs[0].mem_mib = 16384;
  auto opts = quiet();
  opts.cost.checkpoint_gbps = 8;
  opts.cost.restore_gbps = 1;
  auto r = simulate(one_node(4), w, "orrery", opts);
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->preemptions, 1);
  EXPECT_GE(r->tiers[0].max_queue_s, 8);  // the premium job waits for the cut (and a round)
  EXPECT_LT(r->tiers[0].max_queue_s, 8 + 2);
  EXPECT_GE(r->tiers[2].avg_jct_s, 1000 + 50 + 8 + 64);
  EXPECT_LT(r->tiers[2].avg_jct_s, 1000 + 50 + 8 + 64 + 5);
  // A job spliced onto half its world runs at half its speed, less the splice overhead: world 4
  // on the 2 devices there are, 1,000 s of work at 0.5 x (1 - 0.2).
  Workload e;
  e.jobs = {job(0, 1000, 4, spec::Tier::kBasic, /*min_dev=*/2)};
  opts = quiet();
  opts.cost.splice_overhead = 0.2;
  auto spliced = simulate(one_node(2), e, "orrery", opts);
  ASSERT_TRUE(spliced.ok()) << spliced.reason();
  EXPECT_NEAR(spliced->avg_jct_s, 1000 / (0.5 * 0.8), 2);
}

TEST(Simulator, VictimSearchesSeeAttainedServiceAsOfNow) {
  // One device. A 20,000-s basic job runs; a 100-s one arrives later. No periodic checkpoints, so
  // the running job's attained service is committed only when a planner weighs it as a victim
  // (PlanContext::freshen, as orrery-core's nodes report it every second): arriving at 4,000 s,
  // past the first LAS threshold (1 GPU-hour; AFS: a GPU-hour more than the newcomer's), the
  // newcomer has it cut at once; arriving at 3,000 s, before it, it is not cut for the newcomer
  // before it passes the threshold at 3,600 s (its service committed as of 3,000 s is no reason),
  // and is cut soon after, as orrery-core, which plans every 100 ms, would: tiresias and afs ask
  // for a round when the job they passed over will have had enough service (reaches_service_at),
  // orrery searches again when its backoff (60 s) ends. Nothing else happens in between that
  // would bring a round.
  for (const int arrival : {4000, 3000}) {
    Workload w;
    w.jobs = {job(0, 20000, 1, spec::Tier::kBasic), job(arrival, 100, 1, spec::Tier::kBasic)};
    for (const char* policy : {"tiresias", "afs", "orrery"}) {
      auto r = simulate(one_node(1), w, policy, quiet());
      ASSERT_TRUE(r.ok()) << r.reason();
      EXPECT_EQ(r->completed, 2) << policy;
      EXPECT_EQ(r->rejected_proposals, 0) << policy;
      if (arrival > 3600) {
        EXPECT_EQ(r->preemptions, 1) << policy;
        EXPECT_LT(r->tiers[2].max_queue_s, 60) << policy;
      } else {
        EXPECT_GE(r->tiers[2].max_queue_s, 599) << policy;
        EXPECT_EQ(r->preemptions, 1) << policy;
        EXPECT_LT(r->tiers[2].max_queue_s, 700) << policy;
      }
    }
  }
}

TEST(Simulator, ReportsTheLoadOfJobsOnlyOneTypeCanHold) {
  // 4 A100 and 4 H100 devices. Two premium jobs allow only the A100s, one either type; one
  // standard job either type. The premium tier's pinned load is the two pinned jobs' load over the
  // 4 A100s (twice what they offer the whole fleet); the jobs that allow both count in no type's.
  const auto f = *core::Fleet::parse(
      "region r0\ncluster c0\n"
      "node a host_mem_mib=262144\ndevices A100-80G count=4 mem_mib=81920\n"
      "node h host_mem_mib=262144\ndevices H100-80G count=4 mem_mib=81920\n");
  Workload w;
  w.device_types = {"A100-80G", "H100-80G"};
  w.jobs = {job(0, 1000, 2, spec::Tier::kPremium), job(50, 1000, 2, spec::Tier::kPremium),
            job(100, 1000, 2, spec::Tier::kPremium), job(150, 1000, 2, spec::Tier::kStandard)};
  w.jobs[0].device_types = w.jobs[2].device_types = 1;  // A100 only
  w.jobs[1].device_types = w.jobs[3].device_types = 3;  // either
  auto r = simulate(f, w, "orrery", quiet());
  ASSERT_TRUE(r.ok()) << r.reason();
  ASSERT_EQ(r->tiers[0].pinned_load.size(), 1u);
  EXPECT_EQ(r->tiers[0].pinned_load[0].first, "A100-80G");
  const double pinned = offered_load(w, 4, CountedJobs{1, 0, 1, 0});
  EXPECT_GT(pinned, 0);
  EXPECT_NEAR(r->tiers[0].pinned_load[0].second, pinned, 1e-9);
  EXPECT_NEAR(offered_load(w, 8, CountedJobs{1, 0, 1, 0}), pinned / 2, 1e-9);
  EXPECT_TRUE(r->tiers[1].pinned_load.empty());
  // Submitted with one type each (--pin-types), every job is pinned to the type it was given.
  auto o = quiet();
  o.pin_types = true;
  auto pinned_all = simulate(f, w, "orrery", o);
  ASSERT_TRUE(pinned_all.ok()) << pinned_all.reason();
  EXPECT_EQ(pinned_all->tiers[1].pinned_load.size(), 1u);
  double premium = 0;  // the premium jobs' load, split over the types they were given
  for (const auto& [type, load] : pinned_all->tiers[0].pinned_load) premium += load * 4;
  EXPECT_NEAR(premium, offered_load(w, 1, CountedJobs{1, 1, 1, 0}), 1e-9);
}

TEST(Simulator, ShrinksAnElasticJobBeforePreemptingIt) {
  Workload w;
  w.jobs = {job(0, 1000, 4, spec::Tier::kBasic, /*min_dev=*/2), job(10, 50, 2, spec::Tier::kStandard)};
  auto r = simulate(one_node(4), w, "orrery", quiet());
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->resizes, 2);  // down to 2 devices for the standard job, back up to 4 after it
  EXPECT_EQ(r->preemptions, 0);
  EXPECT_EQ(r->completed, 2);
  EXPECT_LT(r->tiers[1].avg_queue_s, 10);
}

TEST(Simulator, TenantsShareATierFairly) {
  // 8 devices. Tenant "big" queues 40 one-device jobs of 1000 s at once; 100 s later "small"
  // submits 4. FIFO makes small wait for big's whole queue; orrery gives small its equal split at
  // once (big is cut to 4 devices), and big's jobs resume from their checkpoints.
  Workload w;
  w.tenants = {"big", "small"};
  for (int i = 0; i < 40; ++i) w.jobs.push_back(job(0, 1000, 1, spec::Tier::kStandard));
  for (int i = 0; i < 4; ++i) {
    w.jobs.push_back(job(100, 1000, 1, spec::Tier::kStandard));
    w.jobs.back().tenant = 1;
  }
  // A job of the same tier may be cut only for one with strictly less attained service
  // (INV-TIER): the planner has big's committed as of now before it weighs them (freshen).
  auto opts = quiet();
  auto fifo = simulate(one_node(8), w, "fifo", opts);
  auto orrery = simulate(one_node(8), w, "orrery", opts);
  ASSERT_TRUE(fifo.ok()) << fifo.reason();
  ASSERT_TRUE(orrery.ok()) << orrery.reason();
  ASSERT_EQ(orrery->tenants.size(), 2u);
  ASSERT_EQ(fifo->tenants.size(), 2u);
  EXPECT_EQ(orrery->tenants[1].name, "small");
  EXPECT_EQ(orrery->completed, 44);
  EXPECT_GT(fifo->tenants[1].avg_queue_s, 4000);  // behind 5 waves of big's jobs
  EXPECT_LT(orrery->tenants[1].avg_queue_s, 10);  // a round and big's cuts
  EXPECT_EQ(orrery->preemptions, 4);
  EXPECT_EQ(orrery->lost_gpu_s, 0);
  EXPECT_EQ(orrery->rejected_proposals, 0u);
  EXPECT_LT(orrery->tenant_mean_queue_s, fifo->tenant_mean_queue_s);
}

// The defragmentation tests' jobs: A (2 devices, 2,000 s) and B (3 devices, 100 s) at 0, C (1
// device, 2,000 s) at 1 s, D (4 devices, 100 s) at 150 s; all standard.
Workload defrag_jobs() {
  Workload w;
  w.jobs = {job(0, 2000, 2, spec::Tier::kStandard), job(0, 100, 3, spec::Tier::kStandard),
            job(1, 2000, 1, spec::Tier::kStandard), job(150, 100, 4, spec::Tier::kStandard)};
  return w;
}

TEST(Simulator, DefragmentsByMigrationWhenMovingPays) {
  // Two regions of one 4-device node (a gang never spans regions). A (2 devices, 2,000 s) lands
  // on node 0; B (3 devices, 100 s) on node 1; C (1 device, 2,000 s) on node 1 (best fit). When B
  // ends, 5 devices are free (2 + 3) but no region has the 4 that D, arriving at 150 s, needs.
  // orrery moves C to node 0 once D has waited as long as the move costs (1 device x 1 GiB / the
  // checkpoint + transfer + restore rate, 1 / (1/2 + 1/1.25 + 1/2) = 0.56 GiB/s: about 1.8 s,
  // over D's 4 devices: about 0.5 s), where without it D waits some 1,650 s, until A has had a
  // GPU-hour (2 devices x 1,800 s): a higher LAS level than D's, so D may cut it.
  const auto fleet = h100_fleet(2, 2, 4);
  const Workload w = defrag_jobs();
  auto recorded = quiet();
  recorded.job_records = true;
  auto orrery = simulate(fleet, w, "orrery", recorded);
  ASSERT_TRUE(orrery.ok()) << orrery.reason();
  EXPECT_EQ(orrery->completed, 4);
  ASSERT_EQ(orrery->job_records.size(), 4u);  // the move is C's (job_records.h)
  for (int i : {0, 1, 3}) EXPECT_EQ(orrery->job_records[static_cast<std::size_t>(i)].migrations, 0) << i;
  EXPECT_EQ(orrery->job_records[2].migrations, 1);
  EXPECT_DOUBLE_EQ(orrery->avg_run_s, (2000 + 100 + 2000 + 100) / 4.0);  // the floor under avg JCT
  EXPECT_GT(orrery->avg_jct_s, orrery->avg_run_s);  // D waited
  EXPECT_EQ(orrery->migrations, 1);
  EXPECT_EQ(orrery->preemptions, 0);
  EXPECT_EQ(orrery->rejected_proposals, 0u);
  EXPECT_LT(orrery->tiers[1].p99_queue_s, 30);
  // Without defragmentation the big job waits for a small one to finish.
  auto opts = quiet();
  opts.planner.migration_gib_per_s = 0;
  auto stay = simulate(fleet, w, "orrery", opts);
  ASSERT_TRUE(stay.ok()) << stay.reason();
  EXPECT_EQ(stay->migrations, 0);
  EXPECT_GT(stay->tiers[1].p99_queue_s, 1600);
}

TEST(Simulator, PacksANodeByMigrationForAGangKeptToOneNode) {
  // The same jobs on one cluster of two 4-device nodes. Gangs span its nodes by default, so D
  // starts at once on 2 + 3 free devices; kept to one node (PlannerOptions::one_node_gangs, as
  // pods are) it fits neither node, and orrery moves C off node 1, where 3 devices are free, once
  // D has waited as long as the move costs; without defragmentation D waits for A's turn (A then
  // has a higher LAS level), and is cut for it on A's node: 2 free there + A's 2.
  const auto fleet = h100_fleet(1, 2, 4);
  const Workload w = defrag_jobs();
  auto spanning = simulate(fleet, w, "orrery", quiet());
  ASSERT_TRUE(spanning.ok()) << spanning.reason();
  EXPECT_EQ(spanning->migrations, 0);
  EXPECT_LT(spanning->tiers[1].max_queue_s, 5);
  auto opts = quiet();
  opts.planner.one_node_gangs = true;
  auto packed = simulate(fleet, w, "orrery", opts);
  ASSERT_TRUE(packed.ok()) << packed.reason();
  EXPECT_EQ(packed->completed, 4);
  EXPECT_EQ(packed->migrations, 1);
  EXPECT_EQ(packed->preemptions, 0);
  EXPECT_EQ(packed->rejected_proposals, 0u);
  EXPECT_LT(packed->tiers[1].max_queue_s, 30);
  // With larger states (C 64 GiB: its move costs about 115 s of its device at 0.56 GiB/s; A 2
  // workers of 80 GiB, 2 devices x 288 s = 576 device-seconds) the cheaper move, C's, waits until
  // D's 4 devices have waited as much, about 29 s; D then waits for C's cut as well (64 GiB at 2
  // GiB/s: 32 s; 61 s in all). Moving A would free node 0 as well (its cut: 80 s).
  Workload heavy = w;
  heavy.jobs[0].mem_mib = 81920;
  heavy.jobs[2].mem_mib = 65536;
  auto weighed = simulate(fleet, heavy, "orrery", opts);
  ASSERT_TRUE(weighed.ok()) << weighed.reason();
  EXPECT_EQ(weighed->migrations, 1);
  EXPECT_GT(weighed->tiers[1].max_queue_s, 53);  // the rule's 29 s and most of C's 32-s cut
  EXPECT_LT(weighed->tiers[1].max_queue_s, 75);
  opts.planner.migration_gib_per_s = 0;
  auto stay = simulate(fleet, w, "orrery", opts);
  ASSERT_TRUE(stay.ok()) << stay.reason();
  EXPECT_EQ(stay->completed, 4);
  EXPECT_EQ(stay->migrations, 0);
  EXPECT_EQ(stay->preemptions, 1) << "A, and only A: the cut frees D's node";
  EXPECT_GT(stay->tiers[1].max_queue_s, 1600);
}

TEST(Simulator, PackingMovesTheCheapestJobsOffTheNode) {
  // Two 4-device nodes. A (2 devices, 80 GiB a worker) and B (2 devices, 100 s) fill node 0; C1
  // (1 GiB) and C2 (64 GiB), one device each, go on node 1. When B ends, each node has 2 free. D
  // (3 devices, kept to one node) arrives at 150 s: one job must leave a node. Moving C1 costs
  // about 1.8 device-seconds (1 GiB at 0.56 GiB/s), C2 115 and A 576: C1 moves, about a second
  // after D arrives. (C2, the dearer, would keep D waiting some 38 s for its cost to be repaid.)
  const auto fleet = h100_fleet(1, 2, 4);
  Workload w;
  w.jobs = {job(0, 5000, 2), job(0, 100, 2), job(1, 5000, 1), job(2, 5000, 1), job(150, 100, 3)};
  w.jobs[0].mem_mib = 81920;
  w.jobs[3].mem_mib = 65536;
  auto opts = quiet();
  opts.planner.one_node_gangs = true;
  auto r = simulate(fleet, w, "orrery", opts);
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->completed, 5);
  EXPECT_EQ(r->migrations, 1);
  EXPECT_EQ(r->preemptions, 0);
  EXPECT_EQ(r->rejected_proposals, 0u);
  EXPECT_LT(r->tiers[1].max_queue_s, 10);
}

TEST(Simulator, AnOverdueGangKeptToOneNodeMovesAHigherTiersJobOutOfItsWay) {
  // Two 4-device nodes. Basic jobs of 3 devices (100 s) fill each node's best fit, and a premium
  // one-device job (1,000,000 s) goes beside each; when the basic jobs end, 3 devices are free on
  // each node. A standard gang of 4, kept to one node, arrives at 200 s: 6 devices are free but
  // no node has 4, and the two premium jobs, which it may neither cut (INV-TIER) nor move (its
  // packing moves its tier's and lower tiers' jobs), stay. Past the overdue cap (72 h) it may move
  // any tier's job: one premium job moves beside the other, and the gang starts then, not when a
  // premium job ends. No job is cut.
  const auto fleet = h100_fleet(1, 2, 4);
  Workload w;
  w.jobs = {job(0, 100, 3, spec::Tier::kBasic), job(0, 1'000'000, 1, spec::Tier::kPremium),
            job(1, 100, 3, spec::Tier::kBasic), job(1, 1'000'000, 1, spec::Tier::kPremium),
            job(200, 1'000, 4, spec::Tier::kStandard)};
  auto opts = quiet();
  opts.planner.one_node_gangs = true;
  auto r = simulate(fleet, w, "orrery", opts);
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->completed, 5);
  EXPECT_EQ(r->rejected_proposals, 0u);
  EXPECT_EQ(r->preemptions, 0);
  EXPECT_EQ(r->migrations, 1);
  const double cap_s = static_cast<double>(opts.planner.overdue_cap_ms) / 1000.0;
  EXPECT_GE(r->tiers[1].max_queue_s, cap_s);
  EXPECT_LT(r->tiers[1].max_queue_s, cap_s + 120);
  // Without the overdue cap it waits for a premium job's end.
  opts.planner.overdue_cap_ms = 0;
  auto no_cap = simulate(fleet, w, "orrery", opts);
  ASSERT_TRUE(no_cap.ok()) << no_cap.reason();
  EXPECT_EQ(no_cap->migrations, 0);
  EXPECT_GT(no_cap->tiers[1].max_queue_s, 999'000);
}

TEST(Simulator, CutsForAGangKeptToOneNodeFreeOneNode) {
  // Two 4-device nodes: node 0 holds two premium jobs and basic jobs 2 and 3, node 1 basic jobs
  // 4 to 7 (best fit fills node 0 first). A standard gang of 4 arrives on the full fleet. Of the
  // basic jobs, those with the lowest ids would go first (2, 3, 4, 5: two on each node), and the
  // gang would not fit; kept to one node, the four cuts are on node 1, and it starts when they end.
  const auto fleet = h100_fleet(1, 2, 4);
  Workload w;
  w.jobs = {job(0, 5000, 1, spec::Tier::kPremium), job(0, 5000, 1, spec::Tier::kPremium)};
  for (int i = 0; i < 6; ++i) w.jobs.push_back(job(1 + i / 2, 5000, 1, spec::Tier::kBasic));
  w.jobs.push_back(job(100, 100, 4, spec::Tier::kStandard));
  for (const char* policy : {"orrery", "tiresias", "afs"}) {
    auto opts = quiet();
    opts.planner.one_node_gangs = true;
    auto r = simulate(fleet, w, policy, opts);
    ASSERT_TRUE(r.ok()) << policy << ": " << r.reason();
    EXPECT_EQ(r->completed, 9) << policy;
    EXPECT_EQ(r->rejected_proposals, 0u) << policy;
    if (std::string(policy) == "orrery") {  // a higher tier: at once
      EXPECT_EQ(r->preemptions, 4) << policy;
      EXPECT_LT(r->tiers[1].max_queue_s, 60) << policy;
    }
  }
}

TEST(Simulator, ASparePremiumJobTakesTurnsWithOneWithinTheReserveThatLeadsByADay) {
  // One device, all of it the premium reserve. A (300,000 s) is admitted within it, B (60,000 s)
  // just after, spare: B may cut A only once A leads it by more than a day of service
  // (spec::kReserveLeadGpuMs, M = 86,400 s on one device), and A may take the device back only
  // once its lead is M / 2 again. So B starts at about 86,400 s, A cuts it back 43,200 s later,
  // B cuts A again when A leads by M once more (about 172,800 s) and ends about 189,600 s, A about
  // 360,000 s: three cuts (before the lead rule, B waited A's 300,000 s; with one threshold the two
  // would take turns at every round). The planner weighs the service as of now (freshen), and
  // searches again while a cut is refused. (tiresias and afs may make the same cuts, but ask for
  // rounds at their LAS bounds only: on this quiet fleet none comes when the lead passes M.)
  Workload w;
  w.jobs = {job(0, 300'000, 1, spec::Tier::kPremium), job(10, 60'000, 1, spec::Tier::kPremium)};
  auto r = simulate(one_node(1), w, "orrery", quiet());
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->completed, 2);
  EXPECT_EQ(r->rejected_proposals, 0u);
  EXPECT_EQ(r->preemptions, 3);
  EXPECT_GT(r->tiers[0].max_queue_s, 86'400);  // B's wait for its first start
  EXPECT_LT(r->tiers[0].max_queue_s, 86'500);
  EXPECT_GT(r->avg_jct_s, (360'000 + 189'600) / 2 - 500);
  EXPECT_LT(r->avg_jct_s, (360'000 + 189'600) / 2 + 1'000);
  // Where A ends within a day of service (80,000 s), the reserve's order stands: no cut, and B
  // waits for A's end.
  w.jobs[0] = job(0, 80'000, 1, spec::Tier::kPremium);
  auto within_a_day = simulate(one_node(1), w, "orrery", quiet());
  ASSERT_TRUE(within_a_day.ok()) << within_a_day.reason();
  EXPECT_EQ(within_a_day->completed, 2);
  EXPECT_EQ(within_a_day->preemptions, 0);
  EXPECT_GT(within_a_day->tiers[0].max_queue_s, 79'900);
  // Where A already leads by more than a day when B arrives, B still waits premium's starvation
  // cap (2 min) before it may cut a job within the reserve, then cuts A.
  w.jobs = {job(0, 300'000, 1, spec::Tier::kPremium), job(100'000, 10'000, 1, spec::Tier::kPremium)};
  auto late = simulate(one_node(1), w, "orrery", quiet());
  ASSERT_TRUE(late.ok()) << late.reason();
  EXPECT_EQ(late->completed, 2);
  EXPECT_EQ(late->preemptions, 1);
  EXPECT_GE(late->tiers[0].max_queue_s, 120);
  EXPECT_LT(late->tiers[0].max_queue_s, 200);
}

// 300 synthetic jobs (gangs up to 16) at load 0.9 on one node of 32 devices: a contended run.
Result<Workload> contended(const core::Fleet& fleet) {
  SyntheticOptions so;
  so.jobs = 300;
  so.max_gang = 16;
  so.arrival_rate_per_s = arrival_rate_for_load(so, fleet.num_devices(), 0.9);
  return generate_synthetic(so);
}

TEST(Simulator, SameInputSameResult) {
  auto fleet = one_node(32);
  auto w = contended(fleet);
  ASSERT_TRUE(w.ok()) << w.reason();
  for (const char* p : {"orrery", "fifo", "tiresias"}) {
    auto a = simulate(fleet, *w, p, quiet());
    auto b = simulate(fleet, *w, p, quiet());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->decisions, b->decisions) << p;
    EXPECT_EQ(a->avg_jct_s, b->avg_jct_s) << p;
    EXPECT_EQ(a->preemptions, b->preemptions) << p;
    EXPECT_EQ(a->rejected_proposals, 0u) << p;
    EXPECT_EQ(a->completed + a->unschedulable, 300) << p;
  }
}

TEST(Simulator, NodeFailuresLoseWorkSinceTheCheckpointAndJobsStillFinish) {
  auto fleet = h100_fleet(1, 8, 4);
  Workload w;
  for (int i = 0; i < 40; ++i) w.jobs.push_back(job(i * 60, 4 * 3600, 2, spec::Tier::kStandard));
  auto o = quiet();
  o.cost.node_mtbf_h = 24;  // 8 nodes: a failure every 3 h on average
  o.cost.repair_s = 600;
  o.cost.checkpoint_every_s = 1800;
  o.seed = 7;
  const auto journal = (std::filesystem::temp_directory_path() / "orrery-sim-test.journal").string();
  o.journal_path = journal;
  auto r = simulate(fleet, w, "orrery", o);
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_GT(r->node_failures, 0);
  EXPECT_GT(r->lost_gpu_s, 0);
  EXPECT_GT(r->checkpoints, 0);
  EXPECT_EQ(r->completed + r->failed, 40);
  // Every decision of the run, node failures and failovers included, passes the checker.
  auto rep = checker::replay_journal(journal);
  EXPECT_TRUE(rep.ok) << rep.error << (rep.violations.empty() ? "" : rep.violations.front());
  EXPECT_EQ(rep.decisions, r->decisions);  // every decision of the run, replayed
  std::filesystem::remove(journal);
}

TEST(Simulator, ARequeueJobRedoesItsWorkWhenPreemptedATransparentOneDoesNot) {
  // As PremiumPreemptsBasic..., every job requeue: the basic job's 10 s x 4 devices are lost
  // when it is cut, and it runs its 1000 s again from scratch.
  Workload w;
  w.jobs = {job(0, 1000, 4, spec::Tier::kBasic), job(10, 50, 4, spec::Tier::kPremium)};
  auto o = quiet();
  o.modes = {0, 0, 1};
  const auto journal = (std::filesystem::temp_directory_path() / "orrery-sim-requeue.journal").string();
  o.journal_path = journal;
  auto r = simulate(one_node(4), w, "orrery", o);
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->preemptions, 1);
  EXPECT_EQ(r->completed, 2);
  EXPECT_EQ(r->submitted_by_mode[2], 2);
  EXPECT_GE(r->lost_cut_gpu_s, 4 * 10.0);
  EXPECT_LT(r->lost_cut_gpu_s, 4 * 15.0);
  EXPECT_GT(r->tiers[2].avg_jct_s, 1000 + 50 + 10);  // the lost 10 s done again
  EXPECT_EQ(r->rejected_proposals, 0u);
  auto rep = checker::replay_journal(journal);  // INV-MODE among the rest
  EXPECT_TRUE(rep.ok) << rep.error << (rep.violations.empty() ? "" : rep.violations.front());
  std::filesystem::remove(journal);
  auto t = simulate(one_node(4), w, "orrery", quiet());
  ASSERT_TRUE(t.ok()) << t.reason();
  EXPECT_EQ(t->submitted_by_mode[0], 2);
  EXPECT_EQ(t->lost_cut_gpu_s, 0);
  EXPECT_LT(t->tiers[2].avg_jct_s, r->tiers[2].avg_jct_s);
}

TEST(Simulator, MixedModesRunCleanUnderEveryPolicy) {
  auto fleet = one_node(32);
  auto w = contended(fleet);
  ASSERT_TRUE(w.ok()) << w.reason();
  auto o = quiet();
  o.cost.checkpoint_every_s = 600;  // periodic cuts for the transparent jobs only
  o.modes = {60, 30, 10};
  const auto journal = (std::filesystem::temp_directory_path() / "orrery-sim-modes.journal").string();
  o.journal_path = journal;
  for (const char* p : {"orrery", "fifo", "tiresias"}) {
    auto r = simulate(fleet, *w, p, o);
    ASSERT_TRUE(r.ok()) << p << ": " << r.reason();
    EXPECT_EQ(r->rejected_proposals, 0u) << p;
    EXPECT_EQ(r->completed + r->unschedulable, 300) << p;
    for (auto n : r->submitted_by_mode) EXPECT_GT(n, 0) << p;
    auto rep = checker::replay_journal(journal);
    EXPECT_TRUE(rep.ok) << p << ": " << rep.error << (rep.violations.empty() ? "" : rep.violations.front());
  }
  std::filesystem::remove(journal);
}

TEST(JobModes, WeightsParseAndDrawInProportion) {
  auto w = parse_mode_weights("60:30:10");
  ASSERT_TRUE(w.ok()) << w.reason();
  EXPECT_EQ(*w, (ModeWeights{60, 30, 10}));
  for (const char* bad : {"", "60:30", "60:30:10:1", "a:b:c", "0:0:0", "-1:1:1", "60:30:10x", "1:2:99999999999"})
    EXPECT_FALSE(parse_mode_weights(bad).ok()) << bad;
  std::array<int, 3> n{};
  for (std::uint64_t i = 0; i < 100'000; ++i) ++n[static_cast<std::size_t>(draw_mode(*w, 1, i))];
  EXPECT_NEAR(n[0], 60'000, 1'000);
  EXPECT_NEAR(n[1], 30'000, 1'000);
  EXPECT_NEAR(n[2], 10'000, 1'000);
  EXPECT_EQ(draw_mode(kAllTransparent, 1, 5), spec::Preemption::kTransparent);
  EXPECT_EQ(draw_mode(*w, 3, 17), draw_mode(*w, 3, 17));  // a function of the seed and the job
}

TEST(Simulator, UnknownPolicyAndEmptyFleetAreErrors) {
  Workload w;
  auto r = simulate(one_node(2), w, "sjf", quiet());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.reason(), "unknown policy \"sjf\"");
}

}  // namespace
}  // namespace orrery::sim
