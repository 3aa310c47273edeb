#include "core/policy/gang_placement.h"

#include <algorithm>
#include <vector>

#include "core/policy/gang_placer.h"
#include "spec/model.h"

namespace orrery::core::policy {

Proposal propose_gang(const SchedulerCore& core, int job, spec::EventKind event, int want) {
  return GangPlacer(core).propose(job, event, want);
}

Proposal propose_gang_scan(const SchedulerCore& core, int job, spec::EventKind event, int want) {
  const spec::Concrete d;
  const auto& s = core.cluster();
  const auto& jv = s.jobs[job];
  const bool keep_own = event == spec::EventKind::kResizeUp;
  const int m = s.num_devices();

  // Free devices of the job's type not reserved for another job, grouped by node; own devices
  // listed separately.
  std::vector<std::vector<int>> free_on(s.nodes);
  std::vector<int> own(jv.held.begin(), jv.held.end());
  for (int dev = 0; dev < m; ++dev) {
    if (s.owner[dev] != -1 || s.dev_type(dev) != jv.dtype || !spec::on_up_node(d, s, dev)) continue;
    if (spec::reserved(d, s, dev) && s.resv_for[dev] != job &&
        !spec::outranks(d, s, job, s.resv_for[dev]))
      continue;
    free_on[s.node_of(dev)].push_back(dev);
  }
  std::vector<int> order(s.nodes);
  for (int n = 0; n < s.nodes; ++n) order[n] = n;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return free_on[a].size() > free_on[b].size(); });

  std::int64_t hi = want > 0 ? std::min<std::int64_t>(want, jv.max_dev) : jv.max_dev;
  bool divisible = false;
  for (std::int64_t c = hi; c >= jv.min_dev; --c) {
    if (jv.world % c != 0 || jv.world / c > spec::kSpliceLimit) continue;
    divisible = true;
    if (keep_own && c <= static_cast<std::int64_t>(own.size())) break;
    std::vector<std::int64_t> pick;
    if (keep_own) pick.assign(own.begin(), own.end());
    for (int n : order)
      for (int dev : free_on[n])
        if (static_cast<std::int64_t>(pick.size()) < c) pick.push_back(dev);
    if (static_cast<std::int64_t>(pick.size()) < c) continue;
    std::sort(pick.begin(), pick.end());
    Proposal p;
    p.decision.event = event;
    p.decision.origin = spec::Origin::kPlanner;
    p.decision.job = job;
    p.decision.devices = pick;
    p.decision.splice = jv.world / c;
    if (event == spec::EventKind::kMigrate) p.decision.step = jv.progress;
    return p;
  }
  Proposal p;
  p.kind = divisible ? Proposal::Kind::kRetryLater : Proposal::Kind::kInfeasible;
  p.why = divisible ? "not enough free devices of the job's type now"
                    : "no device count in range splits the world size within the splice limit";
  return p;
}

}  // namespace orrery::core::policy
