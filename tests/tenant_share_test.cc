// Fair share among tenants inside a tier (core/policy/tenant_shares.h) through the orrery planner
// on a real core: placement goes to the tenant holding fewest devices of the tier, a tenant below
// the tier's equal split may preempt one above it, and nothing of that happens across tiers or
// with a single tenant. The planner's proposals are committed as orrery-core would: placements at
// once, a preemption as its cut (the victim Checkpointing).
#include <gtest/gtest.h>
#include <cstdint>
#include <map>

#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/node_bootstrap.h"
#include "core/policy/planner.h"
#include "core/policy/tenant_shares.h"
#include "core/policy/wait_lanes.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {
namespace {

using spec::EventKind;
using spec::JobState;
using spec::Tier;

struct World : PlanContext {
  ManualClock clock;
  std::unique_ptr<SchedulerCore> core;
  std::unique_ptr<Planner> planner = make_planner("orrery");
  std::vector<Decision> proposed;  // taken this round, in order
  std::set<int> cutting;

  explicit World(int devices) {
    auto fleet = Fleet::parse("premium_reserve " + std::to_string(devices) +
                              "\nregion r\ncluster c\nnode n0 host_mem_mib=1048576\ndevices H100-80G count=" +
                              std::to_string(devices) + " mem_mib=81920\n");
    if (!fleet) throw std::runtime_error("fleet: " + fleet.reason());
    auto made = SchedulerCore::create(std::move(*fleet), clock, nullptr);
    if (!made) throw std::runtime_error("core: " + made.reason());
    core = std::move(*made);
    if (auto up = bring_up_all_nodes(*core); !up) throw std::runtime_error("nodes: " + up.reason());
  }

  void must(const Decision& d) {
    clock.advance(1);
    auto c = core->commit(d);
    ASSERT_TRUE(c.ok()) << d.describe() << ": " << c.reason();
    planner->job_changed(*core, c->job);
  }
  static Decision ev(EventKind e, std::int64_t j, spec::Origin o = spec::Origin::kRuntime) {
    Decision d;
    d.event = e;
    d.job = j;
    d.origin = o;
    return d;
  }
  // A one-device job of `tenant`, submitted (the planner admits it).
  int submit(const std::string& tenant, Tier tier = Tier::kStandard) {
    const int j = core->num_jobs();
    must(Decision::submit("j" + std::to_string(j), tier, "H100-80G", 1, 1, 1, 1024, tenant));
    return j;
  }
  // One planning round; the placed jobs start and have run a while (attained service).
  void round() {
    proposed.clear();
    planner->plan(*core, *this);
    for (const auto& d : proposed)
      if (d.event == EventKind::kPlace || d.event == EventKind::kResume) {
        must(ev(EventKind::kStart, d.job));
        auto p = ev(EventKind::kProgress, d.job);
        p.step = 1;
        p.gpu_ms = 60'000;
        must(p);
      }
  }
  std::vector<std::int64_t> placed() const {
    std::vector<std::int64_t> out;
    for (const auto& d : proposed)
      if (d.event == EventKind::kPlace) out.push_back(d.job);
    return out;
  }
  std::vector<std::int64_t> preempted() const {
    std::vector<std::int64_t> out;
    for (const auto& d : proposed)
      if (d.event == EventKind::kPreempt) out.push_back(d.job);
    return out;
  }

