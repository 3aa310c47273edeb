// The node lifecycle machine behind a plain interface, driven by NodeEvent values; the Boost.MSM
// back-end lives in core/node_machine.cc only, its table is core/node_machine_table.h. Like the
// job machine, one machine serves every node: position() puts it in the node's recorded state
// before an event, and an event the table does not accept returns an error, never aborts.
#pragma once

#include <memory>
#include <vector>

#include "base/result.h"
#include "spec/model.h"

namespace orrery::core {

template <class D>
struct NodeRowDesc;

// What a node guard needs at run time: the concrete cluster and the node.
struct NodeFireContext {
  spec::ClusterVars<spec::Concrete>* cluster;
  int node;
};

class NodeMachine {
 public:
  NodeMachine();
  ~NodeMachine();
  NodeMachine(NodeMachine&&) noexcept;
  NodeMachine& operator=(NodeMachine&&) noexcept;

  spec::NodeState state() const;
  void position(spec::NodeState s);
  // Runs the guard of the row for (state(), event) and, if it holds, moves to the row's target.
  // The caller records state() in the cluster's node_state.
  Status fire(spec::NodeEvent event, NodeFireContext& ctx);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The rows of the real node table on concrete values, in table order.
const std::vector<NodeRowDesc<spec::Concrete>>& node_rows();

}  // namespace orrery::core
