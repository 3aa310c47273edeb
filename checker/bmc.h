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
//     Job slots are interchangeable (no formula orders job ids: the ORDER obligation,
//     checker/id_order.h), so only runs that submit jobs in slot order are explored (symmetry
//     reduction: every other run is a permutation of one of those).
//     Before the runs, one query per choice of a step (job x row, node x node row): one step from
//     any state satisfying the invariants keeps them. A choice for which that holds ("closed")
//     cannot be the last step of a violating run at any depth (the run's last-but-one state
//     satisfies the invariants: the lemma), so the solver is asked about runs ending in the other
//     choices only; with every choice closed, each depth is decided without a query. The
//     one-step queries are the induction step of length 1 below, asked once.
//  2. Step (k-induction): for k = 1, 2, ... up to the depth unrolled + 1, any k consecutive states
//     that satisfy every invariant (linked by k-1 steps that satisfy the step invariants) lead, by
//     any step of the whole table, to a state and step that satisfy them too. With the base case
//     for depths < k, that covers every depth: the report then says all_depths, and depth_checked
//     is the depth asked for.
// Each depth's query is a fresh solver that preprocesses (eliminates the next-state definitions);
// from depth 6 it is split into one query per open choice of the last step, which the
// preprocessing then simplifies to that one row; the induction step's last step is built for its
// one choice only. Unrolled queries grow with the depth (every interleaving of 202 choices per
// step), which is why the base stops at a few steps and induction closes the rest;
// docs/checker.md has the figures.
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
  double induction_seconds = 0;  // the induction step, the one-step queries included
  std::vector<double> seconds_per_depth;  // base case, per unrolled depth
  // Choices of a step (jobs x rows + nodes x node rows), and those after which one step from any
  // state satisfying the invariants keeps them (the induction step of length 1, per choice).
  int choices = 0;
  int closed = 0;
  double one_step_seconds = 0;
  std::vector<int> queries_per_depth;  // base case: solver queries asked at each unrolled depth
  std::string counterexample;  // a violating run, or why the depth could not be established
};

// Node rows are choices of every step too (any node, any node row): runs interleave node and job
// events.
// With `every_path`, the base case asks the solver about every choice of the last step at every
// unrolled depth, also those the one-step queries closed: slower, a cross-check of the shortcut.
BmcReport bmc(const std::vector<SymRow>& rows, const std::vector<NodeSymRow>& node_rows,
              const Shape& shape, int depth, int unroll, unsigned timeout_ms,
              bool every_path = false);
// With the real node table (checker/lifecycle_rows.h).
BmcReport bmc(const std::vector<SymRow>& rows, const Shape& shape, int depth, int unroll,
              unsigned timeout_ms, bool every_path = false);

}  // namespace orrery::checker
