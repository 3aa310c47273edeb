#include "core/policy/victims.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "spec/model.h"

namespace orrery::core::policy {

int mode_rank(spec::Preemption m) { return static_cast<int>(m); }  // the enum's order is the rank

int job_node(const SchedulerCore& core, int v) {
  const auto& s = core.cluster();
  const auto& held = s.jobs[v].held;
  if (held.empty()) return -1;
  const int node = s.node_of(static_cast<int>(*held.begin()));
  return std::all_of(held.begin(), held.end(), [&](auto dev) { return s.node_of(static_cast<int>(dev)) == node; }) ? node : -1;
}

std::int64_t loss_per_device_ms(const SchedulerCore& core, const JobBook& book, int v) {
  if (core.job_info(v).mode == spec::Preemption::kTransparent) return 0;  // cut at its current step
  // Signal and requeue: the run since the incarnation started (victims.h says why for signal).
  return std::max<std::int64_t>(core.now_ms() - book.running_since(v), 0);
}

bool protected_now(const SchedulerCore& core, const JobBook& book, int v) {
  const std::int64_t min_run = core.job_info(v).min_runtime_ms;
  return min_run > 0 && core.now_ms() - book.running_since(v) < min_run;
}

std::int64_t reaches_service_at(const SchedulerCore& core, const PlanContext& ctx, int v, std::int64_t bound) {
  const auto& vj = core.cluster().jobs[v];
  const std::int64_t short_by = bound - (vj.attained + ctx.unreported_gpu_ms(v));
  if (short_by <= 0) return core.now_ms();
  if (vj.devices <= 0) return INT64_MAX;
  return core.now_ms() + (short_by + vj.devices - 1) / vj.devices;
}

namespace {

using Cost = __int128;  // sums of devices x ms over many victims: no overflow

Cost cost_of(const VictimCandidate& c) { return static_cast<Cost>(c.devices) * c.loss_per_device; }

}  // namespace

std::vector<int> cheapest_victims(std::vector<VictimCandidate> cands, std::int64_t need) {
  std::vector<int> out;
  if (need <= 0) return out;
  // Stable: the caller's order breaks the ties that the class, the loss and the mode leave.
  std::stable_sort(cands.begin(), cands.end(), [](const VictimCandidate& a, const VictimCandidate& b) {
    return std::tie(a.cls, a.loss_per_device, a.mode_rank) < std::tie(b.cls, b.loss_per_device, b.mode_rank);
  });
  std::int64_t got = 0;
  std::size_t i = 0;
  // Whole classes while they do not reach the need (a lower tier goes before any higher one).
  while (i < cands.size()) {
    std::size_t end = i;
    std::int64_t in_class = 0;
    while (end < cands.size() && cands[end].cls == cands[i].cls) in_class += cands[end++].devices;
    if (got + in_class >= need) break;
    for (; i < end; ++i) out.push_back(cands[i].job);
    got += in_class;
  }
  if (i == cands.size()) return {};  // all of them together hold fewer
  const std::int64_t rest = need - got;
  const std::int64_t cls = cands[i].cls;
  // Greedy in the deciding class, the cheapest per device first, until the rest is covered.
  std::vector<std::size_t> pick;
  std::int64_t have = 0;
  std::size_t j = i;
  for (; have < rest; ++j) {
    pick.push_back(j);
    have += cands[j].devices;
  }
  // Drop what the later (larger) picks make unneeded, the dearest per device first, where that
  // saves work (a victim that loses none costs only its cut's time: kept, as the planners' order
  // had it).
  Cost greedy = 0;
  std::vector<std::size_t> kept;
  for (auto k = pick.rbegin(); k != pick.rend(); ++k) {
    if (cands[*k].loss_per_device > 0 && have - cands[*k].devices >= rest) {
      have -= cands[*k].devices;
      continue;
    }
    kept.push_back(*k);
    greedy += cost_of(cands[*k]);
  }
  // One candidate of the class that covers the rest alone, if it loses less (greedy overshoots
  // when a cheap-per-device job is much larger than the rest).
  std::size_t single = cands.size();
  for (std::size_t k = i; k < cands.size() && cands[k].cls == cls; ++k)
    if (cands[k].devices >= rest && cost_of(cands[k]) < greedy &&
        (single == cands.size() || cost_of(cands[k]) < cost_of(cands[single])))
      single = k;
  if (single != cands.size()) {
    out.push_back(cands[single].job);
    return out;
  }
  std::sort(kept.begin(), kept.end());  // in preference order
  for (auto k : kept) out.push_back(cands[k].job);
  return out;
}

namespace {

// The region holding every device running job `v` holds: -1 when it holds none, -2 when they span
// regions (a job allowed across them; one that is not spans none, so its first device says).
int job_region(const SchedulerCore& core, JobBook& book, int v) {
  const auto& held = core.cluster().jobs[v].held;
  if (held.empty()) return -1;
  const FreeDeviceIndex& ix = book.placer(core).index();
  auto region_of = [&](auto dev) { return ix.region_of(core.cluster().node_of(static_cast<int>(dev))); };
  const int r = region_of(*held.begin());
  if (!book.placer(core).cross_region(v)) return r;
  return std::all_of(held.begin(), held.end(), [&](auto dev) { return region_of(dev) == r; }) ? r : -2;
}

bool region_matches(int job_region, int region) { return region < 0 || job_region == -1 || job_region == region; }

// More than any job holds: no cut covers it.
constexpr std::int64_t kNoCover = std::numeric_limits<std::int64_t>::max() / 4;

// The region key cut_need counts a node's claims under (-1 on a one-region fleet).
int claim_region(const SchedulerCore& core, JobBook& book, int node) {
  const FreeDeviceIndex& ix = book.placer(core).index();
  return ix.regions() == 1 ? -1 : ix.region_of(node);
}

// cover_need for a gang kept to one node (victims.h, CutNeed).
std::vector<int> cover_on_one_node(const SchedulerCore& core, JobBook& book, const std::vector<VictimCandidate>& candidates,
                                   const CutNeed& need, CutNeed::Option* chosen) {
  const auto& s = core.cluster();
  // Each candidate on each node where it holds devices of the gang's level, with those devices.
  std::map<int, std::vector<VictimCandidate>> on;
  const FreeDeviceIndex& ix = book.placer(core).index();
  for (const auto& c : candidates) {
    std::map<int, std::int64_t> per_node;
    for (auto dev : s.jobs[c.job].held)
      if (ix.in_level(need.level, static_cast<int>(dev))) ++per_node[s.node_of(static_cast<int>(dev))];
    for (const auto& [node, devices] : per_node) {
      VictimCandidate here = c;
      here.devices = devices;
      on[node].push_back(here);
    }
  }
  using Score = std::tuple<std::int64_t, std::int64_t, Cost, std::int64_t, int>;  // (class, devices, loss, lack, node)
  std::optional<Score> best;
  std::vector<int> best_victims;
  for (const auto& [node, inside] : on) {
    const std::int64_t lack = need.lack_on(core, book, node);
    if (lack <= 0 || lack >= kNoCover) continue;  // fits there by count (host memory refuses), or cannot hold it
    auto victims = cheapest_victims(inside, lack);
    if (victims.empty()) continue;
    Score sc{0, 0, 0, lack, node};
    for (int v : victims) {
      const auto& c = *std::find_if(inside.begin(), inside.end(), [&](const VictimCandidate& x) { return x.job == v; });
      std::get<0>(sc) = std::max(std::get<0>(sc), c.cls);
      std::get<1>(sc) += c.devices;
      std::get<2>(sc) += cost_of(c);
    }
    if (!best || sc < *best) {
      best = sc;
      best_victims = std::move(victims);
    }
  }
  if (chosen) *chosen = best ? CutNeed::Option{claim_region(core, book, std::get<4>(*best)), std::get<3>(*best), std::get<4>(*best)}
                             : CutNeed::Option{-1, need.whole, -1};
  return best_victims;
}

}  // namespace

CutNeed cut_need(const SchedulerCore& core, JobBook& book, int ben) {
  const auto& bj = core.cluster().jobs[ben];
  GangPlacer& placer = book.placer(core);
  const auto ev = core.state(ben) == spec::JobState::kQueued ? spec::EventKind::kPlace : spec::EventKind::kResume;
  const auto sf = placer.shortfall(ben, ev);
  CutNeed n;
  n.whole = n.devices = bj.min_dev;
  n.dtype = bj.dtype;
  n.job = ben;
  if (sf.devices == 0 && book.claimed_free(bj.dtype, -1) == 0) n.devices = 0;  // it fits now
  if (placer.one_node(ben)) {  // cover_need chooses the node; here a lower bound
    if (n.devices == 0) return n;
    const FreeDeviceIndex& ix = placer.index();
    n.one_node = true;
    n.level = ix.level_for(bj.dtype, bj.mem);
    // (Devices reserved for it are free to it: with any, no bound but one.)
    const std::int64_t most = ix.has_reservations(ben) ? n.whole - 1 : ix.most_open_on_a_node(n.level);
    n.devices = std::max<std::int64_t>(1, n.whole - most);
    return n;
  }
  if (sf.devices <= 0) return n;
  const bool one_region = placer.index().regions() == 1;
  for (const auto& [r, lack] : sf.regions) {
    const int region = one_region ? -1 : r;
    // Free devices other jobs' cuts counted on this round are not free to this one.
    const std::int64_t d = lack + book.claimed_free(bj.dtype, region);
    if (d < n.whole) n.options.push_back({region, d});
  }
  std::stable_sort(n.options.begin(), n.options.end(),
                   [](const CutNeed::Option& a, const CutNeed::Option& b) { return a.devices < b.devices; });
  if (!n.options.empty()) {
    n.devices = n.options.front().devices;
    n.region = n.options.front().region;
  }
  return n;
}

std::int64_t CutNeed::lack_on(const SchedulerCore& core, JobBook& book, int node) const {
  const FreeDeviceIndex& ix = book.placer(core).index();
  if (!ix.up(node) || ix.capacity(level, node) < whole) return kNoCover;
  std::int64_t reserved = 0;  // reserved for it, or for a job it outranks
  const auto& s = core.cluster();
  ix.for_each_tagged(level, node, [&](int dev) {
    const auto r = s.resv_for[dev];
    if (spec::reserved(spec::Concrete{}, s, dev) && (r == job || spec::outranks(spec::Concrete{}, s, job, r))) ++reserved;
    return true;
  });
  return whole - (ix.open(level, node) + reserved - book.claimed_free_on_node(dtype, node));
}

CutNeed::Option CutNeed::for_victim(const SchedulerCore& core, JobBook& book, int v) const {
  if (one_node) {
    const int node = job_node(core, v);
    if (node < 0) return {-1, kNoCover, -1};
    const std::int64_t lack = lack_on(core, book, node);
    // A node where it fits by count is not one for cuts (cover_on_one_node passes it over too).
    return lack > 0 ? CutNeed::Option{claim_region(core, book, node), lack, node} : CutNeed::Option{-1, kNoCover, -1};
  }
  const int r = options.empty() ? -1 : job_region(core, book, v);
  for (const auto& o : options)
    if (region_matches(r, o.region)) return o;
  return {-1, whole};
}

std::vector<int> cover_need(const SchedulerCore& core, JobBook& book, const std::vector<VictimCandidate>& candidates,
                            const CutNeed& need, CutNeed::Option* chosen) {
  if (need.one_node) return cover_on_one_node(core, book, candidates, need, chosen);
  std::vector<int> where;  // each candidate's region, once (not per option)
  if (std::any_of(need.options.begin(), need.options.end(), [](const CutNeed::Option& o) { return o.region >= 0; })) {
    where.reserve(candidates.size());
    for (const auto& c : candidates) where.push_back(job_region(core, book, c.job));
  }
  for (const auto& o : need.options) {
    std::vector<VictimCandidate> inside;
    for (std::size_t i = 0; i < candidates.size(); ++i)
      if (o.region < 0 || region_matches(where[i], o.region)) inside.push_back(candidates[i]);
    auto v = cheapest_victims(std::move(inside), o.devices);
    if (!v.empty()) {
      if (chosen) *chosen = o;
      return v;
    }
  }
  if (chosen) *chosen = {-1, need.whole};
  return cheapest_victims(candidates, need.whole);
}

void claim_free(const SchedulerCore& core, JobBook& book, int ben, const CutNeed& need, const CutNeed::Option& chosen) {
  if (chosen.devices >= need.whole) return;
  if (chosen.node >= 0)
    book.claim_free_on_node(core.cluster().jobs[ben].dtype, chosen.region, chosen.node, need.whole - chosen.devices);
  else
    book.claim_free(core.cluster().jobs[ben].dtype, chosen.region, need.whole - chosen.devices);
}

int preempt_for(const SchedulerCore& core, PlanContext& ctx, JobBook& book, const std::vector<int>& victims,
                int beneficiary) {
  int started = 0;
  for (int v : victims) {
    Decision p;
    p.event = spec::EventKind::kPreempt;
    p.origin = spec::Origin::kPlanner;
    p.job = v;
    p.beneficiary = beneficiary;
    if (!core.accepts(p) || !ctx.propose(p)) continue;
    book.note_cut(core, v, beneficiary);
    ++started;
  }
  return started;
}

bool shrink_for(const SchedulerCore& core, PlanContext& ctx, int v, std::int64_t devices, int beneficiary) {
  const auto& vj = core.cluster().jobs[v];
  Decision p;
  p.event = spec::EventKind::kResizeDown;
  p.origin = spec::Origin::kPlanner;
  p.job = v;
  p.beneficiary = beneficiary;
  p.splice = vj.world / devices;
  p.devices.assign(vj.held.begin(), vj.held.begin() + devices);
  return core.accepts(p) && ctx.propose(p);
}

}  // namespace orrery::core::policy