  bool propose(const Decision& d) override {
    clock.advance(1);
    auto c = core->commit(d);
    if (!c) return false;
    planner->job_changed(*core, c->job);
    proposed.push_back(d);
    if (d.event == EventKind::kPreempt) cutting.insert(static_cast<int>(d.job));
    return true;
  }
  bool cut_pending(int job) const override { return cutting.count(job) != 0; }
};

TEST(TenantShare, NextDeviceGoesToTheTenantHoldingFewest) {
  World w(4);
  for (int i = 0; i < 4; ++i) w.submit("alice");  // jobs 0..3, first in every plain order
  w.submit("bob");                                // 4
  w.submit("bob");                                // 5
  w.round();
  // alice 0, then bob (0 devices against alice's 1), then alice and bob in turn.
  EXPECT_EQ(w.placed(), (std::vector<std::int64_t>{0, 4, 1, 5}));
  EXPECT_TRUE(w.preempted().empty());
  EXPECT_EQ(w.core->tenant_name(w.core->job_info(4).tenant), "bob");
}

TEST(TenantShare, ATenantBelowTheEqualSplitPreemptsOneAboveIt) {
  World w(4);
  for (int i = 0; i < 4; ++i) w.submit("alice");
  w.round();
  ASSERT_EQ(w.placed().size(), 4u);
  const int b1 = w.submit("bob");
  const int b2 = w.submit("bob");
  w.round();
  // alice holds 4, bob 0 of an equal split of 2: two of alice's jobs are cut for bob's two, and
  // no more (alice without a third would hold 1 < bob's 2).
  ASSERT_EQ(w.preempted().size(), 2u);
  for (auto v : w.preempted()) {
    EXPECT_EQ(w.core->tenant_name(w.core->job_info(static_cast<int>(v)).tenant), "alice");
    EXPECT_EQ(w.core->state(static_cast<int>(v)), JobState::kCheckpointing);
  }
  EXPECT_EQ(w.core->state(b1), JobState::kQueued);
  EXPECT_EQ(w.core->state(b2), JobState::kQueued);
}

TEST(TenantShare, ABalancedTierIsLeftAlone) {
  World w(4);
  w.submit("alice");
  w.submit("alice");
  w.submit("bob");
  w.submit("bob");
  w.round();
  ASSERT_EQ(w.placed().size(), 4u);
  w.submit("bob");  // bob would hold 3 of an equal split of 2
  w.submit("carol");
  w.round();
  // carol (0 of 4/3) takes one device from alice or bob (both at 2, still >= carol's 1 after);
  // bob's third job takes nothing.
  ASSERT_EQ(w.preempted().size(), 1u);
  EXPECT_NE(w.core->tenant_name(w.core->job_info(static_cast<int>(w.preempted()[0])).tenant), "carol");
}

TEST(TenantShare, NoTenantPreemptionWithOneTenantOrAcrossTiersUpward) {
  World one(2);
  one.submit("");
  one.submit("");
  one.round();
  one.submit("");
  one.round();
  EXPECT_TRUE(one.preempted().empty());  // one tenant: the plain per-job order, no fair-share cut

  // A basic tenant holding everything is preempted for a standard job by the tier rule, never a
  // standard job for a basic tenant with nothing.
  World w(2);
  w.submit("alice", Tier::kStandard);
  w.submit("alice", Tier::kStandard);
  w.round();
  w.submit("bob", Tier::kBasic);
  w.round();
  EXPECT_TRUE(w.preempted().empty());
}

TEST(TenantShare, SharesFollowTheJobs) {
  TenantShares s;
  s.add_held(1, 0, 4);
  s.add_held(1, 1, 2);
  s.add_waiting(1, 2, 1);
  EXPECT_EQ(s.held(1, 0), 4);
  EXPECT_EQ(s.held(1, 2), 0);
  EXPECT_EQ(s.equal_share(1), 2);  // 6 devices over 3 tenants
  s.add_waiting(1, 2, -1);
  EXPECT_EQ(s.equal_share(1), 3);  // tenant 2 no longer active
  s.add_held(1, 0, -4);
  EXPECT_EQ(s.equal_share(1), 2);
  EXPECT_EQ(s.equal_share(0), 0);
}

TEST(WaitLanes, LanesByTierTypeAndTenant) {
  WaitLanes l;
  l.add(0, 1, 5, {{0, 0, 7}, 7});
  l.add(0, 1, 5, {{0, 0, 3}, 3});
  l.add(0, 1, 2, {{0, 0, 9}, 9});
  l.add(1, 1, 5, {{1, 0, 4}, 4});
  EXPECT_EQ(l.size(), 4);
  auto by_tenant = [&](std::int64_t cls, std::int64_t type) {
    std::map<int, std::vector<int>> out;
    for (const auto& lane : l.lanes(cls, type))
      for (const auto& e : *lane.jobs) out[lane.tenant].push_back(e.second);
    return out;
  };
  // In order inside a lane; the lanes in no set order.
  EXPECT_EQ(by_tenant(0, 1), (std::map<int, std::vector<int>>{{2, {9}}, {5, {3, 7}}}));
  EXPECT_EQ(by_tenant(1, 1), (std::map<int, std::vector<int>>{{5, {4}}}));
  EXPECT_TRUE(l.lanes(0, 0).empty());
  EXPECT_TRUE(l.lanes(2, 7).empty());
  l.remove(0, 1, 2, {{0, 0, 9}, 9});
  EXPECT_EQ(by_tenant(0, 1), (std::map<int, std::vector<int>>{{5, {3, 7}}}));
  EXPECT_EQ(l.size(), 3);
  l.remove(0, 1, 2, {{0, 0, 9}, 9});  // not there: nothing changes
  EXPECT_EQ(l.size(), 3);
}

TEST(WaitLanes, LanesThatEmptyAndRefillInAnyOrderAreListedOnceEach) {
  // Against a plain model: tenants' lanes empty and fill again in a scrambled order, and the
  // non-empty lanes listed are always exactly the tenants with jobs, each once, with its jobs.
  WaitLanes l;
  std::map<int, std::set<int>> model;
  std::uint64_t x = 12345;
  auto next = [&] { x = x * 6364136223846793005ULL + 1442695040888963407ULL; return x >> 33; };
  for (int step = 0; step < 4000; ++step) {
    const int tenant = static_cast<int>(next() % 12), job = static_cast<int>(next() % 40);
    const WaitEntry e{{0, job, 0}, tenant * 100 + job};
    if (next() % 2 == 0) {
      l.add(0, 3, tenant, e);
      model[tenant].insert(e.second);
    } else {
      l.remove(0, 3, tenant, e);
      model[tenant].erase(e.second);
      if (model[tenant].empty()) model.erase(tenant);
    }
    std::map<int, std::set<int>> seen;
    std::int64_t n = 0;
    for (const auto& lane : l.lanes(0, 3)) {
      ASSERT_FALSE(lane.jobs->empty());
      ASSERT_EQ(seen.count(lane.tenant), 0u) << "a lane listed twice";
      for (const auto& entry : *lane.jobs) seen[lane.tenant].insert(entry.second);
      n += static_cast<std::int64_t>(lane.jobs->size());
    }
    ASSERT_EQ(seen, model) << "at step " << step;
    ASSERT_EQ(l.size(), n);
  }
}

TEST(WaitLanes, LanesStayValidWhenOtherClassesAndTypesAreAdded) {
  // Slots are moved when the book grows to a new class or type: the lanes listed before still
  // point at the jobs.
  WaitLanes l;
  l.add(0, 3, 7, {{0, 1, 0}, 1});
  l.add(0, 3, 8, {{0, 2, 0}, 2});
  for (int k = 0; k < 40; ++k) l.add(k % 5, 4 + k, 1, {{0, 0, k}, 100 + k});  // grows both levels
  std::map<int, int> seen;
  for (const auto& lane : l.lanes(0, 3)) seen[lane.tenant] = lane.jobs->begin()->second;
  EXPECT_EQ(seen, (std::map<int, int>{{7, 1}, {8, 2}}));
  EXPECT_EQ(l.size(), 42);
}

}  // namespace
}  // namespace orrery::core::policy
