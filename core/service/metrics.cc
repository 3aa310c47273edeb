// /metrics: the service's state in Prometheus' text exposition format.
#include <map>
#include <sstream>

#include "core/service/service.h"
#include "core/service/service_internal.h"

namespace orrery::service {

using spec::JobState;
using spec::NodeState;

std::string Service::metrics_text() const {
  std::ostringstream o;
  std::map<std::pair<int, int>, int> per;  // (state, tier) -> jobs
  for (int j = 0; j < core_->num_jobs(); ++j)
    ++per[{static_cast<int>(core_->state(j)), static_cast<int>(core_->cluster().jobs[j].tier)}];
  o << "# HELP orrery_jobs Jobs by lifecycle state and service tier.\n# TYPE orrery_jobs gauge\n";
  for (int s = 0; s < spec::kNumJobStates; ++s)
    for (int t = 0; t < spec::kNumTiers; ++t) {
      auto it = per.find({s, t});
      o << "orrery_jobs{state=\"" << spec::state_name(static_cast<JobState>(s)) << "\",tier=\""
        << spec::tier_name(static_cast<spec::Tier>(t)) << "\"} " << (it == per.end() ? 0 : it->second) << "\n";
    }
  o << "# HELP orrery_decisions_committed_total Decisions committed (job and node), since the journal began.\n"
    << "# TYPE orrery_decisions_committed_total counter\n"
    << "orrery_decisions_committed_total " << core_->committed() << "\n";
  o << "# HELP orrery_decisions_rejected_total Decisions the spec guards rejected, since this start.\n"
    << "# TYPE orrery_decisions_rejected_total counter\n"
    << "orrery_decisions_rejected_total " << core_->rejected() << "\n";
  o << "# HELP orrery_planner_decisions_rejected_total Planner proposals rejected (policy bugs).\n"
    << "# TYPE orrery_planner_decisions_rejected_total counter\n"
    << "orrery_planner_decisions_rejected_total " << planner_rejected_ << "\n";
  o << "# HELP orrery_journal_durability_lag Committed decisions not yet durable.\n"
    << "# TYPE orrery_journal_durability_lag gauge\n"
    << "orrery_journal_durability_lag " << (core_->committed() - core_->durable_seq()) << "\n";
  std::map<int, int> ns;
  for (int n = 0; n < static_cast<int>(conns_.size()); ++n) ++ns[static_cast<int>(core_->node_state(n))];
  o << "# HELP orrery_nodes Nodes by lifecycle state.\n# TYPE orrery_nodes gauge\n";
  for (int s = 0; s < spec::kNumNodeStates; ++s)
    o << "orrery_nodes{state=\"" << spec::node_state_name(static_cast<NodeState>(s)) << "\"} " << ns[s] << "\n";
  o << "# HELP orrery_operations_aborted_total In-flight operations aborted (failed, refused or timed out cuts, launches and restores).\n"
    << "# TYPE orrery_operations_aborted_total counter\n"
    << "orrery_operations_aborted_total " << aborted_ << "\n";
  o << "# HELP orrery_reports_rejected_total Node reports refused (stale epoch, job not placed there).\n"
    << "# TYPE orrery_reports_rejected_total counter\n"
    << "orrery_reports_rejected_total " << rejected_reports_ << "\n";
  o << "# HELP orrery_checkpoint_shard_uploads_total Checkpoint shard uploads started.\n"
    << "# TYPE orrery_checkpoint_shard_uploads_total counter\n"
    << "orrery_checkpoint_shard_uploads_total " << shards_uploaded_ << "\n";
  o << "# HELP orrery_node_commands_failed_total Commands a node refused or could not receive.\n"
    << "# TYPE orrery_node_commands_failed_total counter\n"
    << "orrery_node_commands_failed_total " << commands_failed_ << "\n";
  return o.str();
}

}  // namespace orrery::service
