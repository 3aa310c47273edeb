// orrery's defragmentation by migration (step 5 of core/policy/orrery_planner.h): a waiting job
// that does not fit although enough devices of its kind are free gets room by moving running jobs
// out of the place nearest to fitting it, when the moves' cost is repaid by what it has waited.
// For a gang that may span nodes the place is a region (a gang never spans regions); for a gang
// kept to one node (PlannerOptions::one_node_gangs) it is a node.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/policy/orrery_planner.h"
#include "core/policy/victims.h"
#include "spec/model.h"

namespace orrery::core::policy {

using spec::EventKind;

namespace {

// A running job that could move out of the way: what the move costs (device-seconds) and frees.
struct Mover {
  double cost;
  std::int64_t frees;
  int job;
};
struct Moves {
  std::vector<int> jobs;
  double cost = 0;
  std::int64_t freed = 0;
};

// The cheapest movers first (ties: the lowest job), until they free `deficit`.
Moves cheapest_moves(std::vector<Mover>& movers, std::int64_t deficit) {
  std::sort(movers.begin(), movers.end(),
            [](const Mover& a, const Mover& b) { return std::tie(a.cost, a.job) < std::tie(b.cost, b.job); });
  Moves m;
  for (const auto& v : movers) {
    if (m.freed >= deficit) break;
    m.jobs.push_back(v.job);
    m.cost += v.cost;
    m.freed += v.frees;
  }
  return m;
}

}  // namespace

double OrreryPlanner::move_cost_s(const SchedulerCore& core, int v) const {
  const auto& vj = core.cluster().jobs[v];
  const double gib = static_cast<double>(vj.world) * static_cast<double>(vj.mem) / 1024.0;
  const double idle = static_cast<double>(vj.devices) * gib / o_.migration_gib_per_s;
  // A signal or requeue job also loses its run since it started (victims.h): a migration is a cut
  // like a preemption's.
  const double run = static_cast<double>(loss_per_device_ms(core, book_, v)) * static_cast<double>(vj.devices) / 1000.0;
  return idle + run;
}

std::vector<int> OrreryPlanner::movable_for(const SchedulerCore& core, PlanContext& ctx, int ben) {
  const auto& bj = core.cluster().jobs[ben];
  std::vector<int> out;
  int looked = 0;
  // Its tier's jobs and lower tiers'; for a job past the overdue cap (place_overdue), any tier's. A
  // move costs a job a pause, never its devices, and without it a gang kept to one node waits
  // for a node that no higher tier's job holds, which their one-device jobs may never leave (a
  // trace variant's 4x8: standard gangs of 8 waited 7.7 days on average, docs/scheduling.md).
  const std::int64_t lowest = overdue_now_.count(ben) != 0 ? 0 : spec::kRanksPerTier * bj.tier;
  for (std::int64_t rank = spec::kNumRanks - 1; rank >= lowest && looked < o_.max_victim_candidates; --rank)
    for (int v : book_.running(bj.dtype, rank)) {
      if (++looked > o_.max_victim_candidates) break;
      if (ctx.cut_pending(v) || protected_now(core, book_, v)) continue;
      // Placed overdue: not moved for another rank's job within its quantum.
      if (spec::rank(spec::Concrete{}, core.cluster().jobs[v]) != spec::rank(spec::Concrete{}, bj) && in_overdue_quantum(core, v))
        continue;
      out.push_back(v);
    }
  return out;
}

bool OrreryPlanner::start_moves(const SchedulerCore& core, PlanContext& ctx, int ben, const std::vector<int>& movers,
                                int avoid_scope, int avoid_node, const std::string& where) {
  GangPlacer& placer = book_.placer(core);
  int started = 0;
  for (int v : movers) {
    auto p = placer.propose(v, EventKind::kMigrate, -1, avoid_scope, avoid_node);
    if (p.kind != Proposal::Kind::kOk || !ctx.propose(p.decision)) break;  // no room elsewhere: stop
    ++started;
    ++moves_;
    moving_for_[ben].push_back(v);
  }
  if (started == 0) return false;
  ctx.note(ben, "defragmenting: " + std::to_string(started) + " job(s) moving out of its " + where);
  // Where a migration frees its old devices at once (orrery-sim), the job fits now; orrery-core
  // frees them after the cut, and a later round places it.
  const auto ev = core.state(ben) == spec::JobState::kQueued ? EventKind::kPlace : EventKind::kResume;
  if (auto p = placer.propose(ben, ev); p.kind == Proposal::Kind::kOk) ctx.propose(p.decision);
  return true;
}

bool OrreryPlanner::defragment_for(const SchedulerCore& core, PlanContext& ctx, int ben) {
  if (o_.migration_gib_per_s <= 0) return false;
  // Moves started for `ben` whose devices have not moved yet (orrery-core takes the cut before it
  // commits the Migrate): wait for them rather than move more.
  if (auto it = moving_for_.find(ben); it != moving_for_.end()) {
    for (int v : it->second)
      if (ctx.cut_pending(v) && core.state(v) == spec::JobState::kRunning) return true;
    moving_for_.erase(it);
  }
  if (moves_ >= o_.max_defrag_moves_per_round) return false;
  const auto& s = core.cluster();
  const auto& bj = s.jobs[ben];
  GangPlacer& placer = book_.placer(core);
  placer.sync();
  const FreeDeviceIndex& ix = placer.index();
  const int level = ix.level_for(bj.dtype, bj.mem);
  if (level >= 0 && placer.one_node(ben)) return pack_node_for(core, ctx, ben, level);
  if (level < 0 || ix.regions() < 2) return false;
  // Fragmentation is the reason only when enough devices are free, but no region (the widest
  // scope a gang may span) has enough.
  const std::int64_t need = bj.min_dev;
  const std::int64_t free_all = ix.total(level, ix.fleet_scope());
  if (free_all < need) return false;  // too few free anywhere (the common case on a full fleet)
  int r = -1;
  std::int64_t free_r = -1;
  for (int k = 0; k < ix.regions(); ++k)
    if (const std::int64_t f = ix.total(level, ix.region_scope(k)); f > free_r) {
      free_r = f;
      r = k;
    }
  const std::int64_t deficit = need - free_r;
  if (deficit <= 0 || free_all - free_r < deficit) return false;

  // Jobs of `ben`'s tier or lower wholly in region r, the cheapest to move first.
  std::vector<Mover> movers;
  for (int v : movable_for(core, ctx, ben)) {
    std::int64_t frees = 0;
    bool inside = true;
    for (auto dev : s.jobs[v].held) {
      inside = inside && ix.region_of(s.node_of(static_cast<int>(dev))) == r;
      frees += ix.in_level(level, static_cast<int>(dev)) ? 1 : 0;
    }
    if (inside && frees > 0) movers.push_back({move_cost_s(core, v), frees, v});
  }
  const Moves chosen = cheapest_moves(movers, deficit);
  if (chosen.freed < deficit || static_cast<int>(chosen.jobs.size()) > o_.max_defrag_moves_per_round - moves_) return false;
  if (!repaid(core, ctx, ben, chosen.cost)) return false;  // moving pays
  return start_moves(core, ctx, ben, chosen.jobs, ix.region_scope(r), -1, "region");
}

bool OrreryPlanner::pack_node_for(const SchedulerCore& core, PlanContext& ctx, int ben, int level) {
  const auto& s = core.cluster();
  const auto& bj = s.jobs[ben];
  const FreeDeviceIndex& ix = book_.placer(core).index();
  // Fragmentation is the reason only when enough devices of its level are free, but no node has
  // enough open (else claims, reservations or host memory keep it out: not for moves to mend).
  const std::int64_t need = bj.min_dev;
  const std::int64_t free_all = ix.total(level, ix.fleet_scope());
  if (free_all < need || ix.most_open_on_a_node(level) >= need) return false;
  // Jobs of `ben`'s tier or lower wholly on one node that can hold the gang, by node.
  std::map<int, std::vector<Mover>> on;
  for (int v : movable_for(core, ctx, ben)) {
    const int node = job_node(core, v);
    if (node < 0 || ix.capacity(level, node) < need || !ix.up(node)) continue;
    on[node].push_back({move_cost_s(core, v), static_cast<std::int64_t>(s.jobs[v].held.size()), v});
  }
  // The node whose cheapest moves free what it lacks at the least cost (ties: the lowest node);
  // the moved jobs need as many devices elsewhere, and one round's budget of moves.
  int best = -1;
  Moves chosen;
  for (auto& [node, movers] : on) {
    const std::int64_t deficit = need - (ix.open(level, node) - book_.claimed_free_on_node(bj.dtype, node));
    if (deficit <= 0) continue;
    Moves m = cheapest_moves(movers, deficit);
    if (m.freed < deficit || m.freed > free_all - ix.open(level, node) ||
        static_cast<int>(m.jobs.size()) > o_.max_defrag_moves_per_round - moves_)
      continue;
    if (best < 0 || m.cost < chosen.cost) {
      best = node;
      chosen = std::move(m);
    }
  }
  if (best < 0 || !repaid(core, ctx, ben, chosen.cost)) return false;  // moving pays
  return start_moves(core, ctx, ben, chosen.jobs, -1, best, "node");
}

}  // namespace orrery::core::policy
