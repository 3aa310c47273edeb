// `orrery-check replay JOURNAL`: rebuild the core from a real journal, decision by decision, and
// check every state it passes through against every invariant (state parts) and every decision
// against every step invariant, on concrete values with the spec's own templates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace orrery::checker {

struct ReplayReport {
  bool ok = false;        // readable, replayable, and no invariant broken
  std::string error;      // unreadable journal, bad header, or a record that does not replay
  bool unreadable = false;  // the error is that the journal (or its fleet record) cannot be read
  std::uint64_t records = 0;    // good records (fleet record included)
  std::uint64_t decisions = 0;  // decisions replayed and checked
  std::uint64_t checks = 0;     // invariant evaluations
  bool clean_tail = true;
  std::string tail_error;  // what was wrong past the last good record
  std::vector<std::string> violations;
  double seconds = 0;
};

ReplayReport replay_journal(const std::string& path);

}  // namespace orrery::checker
