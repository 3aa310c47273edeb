// Which running jobs the planners preempt for a waiting one (core/policy/victims.h): the set that
// loses least by preemption mode (a transparent job only the time of its cut, signal and requeue
// jobs their run since they started; ties: transparent, signal, requeue), never a job within its
// min_runtime_ms (nor, inside its tier, one placed past its tier's starvation cap before it has
// run the cap), Tiresias' most attained service first, through the orrery and tiresias planners
// on a real core with a ManualClock.
// Every scenario gives the job the old order (lower id, same progress) would pick the lower id,
// so each test fails if the weighting is taken out.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/node_bootstrap.h"
#include "core/policy/planner.h"
#include "core/policy/victims.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {
namespace {

using spec::EventKind;
using spec::JobState;
using spec::Preemption;
using spec::Tier;

// A core on one node of `devices` H100s and a planner; time moves only when a test says so.
struct World : PlanContext {
  ManualClock clock;
  std::unique_ptr<SchedulerCore> core;
  std::unique_ptr<Planner> planner;
  std::vector<Decision> proposed;  // this round's, in order
  std::set<int> cutting;

  World(int devices, const std::string& policy = "orrery", const PlannerOptions& options = {})
      : World("premium_reserve " + std::to_string(devices) +
                  "\nregion r\ncluster c\nnode n0 host_mem_mib=1048576\ndevices H100-80G count=" +
                  std::to_string(devices) + " mem_mib=81920\n",
              policy, options) {}
  World(const std::string& fleet_text, const std::string& policy, const PlannerOptions& options = {})
      : planner(make_planner(policy, options)) {
    auto fleet = Fleet::parse(fleet_text);
    if (!fleet) throw std::runtime_error("fleet: " + fleet.reason());
    auto made = SchedulerCore::create(std::move(*fleet), clock, nullptr);
    if (!made) throw std::runtime_error("core: " + made.reason());
    core = std::move(*made);
    if (auto up = bring_up_all_nodes(*core); !up) throw std::runtime_error("nodes: " + up.reason());
  }

  void must(const Decision& d) {
    auto c = core->commit(d);
    ASSERT_TRUE(c.ok()) << d.describe() << ": " << c.reason();
    planner->job_changed(*core, c->job);
  }
  // A job of `world` workers on world devices (elastic down to `min_dev` if given).
  int submit(Preemption mode, Tier tier = Tier::kStandard, std::int64_t world = 1, std::int64_t min_runtime_ms = 0,
             std::int64_t min_dev = 0) {
    const int j = core->num_jobs();
    auto d = Decision::submit("j" + std::to_string(j), tier, "H100-80G", world, min_dev > 0 ? min_dev : world,
                              world, 1024);
    d.mode = mode;
    d.min_runtime_ms = min_runtime_ms;
    must(d);
    return j;
  }
  // One round; the jobs it placed start now (the same instant for all of them).
  void round() {
    proposed.clear();
    planner->plan(*core, *this);
    for (const auto& d : proposed)
      if (d.event == EventKind::kPlace || d.event == EventKind::kResume) {
        Decision s;
        s.event = EventKind::kStart;
        s.origin = spec::Origin::kRuntime;
        s.job = d.job;
        must(s);
      }
  }
  void complete(int j) {
    Decision c;
    c.event = EventKind::kComplete;
    c.origin = spec::Origin::kRuntime;
    c.job = j;
    must(c);
  }
  // Attained service for job j (Tiresias' second queue).
  void serve(int j, std::int64_t gpu_ms) {
    Decision p;
    p.event = EventKind::kProgress;
    p.origin = spec::Origin::kRuntime;
    p.job = j;
    p.step = 1;
    p.gpu_ms = gpu_ms;
    must(p);
  }
  std::vector<std::int64_t> of(EventKind e) const {
    std::vector<std::int64_t> out;
    for (const auto& d : proposed)
      if (d.event == e) out.push_back(d.job);
    return out;
  }
  std::vector<std::int64_t> preempted() const { return of(EventKind::kPreempt); }

