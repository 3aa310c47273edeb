// What orrery-check prints: a table (rows x invariants) or a JSON object.
#pragma once

#include <ostream>
#include <string>

#include "checker/bmc.h"
#include "checker/prover.h"
#include "checker/replay.h"

namespace orrery::checker {

struct CheckRun {
  ProofReport proof;
  bool bmc_ran = false;
  BmcReport bmc;
  double seconds = 0;
  bool ok() const { return proof.failed == 0 && (!bmc_ran || bmc.ok); }
};

void print_table(std::ostream& out, const CheckRun& run);
void print_json(std::ostream& out, const CheckRun& run);
void print_replay(std::ostream& out, const std::string& path, const ReplayReport& r);
void print_replay_json(std::ostream& out, const std::string& path, const ReplayReport& r);

std::string json_escape(const std::string& s);

}  // namespace orrery::checker
