#include "core/policy/victims.h"

namespace orrery::core::policy {

std::vector<int> victims_covering(const SchedulerCore& core, const std::vector<int>& candidates,
                                  std::int64_t need) {
  std::vector<int> out;
  std::int64_t got = 0;
  for (int v : candidates) {
    if (got >= need) break;
    out.push_back(v);
    got += core.cluster().jobs[v].devices;
  }
  if (got < need) out.clear();
  return out;
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

}  // namespace orrery::core::policy
