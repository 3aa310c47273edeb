// Tests of the topology-aware gang placer (core/policy/gang_placer.h) and its free-device index
// (core/policy/free_device_index.h): one node before several, best fit, one cluster before
// several, never two regions unless allowed, reservations, nodes that are not Up, device and host
// memory, ResizeUp keeping its devices, Migrate not reusing them; the index following the core
// through its change feed (and rebuilding when the feed dropped entries); and a randomized
// cross-check on random fleets with random commits in between: every proposal is accepted by the
// core, follows the topology rules (checked by brute force), and finds a placement of the same
// device count whenever the old full scan (propose_gang_scan) finds one the core would accept.
#include "core/policy/gang_placer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/node_bootstrap.h"
#include "core/policy/gang_placement.h"
#include "core/scheduler_core.h"
#include "spec/model.h"

namespace orrery::core::policy {
namespace {

using spec::EventKind;
using spec::JobState;
using spec::Tier;

// ---- A small world: a core over a fleet given as text, every node Up ------------------------

struct World {
  ManualClock clock;
  std::unique_ptr<SchedulerCore> core;

  explicit World(const std::string& fleet_text) {
    auto fleet = Fleet::parse(fleet_text);
    if (!fleet) throw std::runtime_error("fleet: " + fleet.reason());
    auto made = SchedulerCore::create(std::move(*fleet), clock, nullptr);
    if (!made) throw std::runtime_error("core: " + made.reason());
    core = std::move(*made);
    auto up = bring_up_all_nodes(*core);
    if (!up) throw std::runtime_error("nodes: " + up.reason());
  }

  Result<Committed> commit(Decision d) {
    clock.advance(1);
    return core->commit(d);
  }
  void must(const Decision& d) {
    auto c = commit(d);
    ASSERT_TRUE(c.ok()) << d.describe() << ": " << c.reason();
  }

