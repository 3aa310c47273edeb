// Bounded model checking of whole-cluster runs, closed by k-induction.
//
// The transition relation is the whole table: at every step a choice variable picks a job and a
// row, with free parameters, or a node and a node row; that row's source state and guard must hold, and every variable of
// the next state is defined by one equation (an ite over the choices that change it). So this
// check needs neither the prover's "job 0 acts" symmetry nor its FRAME argument: any job may act,
// and the run follows what every effect really does to every job and device.
//
//  1. Base: the initial state, then every run of up to `unroll` steps from it. At each depth the
//     solver looks for a run whose last state breaks a state invariant or whose last step breaks a
//     step invariant; a run it finds is a real violation, printed event by event with the states it
//     passes through. A depth proved free of violations is asserted as a lemma for the next ones.
//     Job slots are interchangeable, so only runs that submit jobs in slot order are explored
//     (symmetry reduction: every other run is a permutation of one of those).
//  2. Step (k-induction): for k = 1, 2, ... up to the depth unrolled + 1, any k consecutive states
//     that satisfy every invariant (linked by k-1 steps that satisfy the step invariants) lead, by
//     any step of the whole table, to a state and step that satisfy them too. With the base case
//     for depths < k, that covers every depth: the report then says all_depths, and depth_checked
//     is the depth asked for.
// Each depth's query is a fresh solver that preprocesses (eliminates the next-state definitions);
// from depth 6, and in the induction step, it is split into one query per choice of the last step
// (job x row), which the preprocessing then simplifies to that one row. Unrolled queries still grow
// with the depth (every interleaving of 135 job-row choices per step), which is why the base stops
// at a few steps and induction closes the rest; docs/checker.md has the figures.
#pragma once

#include <string>
#include <vector>

#include "checker/symbolic.h"

namespace orrery::checker {

struct BmcReport {
  Shape shape;            // jobs, nodes, devices per node of the model-checked cluster
  int depth = 0;          // depth asked for
  int unroll = 0;         // base-case depth asked for (capped at `depth`)
  int unrolled = 0;       // deepest depth checked by unrolling from the initial state
  int induction_k = 0;    // length of the induction step that closed every depth (0: none did)
  bool all_depths = false;  // base case and induction step together cover every depth
  int depth_checked = 0;  // deepest depth established: `depth` when all_depths, else `unrolled`
  bool ok = true;         // no violation found and `depth` established
  bool unknown = false;   // not established (solver gave up, or induction did not close)
  double seconds = 0;
  double induction_seconds = 0;
  std::vector<double> seconds_per_depth;  // base case, per unrolled depth
  std::string counterexample;  // a violating run, or why the depth could not be established
};

// Node rows are choices of every step too (any node, any node row): runs interleave node and job
// events.
BmcReport bmc(const std::vector<SymRow>& rows, const std::vector<NodeSymRow>& node_rows,
              const Shape& shape, int depth, int unroll, unsigned timeout_ms);
// With the real node table (checker/lifecycle_rows.h).
BmcReport bmc(const std::vector<SymRow>& rows, const Shape& shape, int depth, int unroll,
              unsigned timeout_ms);

}  // namespace orrery::checker
