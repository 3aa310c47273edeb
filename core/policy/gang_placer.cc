#include "core/policy/gang_placer.h"

#include <algorithm>

#include "spec/model.h"

namespace orrery::core::policy {

using spec::EventKind;
using spec::JobState;

namespace {

Proposal answer(Proposal::Kind kind, Why why) {
  Proposal p;
  p.kind = kind;
  p.why = std::move(why);
  return p;
}

}  // namespace

GangPlacer::GangPlacer(const SchedulerCore& core) : core_(core), index_(core), fit_(core.fleet()) {
  const auto n = static_cast<std::size_t>(index_.nodes());
  adj_stamp_.assign(n, 0);
  excl_stamp_.assign(n, 0);
  tag_seen_.assign(n, 0);
  adj_eff_.assign(n, 0);
  tag_usable_.assign(n, 0);
  held_on_.assign(n, 0);
  for (const bool cross : {false, true})
    miss_answer_[cross ? 1 : 0] = answer(Proposal::Kind::kRetryLater, retry_later_why(cross));
}

void GangPlacer::allow_cross_region(int job, bool allowed) {
  if (job < 0) return;
  if (cross_region_.size() <= static_cast<std::size_t>(job))
    cross_region_.resize(static_cast<std::size_t>(job) + 1, 0);
  cross_region_[static_cast<std::size_t>(job)] = allowed;
}

bool GangPlacer::fits_one_node(int job) const {
  if (job < 0 || job >= core_.cluster().num_jobs()) return false;
  const auto& jv = core_.cluster().jobs[static_cast<std::size_t>(job)];
  const int level = index_.level_for(jv.dtype, jv.mem);
  return level >= 0 && jv.min_dev <= index_.max_per_node(level);
}

Proposal GangPlacer::propose(int job, EventKind event, int want, int avoid_scope, int avoid_node) {
  if (const Proposal* miss = remembered_miss(job, event, want, avoid_scope, avoid_node)) return *miss;
  return plan_checked(job, event, want);
}

const Proposal& GangPlacer::propose_kept(int job, EventKind event) {
  if (const Proposal* miss = remembered_miss(job, event, -1, -1, -1)) return *miss;
  kept_ = plan_checked(job, event, -1);
  return kept_;
}

const Proposal* GangPlacer::remembered_miss(int job, EventKind event, int want, int avoid_scope, int avoid_node) {
  ++stats_.proposals;
  index_.sync();
  avoid_scope_ = avoid_scope > index_.fleet_scope() && avoid_scope < index_.scopes() ? avoid_scope : -1;
  avoid_node_ = avoid_node >= 0 && avoid_node < index_.nodes() ? avoid_node : -1;
  rememberable_ = want <= 0 && avoid_scope_ < 0 && avoid_node_ < 0 &&
                  (event == EventKind::kPlace || event == EventKind::kResume);
  if (!rememberable_ || !missed_again(job, event)) return nullptr;
  ++stats_.misses_remembered;
  return &miss_answer_[misses_[static_cast<std::size_t>(job)].cross ? 1 : 0];
}

Proposal GangPlacer::plan_checked(int job, EventKind event, int want) {
  retry_later_ = false;
  Proposal p = plan(job, event, want);
  if (rememberable_ && retry_later_ && p.kind == Proposal::Kind::kRetryLater) remember_miss(job, event);
  if (p.kind == Proposal::Kind::kOk) {
    if (auto why = check(p.decision); !why.empty()) {
      // The index chose devices the state does not allow: a bug. Never propose it; read the
      // state again and plan once more.
      ++stats_.repairs;
      index_.rebuild();
      p = plan(job, event, want);
      if (p.kind == Proposal::Kind::kOk) {
        if (auto again = check(p.decision); !again.empty())
          return answer(Proposal::Kind::kRetryLater,
                        "the placement index disagrees with the core's state (a bug): " + again);
      }
    }
  }
  if (p.kind == Proposal::Kind::kOk) ++stats_.placed;
  return p;
}

bool GangPlacer::fits_on(int job, EventKind event, std::int64_t type) {
  index_.sync();
  avoid_scope_ = avoid_node_ = -1;
  retry_later_ = false;
  type_override_ = type;
  const Proposal p = plan(job, event, -1);
  type_override_ = -1;
  return p.kind == Proposal::Kind::kOk;
}

GangPlacer::Shortfall GangPlacer::shortfall(int job, EventKind event) {
  index_.sync();
  avoid_scope_ = avoid_node_ = -1;
  retry_later_ = false;
  shortfall_ = {};
  count_tags_ = true;  // the reservations free to the job counted even where it cannot fit
  const Proposal p = plan(job, event, -1);
  count_tags_ = false;
  if (p.kind == Proposal::Kind::kOk) return {0, -1, {}};
  return p.kind == Proposal::Kind::kRetryLater ? shortfall_ : Shortfall{};
}

bool GangPlacer::missed_again(int job, EventKind event) {
  if (job < 0 || static_cast<std::size_t>(job) >= misses_.size()) return false;
  const Miss& m = misses_[static_cast<std::size_t>(job)];
  if (m.epoch < 0 || m.event != event) return false;
  const auto& jv = core_.cluster().jobs[static_cast<std::size_t>(job)];
  const JobState needs = event == EventKind::kPlace ? JobState::kQueued : JobState::kSuspended;
  const bool cross = static_cast<std::size_t>(job) < cross_region_.size() && cross_region_[static_cast<std::size_t>(job)];
  const int level = index_.level_for(jv.dtype, jv.mem);
  if (m.epoch != jv.epoch || m.dtype != jv.dtype || core_.state(job) != needs || m.cross != cross || level < 0)
    return false;
  if (m.deficit > 0) return index_.supply(level) - m.supply < static_cast<std::uint64_t>(m.deficit);
  return m.supply == index_.supply(level) && m.host == (jv.min_dev < jv.world ? index_.host_supply() : 0);
}

void GangPlacer::remember_miss(int job, EventKind event) {
  if (static_cast<std::size_t>(job) >= misses_.size()) misses_.resize(static_cast<std::size_t>(job) + 1);
  const auto& jv = core_.cluster().jobs[static_cast<std::size_t>(job)];
  Miss& m = misses_[static_cast<std::size_t>(job)];
  m.supply = index_.supply(level_);
  // Fewer devices than workers splice, and spliced workers need host memory (the guard's rule).
  m.host = jv.min_dev < jv.world ? index_.host_supply() : 0;
  m.epoch = jv.epoch;
  m.dtype = static_cast<std::int32_t>(jv.dtype);
  m.deficit = static_cast<std::int32_t>(std::clamp<std::int64_t>(deficit_, 0, INT32_MAX));
  m.event = event;
  m.cross = static_cast<std::size_t>(job) < cross_region_.size() && cross_region_[static_cast<std::size_t>(job)];
}

Why GangPlacer::retry_later_why(bool cross) const {
  static const std::string anywhere = "not enough free devices of the job's type now";
  static const std::string in_region = anywhere + " in any one region";
  return Why::fixed(cross || index_.regions() == 1 ? anywhere : in_region);
}

bool GangPlacer::never_fits(int job, bool cross, bool ask, std::string* why) {
  const auto& jv = core_.cluster().jobs[static_cast<std::size_t>(job)];
  core::FitRequest fit;
  fit.dtype = static_cast<int>(type_override_ >= 0 ? type_override_ : jv.dtype);
  fit.world = jv.world;
  fit.min_devices = jv.min_dev;
  fit.max_devices = jv.max_dev;
  fit.mem_mib = jv.mem;
  fit.mode = static_cast<spec::Preemption>(jv.mode);
  fit.across_regions = cross;
  fit.one_node = one_node_gangs_;
  if (static_cast<std::size_t>(job) >= fit_memo_.size()) {
    if (!ask) return false;
    fit_memo_.resize(static_cast<std::size_t>(job) + 1);
  }
  FitMemo& memo = fit_memo_[static_cast<std::size_t>(job)];
  if (memo.type != fit.dtype || memo.cross != cross) {  // its spec is fixed at submission
    if (!ask) return false;
    memo = {fit.dtype, cross, fit_.limit(fit) == core::FitLimit::kNone};
  }
  if (memo.fits) return false;
  fit_.limit(fit, why);  // the reason, with its numbers
  return true;
}

std::string GangPlacer::check(const Decision& d) const {
  auto st = core_.check(d);
  return st.ok() ? std::string() : st.reason();
}

Proposal GangPlacer::plan(int job, EventKind event, int want) {
  const spec::Concrete dom;
  const auto& s = core_.cluster();
  if (job < 0 || job >= s.num_jobs())
    return answer(Proposal::Kind::kInfeasible, "unknown job " + std::to_string(job));
  const auto& jv = s.jobs[static_cast<std::size_t>(job)];
  JobState needs;
  switch (event) {
    case EventKind::kPlace: needs = JobState::kQueued; break;
    case EventKind::kResume: needs = JobState::kSuspended; break;
    case EventKind::kMigrate:
    case EventKind::kResizeUp: needs = JobState::kRunning; break;
    default:
      return answer(Proposal::Kind::kInfeasible,
                    std::string(spec::event_name(event)) + " is not a placement event");
  }
  if (core_.state(job) != needs)
    return answer(Proposal::Kind::kInfeasible,
                  "job " + std::to_string(job) + " is " +
                      std::string(spec::state_name(core_.state(job))) + "; " +
                      std::string(spec::event_name(event)) + " needs it " +
                      std::string(spec::state_name(needs)));
  level_ = index_.level_for(type_override_ >= 0 ? type_override_ : jv.dtype, jv.mem);
  if (level_ < 0)
    return answer(Proposal::Kind::kInfeasible, "no " + core_.device_type(job) + " device has " +
                                                   std::to_string(jv.mem) +
                                                   " MiB of memory for a worker");
  job_ = job;
  keep_held_ = event == EventKind::kResizeUp;
  const bool cross = static_cast<std::size_t>(job) < cross_region_.size() &&
                     cross_region_[static_cast<std::size_t>(job)];
  // A job found before never to fit (below, after the walk) is answered so at once.
  if (std::string why; (event == EventKind::kPlace || event == EventKind::kResume) &&
                       never_fits(job, cross, /*ask=*/false, &why))
    return answer(Proposal::Kind::kInfeasible, why);

  // Where the job's devices are: kept by a resize (and its anchor), given back by a migration.
  for (int n : held_nodes_) held_on_[static_cast<std::size_t>(n)] = 0;
  held_nodes_.clear();
  for (auto dev : jv.held) {
    const int n = s.node_of(dev);
    if (held_on_[static_cast<std::size_t>(n)]++ == 0) held_nodes_.push_back(n);
  }
  per_old_ = spec::swap_per_device(dom, jv.splice, jv.mem);

  // Devices reserved (live) for this job, or for jobs it outranks: free to it. Only a waiting job
  // outranks anyone (spec::precedes), and a running one's own reservations have ended.
  if (++tag_stamp_ == 0) {
    std::fill(tag_seen_.begin(), tag_seen_.end(), 0);
    tag_stamp_ = 1;
  }
  tag_nodes_.clear();
  // An upper bound on the devices any placement of this job can find: the open devices of its
  // level on Up nodes and every reserved one (the per-node adjustments below only lower a node's
  // count). A device count that needs more than that is passed over without a query; when every
  // count in range does, the walk over the reservations is skipped too. Under load most
  // proposals are of waiting gangs that fit nowhere, round after round, and each of them paid
  // for that walk (O(jobs with live reservations)). The answer is the same as without the bound.
  const std::int64_t free_bound = index_.total(level_, index_.fleet_scope()) +
                                  static_cast<std::int64_t>(index_.tagged_devices());
  const std::int64_t lo_count = event == EventKind::kMigrate ? std::max(jv.min_dev, jv.devices) : jv.min_dev;
  const std::int64_t hi_count = want > 0 ? std::min<std::int64_t>(want, jv.max_dev) : jv.max_dev;
  std::int64_t least_need = -1;  // the fewest new devices a count in range needs (-1: none)
  for (std::int64_t c = lo_count; c <= hi_count && least_need < 0; ++c)
    if (jv.world % c == 0 && jv.world / c <= spec::kSpliceLimit && (!keep_held_ || c > jv.devices))
      least_need = c - (keep_held_ ? jv.devices : 0);
  const bool tag_walk_skipped = least_need < 0 || (least_need > free_bound && !count_tags_);
  if (!keep_held_ && event != EventKind::kMigrate && !tag_walk_skipped) {
    index_.for_each_tag_group([&](int r, const std::vector<std::pair<int, int>>& groups) {
      if (r != job && !spec::outranks(dom, s, job, r)) return;
      for (const auto& [g, count] : groups) {
        const int n = s.group_node[g];
        if (!index_.up(n) || !index_.group_in_level(level_, g)) continue;
        const auto i = static_cast<std::size_t>(n);
        if (tag_seen_[i] != tag_stamp_) {
          tag_seen_[i] = tag_stamp_;
          tag_usable_[i] = 0;
          tag_nodes_.push_back(n);
        }
        tag_usable_[i] += count;
      }
    });
  }

  // Where new devices may go, and how many of the level there are at all.
  const std::int64_t kept = keep_held_ ? jv.devices : 0;
  int anchor_node = -1, anchor_cluster = -1, anchor_region = -1;
  std::int64_t capacity = 0;
  if (keep_held_) {
    bool one_node = held_nodes_.size() == 1, one_cluster = true, one_region = true;
    for (int n : held_nodes_) {
      one_cluster = one_cluster && index_.cluster_of(n) == index_.cluster_of(held_nodes_[0]);
      one_region = one_region && index_.region_of(n) == index_.region_of(held_nodes_[0]);
    }
    if (held_nodes_.empty()) one_cluster = one_region = false;
    if (one_node) anchor_node = held_nodes_[0];
    if (one_cluster) anchor_cluster = index_.cluster_of(held_nodes_[0]);
    if (one_region) anchor_region = index_.region_of(held_nodes_[0]);
    if (cross)
      capacity = index_.scope_capacity(level_, index_.fleet_scope()) - kept;
    else if (anchor_region >= 0)
      capacity = index_.scope_capacity(level_, index_.region_scope(anchor_region)) - kept;
  } else if (cross) {
    capacity = index_.scope_capacity(level_, index_.fleet_scope());
  } else {
    for (int r = 0; r < index_.regions(); ++r)
      capacity = std::max(capacity, index_.scope_capacity(level_, index_.region_scope(r)));
  }

  const std::int64_t hi = want > 0 ? std::min<std::int64_t>(want, jv.max_dev) : jv.max_dev;
  std::int64_t lo = jv.min_dev;
  if (event == EventKind::kMigrate) lo = std::max(lo, jv.devices);  // fewer would be a shrink
  bool divisible = false, could_fit = false;
  std::vector<Pick> picks;
  for (std::int64_t c = hi; c >= lo; --c) {
    if (jv.world % c != 0 || jv.world / c > spec::kSpliceLimit) continue;
    if (keep_held_ && c <= kept) break;
    divisible = true;
    const int need = static_cast<int>(c - kept);
    if (need > capacity) continue;
    could_fit = true;
    if (need > free_bound) continue;  // no placement can find that many (free_bound above)
    per_new_ = spec::swap_per_device(dom, jv.world / c, jv.mem);
    begin_query();
    picks.clear();
    bool ok = false;
    // A count one node can hold, under one_node_gangs: that node only (a resize: the one it is on).
    const bool on_one_node = one_node_gangs_ && c <= index_.max_per_node(level_);
    if (!keep_held_ && on_one_node) {
      if (const int n = best_node(index_.fleet_scope(), need); n >= 0) {
        picks.push_back({n, need});
        ok = true;
      }
    } else if (!keep_held_) {
      ok = place_in_fleet(need, cross, picks);
    } else {
      if (anchor_node >= 0 && eff(anchor_node) >= need) {
        picks.push_back({anchor_node, need});
        ok = true;
      }
      if (!ok && on_one_node) continue;  // it grows on its own node only
      // In the cluster: one node (fill_cluster's first choice), else several.
      if (!ok && anchor_cluster >= 0) ok = fill_cluster(anchor_cluster, need, picks);
      if (!ok && anchor_region >= 0) ok = place_in_region(anchor_region, need, picks);
      if (!ok && cross) ok = place_in_fleet(need, true, picks);
    }
    if (!ok) continue;

    // The devices: reserved for this job first, then unreserved, then reservations it outranks.
    Proposal p;
    auto& devs = p.decision.devices;
    if (keep_held_) devs.assign(jv.held.begin(), jv.held.end());
    for (const auto& pk : picks) {
      int got = 0;
      const bool tagged = tag_seen_[static_cast<std::size_t>(pk.node)] == tag_stamp_;
      auto take = [&](int dev) {
        devs.push_back(dev);
        return ++got < pk.count;
      };
      if (tagged)
        index_.for_each_tagged(level_, pk.node, [&](int dev) {
          if (s.resv_for[dev] != job || !spec::reserved(dom, s, dev)) return true;
          return take(dev);
        });
      if (got < pk.count) index_.for_each_open(level_, pk.node, take);
      if (got < pk.count && tagged)
        index_.for_each_tagged(level_, pk.node, [&](int dev) {
          const auto r = s.resv_for[dev];
          const bool reserved = spec::reserved(dom, s, dev);
          if (reserved && r == job) return true;  // taken above
          if (reserved && !spec::outranks(dom, s, job, r)) return true;
          return take(dev);
        });
      if (got < pk.count)  // the counts promised more than the node has: an index bug
        return answer(Proposal::Kind::kRetryLater,
                      "the placement index disagrees with the core's state (a bug): node " +
                          core_.fleet().nodes[static_cast<std::size_t>(pk.node)].name);
    }
    std::sort(devs.begin(), devs.end());
    p.decision.event = event;
    p.decision.origin = spec::Origin::kPlanner;
    p.decision.job = job;
    p.decision.splice = jv.world / c;
    if (event == EventKind::kMigrate) p.decision.step = jv.progress;
    return p;
  }
  if (!divisible)
    return answer(Proposal::Kind::kInfeasible,
                  keep_held_ ? "no device count above the " + std::to_string(kept) +
                                   " held, within the cap, splits the world size within the splice limit"
                             : "no device count in range splits the world size within the splice limit");
  if (!could_fit) {
    if (keep_held_ && anchor_region < 0 && !cross)
      return answer(Proposal::Kind::kInfeasible,
                    "the job's devices span regions and it may not be placed across regions");
    return answer(Proposal::Kind::kInfeasible,
                  "more " + core_.device_type(job) + " devices than " +
                      (cross ? std::string("the fleet") : std::string("one region")) + " has");
  }
  // A Place or Resume that no state of the fleet could take: the capacity above counts devices,
  // not the host memory each node has for spliced-out workers (the rule orrery-core's submission
  // applies, core/fleet_fit.h; a job reaches here past it only on a type it was moved to, or
  // submitted to the core directly). Waiting for it would hold a type's devices for nothing.
  if (std::string why; !keep_held_ && event != EventKind::kMigrate && never_fits(job, cross, /*ask=*/true, &why))
    return answer(Proposal::Kind::kInfeasible, why);
  retry_later_ = true;  // too few free devices: an answer propose() may remember
  // By how many at least: the fewest a count needs, less the most any scope the job may span had
  // free to it, host memory aside (the tagged ones as the walk above counted them; all of them
  // where it was skipped).
  if (!keep_held_ && event != EventKind::kMigrate) {
    std::int64_t most = free_bound;
    if (!tag_walk_skipped) {
      region_tagged_.assign(static_cast<std::size_t>(index_.regions()), 0);
      std::int64_t all_tagged = 0;
      for (int n : tag_nodes_) {
        region_tagged_[static_cast<std::size_t>(index_.region_of(n))] += tag_usable_[static_cast<std::size_t>(n)];
        all_tagged += tag_usable_[static_cast<std::size_t>(n)];
      }
      most = index_.total(level_, index_.fleet_scope()) + all_tagged;
      if (!cross) {
        most = 0;
        for (int r = 0; r < index_.regions(); ++r)
          most = std::max(most, index_.total(level_, index_.region_scope(r)) + region_tagged_[static_cast<std::size_t>(r)]);
      }
    }
    // A gang kept to one node has at most what one node has free to it.
    if (one_node_gangs_ && least_need <= index_.max_per_node(level_)) {
      std::int64_t node_most = index_.most_open_on_a_node(level_);
      if (!tag_walk_skipped)
        for (int n : tag_nodes_)
          node_most = std::max<std::int64_t>(node_most, base(n) + tag_usable_[static_cast<std::size_t>(n)]);
      most = std::min(most, node_most);
    }
    deficit_ = least_need - most;
    // The shortfall (shortfall(), which never skips the walk): the same, per region that can hold
    // the gang at all. Where some region has devices enough by count, the count is not what
    // keeps the gang out (host memory, topology): none.
    const auto tagged_in = [&](int r) { return tag_walk_skipped ? 0 : region_tagged_[static_cast<std::size_t>(r)]; };
    std::vector<std::pair<int, std::int64_t>> lacks;
    bool enough_somewhere = false;
    if (cross) {
      std::int64_t f = index_.total(level_, index_.fleet_scope());
      for (int r = 0; r < index_.regions() && !tag_walk_skipped; ++r) f += tagged_in(r);
      lacks.emplace_back(-1, least_need - f);
    } else {
      for (int r = 0; r < index_.regions(); ++r)
        if (index_.scope_capacity(level_, index_.region_scope(r)) >= least_need)
          lacks.emplace_back(r, least_need - index_.total(level_, index_.region_scope(r)) - tagged_in(r));
    }
    for (const auto& [r, lack] : lacks) enough_somewhere = enough_somewhere || lack <= 0;
    if (!lacks.empty() && !enough_somewhere) {
      std::stable_sort(lacks.begin(), lacks.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      shortfall_ = {lacks.front().second, lacks.front().first, std::move(lacks)};
    }
  } else {
    deficit_ = 0;
  }
  return answer(Proposal::Kind::kRetryLater, retry_later_why(cross));
}

void GangPlacer::begin_query() {
  if (++stamp_ == 0) {
    std::fill(adj_stamp_.begin(), adj_stamp_.end(), 0);
    stamp_ = 1;
  }
  if (++excl_gen_ == 0) {
    std::fill(excl_stamp_.begin(), excl_stamp_.end(), 0);
    excl_gen_ = 1;
  }
  adj_nodes_.clear();
  for (int n : tag_nodes_) adjust(n);
  if (per_new_ > 0) {
    index_.for_each_host_below(per_new_ * index_.max_per_node(level_), [&](int n) { adjust(n); });
    for (int n : held_nodes_) adjust(n);
  }
  auto avoid = [&](int n) {  // the node offers nothing
    const auto i = static_cast<std::size_t>(n);
    if (!adjusted(n)) {
      if (base(n) == 0) return;
      adj_stamp_[i] = stamp_;
      adj_nodes_.push_back(n);
    }
    adj_eff_[i] = 0;
  };
  if (avoid_scope_ >= 0)
    for (int n : index_.scope_nodes(avoid_scope_)) avoid(n);
  if (avoid_node_ >= 0) avoid(avoid_node_);
  // What the adjusted nodes change in each scope's total, once: scope_total() is asked for every
  // cluster and region of a fill, and a walk over the adjusted nodes (hundreds where many devices
  // are reserved) each time was a quarter of a 1M-job run.
  if (scope_delta_.size() != static_cast<std::size_t>(index_.scopes())) scope_delta_.assign(static_cast<std::size_t>(index_.scopes()), 0);
  for (int sc : delta_scopes_) scope_delta_[static_cast<std::size_t>(sc)] = 0;
  delta_scopes_.clear();
  for (int n : adj_nodes_) {
    const std::int64_t d = eff(n) - base(n);
    if (d == 0) continue;
    for (int sc : {index_.fleet_scope(), index_.region_scope(index_.region_of(n)), index_.cluster_scope(index_.cluster_of(n))}) {
      if (scope_delta_[static_cast<std::size_t>(sc)] == 0) delta_scopes_.push_back(sc);
      scope_delta_[static_cast<std::size_t>(sc)] += d;
    }
  }
}

void GangPlacer::adjust(int node) {
  if (!index_.up(node) || adjusted(node)) return;
  const auto& s = core_.cluster();
  const auto i = static_cast<std::size_t>(node);
  const int b = base(node);
  std::int64_t e = b + (tag_seen_[i] == tag_stamp_ ? tag_usable_[i] : 0);
  if (per_new_ > 0) {
    // The guard's host-memory rule on this node: the job's old devices here give back their
    // swapped-out workers' memory (a resize keeps them, at the new splice).
    const std::int64_t held = held_on_[i];
    const std::int64_t avail = s.host_mem[node] - s.node_swap[node] + held * per_old_;
    std::int64_t cap = avail / per_new_ - (keep_held_ ? held : 0);
    e = std::min(e, std::max<std::int64_t>(cap, 0));
  }
  if (e == b) return;
  adj_stamp_[i] = stamp_;
  adj_eff_[i] = static_cast<int>(e);
  adj_nodes_.push_back(node);
}

}  // namespace orrery::core::policy
