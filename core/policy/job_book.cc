#include "core/policy/job_book.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <tuple>

#include "core/policy/type_speed.h"

namespace orrery::core::policy {

using spec::EventKind;
using spec::JobState;

namespace {

std::int64_t entered(const SchedulerCore& core, std::int64_t since_ms) {
  return since_ms < 0 ? core.now_ms() : std::min(since_ms, core.now_ms());
}

}  // namespace

void JobBook::update(const SchedulerCore& core, int job, std::int64_t since_ms) {
  if (job < 0) return;
  const auto i = static_cast<std::size_t>(job);
  if (i >= where_.size()) {
    where_.resize(i + 1, Where::kNone);
    key_of_.resize(where_.size());
    wait_since_.resize(where_.size(), 0);
    run_since_.resize(where_.size(), 0);
    run_epoch_.resize(where_.size(), -1);
    run_devices_.resize(where_.size(), 0);
    run_rank_.resize(where_.size(), 0);
    wait_type_.resize(where_.size(), 0);
    wait_size_.resize(where_.size(), 0);
    if (by_tenant_) held_of_.resize(where_.size(), 0);
  }
  const auto& jv = core.cluster().jobs[job];
  // Still Running, the same incarnation on as many devices (its progress or a periodic checkpoint
  // committed: most commits): filed as it is. Taking it out of the sets and back in was a tenth
  // of a 1M-job run.
  if (where_[i] == Where::kRunning && core.state(job) == JobState::kRunning && run_epoch_[i] == jv.epoch &&
      run_devices_[i] == jv.devices && (!by_tenant_ || held_of_[i] == jv.devices) &&
      (cut_for_.empty() || cut_for_.count(job) == 0))
    return;
  const int tenant = by_tenant_ ? core.job_info(job).tenant : 0;
  auto& w = where_[i];
  const Where was = w;
  switch (w) {
    case Where::kSubmitted: submitted_.erase(job); break;
    case Where::kWaiting:  // under the type it was filed with (a Retype changes the job's)
      lanes_.remove(lane_class(key_of_[i]), wait_type_[i], tenant, {key_of_[i], job});
      if (!core.job_info(job).types.empty()) movable_[wait_type_[i]].erase({key_of_[i], job});
      size_set(wait_type_[i], wait_size_[i]).erase({key_of_[i], job});
      --waiting_by_type_[wait_type_[i]];
      if (by_tenant_) shares_.add_waiting(jv.tier, tenant, -1);
      break;
    case Where::kRunning:
      running_.erase(job);
      running_by_[{jv.dtype, run_rank_[i]}].erase(job);
      growable_.erase({jv.tier, job});
      running_devices_[{jv.dtype, run_rank_[i]}] -= run_devices_[i];
      run_devices_[i] = 0;
      break;
    case Where::kNone: break;
  }
  w = Where::kNone;
  if (by_tenant_) {  // whatever the state: the devices the job holds now
    shares_.add_held(jv.tier, tenant, jv.devices - held_of_[i]);
    held_of_[i] = jv.devices;
  }
  if (auto c = cut_for_.find(job); c != cut_for_.end() && core.state(job) != JobState::kCheckpointing) {
    --helped_[static_cast<std::size_t>(c->second)];
    cut_for_.erase(c);
  }
  switch (core.state(job)) {
    case JobState::kSubmitted:
      submitted_.insert(job);
      w = Where::kSubmitted;
      break;
    case JobState::kQueued:
    case JobState::kSuspended:
      // A job an operator suspended waits for `orrery resume` (Release), not for devices: no
      // planner places it, resumes it or frees devices for it meanwhile.
      if (jv.hold != 0) break;
      // Already waiting (a re-file): unchanged.
      if (was != Where::kWaiting) wait_since_[i] = entered(core, since_ms);
      key_of_[i] = key_(core, job);
      wait_type_[i] = jv.dtype;
      lanes_.add(lane_class(key_of_[i]), jv.dtype, tenant, {key_of_[i], job});
      if (!core.job_info(job).types.empty()) movable_[jv.dtype].insert({key_of_[i], job});
      wait_size_[i] = static_cast<std::int8_t>(size_class(jv.min_dev));
      size_set(jv.dtype, wait_size_[i]).insert({key_of_[i], job});
      ++waiting_by_type_[jv.dtype];
      if (by_tenant_) shares_.add_waiting(jv.tier, tenant, 1);
      w = Where::kWaiting;
      break;
    case JobState::kRunning:
      if (run_epoch_[i] != jv.epoch) {  // a new incarnation: it starts now
        run_epoch_[i] = jv.epoch;
        run_since_[i] = entered(core, since_ms);
      }
      running_.insert(job);
      run_rank_[i] = spec::rank(spec::Concrete{}, jv);
      running_by_[{jv.dtype, run_rank_[i]}].insert(job);
      if (jv.devices < jv.max_dev && core.job_info(job).mode == spec::Preemption::kTransparent)
        growable_.insert({jv.tier, job});
      run_devices_[i] = jv.devices;
      running_devices_[{jv.dtype, run_rank_[i]}] += jv.devices;
      w = Where::kRunning;
      break;
    default: break;
  }
}

void JobBook::refile(const SchedulerCore& core, int job) {
  if (is_waiting(job)) update(core, job);  // update() recomputes the key, keeping the wait clock
}

void JobBook::admit_all(const SchedulerCore& core, PlanContext& ctx) {
  // Every submitted job is admitted; the core counts a premium job against the premium reserve
  // when it fits, else admits it spare (spec::EffectAdmit). A copy: a commit refiles the job.
  const std::vector<int> ids(submitted_.begin(), submitted_.end());
  for (int j : ids) {
    Decision d;
    d.event = EventKind::kAdmit;
    d.origin = spec::Origin::kPlanner;
    d.job = j;
    if (core.accepts(d)) ctx.propose(d);
  }
}

// One round's budget of failed placements per device type (place_waiting); premium jobs may have
// their own (PlannerOptions::premium_round_budget).
struct JobBook::Tries {
  // split: premium jobs count against a budget of their own (else every job counts against one).
  Tries(int types, int limit, int premium_limit, bool split)
      : failed(static_cast<std::size_t>(types), 0), failed_premium(static_cast<std::size_t>(types), 0),
        types(types), limit(limit), premium_limit(premium_limit), split(split) {}
  std::vector<int> failed, failed_premium;
  std::vector<double> speed;  // by device type (PlannerOptions::type_speed); empty: none given
  int types;
  int limit, premium_limit;  // failures per type before the type counts as full (for premium jobs, if split)
  bool split;
  int full = 0;              // types full for every job
  int placed = 0;
  bool over() const { return full >= types; }
  bool type_full(std::size_t type, bool premium) const {
    return split && premium ? failed_premium[type] >= premium_limit : failed[type] >= limit;
  }
  bool type_full(std::size_t type) const { return type_full(type, false) && type_full(type, true); }
  void fail(std::size_t type, bool premium) {
    const bool was = type_full(type);
    ++(split && premium ? failed_premium : failed)[type];
    if (!was && type_full(type)) ++full;
  }
};

bool JobBook::try_place(const SchedulerCore& core, PlanContext& ctx, int j, Tries& t,
                        const std::function<void(int)>& blocked) {
  const auto& jv = core.cluster().jobs[j];
  const auto type = static_cast<std::size_t>(jv.dtype);
  const bool premium = spec::is(spec::Concrete{}, jv.tier, spec::Tier::kPremium);
  if (t.type_full(type, premium) || ctx.cut_pending(j)) return false;
  if (static_cast<std::size_t>(j) >= tried_in_.size()) tried_in_.resize(static_cast<std::size_t>(j) + 1, 0);
  tried_in_[static_cast<std::size_t>(j)] = round_;  // its other types are offered below if they can be
  const Proposal* own = nullptr;
  if (place_in_order(core, ctx, j, t, own)) return true;
  // Moved to a faster type, and (against the placer's plan: the index and the core disagreed)
  // not placed there: it waits on that type now, which was charged.
  if (!own) return false;
  const Proposal& p = *own;
  if (p.kind != Proposal::Kind::kOk) ctx.note(j, p.why);
  // Room can be made only for a job that fits the fleet at all (on the type it has now: a type
  // it was just moved to fits it, as the placer planned).
  if (blocked && (p.kind == Proposal::Kind::kRetryLater || jv.dtype != static_cast<std::int64_t>(type))) blocked(j);
  t.fail(type, premium);
  return false;
}

bool JobBook::place_in_order(const SchedulerCore& core, PlanContext& ctx, int j, Tries& t,
                             const Proposal*& own) {
  const auto& jv = core.cluster().jobs[j];
  const std::int64_t type = jv.dtype;
  // A faster type of its spec where it fits now first (PlannerOptions::type_speed).
  bool placed = !t.speed.empty() && place_on_another_type(core, ctx, j, t, /*faster_only=*/true);
  if (!placed && jv.dtype == type) {
    const auto ev = core.state(j) == JobState::kQueued ? EventKind::kPlace : EventKind::kResume;
    own = &placer(core).propose_kept(j, ev);
    // A kOk proposal is one the core accepts now: the placer asked it (gang_placer.h).
    placed = own->kind == Proposal::Kind::kOk && ctx.propose(own->decision);
    if (!placed && own->kind != Proposal::Kind::kOk) placed = place_on_another_type(core, ctx, j, t, /*faster_only=*/false);
  }
  if (placed) ++t.placed;
  return placed;
}

bool JobBook::may_retype(const SchedulerCore& core, int job) {
  if (core.job_info(job).types.empty() || helped(job)) return false;
  GangPlacer& pl = placer(core);
  pl.sync();
  return !pl.index().has_reservations(job);
}

bool JobBook::place_on_another_type(const SchedulerCore& core, PlanContext& ctx, int j, Tries& t, bool faster_only) {
  if (!may_retype(core, j)) return false;
  const auto& spec_types = core.job_info(j).types;
  GangPlacer& pl = placer(core);
  const FreeDeviceIndex& ix = pl.index();
  const auto& jv = core.cluster().jobs[j];
  const bool premium = spec::is(spec::Concrete{}, jv.tier, spec::Tier::kPremium);
  const auto ev = core.state(j) == JobState::kQueued ? EventKind::kPlace : EventKind::kResume;
  // The spec's order, or by speed (the fastest first; the spec's order among equals).
  std::vector<std::int32_t> types(spec_types.begin(), spec_types.end());
  auto speed = [&](std::int64_t type) { return t.speed.empty() ? 1.0 : t.speed[static_cast<std::size_t>(type)]; };
  if (!t.speed.empty())
    std::stable_sort(types.begin(), types.end(), [&](std::int32_t a, std::int32_t b) { return speed(a) > speed(b); });
  const double own_speed = speed(jv.dtype);
  for (const std::int32_t type : types) {
    // The faster types first (faster_only), and after the job's own only the others: the faster
    // ones were tried already (try_place), on the same state.
    if (faster_only && speed(type) <= own_speed) break;
    if (!faster_only && speed(type) > own_speed) continue;
    if (type == jv.dtype || t.type_full(static_cast<std::size_t>(type), premium)) continue;
    // Free devices enough (O(1)), then whether the gang fits there now, by the placer's own rules:
    // a move to a type where it would not fit either would only move it back and forth.
    const int level = ix.level_for(type, jv.mem);
    if (level < 0 || ix.total(level, ix.fleet_scope()) < jv.min_dev || !pl.fits_on(j, ev, type)) continue;
    const Decision r = Decision::retype(j, core.fleet().device_types[static_cast<std::size_t>(type)]);
    if (!core.accepts(r) || !ctx.propose(r)) continue;
    auto p = pl.propose(j, ev);
    if (p.kind == Proposal::Kind::kOk && ctx.propose(p.decision)) return true;
    t.fail(static_cast<std::size_t>(type), premium);  // it waits on that type now
    return false;
  }
  return false;
}

int JobBook::place_waiting(const SchedulerCore& core, PlanContext& ctx, const PlannerOptions& o,
                           bool strict, const std::function<void(int)>& blocked, bool premium_budget) {
  const auto types = static_cast<std::int64_t>(core.fleet().device_types.size());
  const int limit = strict ? 1 : o.max_failed_tries_per_type;
  Tries t(static_cast<int>(types), limit, o.premium_round_budget, premium_budget && !strict);
  if (!round_begun_) {  // else begin_round() cleared them, before earlier cuts
    claimed_.clear();
    claimed_node_.clear();
  }
  round_begun_ = false;
  if (++round_ == 0) {  // wrapped: no stale mark may equal a round again
    std::fill(tried_in_.begin(), tried_in_.end(), 0);
    round_ = 1;
  }
  if (!o.type_speed.empty()) t.speed = speeds_by_type(core.fleet(), o.type_speed);
  // Class by class, a k-way merge of the class's lanes by their next job: by tenant, the tenant
  // holding fewest devices of the job's tier first (its share when its lane is taken up again),
  // then the planner's order.
  struct Head {
    std::int64_t held;
    WaitEntry next;
    std::size_t lane;
    bool operator>(const Head& h) const { return std::tie(held, next) > std::tie(h.held, h.next); }
  };
  std::vector<WaitLanes::Lane> lanes;
  std::vector<std::set<WaitEntry>::const_iterator> cursor;
  std::vector<std::int64_t> lane_type;
  std::vector<Head> heap;
  auto is_premium = [&](int j) { return spec::is(spec::Concrete{}, core.cluster().jobs[j].tier, spec::Tier::kPremium); };
  auto share = [&](int j, int tenant) {
    return by_tenant_ ? shares_.held(core.cluster().jobs[j].tier, tenant) : 0;
  };
  for (std::int64_t cls = 0; cls < lanes_.classes() && !t.over(); ++cls) {
    lanes.clear();
    cursor.clear();
    lane_type.clear();
    heap.clear();
    for (std::int64_t type = 0; type < types; ++type) {
      if (t.type_full(static_cast<std::size_t>(type))) continue;
      for (const auto& lane : lanes_.lanes(cls, type)) {
        const WaitEntry& first = *lane.jobs->begin();
        // By tenant a class holds jobs of one tier: a type full for it is skipped whole (every
        // lane of the class would be popped once for nothing; a quarter of a 300k-job run).
        if (by_tenant_ && t.type_full(static_cast<std::size_t>(type), is_premium(first.second))) break;
        heap.push_back({share(first.second, lane.tenant), first, lanes.size()});
        lanes.push_back(lane);
        cursor.push_back(lane.jobs->begin());
        lane_type.push_back(type);
      }
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<>());
    auto drop_top = [&] {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      heap.pop_back();
    };
    // The top's lane moves on to its next job: one sift-down, not a pop and a push (the keys are
    // unique, so the order is the same).
    auto replace_top = [&](const Head& h) {
      const std::size_t n = heap.size();
      std::size_t i = 0;
      for (std::size_t c = 1; c < n; c = 2 * i + 1) {
        if (c + 1 < n && heap[c] > heap[c + 1]) ++c;
        if (!(h > heap[c])) break;
        heap[i] = heap[c];
        i = c;
      }
      heap[i] = h;
    };
    while (!heap.empty() && !t.over()) {
      const std::size_t l = heap.front().lane;
      const int j = cursor[l]->second;
      if (t.type_full(static_cast<std::size_t>(lane_type[l]), is_premium(j))) {  // for its tier
        drop_top();
        continue;
      }
      // Past j before j is proposed: a proposal changes only its own job's entry (a Retype files it
      // under another type, where the placer planned it to fit: it is placed at once).
      ++cursor[l];
      try_place(core, ctx, j, t, blocked);
      if (cursor[l] != lanes[l].jobs->end())
        replace_top({share(cursor[l]->second, lanes[l].tenant), *cursor[l], l});
      else
        drop_top();
    }
  }
  if (!strict && o.backfill) backfill(core, ctx, t, limit);
  // Jobs whose spec names several types, waiting on a type that ran out of tries this round: the
  // walk above passed them over with their type, and a job behind a congested type's queue would
  // never be offered the others, however much room they have (a basic job waited 135 days so on
  // a variant of the Alibaba trace). The first ones the walk did not try, in order, up to a
  // type's budget of tries, are offered the other types now (nothing is cut for them here). A
  // type's set is looked at only when the type is full for a tier, and at most 4 x its budget of
  // entries (those the walk tried, or that may not move now, are passed over).
  if (!strict && !t.over()) {
    std::vector<std::pair<WaitEntry, int>> offer;
    for (const auto& [type, jobs] : movable_) {
      const auto ty = static_cast<std::size_t>(type);
      if (!t.type_full(ty, false) && !t.type_full(ty, true)) continue;  // every job of it was tried
      int n = 0, looked = 0;
      for (const auto& e : jobs) {
        if (n >= limit || ++looked > 4 * limit) break;
        const int j = e.second;
        const auto& jv = core.cluster().jobs[j];
        const bool premium = spec::is(spec::Concrete{}, jv.tier, spec::Tier::kPremium);
        if (!t.type_full(ty, premium) || ctx.cut_pending(j)) continue;  // tried above, in the walk
        if (static_cast<std::size_t>(j) < tried_in_.size() && tried_in_[static_cast<std::size_t>(j)] == round_) continue;
        if (!may_retype(core, j)) continue;
        offer.emplace_back(e, j);
        ++n;
      }
    }
    // In the planner's order across types. (Collected first: a Retype files the job under
    // another type, in the sets walked above.)
    std::sort(offer.begin(), offer.end());
    for (const auto& [e, j] : offer) {
      if (t.over()) break;
      if (!is_waiting(j)) continue;
      // Never tried this round: the faster types first too (PlannerOptions::type_speed).
      if ((!t.speed.empty() && place_on_another_type(core, ctx, j, t, /*faster_only=*/true)) ||
          (is_waiting(j) && place_on_another_type(core, ctx, j, t, /*faster_only=*/false)))
        ++t.placed;
    }
  }
  return t.placed;
}

int JobBook::size_class(std::int64_t min_dev) {
  if (min_dev <= 1) return 0;
  return std::min(kSizeClasses - 1, static_cast<int>(std::bit_width(static_cast<std::uint64_t>(min_dev - 1))));
}

int JobBook::backfill(const SchedulerCore& core, PlanContext& ctx, Tries& t, int limit) {
  // The walk stops a type after its budget of failed tries, and on a busy fleet those are the
  // gangs at the head of the order that fit nowhere yet: every job behind them waited, whatever
  // room was open, until they started (1M synthetic jobs at an offered load of 0.9: 57.5 % of the
  // fleet busy while basic jobs waited 22 h on average; docs/scheduling.md, "Backfill behind gangs
  // that fit nowhere"). Here, per type, the first jobs in the planner's order (not by tenant)
  // whose smallest gang is at most the open devices of the roomiest region, less those cuts
  // counted on this round, are placed; each size class's set gives its first candidate, so a round
  // costs what it places and what it tries, not a walk past the gangs. Bounded by `limit` failed
  // proposals and 4 x `limit` entries passed over (tried this round, too large, or being cut), per
  // type.
  GangPlacer& pl = placer(core);
  const FreeDeviceIndex& ix = pl.index();
  const int placed_before = t.placed;
  if (t.types > 0) size_set(t.types - 1, kSizeClasses - 1);  // no set moves while iterated below

  for (std::int64_t type = 0; type < static_cast<std::int64_t>(t.types); ++type) {
    const auto ty = static_cast<std::size_t>(type);
    if (!t.type_full(ty, false) && !t.type_full(ty, true)) continue;  // the walk tried every job of it
    auto room = [&](int level) {
      pl.sync();
      std::int64_t best = 0;
      for (int r = 0; r < ix.regions(); ++r)
        best = std::max(best, ix.total(level, ix.region_scope(r)) - claimed_free(type, r));
      return best - claimed_free(type, -1);
    };
    auto claimed_total = [&](std::int64_t ty2) {
      std::int64_t n = 0;
      for (const auto& [key, devices] : claimed_)
        if (key.first == ty2) n += devices;
      return n;
    };
    const int widest = ix.level_for(type, 1);
    if (widest < 0) continue;
    std::int64_t open = room(widest);
    std::array<std::set<WaitEntry>::const_iterator, kSizeClasses> at{}, end{};
    std::array<bool, kSizeClasses> has{};
    for (int c = 0; c < kSizeClasses; ++c) {
      const std::set<WaitEntry>& set = size_set(type, c);
      if (set.empty()) continue;
      at[static_cast<std::size_t>(c)] = set.begin();
      end[static_cast<std::size_t>(c)] = set.end();
      has[static_cast<std::size_t>(c)] = true;
    }
    int fails = 0, passed = 0;
    while (open > 0 && fails < limit && passed < 4 * limit) {
      // The first entry in order among the size classes that could fit `open` devices.
      int best = -1;
      for (int c = 0; c < kSizeClasses; ++c) {
        const auto k = static_cast<std::size_t>(c);
        if (!has[k] || at[k] == end[k] || (c > 0 && (std::int64_t{1} << (c - 1)) + 1 > open)) continue;
        if (best < 0 || *at[k] < *at[static_cast<std::size_t>(best)]) best = c;
      }
      if (best < 0) break;
      const auto b = static_cast<std::size_t>(best);
      const int j = at[b]->second;
      ++at[b];  // past j before j is proposed: a proposal changes only its own job's entry
      const auto& jv = core.cluster().jobs[j];
      const bool tried = static_cast<std::size_t>(j) < tried_in_.size() && tried_in_[static_cast<std::size_t>(j)] == round_;
      const int level = ix.level_for(type, jv.mem);
      // The open devices of one region (of the fleet for a job that may span regions) are what a
      // gang can take, unless devices are reserved for it (its cuts are over): the placer decides.
      auto may_fit = [&] {
        if (ix.has_reservations(j)) return true;
        if (pl.one_node(j)) {  // a gang kept to one node: what one node has open, at most
          pl.sync();
          if (jv.min_dev > ix.most_open_on_a_node(level)) return false;
        }
        if (pl.cross_region(j)) {
          pl.sync();
          return jv.min_dev <= ix.total(level, ix.fleet_scope()) - claimed_total(type);
        }
        return jv.min_dev <= (level == widest ? open : room(level));
      };
      if (tried || ctx.cut_pending(j) || level < 0 || !may_fit()) {
        ++passed;
        continue;
      }
      if (static_cast<std::size_t>(j) >= tried_in_.size()) tried_in_.resize(static_cast<std::size_t>(j) + 1, 0);
      tried_in_[static_cast<std::size_t>(j)] = round_;
      // As the walk places (try_place), nothing cut.
      const Proposal* own = nullptr;
      if (place_in_order(core, ctx, j, t, own))
        open = room(widest);
      else
        ++fails;
    }
  }
  return t.placed - placed_before;
}

}  // namespace orrery::core::policy
