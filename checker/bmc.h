// Bounded model checking of whole-cluster runs: from the initial state, every interleaving of every
// row of every job (with free parameters at each step), up to a depth. At each depth the solver
// looks for a run whose last state breaks a state invariant or whose last step breaks a step
// invariant; a run it finds is printed event by event with the states it passes through. Once a
// depth is proved free of violations, its invariants are asserted as lemmas for the deeper queries
// (they hold in every state reachable in that many steps), which keeps each depth's query small.
#pragma once

#include <string>
#include <vector>

#include "checker/symbolic.h"

namespace orrery::checker {

struct BmcReport {
  Shape shape;            // jobs, nodes, devices per node of the model-checked cluster
  int depth = 0;          // depth asked for
  int depth_checked = 0;  // deepest depth fully checked without a violation
  bool ok = true;
  bool unknown = false;   // the solver gave up at depth_checked + 1
  double seconds = 0;
  std::vector<double> seconds_per_depth;
  std::string counterexample;  // a violating run, when !ok
};

BmcReport bmc(const std::vector<SymRow>& rows, const Shape& shape, int depth, unsigned timeout_ms);

}  // namespace orrery::checker
