// What orrery-check prints: a table (rows x invariants), a JSON object, or a JUnit XML report for
// CI systems. docs/ci.md describes the JUnit report; README.md the JSON keys.
#pragma once

#include <ostream>
#include <string>

#include "checker/bmc.h"
#include "checker/prover.h"
#include "checker/replay.h"
#include "checker/symbolic.h"

namespace orrery::checker {

struct CheckRun {
  ProofReport proof;
  Shape proof_shape;    // the symbolic cluster of the inductive proof
  bool bmc_ran = false;
  Shape bmc_shape;      // the configured BMC cluster (reported even when the BMC is skipped)
  int bmc_depth_asked = 0;  // the configured BMC depth (bounds file or --bmc-depth)
  BmcReport bmc;
  double seconds = 0;
  bool ok() const { return proof.failed == 0 && (!bmc_ran || bmc.ok); }
};

void print_table(std::ostream& out, const CheckRun& run);
void print_json(std::ostream& out, const CheckRun& run);
void print_replay(std::ostream& out, const std::string& path, const ReplayReport& r);
void print_replay_json(std::ostream& out, const std::string& path, const ReplayReport& r);

// JUnit XML (the Ant/Surefire schema that CI systems read): <testsuites> with a testsuite
// "orrery-check.proof" (one testcase per obligation, named "<row> :: <INV-ID|FRAME|DELTA|
// DETERMINISTIC>"; a counterexample is a <failure>, a solver that gave up an <error>) and a
// testsuite "orrery-check.bmc" (one testcase; <skipped/> when the BMC did not run).
void write_junit(std::ostream& out, const CheckRun& run);
// One testsuite "orrery-check.replay" with one testcase for the journal: a <failure> listing the
// violations (or the record that does not replay), an <error> when the journal cannot be read.
void write_replay_junit(std::ostream& out, const std::string& path, const ReplayReport& r);
// A report with a single errored testcase, for a run that could not start or finish; `type` says
// why ("input": a bad bounds file or argument, "internal": the solver or the checker failed).
void write_junit_error(std::ostream& out, const std::string& suite, const std::string& type,
                       const std::string& message);

std::string json_escape(const std::string& s);
// Escapes &, <, >, " and ' (and, for attributes, newlines and tabs); drops the characters XML 1.0
// forbids and replaces bytes that are not UTF-8 with U+FFFD, so any text makes well-formed XML.
std::string xml_escape(const std::string& s, bool attribute = false);

// The JUnit testcase name of an obligation: its row label without the "[guard / effect]" part,
// " :: ", and the obligation's name.
std::string junit_name(const Obligation& ob);

}  // namespace orrery::checker
