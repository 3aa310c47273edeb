#include "core/node_bootstrap.h"

namespace orrery::core {

Status bring_up_all_nodes(SchedulerCore& core) {
  for (int n = 0; n < static_cast<int>(core.fleet().nodes.size()); ++n) {
    if (core.node_state(n) != spec::NodeState::kDown) continue;
    for (auto e : {spec::NodeEvent::kRegister, spec::NodeEvent::kReady}) {
      auto c = core.commit_node(NodeDecision{e, spec::Origin::kRuntime, n});
      if (!c) return Status::Error("bringing up node " + core.fleet().nodes[n].name + ": " + c.reason());
    }
  }
  return Status::Ok();
}

}  // namespace orrery::core
