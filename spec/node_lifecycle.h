// The node lifecycle's guards: when a node transition may be taken. The rows themselves are the
// second Boost.MSM table (core/node_machine_table.h): Register Down->Joining, Ready Joining->Up,
// Drain Up->Draining, Undrain Draining->Up, HeartbeatLost Joining|Up|Draining->Lost, FailedOver
// Lost->Down. A node row changes only that node's state (the checker proves it: FRAME); what
// nodes mean for jobs is in GuardGang (new devices only on Up nodes) and INV-NODE.
//
// Each node guard is a type with a name and
//   template <class D> static Clauses<D> clauses(const D&, const ClusterVars<D>&, int node);
#pragma once

#include "spec/model.h"

namespace orrery::spec {

// A lost node goes Down only once no job holds any of its devices: each job that held one has had
// its NodeLoss (or its crash, cancellation or completion) committed, so it was failed over from
// its last checkpoint and nothing still counts on the node. Visits the node's devices.
struct GuardNodeIdle {
  static constexpr std::string_view name = "node_idle";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int n) {
    auto idle = d.b(true);
    for_each_node_device(s, n, [&](int dev) { idle = idle && s.owner[dev] == d.k(-1); });
    return {{"no device of the node held", idle}};
  }
};

}  // namespace orrery::spec
