// Symbolic clusters and parameters for the solver, and reading them back out of a model as text
// for counterexamples.
#pragma once

#include <string>
#include <vector>

#include "checker/z3_domain.h"
#include "core/row_desc.h"
#include "spec/model.h"

namespace orrery::checker {

using SymCluster = spec::ClusterVars<Z3Domain>;
using SymParams = spec::Params<Z3Domain>;
using SymRow = core::RowDesc<Z3Domain>;
using NodeSymRow = core::NodeRowDesc<Z3Domain>;

// The shape of a bounded cluster: `nodes` nodes of `devices_per_node` devices, `jobs` job slots.
struct Shape {
  int jobs = 3;
  int nodes = 2;
  int devices_per_node = 2;
};

// Every value a fresh constant named after `prefix` ("s0." -> "s0.j1.state", "s0.owner[3]",
// "s0.j1.held[3]"); each device is its own group (its own symbolic type and memory).
// With `shared_fleet`, the fleet's values (device types, host memory, reserve) come from it
// instead, so several states of one run share one fleet.
SymCluster make_cluster(const Z3Domain& d, const Shape& shape, const std::string& prefix,
                        const SymCluster* shared_fleet = nullptr);
SymParams make_params(const Z3Domain& d, int devices, const std::string& prefix);

// The state after `row` fires for job j: the row's effect, and the job's state set to the row's
// target.
SymCluster fire(const Z3Domain& d, const SymRow& row, const SymCluster& pre, int j,
                const SymParams& p);

// The state after node row `row` fires for node n: the node's state set to the row's target (a
// node row has no other effect).
SymCluster fire_node(const Z3Domain& d, const NodeSymRow& row, const SymCluster& pre, int n);

// Every state variable of a symbolic cluster (not the shape or the fleet values), in a fixed
// order: the integers and the membership bits of the held sets.
std::vector<z3::expr*> state_refs(SymCluster& s);

// Readable values under a model.
std::string show_cluster(z3::model& m, const SymCluster& s);
std::string show_job(z3::model& m, const SymCluster& s, int j);
std::string show_params(z3::model& m, const SymParams& p, spec::EventKind e);
// "Preempt job0 beneficiary=job1  via row #9 Running --Preempt--> Checkpointing [...]"
std::string show_event(z3::model& m, const SymRow& row, int j, const SymParams& p);
// "Drain node1  via node row node #3 Up --Drain--> Draining [none]"
std::string show_node_event(const NodeSymRow& row, int n);

}  // namespace orrery::checker
