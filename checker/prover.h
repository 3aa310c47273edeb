// Inductive proof of the invariants over the rows of a lifecycle table, on a bounded symbolic
// cluster: for every invariant, Init => Inv; for every row and every invariant,
//   Fleet /\ Inv(s) /\ state_j(s) = Source /\ Guard(s, j, p) /\ s' = Effect(s, j, p)
//     => Inv_state(s') /\ Inv_step(s, j, p, s')
// with j = job 0 (job slots are symmetric) and every other value symbolic. Each obligation is one
// solver query; a satisfiable negation is a counterexample, printed as before/event/after states.
#pragma once

#include <string>
#include <vector>

#include "checker/symbolic.h"
#include "spec/invariants.h"

namespace orrery::checker {

// Besides the invariants, two obligations about the table itself:
//  - FRAME, per row: the effect changes only the acting job's variables and its row of the hold
//    matrix, never another job or the fleet. The "job 0 acts" symmetry rests on it.
//  - DETERMINISTIC, per pair of rows with the same source and event: their guards never both hold
//    (in a state satisfying the invariants), so the core and Boost.MSM, which try such rows in
//    opposite orders, always take the same row.
enum class ObligationKind { kInvariant, kFrame, kDeterministic };

struct Obligation {
  ObligationKind kind = ObligationKind::kInvariant;
  int row = 0;            // 1-based table row, 0 for Init
  int other_row = 0;      // kDeterministic: the second row of the pair
  std::string row_label;  // "Init" or the row's label
  spec::Inv inv{};        // kInvariant
  bool proved = false;
  bool unknown = false;  // the solver gave up (time limit): counts as not proved
  double ms = 0;
  std::string counterexample;  // when not proved
};

// "INV-GANG", "FRAME" or "DETERMINISTIC".
std::string obligation_name(const Obligation& ob);

struct ProofReport {
  int rows = 0;
  std::vector<Obligation> obligations;
  int proved = 0;
  int failed = 0;
  double seconds = 0;
};

ProofReport prove(const std::vector<SymRow>& rows, const Shape& shape, unsigned timeout_ms);

}  // namespace orrery::checker