  bool propose(const Decision& d) override {
    auto c = core->commit(d);
    if (!c) return false;
    planner->job_changed(*core, c->job);
    proposed.push_back(d);
    if (d.event == EventKind::kPreempt || d.event == EventKind::kResizeDown) cutting.insert(static_cast<int>(d.job));
    return true;
  }
  bool cut_pending(int job) const override { return cutting.count(job) != 0; }
};

using V = std::vector<std::int64_t>;

TEST(VictimChoice, TransparentBeforeRequeueOfEqualSizeAndAge) {
  World w(2);
  const int r = w.submit(Preemption::kRequeue);
  const int t = w.submit(Preemption::kTransparent);
  w.round();
  ASSERT_EQ(w.of(EventKind::kPlace).size(), 2u);
  w.clock.advance(3'600'000);  // both ran an hour
  w.submit(Preemption::kTransparent, Tier::kPremium);
  w.round();
  EXPECT_EQ(w.preempted(), V{t});
  EXPECT_EQ(w.core->state(r), JobState::kRunning);
}

TEST(VictimChoice, SignalBeforeRequeueOfEqualRunTime) {
  World w(2);
  const int r = w.submit(Preemption::kRequeue);
  const int s = w.submit(Preemption::kSignal);
  w.round();
  w.clock.advance(600'000);
  w.submit(Preemption::kTransparent, Tier::kPremium);
  w.round();
  EXPECT_EQ(w.preempted(), V{s});  // equal losses: the mode decides (victims.h)
  EXPECT_EQ(w.core->state(r), JobState::kRunning);
}

TEST(VictimChoice, TheShorterRunLosesLessWhateverTheMode) {
  World w(2);
  const int s = w.submit(Preemption::kSignal);
  w.round();
  w.clock.advance(3'600'000);  // the signal job ran an hour
  const int r = w.submit(Preemption::kRequeue);
  w.round();
  w.clock.advance(600'000);  // the requeue job 10 minutes
  w.submit(Preemption::kTransparent, Tier::kPremium);
  w.round();
  EXPECT_EQ(w.preempted(), V{r});
  EXPECT_EQ(w.core->state(s), JobState::kRunning);
}

TEST(VictimChoice, AJobWithinItsMinRuntimeIsNotChosenWhileAnotherCandidateExists) {
  World w(2);
  const int r = w.submit(Preemption::kRequeue);
  const int t = w.submit(Preemption::kTransparent, Tier::kStandard, 1, /*min_runtime_ms=*/600'000);
  w.round();
  w.clock.advance(599'999);
  w.submit(Preemption::kTransparent, Tier::kPremium);
  w.round();
  EXPECT_EQ(w.preempted(), V{r});  // the cheaper one is protected
  EXPECT_EQ(w.core->state(t), JobState::kRunning);
}

TEST(VictimChoice, AJobIsChosenOnceItsMinRuntimeHasPassed) {
  World w(2);
  w.submit(Preemption::kRequeue);
  const int t = w.submit(Preemption::kTransparent, Tier::kStandard, 1, /*min_runtime_ms=*/600'000);
  w.round();
  w.clock.advance(600'000);
  w.submit(Preemption::kTransparent, Tier::kPremium);
  w.round();
  EXPECT_EQ(w.preempted(), V{t});
}

TEST(VictimChoice, OnlyProtectedCandidatesMeansNoPreemptionNorShrink) {
  World w(4);
  // An elastic transparent job (shrinkable) and a requeue job, both protected for 10 minutes.
  const int e = w.submit(Preemption::kTransparent, Tier::kBasic, 2, 600'000, /*min_dev=*/1);
  const int r = w.submit(Preemption::kRequeue, Tier::kBasic, 2, 600'000);
  w.round();
  ASSERT_EQ(w.of(EventKind::kPlace).size(), 2u);
  w.clock.advance(300'000);
  const int p = w.submit(Preemption::kTransparent, Tier::kPremium);
  w.round();
  EXPECT_TRUE(w.preempted().empty());
  EXPECT_TRUE(w.of(EventKind::kResizeDown).empty());
  EXPECT_EQ(w.core->state(p), JobState::kQueued);
  // Once the protection is over the elastic job is shrunk (nothing lost) for the premium job.
  w.clock.advance(300'000);
  w.round();
  EXPECT_EQ(w.of(EventKind::kResizeDown), V{e});
  EXPECT_EQ(w.core->state(r), JobState::kRunning);
}

// A job no state of the fleet could ever hold (here: host memory for its spliced-out workers; the
// service refuses such a spec at submission, core/fleet_fit.h, but a job may reach the core
// directly) is answered "never" by the placer: no planner cuts for it, and the jobs behind it run.
// (When it was answered "retry later", a premium job like it had basic jobs cut for it, and the
// devices kept for it stopped every lower job: 646 of 20,000 synthetic jobs waited forever.)
TEST(VictimChoice, NothingIsCutForAJobNoNodeCouldEverHold) {
  // 64 GiB of host memory: 16 workers of 20,000 MiB on 2 devices swap 7 x 20,000 MiB a device, on
  // 4 devices 3 x 20,000: one device's worth; no count in range fits, even on an empty node.
  const std::string fleet =
      "premium_reserve 4\nregion r\ncluster c\nnode n0 host_mem_mib=65536\n"
      "devices H100-80G count=4 mem_mib=81920\n";
  for (const char* policy : {"orrery", "tiresias", "afs"}) {
    World w(fleet, policy);
    const int running = w.submit(Preemption::kTransparent, Tier::kBasic, 2);
    w.round();
    ASSERT_EQ(w.core->state(running), JobState::kRunning) << policy;
    w.clock.advance(600'000);
    const int never = w.core->num_jobs();
    w.must(Decision::submit("never", Tier::kPremium, "H100-80G", 16, 2, 4, 20000));
    const int next = w.submit(Preemption::kTransparent, Tier::kBasic, 1);
    w.round();
    EXPECT_TRUE(w.preempted().empty()) << policy;
    EXPECT_TRUE(w.of(EventKind::kResizeDown).empty()) << policy;
    EXPECT_EQ(w.core->state(running), JobState::kRunning) << policy;
    EXPECT_EQ(w.core->state(next), JobState::kRunning) << policy << ": the job behind it runs";
    EXPECT_EQ(w.core->state(never), JobState::kQueued) << policy;
  }
}

TEST(VictimChoice, NoDefragmentingMigrationWithinMinRuntime) {
  // Two regions of one 4-device node. A (2 devices) on n0, B (3) and C (1, protected for 10
  // minutes) on n1; when B ends, D (4) finds 5 devices free but no region with 4: moving C to n0
  // would make room (Simulator.DefragmentsByMigrationWhenMovingPays), but not while C is protected.
  World w("premium_reserve 8\nregion r0\ncluster c0\nnode n0 host_mem_mib=1048576\n"
          "devices H100-80G count=4 mem_mib=81920\nregion r1\ncluster c1\nnode n1 host_mem_mib=1048576\n"
          "devices H100-80G count=4 mem_mib=81920\n",
          "orrery");
  w.submit(Preemption::kTransparent, Tier::kStandard, 2);
  const int b = w.submit(Preemption::kTransparent, Tier::kStandard, 3);
  const int c = w.submit(Preemption::kTransparent, Tier::kStandard, 1, /*min_runtime_ms=*/600'000);
  w.round();
  ASSERT_EQ(w.of(EventKind::kPlace).size(), 3u);
  w.complete(b);
  w.submit(Preemption::kTransparent, Tier::kStandard, 4);
  w.round();  // admitted: starts waiting
  w.clock.advance(60'000);  // D has waited long enough for the move to pay
  w.round();
  EXPECT_TRUE(w.of(EventKind::kMigrate).empty());
  w.clock.advance(540'000);  // C's protection is over
  w.round();
  EXPECT_EQ(w.of(EventKind::kMigrate), V{c});
}

TEST(VictimChoice, TiresiasWeighsTheLossToo) {
  World w(2, "tiresias");
  const int r = w.submit(Preemption::kRequeue);
  const int t = w.submit(Preemption::kTransparent);
  w.round();
  w.clock.advance(3'600'000);
  w.serve(r, 7'200'000);  // both in the second queue, the requeue job the most attained
  w.serve(t, 3'600'000);
  w.submit(Preemption::kTransparent, Tier::kPremium);
  w.round();
  EXPECT_EQ(w.preempted(), V{t});
}

TEST(VictimChoice, TiresiasCutsTheMostAttainedServiceFirst) {
  // Two transparent jobs in the second queue (each loses only its cut's time): the one that has
  // had the most service goes, not the lower id.
  World w(2, "tiresias");
  const int a = w.submit(Preemption::kTransparent);
  const int b = w.submit(Preemption::kTransparent);
  w.round();
  w.clock.advance(3'600'000);
  w.serve(a, 3'600'000);
  w.serve(b, 7'200'000);
  w.submit(Preemption::kTransparent, Tier::kPremium);
  w.round();
  EXPECT_EQ(w.preempted(), V{b});
  EXPECT_EQ(w.core->state(a), JobState::kRunning);
}

TEST(VictimChoice, AJobPlacedPastItsTiersCapIsNotCutInsideItsTierWithinTheCap) {
  // One device; standard's starvation cap 2 min, LAS levels from 60 GPU-s. B (standard) waits
  // behind a premium job for 130 s, past its cap, and is placed when it ends; 10 s later B has a
  // higher LAS level than C, a standard newcomer, which may cut a job of a higher level, but not
  // B before it has run the cap (its quantum); then C cuts it.
  PlannerOptions o;
  o.starvation_cap_ms = {120'000, 120'000, 0};
  o.las_threshold_gpu_ms = 60'000;
  o.cut_gib_per_s = 0;  // no pay rule for the cut inside the tier
  World w(1, "orrery", o);
  const int p = w.submit(Preemption::kTransparent, Tier::kPremium);
  w.round();
  const int b = w.submit(Preemption::kTransparent);
  w.round();
  w.clock.advance(130'000);
  w.complete(p);
  w.round();
  ASSERT_EQ(w.of(EventKind::kPlace), V{b});
  w.clock.advance(10'000);
  w.serve(b, 100'000);  // level 1; C, with none, level 0
  w.submit(Preemption::kTransparent);
  w.round();
  EXPECT_TRUE(w.preempted().empty());
  w.clock.advance(110'000);  // B has run the cap (C's search, which found nothing, is due again)
  w.round();
  EXPECT_EQ(w.preempted(), V{b});
}

// The cover itself (no core).
VictimCandidate cand(int job, std::int64_t devices, std::int64_t per_device, std::int64_t cls = 0, int rank = 0) {
  return {job, devices, per_device, rank, cls};
}

TEST(CheapestVictims, CoversTheNeedOrNothing) {
  EXPECT_TRUE(cheapest_victims({cand(0, 1, 5), cand(1, 1, 5)}, 3).empty());
  EXPECT_EQ(cheapest_victims({cand(0, 1, 9), cand(1, 1, 5), cand(2, 1, 7)}, 2), (std::vector<int>{1, 2}));
}

TEST(CheapestVictims, ASingleJobThatCoversAloneBeatsAnOvershootingGreedySet) {
  // Per device job 0 is cheapest, but its 8 devices cost 8 x 10 = 80; job 1 covers alone for 30.
  EXPECT_EQ(cheapest_victims({cand(0, 8, 10), cand(1, 2, 15)}, 2), (std::vector<int>{1}));
  // Unneeded small victims are dropped once a larger one covers the need.
  EXPECT_EQ(cheapest_victims({cand(0, 1, 1), cand(1, 1, 1), cand(2, 4, 2), cand(3, 4, 3)}, 4),
            (std::vector<int>{2}));
}

TEST(CheapestVictims, VictimsThatLoseNothingKeepThePlannersPrefix) {
  // All transparent: the shortest covering prefix of the caller's order, as before modes.
  EXPECT_EQ(cheapest_victims({cand(0, 1, 0), cand(1, 1, 0), cand(2, 8, 0), cand(3, 4, 0)}, 4),
            (std::vector<int>{0, 1, 2}));
}

TEST(CheapestVictims, LowerClassesGoFirstWhateverTheyLose) {
  // Class 0 (the lowest tier) is taken whole before class 1 is touched.
  EXPECT_EQ(cheapest_victims({cand(0, 1, 100, 0), cand(1, 1, 1, 1), cand(2, 1, 2, 1)}, 2),
            (std::vector<int>{0, 1}));
  // Equal losses: the mode rank, then the caller's order.
  EXPECT_EQ(cheapest_victims({cand(0, 1, 5, 0, 2), cand(1, 1, 5, 0, 1), cand(2, 1, 5, 0, 1)}, 1),
            (std::vector<int>{1}));
}

}  // namespace
}  // namespace orrery::core::policy
