// The ORDER obligation: no guard, effect or invariant orders job ids or computes with them.
//
// The inductive proof (checker/prover.cc) proves every row with the acting job at index 0, and
// the bounded model check (checker/bmc.cc) explores only runs that submit jobs in slot order. Both
// rest on job slots being interchangeable: the formulas may test ids for equality and select a job
// by its id, nothing else. This check makes that a checked fact rather than an assumption: every
// row's guard and effect, for every acting job, and every invariant (state parts per job, device
// and node, the fleet and sums parts, every step invariant with the row's own step, DELTA's
// counters_follow_shares, the initial state and the fleet's well-formedness) are evaluated in
// checker/id_order_domain.h, which records whether a value holding a job id takes part in <, <=,
// >, >=, +, -, *, mod or div. That domain evaluates every term the symbolic domain builds, so the
// verdict does not depend on the cluster's values; the cluster still has jobs in several states.
//
// What that domain cannot see is plain C++ on slot indices, no domain value involved: a formula
// that reads a fixed slot (`s.jobs[0]`) or compares slot indices itself (`i < j`, or
// `d.k(i) < d.k(j)` with neither ever meeting an id). So, second, every formula must commute with
// renaming the jobs: on the two clusters above and three random ones (any values, ids of no job
// and -1 included), under a transposition and a rotation of the slots (ids in owners,
// reservations and beneficiaries renamed with them), every guard's clauses and every invariant's
// value (state and step parts, DELTA) are unchanged and every effect's state after is the renamed
// one. That is a test on a few clusters, not a proof; the domain's part holds for any values.
#pragma once

#include <string>
#include <vector>

#include "checker/id_order_domain.h"
#include "checker/prover.h"
#include "checker/symbolic.h"
#include "core/row_desc.h"
#include "spec/model.h"

namespace orrery::checker {

using OrdCluster = spec::ClusterVars<IdOrderDomain>;
using OrdParams = spec::Params<IdOrderDomain>;
using OrdRow = core::RowDesc<IdOrderDomain>;
using OrdNodeRow = core::NodeRowDesc<IdOrderDomain>;

struct IdOrderReport {
  int formulas = 0;  // evaluations (one formula, one acting job, one state)
  // One line per formula that orders a job id, e.g. "the guard gang_fits of #3 Queued --Place-->
  // Placed [...] (job 1 acting): a job id takes part in `<=`", or that does not commute with
  // renaming the jobs ("renaming the jobs 0->1, 1->0, 2->2 changes the guard ...").
  std::vector<std::string> violations;
  double ms = 0;
  bool ok() const { return violations.empty(); }
};

IdOrderReport check_id_order(const std::vector<OrdRow>& rows,
                             const std::vector<OrdNodeRow>& node_rows, const Shape& shape);

// The report as an obligation (kind kIdOrder), for the proof report, the table, JSON and JUnit.
Obligation id_order_obligation(const IdOrderReport& r);

// "job ids: compared only for equality in every guard, effect and invariant".
inline constexpr const char* kIdOrderLabel =
    "job ids: compared only for equality in every guard, effect and invariant";

}  // namespace orrery::checker
