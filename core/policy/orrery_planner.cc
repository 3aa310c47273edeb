#include "core/policy/orrery_planner.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "core/policy/victims.h"
#include "spec/model.h"

namespace orrery::core::policy {

using spec::EventKind;

OrreryPlanner::OrreryPlanner(const PlannerOptions& o)
    : o_(o), book_([this](const SchedulerCore& core, int job) { return key(core, job); }, /*by_tenant=*/true) {
  book_.set_one_node_gangs(o.one_node_gangs);
}

std::int64_t OrreryPlanner::las_level(std::int64_t attained) const {
  const int levels = std::clamp(o_.las_levels, 1, static_cast<int>(kClassesPerTier) - 1);
  std::int64_t level = 0;
  for (std::int64_t t = o_.las_threshold_gpu_ms; level + 1 < levels && attained >= t; ++level)
    t = t > INT64_MAX / std::max<std::int64_t>(o_.las_level_factor, 2) ? INT64_MAX : t * std::max<std::int64_t>(o_.las_level_factor, 2);
  return level;
}

bool OrreryPlanner::starving(const SchedulerCore& core, int job) const {
  const auto tier = static_cast<std::size_t>(core.cluster().jobs[job].tier);
  const std::int64_t cap = o_.starvation_cap_ms[tier];
  return cap > 0 && core.now_ms() - book_.waiting_since(job) >= cap;
}

JobBook::Key OrreryPlanner::key(const SchedulerCore& core, int job) const {
  const auto& j = core.cluster().jobs[job];
  // Class: the tier; inside it the jobs past the tier's starvation cap first, then Tiresias'
  // discretised LAS levels; inside a level tenants share fairly, and inside a tenant (and among
  // the jobs past the cap) the least attained service goes first. (The longest waiting first
  // among the jobs past the cap made a device type whose tier's demand never ends a FIFO queue,
  // its longest jobs ahead of the rest: docs/scheduling.md, "Service as of now".)
  if (starving(core, job)) return JobBook::Key{kClassesPerTier * j.tier, j.attained, job};
  return JobBook::Key{kClassesPerTier * j.tier + 1 + las_level(j.attained), j.attained, job};
}

void OrreryPlanner::track_age(const SchedulerCore& core, int job) {
  if (job < 0) return;
  const auto i = static_cast<std::size_t>(job);
  if (i >= aging_since_.size()) aging_since_.resize(i + 1, -1);
  const auto tier = static_cast<std::size_t>(core.cluster().jobs[job].tier);
  if (aging_since_[i] >= 0) aging_[tier].erase({aging_since_[i], job});
  aging_since_[i] = -1;
  if (!book_.is_waiting(job) || o_.starvation_cap_ms[tier] <= 0) return;
  if (book_.key_of(job)[0] % kClassesPerTier == 0) return;  // already ahead of its tier
  aging_since_[i] = book_.waiting_since(job);
  aging_[tier].insert({aging_since_[i], job});
}

void OrreryPlanner::promote_starving(const SchedulerCore& core, PlanContext& ctx) {
  for (std::size_t tier = 0; tier < aging_.size(); ++tier) {
    auto& a = aging_[tier];
    const std::int64_t cap = o_.starvation_cap_ms[tier];
    while (!a.empty() && core.now_ms() - a.begin()->first >= cap) {
      const int job = a.begin()->second;
      a.erase(a.begin());
      aging_since_[static_cast<std::size_t>(job)] = -1;
      book_.refile(core, job);
      // Past its cap it may cut jobs it could not before: search for it again at once.
      if (static_cast<std::size_t>(job) < next_search_.size()) next_search_[static_cast<std::size_t>(job)] = 0;
    }
    if (!a.empty()) ctx.replan_at(a.begin()->first + cap);
  }
}

void OrreryPlanner::job_recovered(const SchedulerCore& core, int job, std::int64_t since_ms, std::int64_t waited_ms) {
  changed(core, job, since_ms);
  // A job that holds devices keeps the quanta of its placement (the journal has the wait before
  // it): placed overdue, it is not cut by a higher tier within overdue_quantum_ms of its start;
  // placed past its tier's starvation cap, not inside its tier within the cap.
  if (waited_ms < 0 || core.cluster().jobs[job].devices == 0) return;
  if (o_.overdue_cap_ms > 0 && waited_ms >= o_.overdue_cap_ms) overdue_placed_.insert(job);
  const std::int64_t cap = o_.starvation_cap_ms[static_cast<std::size_t>(core.cluster().jobs[job].tier)];
  if (cap > 0 && waited_ms >= cap) quantum_.insert(job);
}

void OrreryPlanner::track_wait(const SchedulerCore& core, int job) {
  if (job < 0 || o_.overdue_cap_ms <= 0) return;
  const auto i = static_cast<std::size_t>(job);
  if (i >= by_wait_since_.size()) by_wait_since_.resize(i + 1, -1);
  // Placed while overdue (this round's place_overdue found it so): protected for a quantum.
  // It keeps it through its own moves (a grow, a migration, a periodic checkpoint); it loses it
  // when it stops running.
  const auto st = core.state(job);
  if (st == spec::JobState::kPlaced || st == spec::JobState::kRestoring) {
    if (overdue_now_.count(job) != 0) overdue_placed_.insert(job);
  } else if (st == spec::JobState::kQueued || st == spec::JobState::kSuspended || st == spec::JobState::kCompleted ||
             st == spec::JobState::kFailed || st == spec::JobState::kCancelled) {
    overdue_placed_.erase(job);
  }
  const std::int64_t since = book_.is_waiting(job) ? book_.waiting_since(job) : -1;
  if (by_wait_since_[i] == since) return;
  if (by_wait_since_[i] >= 0) by_wait_.erase({by_wait_since_[i], job});
  by_wait_since_[i] = since;
  if (since >= 0) by_wait_.insert({since, job});
}

void OrreryPlanner::place_overdue(const SchedulerCore& core, PlanContext& ctx) {
  overdue_now_.clear();
  if (o_.overdue_cap_ms <= 0) return;
  const std::int64_t now = core.now_ms();
  // The oldest overdue jobs, up to 4 x max_cuts_per_round: each is offered a placement (a miss
  // costs the placer O(1) while nothing changed); older ones that cannot be placed do not keep
  // younger ones from their turn.
  std::vector<int> overdue;
  const int most = 4 * std::max(o_.max_cuts_per_round, 1);
  for (const auto& [since, job] : by_wait_) {
    if (now - since < o_.overdue_cap_ms) {
      ctx.replan_at(since + o_.overdue_cap_ms);  // when the next one will be overdue
      break;
    }
    if (static_cast<int>(overdue.size()) >= most) break;
    overdue.push_back(job);
  }
  if (overdue.empty()) return;
  overdue_now_.insert(overdue.begin(), overdue.end());
  std::set<std::int64_t> searched;  // types where room is sought already, for an older job
  GangPlacer& placer = book_.placer(core);
  for (int j : overdue) {
    if (!book_.is_waiting(j) || ctx.cut_pending(j)) continue;
    const auto ev = core.state(j) == spec::JobState::kQueued ? EventKind::kPlace : EventKind::kResume;
    auto p = placer.propose(j, ev);
    if (p.kind == Proposal::Kind::kOk && ctx.propose(p.decision)) continue;
    if (p.kind == Proposal::Kind::kInfeasible) continue;  // never: nothing to cut for it
    ctx.note(j, "overdue (waited " + std::to_string((now - book_.waiting_since(j)) / 1000) + " s): " + p.why.str());
    // Room for the oldest overdue job of a type that does not fit: the usual cuts (of lower tiers,
    // INV-TIER, and inside its own by its tier's rules), before any later job's; at most
    // max_cuts_per_round searches.
    if (static_cast<int>(searched.size()) >= o_.max_cuts_per_round) continue;
    if (!searched.insert(core.cluster().jobs[j].dtype).second || book_.helped(j)) continue;
    if (!backed_off(core, j)) free_for(core, ctx, j);
  }
}

bool OrreryPlanner::in_overdue_quantum(const SchedulerCore& core, int v) {
  auto it = overdue_placed_.find(v);
  if (it == overdue_placed_.end()) return false;
  if (core.now_ms() - book_.running_since(v) < o_.overdue_quantum_ms) return true;
  overdue_placed_.erase(it);
  return false;
}

double OrreryPlanner::cut_cost_s(const SchedulerCore& core, int v) const {
  const auto& vj = core.cluster().jobs[v];
  const double gib = static_cast<double>(vj.world) * static_cast<double>(vj.mem) / 1024.0;
  const double idle = o_.cut_gib_per_s > 0 ? gib / o_.cut_gib_per_s : 0.0;
  return static_cast<double>(vj.devices) * (idle + static_cast<double>(loss_per_device_ms(core, book_, v)) / 1000.0);
}

bool OrreryPlanner::repaid(const SchedulerCore& core, PlanContext& ctx, int ben, double cost_s) {
  const auto need = static_cast<double>(core.cluster().jobs[ben].min_dev);
  const std::int64_t since = book_.waiting_since(ben);
  const double waited_s = static_cast<double>(core.now_ms() - since) / 1000.0;
  if (cost_s <= need * waited_s) return true;
  ctx.replan_at(since + static_cast<std::int64_t>(cost_s / need * 1000.0) + 1);
  return false;
}

void OrreryPlanner::plan(const SchedulerCore& core, PlanContext& ctx) {
  book_.admit_all(core, ctx);
  promote_starving(core, ctx);
  book_.begin_round();  // the cuts for overdue jobs count in the round's claims (JobBook::claim_free)
  place_overdue(core, ctx);
  int searches = 0, premium_searches = 0;  // each a walk over the running jobs: bounded per round
  // Devices the premium searches past max_cuts_per_round may be for, this round.
  std::int64_t burst_devices = static_cast<std::int64_t>(o_.premium_burst_share * static_cast<double>(core.fleet().num_devices()));
  moves_ = 0;
  book_.place_waiting(core, ctx, o_, /*strict=*/false, [&](int ben) {
    if (book_.helped(ben)) return;
    const auto& bj = core.cluster().jobs[ben];
    if (spec::is(spec::Concrete{}, bj.tier, spec::Tier::kPremium)) {
      if (premium_searches >= o_.premium_round_budget) return;
      if (premium_searches >= o_.max_cuts_per_round) {
        if (bj.min_dev > burst_devices) return;
        burst_devices -= bj.min_dev;
      }
      ++premium_searches;
    } else {
      if (searches >= o_.max_cuts_per_round) return;
      ++searches;
    }
    if (defragment_for(core, ctx, ben)) return;  // cheap where there is no fragmentation to undo
    if (!backed_off(core, ben)) free_for(core, ctx, ben);
  }, /*premium_budget=*/true);
  grow(core, ctx);
}

bool OrreryPlanner::move_to_roomiest_type(const SchedulerCore& core, PlanContext& ctx, int ben) {
  if (!book_.may_retype(core, ben)) return false;
  const auto& types = core.job_info(ben).types;
  const auto& bj = core.cluster().jobs[ben];
  const std::int64_t ben_rank = spec::rank(spec::Concrete{}, bj);
  const FreeDeviceIndex& ix = book_.placer(core).index();
  // What a type could give `ben` now: its free devices with memory for a worker, and those jobs
  // of lower ranks hold (what cutting all of them would free).
  auto room = [&](std::int64_t type) {
    const int level = ix.level_for(type, bj.mem);
    if (level < 0) return std::int64_t{-1};
    return ix.total(level, ix.fleet_scope()) + book_.running_devices_below(type, ben_rank);
  };
  std::int64_t best = bj.dtype, best_room = room(bj.dtype);
  for (const std::int32_t t : types)
    if (const std::int64_t r = room(t); r > best_room) {
      best = t;
      best_room = r;
    }
  if (best == bj.dtype || best_room < bj.min_dev) return false;
  const Decision r = Decision::retype(ben, core.fleet().device_types[static_cast<std::size_t>(best)]);
  return core.accepts(r) && ctx.propose(r);
}

namespace {

// Whether waiting `ben` takes precedence over running `victim` (spec::precedes) once the victim's
// `unreported` service is committed: the spec's rule on a copy of the victim's fields (its device
// sets, which precedes does not read, left empty).
bool precedes_as_of_now(const spec::Concrete& d, const spec::JobVars<spec::Concrete>& ben,
                        const spec::JobVars<spec::Concrete>& victim, std::int64_t unreported) {
  if (unreported <= 0) return false;
  spec::JobVars<spec::Concrete> now;
  for (const auto& [name, field] : spec::job_fields<spec::Concrete>()) now.*field = victim.*field;
  now.attained += unreported;
  return spec::precedes(d, ben, now);
}

}  // namespace

bool OrreryPlanner::free_for(const SchedulerCore& core, PlanContext& ctx, int ben) {
  const spec::Concrete d;
  const auto& s = core.cluster();
  // A job its spec lets run on several types looks for room where the most could be made.
  move_to_roomiest_type(core, ctx, ben);
  const auto& bj = s.jobs[ben];
  // What the cuts must free (victims.h; nothing where it fits now: a Retype above, and the next
  // placement takes it).
  const CutNeed cn = cut_need(core, book_, ben);
  if (cn.devices == 0) return false;
  const std::int64_t need = cn.devices;
  // Candidates: running jobs whose devices the guard lets go for `ben` (a lower tier; or its own
  // tier by the fair-share rules below).
  int shrink = -1;
  std::int64_t shrink_to = 0;
  CutNeed::Option shrink_frees;
  std::vector<int> candidates;
  const TenantShares& shares = book_.shares();
  auto tenant = [&](int j) { return core.job_info(j).tenant; };
  // Ties between victims that lose as much (victims.h: the lowest tier first, then the least
  // loss per device, then the mode): the tenant holding most of the tier, then the most devices.
  // (Not the fewest steps since the last checkpoint: a transparent cut loses none of them, and
  // with progress committed as orrery-core commits it, every second, that key picked the jobs
  // just restored from a cut, to cut them again: docs/scheduling.md, "Service as of now".)
  auto tie_key = [&](int v) { return std::tuple(-shares.held(s.jobs[v].tier, tenant(v)), -s.jobs[v].devices, v); };
  // Fair share among tenants inside the tier: `ben`'s tenant, with `ben` placed, would hold no
  // more than the tier's equal split, so it may take devices from a tenant that, without the
  // victim, would still hold at least as much (the move narrows the gap and never reverses it).
  const std::int64_t ben_held = shares.held(bj.tier, tenant(ben)) + bj.min_dev;
  const bool ben_poor = ben_held <= shares.equal_share(bj.tier);
  // `ben`'s class in its tier: 0 past the tier's starvation cap, else 1 + its LAS level.
  const std::int64_t ben_class = book_.key_of(ben)[0] % kClassesPerTier;
  const std::int64_t top_level = std::clamp<std::int64_t>(o_.las_levels, 1, kClassesPerTier - 1) - 1;
  // Past the cap a gang that one node can hold may cut as many jobs of its tier as it needs (each
  // by the cap's rule below): else a gang whose type its tier's one-device jobs keep full waits for
  // them all to end, whatever the cap (a premium gang of 8 on a type of one node: 37 days). Not a
  // larger one: gangs of hundreds cutting dozens of jobs each churned (docs/policies.md).
  const std::int64_t same_tier_most = ben_class == 0 && book_.placer(core).fits_one_node(ben)
                                          ? std::numeric_limits<std::int64_t>::max()
                                          : o_.max_same_tier_victims;
  // Inside the tier only if a rule below can let a job go (and, when at most one job of the tier
  // may be cut, only one that covers, alone, what the gang lacks).
  const bool same_tier_possible = o_.max_same_tier_victims > 0 && (ben_class <= top_level || ben_poor);
  const std::int64_t cap = o_.starvation_cap_ms[static_cast<std::size_t>(bj.tier)];
  // A search that finds no victims for `ben` is not repeated for it for search_backoff_ms: a
  // blocked gang would otherwise cost a walk over the running jobs every round, for nothing.
  auto nothing_found = [&] {
    if (static_cast<std::size_t>(ben) >= next_search_.size()) next_search_.resize(static_cast<std::size_t>(ben) + 1, 0);
    next_search_[static_cast<std::size_t>(ben)] = core.now_ms() + o_.search_backoff_ms;
    // orrery-core plans every 100 ms, so the search comes back when the backoff ends; a caller
    // that plans only after a change (orrery-sim) is asked for a round then.
    ctx.replan_at(next_search_[static_cast<std::size_t>(ben)]);
    return false;
  };
  bool waiting_to_pay = false;  // a cut inside the tier that will pay later (a round is asked for)
  bool shrink_deferred = false;  // a shrink inside the tier that will pay later
  // Nothing to search when the lower tiers together hold too few devices of the type and the tier
  // itself cannot let a job go (O(1): the book's counters).
  // "Tier" below is the rank (spec::rank): a premium job admitted beyond the reserve (spare) is a
  // lower tier to one admitted within it, and its equal only to the other spare ones; but a spare
  // `ben` past its tier's starvation cap may also cut one within the reserve that the spec lets it
  // (a lead in service of more than spec::kReserveLeadGpuMs: spec::precedes). Such a victim counts
  // as inside the tier (the limit on victims, the pay rule for shrinks), but the lead, not the LAS
  // levels that order `ben`'s equals, decides whether it may go.
  const std::int64_t ben_rank = spec::rank(d, bj);
  const std::int64_t low_rank = bj.spare == 1 && ben_class == 0 ? ben_rank - 1 : ben_rank;
  auto inside_tier = [&](int v) {
    const std::int64_t r = spec::rank(d, s.jobs[v]);
    return r == ben_rank || (r < ben_rank && r >= low_rank);
  };
  if (!same_tier_possible && book_.running_devices_below(bj.dtype, ben_rank) < need) return nothing_found();
  // The beneficiary's device type only (no other frees devices it can use), the lowest rank first.
  std::vector<int> pool;
  int looked = 0;
  for (std::int64_t rank = spec::kNumRanks - 1; rank >= low_rank && looked < o_.max_victim_candidates; --rank) {
    if (rank == ben_rank && !same_tier_possible) break;
    for (int v : book_.running(bj.dtype, rank)) {
      if (++looked > o_.max_victim_candidates) break;
      if (rank <= ben_rank && same_tier_most == 1 && s.jobs[v].devices < need) continue;
      pool.push_back(v);
    }
  }
  if (pool.empty()) return nothing_found();
  // Every device of the type has memory for `ben`'s workers (its level is the type's widest, a
  // fixed fact of the fleet): spec::fits_devices_of holds for every candidate (they hold devices of
  // the type only), without a walk over their devices.
  const FreeDeviceIndex& ix = book_.placer(core).index();
  const int ben_level = ix.level_for(bj.dtype, bj.mem);
  const bool fits_any = ben_level >= 0 && ben_level == ix.level_for(bj.dtype, 1);
  // A shrink inside the tier reorders equals: it is made only when what `ben` has waited outweighs
  // what the re-splice costs the shrunk job (cut_cost_s, repaid).
  auto pays = [&](const std::vector<int>& victims) {
    double cost = 0;
    for (int v : victims) cost += cut_cost_s(core, v);
    if (repaid(core, ctx, ben, cost)) return true;
    waiting_to_pay = true;
    return false;
  };
  for (int v : pool) {
    const auto& vj = s.jobs[v];
    const std::int64_t v_rank = spec::rank(d, vj);  // (the book files by rank, but it may change meanwhile)
    // A lower tier, or a job of the same tier that has had a longer turn: a higher LAS level than
    // `ben`'s (Tiresias' queues); for `ben` past its tier's starvation cap, any job with more than
    // twice its attained service that has run at least the cap since it started (a quantum: two
    // starving jobs do not take turns faster, and each turn at least doubles what the victim has
    // had over `ben`: PlannerOptions::starvation_cap_ms); or (fair share) a job of a tenant above
    // the tier's split.
    auto turn_with = [&](std::int64_t v_attained) {
      return (ben_class > 0 && 1 + las_level(v_attained) > ben_class) ||
             (ben_class == 0 && v_attained > 2 * bj.attained && core.now_ms() - book_.running_since(v) >= cap) ||
             (ben_poor && tenant(v) != tenant(ben) && shares.held(vj.tier, tenant(v)) - vj.devices >= ben_held);
    };
    // Weighed against `ben`'s with its service as of now (PlanContext::unreported_gpu_ms): the
    // committed service first, the unreported part only where that decides (more service never
    // takes a turn away).
    const bool same_tier_turn = v_rank == ben_rank && (turn_with(vj.attained) || [&] {
                                  const std::int64_t unreported = ctx.unreported_gpu_ms(v);
                                  return unreported > 0 && turn_with(vj.attained + unreported);
                                }());
    // A job within the reserve, for a spare `ben`: the spec's lead decides (favoured, below).
    const bool reserve_turn = v_rank < ben_rank && v_rank >= low_rank;
    if ((v_rank < ben_rank && !reserve_turn) || (v_rank == ben_rank && !same_tier_turn) || ctx.cut_pending(v)) continue;
    if (protected_now(core, book_, v)) continue;  // within its min_runtime_ms (victims.h)
    // Placed overdue: a higher tier does not cut it before it has run its quantum (its own tier
    // by the rules above, as any job of it).
    if (v_rank > ben_rank && in_overdue_quantum(core, v)) continue;
    // A job placed past its tier's starvation cap runs at least the cap before its tier may cut it
    // again: else the next newcomer of a lower LAS level would cut it at once, and the cap would
    // bound its waits but not its progress.
    if (v_rank <= ben_rank && quantum_.count(v) != 0) {
      if (core.now_ms() - book_.running_since(v) < o_.starvation_cap_ms[static_cast<std::size_t>(vj.tier)]) continue;
      quantum_.erase(v);
    }
    // The guard weighs committed service inside the tier (a spare job and one within the reserve
    // by their lead: spec::precedes): a victim's is committed as of now where the committed figure
    // alone does not let it go (committing more never makes the guard refuse). Equals were weighed
    // as of now above (same_tier_turn); the others are weighed here, so that only a job the guard
    // will then let go is committed (PlanContext::freshen).
    if (vj.tier == bj.tier && !spec::favoured(d, s, ben, v) &&
        (v_rank == ben_rank || precedes_as_of_now(d, bj, vj, ctx.unreported_gpu_ms(v))))
      ctx.freshen(v);
    if (!spec::favoured(d, s, ben, v) || (!fits_any && !spec::fits_devices_of(d, s, ben, v))) continue;
    candidates.push_back(v);
    // A shrink only of a transparent job (INV-MODE); inside the tier only when it pays (below).
    if (shrink >= 0 || core.job_info(v).mode != spec::Preemption::kTransparent) continue;
    // The largest device count the job may shrink to (a divisor of its world within the splice
    // limit, at least min_devices) that frees what the beneficiary needs (the whole gang from a
    // job outside the region the free devices were counted in: victims.h).
    // (By splice factor f, the smallest first: a device count is world / f.)
    // (None where what is left after freeing it is below its min_devices.)
    if (vj.devices <= vj.min_dev) continue;  // at its smallest already (every option frees >= 1)
    std::int64_t to = 0;
    const CutNeed::Option opt = cn.for_victim(core, book_, v);
    const std::int64_t frees = opt.devices;
    if (vj.devices - frees < vj.min_dev) continue;
    for (std::int64_t f = 1, c = vj.world; f <= spec::kSpliceLimit && to == 0; c = vj.world / ++f)
      if (vj.world % f == 0 && c <= vj.devices - frees && c >= vj.min_dev) to = c;
    if (to == 0) continue;
    if (inside_tier(v) && !pays({v})) {
      shrink_deferred = true;  // it will pay: a preemption inside the tier would cost as much
      continue;
    }
    shrink = v;
    shrink_to = to;
    shrink_frees = opt;
  }
  // A shrink (the first candidate, lowest tier first, that can free what the gang needs):
  // nothing is lost, the job runs on with more workers a device.
  if (shrink >= 0 && shrink_for(core, ctx, shrink, shrink_to, ben)) {
    claim_free(core, book_, ben, cn, shrink_frees);
    return true;
  }
  // Else preemptions: the victims that lose least (victims.h), as many as cover what the
  // beneficiary's smallest gang needs (or none), the lowest tier first.
  // None where the candidates together hold less than the least any option needs: no sort, no
  // cover (on the 1M synthetic run, 154,114 of 401,740 searches, docs/performance.md).
  std::int64_t candidates_hold = 0;
  for (int v : candidates) candidates_hold += s.jobs[v].devices;
  if (candidates_hold < need) return waiting_to_pay ? false : nothing_found();
  {  // each tie key computed once
    std::vector<std::pair<decltype(tie_key(0)), int>> keyed;
    keyed.reserve(candidates.size());
    for (int v : candidates) keyed.emplace_back(tie_key(v), v);
    std::sort(keyed.begin(), keyed.end());
    for (std::size_t i = 0; i < keyed.size(); ++i) candidates[i] = keyed[i].second;
  }
  CutNeed::Option chosen;
  auto cover = [&] {
    std::vector<VictimCandidate> vc;
    vc.reserve(candidates.size());
    for (int v : candidates)
      vc.push_back({v, s.jobs[v].devices, loss_per_device_ms(core, book_, v),
                    mode_rank(core.job_info(v).mode), spec::kNumRanks - 1 - spec::rank(d, s.jobs[v])});
    return cover_need(core, book_, vc, cn, &chosen);
  };
  auto victims = cover();
  // Inside a tier a preemption only reorders equals (fair share): it pays when it delays fewer
  // jobs than it helps. Cutting many small jobs for one large gang lengthens the average job's
  // completion and churns; then only lower tiers' jobs are cut (but for a gang that one node
  // holds, past its tier's starvation cap: same_tier_most above).
  // (The cost rule is not applied to these cuts themselves: weighed like shrinks, they made the
  // average JCT 1.7x longer on the Alibaba trace on 8x8 GPUs at load 0.7, docs/scheduling.md; but
  // while a shrink inside the tier waits to pay, no job of the tier is cut instead.)
  if (std::any_of(victims.begin(), victims.end(), inside_tier) &&
      (static_cast<std::int64_t>(victims.size()) > same_tier_most || shrink_deferred)) {
    std::erase_if(candidates, inside_tier);
    victims = cover();
  }
  if (victims.empty() && !waiting_to_pay) return nothing_found();
  if (preempt_for(core, ctx, book_, victims, ben) == 0) return false;
  claim_free(core, book_, ben, cn, chosen);
  return true;
}

void OrreryPlanner::grow(const SchedulerCore& core, PlanContext& ctx) {
  // Elastic jobs grow into devices of a type that nothing waits for (a waiting job would have them
  // first), the highest tier first. The candidates are taken first: a commit changes the book.
  // Nothing to do where every device type has jobs waiting (the usual case under load): no walk.
  if (book_.growable().empty() || !book_.some_type_without_waiting(core)) return;
  std::vector<int> candidates;
  int looked = 0;
  for (const auto& [tier, j] : book_.growable()) {
    if (++looked > 4 * o_.max_grows_per_round) break;
    if (!ctx.cut_pending(j) && book_.waiting_of_type(core.cluster().jobs[j].dtype) == 0) candidates.push_back(j);
    if (static_cast<int>(candidates.size()) >= o_.max_grows_per_round) break;
  }
  std::set<std::int64_t> full;  // device types with no room left for a grow this round
  for (int j : candidates) {
    const auto& jv = core.cluster().jobs[j];
    if (full.count(jv.dtype) != 0 || core.state(j) != spec::JobState::kRunning) continue;
    auto p = book_.placer(core).propose(j, EventKind::kResizeUp);
    if (p.kind != Proposal::Kind::kOk) {
      full.insert(jv.dtype);
      continue;
    }
    if (static_cast<std::int64_t>(p.decision.devices.size()) <= jv.devices) continue;
    ctx.propose(p.decision);  // checked by the placer
  }
}

}  // namespace orrery::core::policy
