// Inductive proof of the invariants over the rows of a lifecycle table, on a symbolic cluster: for
// every invariant, Init => Inv; for every row and every invariant,
//   Fleet /\ Local(s) /\ state_j(s) = Source /\ Guard(s, j, p) /\ s' = Effect(s, j, p)
//     => Inv_state(s') /\ Inv_step(s, j, p, s')
// with j = job 0 and every other value symbolic. Job slots are interchangeable because no formula
// orders job ids (the ORDER obligation, checker/id_order.h, checks it) and FRAME below. Local(s) is every
// invariant *without* the sums of INV-INDEX and without INV-EXCL's count of holders per device
// (which the per-element part of INV-INDEX implies): what each obligation may assume is about
// single jobs, single devices, single nodes and the counters, never a sum over jobs. Together with FRAME and
// DELTA below, that is what makes the proof hold for any number of jobs, nodes and devices
// (docs/spec.md gives the argument); such an obligation is `unbounded`. One that needs the sums is
// retried with them (Inv(s) whole) and, if that proves it, holds for the bounded shape only.
// INV-INDEX itself is proved in two parts: its per-element part locally, its sums with Inv(s).
// Each obligation is one solver query; a satisfiable negation is a counterexample, printed as
// before/event/after states.
#pragma once

#include <string>
#include <vector>

#include "checker/symbolic.h"
#include "spec/invariants.h"

namespace orrery::checker {

// Besides the invariants, three obligations about the table itself:
//  - FRAME, per row: the effect changes only the acting job's variables and held set, the
//    per-device state of the devices the row names (those the job holds, and the selection of an
//    event that takes one) and the counters of their nodes; never another job or the fleet. The
//    "job 0 acts" symmetry and the unbounded argument rest on it.
//  - DELTA, per row: the effect changes each counter (node_held, node_swap per node,
//    premium_admitted) by exactly the acting job's change of share. With FRAME, that keeps the
//    sums of INV-INDEX for any number of jobs.
//  - ENABLED, per row: the row can fire at all on this shape (the local assumptions, its source
//    state and its guard are satisfiable together). A row that cannot would make every other
//    obligation about it vacuous — e.g. on a shape too small for a beneficiary to exist.
//  - DETERMINISTIC, per pair of rows with the same source and event: their guards never both hold
//    (in a state satisfying the invariants), so the core and Boost.MSM, which try such rows in
//    opposite orders, always take the same row.
// and one about the formulas, not asked of the solver (checker/id_order.h): ORDER, no guard,
// effect or invariant orders job ids or computes with them, which is what makes "job 0 acts" (and
// the BMC's slot-order reduction) sound. prove() does not add it; orrery-check does
// (add_obligation).
enum class ObligationKind { kInvariant, kFrame, kDelta, kEnabled, kDeterministic, kIdOrder };

struct Obligation {
  ObligationKind kind = ObligationKind::kInvariant;
  // 1-based row, 0 for Init: the job table's rows first, then the node table's (node row k is
  // row `rows + k`; its label says "node #k").
  int row = 0;
  int other_row = 0;      // kDeterministic: the second row of the pair
  std::string row_label;  // "Init" or the row's label
  spec::Inv inv{};        // kInvariant
  bool proved = false;
  bool unknown = false;  // the solver gave up (time limit): counts as not proved
  // Proved from the local assumptions alone (see above). FRAME, DELTA and DETERMINISTIC are
  // always asked locally.
  bool local = false;
  double ms = 0;
  std::string counterexample;  // when not proved
};

// "INV-GANG", "FRAME", "DELTA", "ENABLED", "DETERMINISTIC" or "ORDER".
std::string obligation_name(const Obligation& ob);

struct ProofReport {
  int rows = 0;       // job table rows
  int node_rows = 0;  // node table rows
  std::vector<Obligation> obligations;
  int proved = 0;
  int failed = 0;
  double seconds = 0;
};

// Appends an obligation decided outside prove() (ORDER), counting it as proved or failed.
void add_obligation(ProofReport& r, Obligation ob);

// Whether an invariant is proved for any fleet size (by the argument of docs/spec.md, which this
// does not check): every obligation of the run is proved — FRAME, DELTA and ENABLED included —
// and each of this invariant's obligations was proved from the local assumptions.
bool unbounded(const ProofReport& r, spec::Inv inv);

// The node table's rows are proved like the job table's, node 0 acting (node slots are symmetric):
// every invariant, FRAME (only the node's state changes), ENABLED and DETERMINISTIC. The job
// rows' FRAME includes that no job row changes a node's state.
ProofReport prove(const std::vector<SymRow>& rows, const std::vector<NodeSymRow>& node_rows,
                  const Shape& shape, unsigned timeout_ms);
// With the real node table (checker/lifecycle_rows.h).
ProofReport prove(const std::vector<SymRow>& rows, const Shape& shape, unsigned timeout_ms);

}  // namespace orrery::checker