  // Submits and admits a job; returns its id.
  int job(std::int64_t world, std::int64_t min, std::int64_t max, Tier tier = Tier::kStandard,
          const std::string& type = "H100-80G", std::int64_t mem = 1024) {
    auto c = commit(Decision::submit("j", tier, type, world, min, max, mem));
    EXPECT_TRUE(c.ok()) << c.reason();
    const int j = c.ok() ? c->job : -1;
    must(ev(EventKind::kAdmit, j));
    return j;
  }
  static Decision ev(EventKind e, std::int64_t j) {
    Decision d;
    d.event = e;
    d.job = j;
    return d;
  }
  // An operator's placement of job j on exactly these devices, then Start: a filler.
  int fill(const std::vector<std::int64_t>& devices, Tier tier = Tier::kStandard,
           const std::string& type = "H100-80G") {
    const auto n = static_cast<std::int64_t>(devices.size());
    const int j = job(n, n, n, tier, type);
    Decision d = ev(EventKind::kPlace, j);
    d.devices = devices;
    d.splice = 1;
    must(d);
    must(ev(EventKind::kStart, j));
    return j;
  }
  // A planner's preemption of running `victim` for waiting `ben`, its cut stored: the victim's
  // devices are free, reserved for `ben`.
  void cut_for(int victim, int ben) {
    Decision pre = ev(EventKind::kPreempt, victim);
    pre.origin = spec::Origin::kPlanner;
    pre.beneficiary = ben;
    must(pre);
    Decision done = ev(EventKind::kCheckpointDone, victim);
    done.step = core->cluster().jobs[victim].progress;
    must(done);
  }
  // Commits a proposal; it must be one the core accepts.
  void take(const Proposal& p) {
    ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
    must(p.decision);
  }
  int node_of(std::int64_t dev) const { return core->cluster().node_of(static_cast<int>(dev)); }
  std::set<int> nodes_of(const Decision& d) const {
    std::set<int> s;
    for (auto dev : d.devices) s.insert(node_of(dev));
    return s;
  }
  std::set<std::string> clusters_of(const Decision& d) const {
    std::set<std::string> s;
    for (int n : nodes_of(d)) {
      const auto& node = core->fleet().nodes[static_cast<std::size_t>(n)];
      s.insert(node.region + "/" + node.cluster);
    }
    return s;
  }
  std::set<std::string> regions_of(const Decision& d) const {
    std::set<std::string> s;
    for (int n : nodes_of(d)) s.insert(core->fleet().nodes[static_cast<std::size_t>(n)].region);
    return s;
  }
};

// Fleet text: `spec` lists regions, each a list of clusters, each a list of node sizes. Every
// device may serve admitted premium demand.
std::string fleet_text(const std::vector<std::vector<std::vector<int>>>& spec,
                       std::int64_t host_mem = 1 << 30, const std::string& type = "H100-80G") {
  int devices = 0;
  for (const auto& r : spec)
    for (const auto& c : r)
      for (int n : c) devices += n;
  std::string t = "premium_reserve " + std::to_string(devices) + "\n";
  int node = 0;
  for (std::size_t r = 0; r < spec.size(); ++r) {
    t += "region r" + std::to_string(r) + "\n";
    for (std::size_t c = 0; c < spec[r].size(); ++c) {
      t += "cluster c" + std::to_string(c) + "\n";
      for (int devs : spec[r][c])
        t += "node n" + std::to_string(node++) + " host_mem_mib=" + std::to_string(host_mem) +
             "\ndevices " + type + " count=" + std::to_string(devs) + " mem_mib=81920\n";
    }
  }
  return t;
}

// The index after catching up with the core, against the state: "" when they agree.
std::string audited(GangPlacer& placer) {
  placer.sync();
  return placer.index().audit();
}

std::vector<std::int64_t> range(int first, int count) {
  std::vector<std::int64_t> v;
  for (int i = 0; i < count; ++i) v.push_back(first + i);
  return v;
}

// ---- Topology and packing -------------------------------------------------------------------

TEST(GangPlacer, OneNodeBestFit) {
  // One cluster of three 8-device nodes with 3, 8 and 6 free devices.
  World w(fleet_text({{{8, 8, 8}}}));
  w.fill(range(0, 5));
  w.fill(range(16, 2));
  GangPlacer placer(*w.core);
  const int a = w.job(4, 4, 4);
  auto p = placer.propose(a, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{2}) << "the node with 6 free: the fewest that fit";
  EXPECT_EQ(p.decision.devices, (std::vector<std::int64_t>{18, 19, 20, 21}));
  EXPECT_EQ(p.decision.splice, 1);
  w.take(p);
  const int b = w.job(3, 3, 3);
  p = placer.propose(b, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{0}) << "exactly 3 free on node 0";
  w.take(p);
  // 8 + 2 free remain (nodes 1, 2): a job of 8 takes node 1 whole, not 6 + 2.
  const int c = w.job(8, 8, 8);
  p = placer.propose(c, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{1});
  w.take(p);
  EXPECT_EQ(placer.stats().repairs, 0u);
  EXPECT_EQ(audited(placer), "");
}

TEST(GangPlacer, OneNodeBeforeSpanningNodes) {
  // Nodes of 4, 4 and 8 free: a gang of 8 goes on the 8-device node, 6 on it too (best fit among
  // those that fit), and only 12 spans nodes.
  World w(fleet_text({{{4, 4, 8}}}));
  GangPlacer placer(*w.core);
  const int a = w.job(6, 6, 6);
  auto p = placer.propose(a, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{2});
  const int b = w.job(12, 12, 12);
  p = placer.propose(b, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  // Fewest nodes: the 8-device node whole, then 4 on the lowest-numbered 4-device node.
  EXPECT_EQ(w.nodes_of(p.decision), (std::set<int>{0, 2}));
  w.take(p);
}

TEST(GangPlacer, ElasticTakesTheLargestCountThatFitsOneRegion) {
  World w(fleet_text({{{8}}, {{8}}}));  // two regions of one 8-device node
  GangPlacer placer(*w.core);
  const int j = w.job(16, 4, 16);  // 16, 8 or 4 devices (splice 1, 2, 4)
  auto p = placer.propose(j, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(p.decision.devices.size(), 8u) << "16 would need two regions";
  EXPECT_EQ(p.decision.splice, 2);
  // The old scan would span both regions.
  auto old = propose_gang_scan(*w.core, j, EventKind::kPlace);
  ASSERT_EQ(old.kind, Proposal::Kind::kOk);
  EXPECT_EQ(old.decision.devices.size(), 16u);
  // With cross-region allowed for it, the placer takes 16 too.
  placer.allow_cross_region(j);
  p = placer.propose(j, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(p.decision.devices.size(), 16u);
  EXPECT_EQ(w.regions_of(p.decision).size(), 2u);
  w.take(p);
}

TEST(GangPlacer, NeverAcrossRegionsUnlessAllowed) {
  World w(fleet_text({{{8}}, {{8}}}));
  GangPlacer placer(*w.core);
  const int j = w.job(12, 12, 12);
  auto p = placer.propose(j, EventKind::kPlace);
  EXPECT_EQ(p.kind, Proposal::Kind::kInfeasible) << "no region has 12 devices";
  placer.allow_cross_region(j);
  p = placer.propose(j, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(w.regions_of(p.decision).size(), 2u);
  placer.allow_cross_region(j, false);
  EXPECT_EQ(placer.propose(j, EventKind::kPlace).kind, Proposal::Kind::kInfeasible);
  // A gang that fits a region but not its free devices now: retry later, still not across.
  w.fill(range(0, 2));
  w.fill(range(8, 2));
  const int k = w.job(8, 8, 8);
  EXPECT_EQ(placer.propose(k, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(propose_gang_scan(*w.core, k, EventKind::kPlace).kind, Proposal::Kind::kOk)
      << "the old scan would have spanned the regions";
}

TEST(GangPlacer, TheShortfallIsCountedInTheRegionWithTheMostFreeToTheJob) {
  // Two regions of 8: 5 held in r0 (3 free), 7 in r1 (1 free). A gang of 8 lacks 5 in r0; across
  // regions it lacks 4 of the fleet's.
  World w(fleet_text({{{8}}, {{8}}}));
  GangPlacer placer(*w.core);
  const int victim = w.fill(range(0, 2), Tier::kBasic);
  w.fill(range(2, 3));
  w.fill(range(8, 7));
  const int k = w.job(8, 8, 8);
  auto sf = placer.shortfall(k, EventKind::kPlace);
  EXPECT_EQ(sf.devices, 5);
  EXPECT_EQ(sf.region, 0);
  placer.allow_cross_region(k);
  sf = placer.shortfall(k, EventKind::kPlace);
  EXPECT_EQ(sf.devices, 4);
  EXPECT_EQ(sf.region, -1);
  placer.allow_cross_region(k, false);
  // Devices reserved for it count as free to it: the victim's 2, cut for k.
  w.cut_for(victim, k);
  EXPECT_EQ(placer.shortfall(k, EventKind::kPlace).devices, 3);
  // Not to a basic gang, which k outranks: for it only the 3 open ones count.
  EXPECT_EQ(placer.shortfall(w.job(8, 8, 8, Tier::kBasic), EventKind::kPlace).devices, 5);
  // A job that fits now lacks nothing; one that fits no region at all is not a shortfall (-1).
  EXPECT_EQ(placer.shortfall(w.job(3, 3, 3), EventKind::kPlace).devices, 0);
  EXPECT_EQ(placer.shortfall(w.job(12, 12, 12), EventKind::kPlace).devices, -1);
  EXPECT_EQ(placer.stats().proposals, 0u) << "a shortfall is no proposal";
}

TEST(GangPlacer, OneClusterBeforeSpanningClusters) {
  // Region r0: cluster c0 with two nodes of 8, cluster c1 with four nodes of 4 (16 free each).
  World w(fleet_text({{{8, 8}, {4, 4, 4, 4}}}));
  GangPlacer placer(*w.core);
  const int a = w.job(12, 12, 12);
  auto p = placer.propose(a, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.clusters_of(p.decision), std::set<std::string>{"r0/c0"}) << "2 nodes beat 3";
  EXPECT_EQ(w.nodes_of(p.decision).size(), 2u);
  w.take(p);
  // c0 has 4 free on one node, c1 16 on four: a gang of 10 fits only c1 (3 nodes).
  const int b = w.job(10, 10, 10);
  p = placer.propose(b, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.clusters_of(p.decision), std::set<std::string>{"r0/c1"});
  EXPECT_EQ(w.nodes_of(p.decision).size(), 3u);
  w.take(p);
  // 4 free in c0 (node 1), 6 in c1 (4 + 2): a gang of 9 spans both clusters of the region.
  const int c = w.job(9, 9, 9);
  p = placer.propose(c, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.clusters_of(p.decision).size(), 2u);
  w.take(p);
  EXPECT_EQ(audited(placer), "");
}

TEST(GangPlacer, ClusterTieGoesToTheFullerCluster) {
  // Both clusters need 2 nodes for 8; c1 has fewer free devices: packing picks it.
  World w(fleet_text({{{8, 8}, {4, 4, 8}}}));
  w.fill(range(16, 4));  // c1: node 2 full... its 4 devices held
  w.fill(range(24, 4));  // c1: node 4 has 4 free
  GangPlacer placer(*w.core);
  const int j = w.job(12, 12, 12);
  auto p = placer.propose(j, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.clusters_of(p.decision), std::set<std::string>{"r0/c0"}) << "only c0 has 12";
  const int k = w.job(8, 8, 8);
  w.fill(range(0, 4));  // c0: 4 + 8 free; c1: 4 + 4 free
  p = placer.propose(k, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{1}) << "one node first";
  w.fill(range(8, 1));  // c0: 4 + 7; c1: 4 + 4; a gang of 8 needs 2 nodes in either
  p = placer.propose(k, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.clusters_of(p.decision), std::set<std::string>{"r0/c1"}) << "8 free beat 11";
  w.take(p);
}

// ---- Reservations, node states, memory ------------------------------------------------------

TEST(GangPlacer, ReservationsAreFreeToTheirJobAndToJobsThatOutrankIt) {
  World w(fleet_text({{{4, 4}}}));
  const int victim = w.fill(range(0, 4), Tier::kBasic);
  w.fill(range(4, 4));
  const int ben = w.job(4, 4, 4, Tier::kStandard);
  GangPlacer placer(*w.core);
  EXPECT_EQ(placer.propose(ben, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  w.cut_for(victim, ben);  // devices 0-3 free, reserved for `ben`
  const int basic = w.job(4, 4, 4, Tier::kBasic);
  const int premium = w.job(4, 4, 4, Tier::kPremium);
  EXPECT_EQ(placer.propose(basic, EventKind::kPlace).kind, Proposal::Kind::kRetryLater)
      << "reserved for a job it does not outrank";
  auto p = placer.propose(premium, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << "a premium job outranks the standard beneficiary";
  EXPECT_EQ(p.decision.devices, range(0, 4));
  p = placer.propose(ben, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(p.decision.devices, range(0, 4));
  // The victim resumes elsewhere once the beneficiary runs: nothing free yet.
  w.take(p);
  EXPECT_EQ(placer.propose(victim, EventKind::kResume).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(placer.stats().repairs, 0u);
}

TEST(GangPlacer, VoidReservationsFreeDevicesWithoutACommitTouchingThem) {
  World w(fleet_text({{{4}}}));
  const int victim = w.fill(range(0, 4), Tier::kBasic);
  const int ben = w.job(4, 4, 4, Tier::kStandard);
  w.cut_for(victim, ben);
  GangPlacer placer(*w.core);
  const int other = w.job(4, 4, 4, Tier::kStandard);
  EXPECT_EQ(placer.propose(other, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  // The operator releases the reservation: only the beneficiary's generation changes.
  Decision rel = World::ev(EventKind::kRelease, ben);
  w.must(rel);
  auto p = placer.propose(other, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  w.take(p);
  EXPECT_EQ(audited(placer), "");
}

TEST(GangPlacer, DevicesReservedAgainForAnotherJobBetweenTwoCalls) {
  World w(fleet_text({{{4, 4}}}));  // node 1 stays full: room for 8 premium devices, none free
  w.fill(range(4, 4));
  GangPlacer placer(*w.core);
  const int basic = w.fill(range(0, 4), Tier::kBasic);
  const int standard = w.job(4, 4, 4, Tier::kStandard);
  w.cut_for(basic, standard);  // devices 0-3 reserved for `standard`
  ASSERT_EQ(audited(placer), "");
  // Before the placer looks again: a premium job takes them (it outranks `standard`), runs, and
  // is preempted for a premium job with less service, for which they are reserved now.
  const int premium = w.job(4, 4, 4, Tier::kPremium);
  Decision place = World::ev(EventKind::kPlace, premium);
  place.devices = range(0, 4);
  place.splice = 1;
  w.must(place);
  w.must(World::ev(EventKind::kStart, premium));
  Decision prog = World::ev(EventKind::kProgress, premium);
  prog.step = 1;
  prog.gpu_ms = 1000;
  w.must(prog);
  const int premium2 = w.job(4, 4, 4, Tier::kPremium);
  w.cut_for(premium, premium2);
  EXPECT_EQ(placer.propose(standard, EventKind::kPlace).kind, Proposal::Kind::kRetryLater)
      << "reserved for a premium job now";
  auto p = placer.propose(premium2, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(p.decision.devices, range(0, 4));
  EXPECT_EQ(placer.stats().repairs, 0u);
  EXPECT_EQ(audited(placer), "");
}

TEST(GangPlacer, OnlyUpNodes) {
  World w(fleet_text({{{8, 4}}}));
  GangPlacer placer(*w.core);
  NodeDecision drain;
  drain.event = spec::NodeEvent::kDrain;
  drain.origin = spec::Origin::kOperator;
  drain.node = 0;
  ASSERT_TRUE(w.core->commit_node(drain).ok());
  const int j = w.job(4, 4, 4);
  auto p = placer.propose(j, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{1});
  const int k = w.job(8, 8, 8);
  EXPECT_EQ(placer.propose(k, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  drain.event = spec::NodeEvent::kUndrain;
  ASSERT_TRUE(w.core->commit_node(drain).ok());
  p = placer.propose(k, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{0});
  // A node whose heartbeats are lost takes nothing either.
  NodeDecision lost;
  lost.event = spec::NodeEvent::kHeartbeatLost;
  lost.node = 0;
  ASSERT_TRUE(w.core->commit_node(lost).ok());
  EXPECT_EQ(placer.propose(k, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(audited(placer), "");
}

TEST(GangPlacer, ARetryLaterIsRememberedWhileNoScopeCanHaveGainedEnough) {
  // One node of 8: six 1-device jobs leave 2 free; a gang of 4 needs 2 more than any scope has.
  World w(fleet_text({{{8}}}));
  std::vector<int> fillers;
  for (int d = 0; d < 6; ++d) fillers.push_back(w.fill({d}));
  GangPlacer placer(*w.core);
  const int a = w.job(4, 4, 4);
  EXPECT_EQ(placer.propose(a, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(placer.stats().misses_remembered, 0u);
  auto again = placer.propose(a, EventKind::kPlace);
  EXPECT_EQ(again.kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(again.why, "not enough free devices of the job's type now");
  EXPECT_EQ(placer.stats().misses_remembered, 1u) << "nothing freed: the same answer, no query";
  // One device freed: 3 free at most, still short of 4.
  w.must(World::ev(EventKind::kComplete, fillers[0]));
  EXPECT_EQ(placer.propose(a, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(placer.stats().misses_remembered, 2u);
  // A second one: 4 may be free now, so the placer looks again, and places the gang.
  w.must(World::ev(EventKind::kComplete, fillers[1]));
  auto p = placer.propose(a, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(placer.stats().misses_remembered, 2u);
  EXPECT_EQ(p.decision.devices, (std::vector<std::int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(audited(placer), "");
}

TEST(GangPlacer, ARememberedRetryLaterEndsWithAReservationForTheJob) {
  // A miss whose deficit no open device could make up is looked at again once devices are
  // reserved for the job (tagged devices count in the supply too).
  World w(fleet_text({{{4}}}));
  const int victim = w.fill(range(0, 4), Tier::kBasic);
  GangPlacer placer(*w.core);
  const int a = w.job(4, 4, 4, Tier::kPremium);
  EXPECT_EQ(placer.propose(a, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(placer.propose(a, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(placer.stats().misses_remembered, 1u);
  w.cut_for(victim, a);  // devices 0-3 free, reserved for `a`
  auto p = placer.propose(a, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(placer.stats().misses_remembered, 1u);
  EXPECT_EQ(audited(placer), "");
}

TEST(GangPlacer, DeviceMemoryAndType) {
  // One type at two memory sizes, and another type.
  World w(
      "premium_reserve 0\nregion r\ncluster c\n"
      "node a host_mem_mib=1048576\ndevices A100 count=4 mem_mib=40960\n"
      "node b host_mem_mib=1048576\ndevices A100 count=2 mem_mib=81920\n"
      "node c host_mem_mib=1048576\ndevices H100 count=8 mem_mib=81920\n");
  GangPlacer placer(*w.core);
  const int big = w.job(2, 2, 2, Tier::kStandard, "A100", 60000);
  auto p = placer.propose(big, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{1}) << "only node b's A100s have 60000 MiB";
  const int small = w.job(2, 2, 2, Tier::kStandard, "A100", 1024);
  p = placer.propose(small, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{1}) << "best fit: 2 free beat 4";
  const int huge = w.job(3, 3, 3, Tier::kStandard, "A100", 60000);
  EXPECT_EQ(placer.propose(huge, EventKind::kPlace).kind, Proposal::Kind::kInfeasible);
  const int wide = w.job(6, 6, 6, Tier::kStandard, "A100", 1024);
  p = placer.propose(wide, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << "both A100 nodes";
  EXPECT_EQ(w.nodes_of(p.decision), (std::set<int>{0, 1}));
  const int nomem = w.job(1, 1, 1, Tier::kStandard, "H100", 100000);
  EXPECT_EQ(placer.propose(nomem, EventKind::kPlace).kind, Proposal::Kind::kInfeasible);
}

TEST(GangPlacer, HostMemoryForSplicedWorkers) {
  // Spliced workers wait in host memory: 8 workers of 30000 MiB on 2 devices need 3 x 30000 per
  // device. Node a has room for none of that; node b for 2 devices.
  World w(
      "premium_reserve 0\nregion r\ncluster c\n"
      "node a host_mem_mib=50000\ndevices H100 count=4 mem_mib=81920\n"
      "node b host_mem_mib=200000\ndevices H100 count=2 mem_mib=81920\n");
  GangPlacer placer(*w.core);
  const int j = w.job(8, 2, 2, Tier::kStandard, "H100", 30000);
  auto p = placer.propose(j, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{1}) << "node a fits the devices, not the memory";
  // The old scan ignores host memory: its proposal is one the core refuses.
  auto old = propose_gang_scan(*w.core, j, EventKind::kPlace);
  ASSERT_EQ(old.kind, Proposal::Kind::kOk);
  EXPECT_FALSE(w.core->check(old.decision).ok());
  w.take(p);
  const int k = w.job(8, 2, 2, Tier::kStandard, "H100", 30000);
  EXPECT_EQ(placer.propose(k, EventKind::kPlace).kind, Proposal::Kind::kRetryLater)
      << "node a has the devices but not the host memory, node b neither";
}

TEST(GangPlacer, ARememberedRetryLaterEndsWhenHostMemoryFrees) {
  // One node of 6 devices with host memory for two spliced-out workers of 30,000 MiB (75,000 MiB).
  // s (world 4) runs on 2 devices, one worker of each swapped out (60,000 MiB). k (world 2 on 1
  // device: one worker swapped out) finds devices free but not the host memory: retry later, an
  // answer remembered while nothing changes. s grows to 4 devices and swaps nothing out: no device
  // is freed, but host memory is, and k is looked at again and placed.
  World w("premium_reserve 0\nregion r\ncluster c\nnode a host_mem_mib=75000\ndevices H100 count=6 mem_mib=81920\n");
  GangPlacer placer(*w.core);
  const int s = w.job(4, 2, 4, Tier::kStandard, "H100", 30000);
  auto p = placer.propose(s, EventKind::kPlace, 2);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  w.take(p);
  w.must(World::ev(EventKind::kStart, s));
  const int k = w.job(2, 1, 1, Tier::kStandard, "H100", 30000);
  EXPECT_EQ(placer.propose(k, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(placer.propose(k, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(placer.stats().misses_remembered, 1u);
  p = placer.propose(s, EventKind::kResizeUp, 4);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  w.take(p);
  Decision done = World::ev(EventKind::kCheckpointDone, s);
  done.step = w.core->cluster().jobs[s].progress;
  w.must(done);
  w.must(World::ev(EventKind::kRestoreDone, s));
  auto q = placer.propose(k, EventKind::kPlace);
  ASSERT_EQ(q.kind, Proposal::Kind::kOk) << q.why;
  EXPECT_EQ(placer.stats().misses_remembered, 1u);
  EXPECT_EQ(audited(placer), "");
}

TEST(GangPlacer, AGangNoNodesHostMemoryCouldEverHoldIsInfeasible) {
  // 8 workers of 30,000 MiB on 2 devices swap 3 x 30,000 MiB a device: neither node's host memory
  // holds one device's worth, on any state of the fleet. On 4 devices (splice 2) node b holds
  // two; node a none: 4 devices nowhere.
  World w(
      "premium_reserve 0\nregion r\ncluster c\n"
      "node a host_mem_mib=20000\ndevices H100 count=4 mem_mib=81920\n"
      "node b host_mem_mib=100000\ndevices H100 count=2 mem_mib=81920\n");
  GangPlacer placer(*w.core);
  const int j = w.job(8, 2, 4, Tier::kStandard, "H100", 30000);
  auto p = placer.propose(j, EventKind::kPlace);
  EXPECT_EQ(p.kind, Proposal::Kind::kInfeasible) << p.why;
  EXPECT_NE(p.why.str().find("host memory"), std::string::npos) << p.why;
  // 16,000 MiB a worker: 2 devices at 3 x 16,000 fit node b; busy, that is "later", not "never".
  const int k = w.job(8, 2, 2, Tier::kStandard, "H100", 16000);
  w.fill({4, 5}, Tier::kStandard, "H100");
  EXPECT_EQ(placer.propose(k, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
}

TEST(GangPlacer, AGangAllowedAcrossRegionsIsCountedAcrossThem) {
  // 3 devices a region: 6 fit only across both; allowed to cross, that is not "never".
  World w(
      "premium_reserve 0\nregion r1\ncluster c1\nnode a host_mem_mib=1048576\ndevices H100 count=3 mem_mib=81920\n"
      "region r2\ncluster c2\nnode b host_mem_mib=1048576\ndevices H100 count=3 mem_mib=81920\n");
  GangPlacer placer(*w.core);
  const int j = w.job(6, 6, 6, Tier::kStandard, "H100");
  EXPECT_EQ(placer.propose(j, EventKind::kPlace).kind, Proposal::Kind::kInfeasible);
  placer.allow_cross_region(j);
  w.fill({0}, Tier::kStandard, "H100");
  EXPECT_EQ(placer.propose(j, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
}

// ---- Resize and migration -------------------------------------------------------------------

TEST(GangPlacer, OneNodeGangsStayOnOneNode) {
  // Two 4-device nodes with 2 free each. A gang of 4 spans them; kept to one node (as a pod is) it
  // waits, and the shortfall says it lacks 2 on the node nearest to fitting.
  World w(fleet_text({{{4, 4}}}));
  w.fill(range(0, 2));
  w.fill(range(4, 2));
  GangPlacer placer(*w.core);
  const int a = w.job(4, 4, 4);
  auto p = placer.propose(a, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(w.nodes_of(p.decision), (std::set<int>{0, 1}));
  EXPECT_FALSE(placer.one_node(a));
  placer.set_one_node_gangs(true);
  EXPECT_TRUE(placer.one_node(a));
  EXPECT_EQ(placer.propose(a, EventKind::kPlace).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(placer.propose(a, EventKind::kPlace).kind, Proposal::Kind::kRetryLater) << "remembered";
  EXPECT_EQ(placer.shortfall(a, EventKind::kPlace).devices, -1)
      << "the count is not what keeps it out: the topology is";
  // An elastic one (world 4, down to 2) fits one node at 2, and grows on that node only.
  const int b = w.job(4, 2, 4);
  p = placer.propose(b, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(p.decision.devices.size(), 2u);
  EXPECT_EQ(w.nodes_of(p.decision).size(), 1u);
  w.take(p);
  w.must(World::ev(EventKind::kStart, b));
  EXPECT_EQ(placer.propose(b, EventKind::kResizeUp).kind, Proposal::Kind::kRetryLater)
      << "its node is full; the other node's 2 free devices are not its";
  EXPECT_EQ(placer.stats().repairs, 0u);
  EXPECT_EQ(audited(placer), "");
}

TEST(GangPlacer, OneNodeGangsLargerThanANodeStillSpanNodes) {
  World w(fleet_text({{{4, 4}}}));
  GangPlacer placer(*w.core);
  placer.set_one_node_gangs(true);
  const int a = w.job(6, 6, 6);
  EXPECT_FALSE(placer.one_node(a));
  auto p = placer.propose(a, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(w.nodes_of(p.decision), (std::set<int>{0, 1}));
}

TEST(GangPlacer, ResizeUpKeepsItsDevicesAndGrowsNearThem) {
  World w(fleet_text({{{8, 8}, {8}}}));
  GangPlacer placer(*w.core);
  const int j = w.job(8, 2, 8);
  auto p = placer.propose(j, EventKind::kPlace, 2);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  w.take(p);
  w.must(World::ev(EventKind::kStart, j));
  const auto held = p.decision.devices;  // on node 0 (best fit on an empty fleet: lowest id)
  ASSERT_EQ(w.nodes_of(p.decision), std::set<int>{0});
  w.fill(range(2, 4));  // node 0 keeps 2 free
  p = placer.propose(j, EventKind::kResizeUp, 4);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(p.decision.devices.size(), 4u);
  EXPECT_EQ(w.nodes_of(p.decision), std::set<int>{0}) << "grows on its own node";
  EXPECT_EQ(p.decision.splice, 2);
  for (auto d : held)
    EXPECT_TRUE(std::count(p.decision.devices.begin(), p.decision.devices.end(), d)) << d;
  // To 8: node 0 has 2 free; the 6 more go on node 1, in its cluster, although node 2 (another
  // cluster of the region) would be the best fit without locality.
  w.fill(range(16, 1));  // node 2: 7 free, node 1: 8
  p = placer.propose(j, EventKind::kResizeUp);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(p.decision.devices.size(), 8u);
  EXPECT_EQ(w.nodes_of(p.decision), (std::set<int>{0, 1}));
  for (auto d : held)
    EXPECT_TRUE(std::count(p.decision.devices.begin(), p.decision.devices.end(), d)) << d;
  w.take(p);
  EXPECT_EQ(placer.propose(j, EventKind::kResizeUp).kind, Proposal::Kind::kInfeasible)
      << "already at max_devices";
}

TEST(GangPlacer, MigrateNeverReusesItsDevicesNorShrinks) {
  World w(fleet_text({{{4, 4, 2}}}));
  GangPlacer placer(*w.core);
  const int j = w.job(4, 2, 4);
  auto p = placer.propose(j, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  w.take(p);
  w.must(World::ev(EventKind::kStart, j));
  const auto held = p.decision.devices;
  p = placer.propose(j, EventKind::kMigrate);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(p.decision.devices.size(), 4u);
  for (auto d : held)
    EXPECT_FALSE(std::count(p.decision.devices.begin(), p.decision.devices.end(), d)) << d;
  w.fill(range(4, 4));  // only 2 free devices left: not enough for 4, and fewer would shrink it
  EXPECT_EQ(placer.propose(j, EventKind::kMigrate).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(placer.propose(j, EventKind::kPlace).kind, Proposal::Kind::kInfeasible)
      << "a running job is not placed";
}

TEST(GangPlacer, AnAvoidedScopeOffersNothing) {
  // Two regions: r0 with nodes of 2 and 4 devices, r1 with one of 4. A 2-device job runs on the
  // 2-device node; a migration goes to r0's 4-device node (best fit, the lowest id on a tie), and
  // avoiding r0 sends it to r1.
  World w(fleet_text({{{2, 4}}, {{4}}}));
  GangPlacer placer(*w.core);
  const int j = w.fill({0, 1});
  auto near = placer.propose(j, EventKind::kMigrate);
  ASSERT_EQ(near.kind, Proposal::Kind::kOk) << near.why;
  EXPECT_EQ(w.regions_of(near.decision), (std::set<std::string>{"r0"}));
  const auto& ix = placer.index();
  auto away = placer.propose(j, EventKind::kMigrate, -1, ix.region_scope(0));
  ASSERT_EQ(away.kind, Proposal::Kind::kOk) << away.why;
  EXPECT_EQ(w.regions_of(away.decision), (std::set<std::string>{"r1"}));
  // A place avoiding r1 too has nowhere to go; the next query without it is unaffected.
  const int k = w.job(4, 4, 4);
  EXPECT_EQ(placer.propose(k, EventKind::kPlace, -1, ix.region_scope(1)).kind, Proposal::Kind::kOk);
  w.fill({2, 3, 4, 5});
  EXPECT_EQ(placer.propose(k, EventKind::kPlace, -1, ix.region_scope(1)).kind, Proposal::Kind::kRetryLater);
  EXPECT_EQ(placer.propose(k, EventKind::kPlace).kind, Proposal::Kind::kOk);
}

// ---- Sync ----------------------------------------------------------------------------------

TEST(GangPlacer, RebuildsWhenTheFeedDroppedEntries) {
  World w(fleet_text({{{8}}}));
  GangPlacer placer(*w.core);
  // More than ChangeFeed::kCapacity entries between two calls: 8 per Place and 8 per Cancel.
  const int rounds = static_cast<int>(ChangeFeed::kCapacity / 16) + 2;
  for (int i = 0; i < rounds; ++i) {
    const int j = w.job(8, 8, 8);
    Decision d = World::ev(EventKind::kPlace, j);
    d.devices = range(0, 8);
    d.splice = 1;
    w.must(d);
    w.must(World::ev(EventKind::kCancel, j));
  }
  w.fill(range(0, 3));
  const int j = w.job(5, 5, 5);
  auto p = placer.propose(j, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk) << p.why;
  EXPECT_EQ(p.decision.devices, range(3, 5));
  EXPECT_EQ(placer.index().rebuilds(), 1u);
  EXPECT_EQ(audited(placer), "");
  // Caught up in O(changes) afterwards.
  w.take(p);
  placer.sync();
  EXPECT_EQ(placer.index().rebuilds(), 1u);
  EXPECT_EQ(audited(placer), "");
}

TEST(GangPlacer, ProposeGangIsThePlacerOnTheStateAsItIs) {
  World w(fleet_text({{{8, 8, 8}}}));
  w.fill(range(0, 5));
  const int j = w.job(3, 3, 3);
  auto p = propose_gang(*w.core, j, EventKind::kPlace);
  ASSERT_EQ(p.kind, Proposal::Kind::kOk);
  EXPECT_EQ(p.decision.devices, range(5, 3));
}

// ---- Randomized cross-check -----------------------------------------------------------------

// Free devices node n has for job j per the spec's rules, by brute force, for a placement at
// `splice` workers per device of a job that holds nothing (host memory for the spliced-out ones).
int usable_on(const SchedulerCore& core, int j, int n, std::int64_t splice = 1) {
  const spec::Concrete d;
  const auto& s = core.cluster();
  const auto& jv = s.jobs[static_cast<std::size_t>(j)];
  if (s.node_state[n] != static_cast<std::int64_t>(spec::NodeState::kUp)) return 0;
  const auto& node = core.fleet().nodes[static_cast<std::size_t>(n)];
  int u = 0;
  for (int dev = node.first_device; dev < node.end_device; ++dev) {
    if (s.owner[dev] != -1 || s.dev_type(dev) != jv.dtype || s.dev_mem(dev) < jv.mem) continue;
    if (spec::reserved(d, s, dev) && s.resv_for[dev] != j && !spec::outranks(d, s, j, s.resv_for[dev]))
      continue;
    ++u;
  }
  const auto per_dev = spec::swap_per_device(d, splice, jv.mem);
  if (per_dev > 0) u = std::min<std::int64_t>(u, (s.host_mem[n] - s.node_swap[n]) / per_dev);
  return u;
}

struct RandomRun {
  std::mt19937_64 rng;
  std::unique_ptr<World> w;
  std::unique_ptr<GangPlacer> placer;
  int regions = 1;
  std::set<int> cross;  // jobs allowed across regions
  int checked_parity = 0, placed = 0, multi_node = 0, multi_cluster = 0;

  bool tight_host = false;  // host memory that limits spliced gangs

  explicit RandomRun(std::uint64_t seed) : rng(seed) {
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    tight_host = seed % 2 == 0;
    regions = pick(1, 3);
    std::string t;
    int node = 0, devices = 0;
    for (int r = 0; r < regions; ++r) {
      t += "region r" + std::to_string(r) + "\n";
      const int clusters = pick(1, 3);
      for (int c = 0; c < clusters; ++c) {
        t += "cluster c" + std::to_string(c) + "\n";
        const int nodes = pick(1, 4);
        for (int k = 0; k < nodes; ++k) {
          t += "node n" + std::to_string(node++) + " host_mem_mib=" +
               std::to_string(tight_host ? pick(1, 40) * 50000 : 1073741824) + "\n";
          // Mostly one type per node; sometimes a second group (another type or memory size).
          const int a = pick(1, 8);
          devices += a;
          t += "devices A count=" + std::to_string(a) + " mem_mib=81920\n";
          if (pick(0, 3) == 0) {
            const int b = pick(1, 4);
            devices += b;
            t += std::string("devices ") + (pick(0, 1) ? "A" : "B") + " count=" + std::to_string(b) +
                 " mem_mib=" + (pick(0, 1) ? "40960" : "81920") + "\n";
          }
        }
      }
    }
    w = std::make_unique<World>("premium_reserve " + std::to_string(devices) + "\n" + t);
    placer = std::make_unique<GangPlacer>(*w->core);
  }

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  const SchedulerCore& core() const { return *w->core; }
  std::vector<int> jobs_in(std::initializer_list<JobState> states) const {
    std::vector<int> out;
    for (int j = 0; j < core().num_jobs(); ++j)
      if (std::find(states.begin(), states.end(), core().state(j)) != states.end()) out.push_back(j);
    return out;
  }

  void submit() {
    static const int worlds[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
    const int world = worlds[pick(0, 9)];
    std::vector<int> counts;  // device counts the world splits over within the splice limit
    for (int c = 1; c <= world; ++c)
      if (world % c == 0 && world / c <= spec::kSpliceLimit) counts.push_back(c);
    const int c0 = counts[static_cast<std::size_t>(pick(0, static_cast<int>(counts.size()) - 1))];
    const int min = pick(1, c0), max = pick(c0, world);
    const Tier tier = static_cast<Tier>(pick(0, 2));
    const std::string type = pick(0, 4) == 0 && core().fleet().type_id("B") >= 0 ? "B" : "A";
    static const std::int64_t mems[] = {1024, 1024, 30000, 60000};
    const std::int64_t mem = mems[pick(0, 3)];
    auto c = w->commit(Decision::submit("r", tier, type, world, min, max, mem));
    ASSERT_TRUE(c.ok()) << c.reason();
    const int j = c->job;
    // Premium demand beyond the reserve is not admitted: such a job is cancelled.
    Decision admit = World::ev(EventKind::kAdmit, j);
    w->must(core().check(admit).ok() ? admit : World::ev(EventKind::kCancel, j));
    if (regions > 1 && pick(0, 1)) {
      cross.insert(j);
      placer->allow_cross_region(j);
    }
  }

  // A placement through the placer, checked against the old scan and the rules, and committed.
  void place(int j, EventKind e, int want = -1) {
    const auto& s = core().cluster();
    auto old = propose_gang_scan(core(), j, e, want);
    auto p = placer->propose(j, e, want);
    const bool old_valid = old.kind == Proposal::Kind::kOk && core().check(old.decision).ok();
    const bool parity_applies = (regions == 1 || cross.count(j)) && e != EventKind::kMigrate;
    if (old_valid && parity_applies) {
      ++checked_parity;
      ASSERT_EQ(p.kind, Proposal::Kind::kOk)
          << "the old scan placed job " << j << " (" << old.decision.describe() << "): " << p.why;
      EXPECT_EQ(p.decision.devices.size(), old.decision.devices.size()) << old.decision.describe();
    }
    if (p.kind != Proposal::Kind::kOk) return;
    // The rules, by brute force.
    const auto& jv = s.jobs[static_cast<std::size_t>(j)];
    const int kept = e == EventKind::kResizeUp ? static_cast<int>(jv.devices) : 0;
    const int need = static_cast<int>(p.decision.devices.size()) - kept;
    if (!cross.count(j)) {
      std::set<std::string> regions_used = w->regions_of(p.decision);
      EXPECT_EQ(regions_used.size(), 1u) << p.decision.describe();
    }
    if (e == EventKind::kPlace || e == EventKind::kResume) {
      std::map<int, int> on;  // node -> devices taken
      for (auto dev : p.decision.devices) ++on[w->node_of(dev)];
      std::map<std::string, int> cluster_free;  // usable devices per (region/cluster)
      int best_single = INT32_MAX;
      for (int n = 0; n < s.nodes; ++n) {
        const int u = usable_on(core(), j, n, p.decision.splice);
        const auto& node = core().fleet().nodes[static_cast<std::size_t>(n)];
        cluster_free[node.region + "/" + node.cluster] += u;
        if (u >= need) best_single = std::min(best_single, u);
      }
      if (on.size() == 1) {
        EXPECT_EQ(usable_on(core(), j, on.begin()->first, p.decision.splice), best_single)
            << "best fit: a node with fewer free devices fits " << p.decision.describe();
      } else {
        ++multi_node;
        EXPECT_EQ(best_single, INT32_MAX) << "spans nodes although one fits " << p.decision.describe();
        if (w->clusters_of(p.decision).size() + 0 > 1 || w->regions_of(p.decision).size() > 1) {
          ++multi_cluster;
          for (const auto& [name, free] : cluster_free)
            EXPECT_LT(free, need) << "spans clusters although " << name << " fits "
                                  << p.decision.describe();
        }
      }
    }
    auto c = w->commit(p.decision);
    ASSERT_TRUE(c.ok()) << "the core refused the placer's proposal " << p.decision.describe()
                        << ": " << c.reason();
    ++placed;
  }

  void step() {
    const int op = pick(0, 16);
    auto any = [&](const std::vector<int>& v) {
      return v.empty() ? -1 : v[static_cast<std::size_t>(pick(0, static_cast<int>(v.size()) - 1))];
    };
    if (op <= 2) {
      if (core().num_jobs() < 60) submit();
    } else if (op <= 5) {
      int j = any(jobs_in({JobState::kQueued, JobState::kSuspended}));
      if (j >= 0)
        place(j, core().state(j) == JobState::kQueued ? EventKind::kPlace : EventKind::kResume,
              pick(0, 3) == 0 ? pick(1, 8) : -1);
    } else if (op == 6) {
      for (int j : jobs_in({JobState::kPlaced})) w->must(World::ev(EventKind::kStart, j));
      // A move's stored cut carries it out, unless its target was taken meanwhile (by a job that
      // outranks it) or left Up: then the move is aborted.
      for (int j : jobs_in({JobState::kMigrating, JobState::kResizing})) {
        Decision done = World::ev(EventKind::kCheckpointDone, j);
        done.step = core().cluster().jobs[static_cast<std::size_t>(j)].progress;
        if (w->commit(done).ok()) continue;
        Decision abort = World::ev(EventKind::kAbort, j);
        abort.origin = spec::Origin::kCore;
        w->must(abort);
      }
      for (int j : jobs_in({JobState::kRestoring})) w->must(World::ev(EventKind::kRestoreDone, j));
    } else if (op == 7) {
      int j = any(jobs_in({JobState::kRunning}));
      if (j >= 0) w->must(World::ev(EventKind::kComplete, j));
    } else if (op == 8) {
      int j = any(jobs_in({JobState::kRunning, JobState::kPlaced}));
      if (j >= 0) w->must(World::ev(pick(0, 1) ? EventKind::kWorkerCrash : EventKind::kNodeLoss, j));
    } else if (op == 9) {
      // A preemption for a waiting job the victim yields to: its devices get reserved.
      int v = any(jobs_in({JobState::kRunning}));
      int b = any(jobs_in({JobState::kQueued, JobState::kSuspended}));
      if (v < 0 || b < 0) return;
      Decision pre = World::ev(EventKind::kPreempt, v);
      pre.origin = spec::Origin::kPlanner;
      pre.beneficiary = b;
      if (!core().check(pre).ok()) return;
      w->must(pre);
      Decision done = World::ev(EventKind::kCheckpointDone, v);
      done.step = core().cluster().jobs[static_cast<std::size_t>(v)].progress;
      w->must(done);
    } else if (op == 10) {
      int j = any(jobs_in({JobState::kRunning}));
      if (j >= 0) place(j, EventKind::kResizeUp, pick(0, 1) ? -1 : pick(1, 32));
    } else if (op == 11) {
      int j = any(jobs_in({JobState::kRunning}));
      if (j >= 0) place(j, EventKind::kMigrate);
    } else if (op == 12) {
      int j = any(jobs_in({JobState::kRunning}));
      if (j < 0) return;
      Decision d = World::ev(EventKind::kProgress, j);
      d.step = core().cluster().jobs[static_cast<std::size_t>(j)].progress + 1;
      d.gpu_ms = pick(0, 100000);
      w->must(d);
    } else if (op == 13) {
      int j = any(jobs_in({JobState::kQueued, JobState::kSuspended, JobState::kRunning}));
      if (j < 0) return;
      Decision d = World::ev(pick(0, 1) ? EventKind::kCancel : EventKind::kRelease, j);
      if (core().check(d).ok()) w->must(d);
    } else if (op == 14) {
      // A shrink of a running job for a waiting one: part of its devices get reserved.
      int v = any(jobs_in({JobState::kRunning}));
      int b = any(jobs_in({JobState::kQueued, JobState::kSuspended}));
      if (v < 0 || b < 0) return;
      const auto& jv = core().cluster().jobs[static_cast<std::size_t>(v)];
      for (std::int64_t c = jv.devices - 1; c >= jv.min_dev; --c) {
        if (jv.world % c || jv.world / c > spec::kSpliceLimit) continue;
        Decision d = World::ev(EventKind::kResizeDown, v);
        d.origin = spec::Origin::kPlanner;
        d.beneficiary = b;
        d.devices.assign(jv.held.begin(), jv.held.begin() + c);
        d.splice = jv.world / c;
        if (core().check(d).ok()) w->must(d);
        break;
      }
    } else {
      // Node lifecycle: drain / undrain, or a lost node that holds nothing fails over and rejoins.
      const int n = pick(0, core().cluster().nodes - 1);
      NodeDecision nd;
      nd.node = n;
      nd.origin = spec::Origin::kOperator;
      switch (core().node_state(n)) {
        case spec::NodeState::kUp:
          nd.event = pick(0, 1) ? spec::NodeEvent::kDrain : spec::NodeEvent::kHeartbeatLost;
          break;
        case spec::NodeState::kDraining: nd.event = spec::NodeEvent::kUndrain; break;
        case spec::NodeState::kLost: nd.event = spec::NodeEvent::kFailedOver; break;
        case spec::NodeState::kDown: nd.event = spec::NodeEvent::kRegister; break;
        case spec::NodeState::kJoining: nd.event = spec::NodeEvent::kReady; break;
      }
      if (nd.event == spec::NodeEvent::kHeartbeatLost || nd.event == spec::NodeEvent::kFailedOver ||
          nd.event == spec::NodeEvent::kRegister || nd.event == spec::NodeEvent::kReady)
        nd.origin = spec::Origin::kRuntime;
      w->core->commit_node(nd);  // FailedOver is refused while the node holds devices: fine
    }
  }
};

TEST(GangPlacerRandom, ProposalsAreAcceptedFollowTheRulesAndMatchTheOldScansCount) {
  int parity = 0, placed = 0, multi_node = 0, multi_cluster = 0, remembered = 0;
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    RandomRun run(seed);
    for (int i = 0; i < 300; ++i) {
      run.step();
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "seed " << seed << " step " << i;
        return;
      }
      if (i % 10 == 0 || i == 299) {
        const auto audit = audited(*run.placer);
        ASSERT_EQ(audit, "") << "seed " << seed << " step " << i;
      }
    }
    EXPECT_EQ(run.placer->stats().repairs, 0u) << "seed " << seed;
    remembered += static_cast<int>(run.placer->stats().misses_remembered);
    parity += run.checked_parity;
    placed += run.placed;
    multi_node += run.multi_node;
    multi_cluster += run.multi_cluster;
  }
  // The run exercised what it claims to.
  EXPECT_GT(parity, 1000);
  EXPECT_GT(placed, 2000);
  EXPECT_GT(multi_node, 100);
  EXPECT_GT(multi_cluster, 10);
  // Answers given again from memory (GangPlacer's Miss) are among those the parity check judged.
  EXPECT_GT(remembered, 100);
  std::printf("placed %d, parity-checked %d, multi-node %d, multi-cluster %d, remembered misses %d\n",
              placed, parity, multi_node, multi_cluster, remembered);
}

}  // namespace
}  // namespace orrery::core::policy
