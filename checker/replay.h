// `orrery-check replay JOURNAL`: rebuild the core from a real journal, decision by decision, and
// check the states it passes through against the invariants and every decision against the step
// invariants, on concrete values with the spec's own templates (spec/invariants.h).
//
// The journal is streamed (core::stream_journal): memory is the core's state plus a shadow copy of
// it, whatever the journal's length. Checks, per decision (docs/checker.md, "Replay"):
//   incremental, after every decision, O(|devices the decision names| + |devices the job held|):
//     the job parts of every state invariant for the acting job and for every job that owned one
//     of the named devices before or after; the device parts for the named devices (those the job
//     held before and after, and those the decision selects); the node parts for their nodes; the
//     fleet parts; INV-INDEX's sums through DELTA (each counter changed by exactly the acting job's
//     change of share, on the touched nodes); and every step invariant for those jobs and devices.
//   full, after every `full_every` decisions, and always on the initial state and after the last
//     decision: every state invariant over the whole state (state_invariant: O(jobs + devices)),
//     and FRAME over the interval: the state outside the acting jobs, named devices and their
//     nodes is what it was at the last full check (the shadow copy the incremental checks use as
//     the state before each decision is compared with the core's state).
//   FRAME, before every decision: what it may change (its job, the named devices, their nodes'
//     counters, the fleet counter) is still as the shadow has it, i.e. no earlier decision changed
//     them outside its own frame (the copy into the shadow after this decision would otherwise
//     hide such a change from the next full check).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace orrery::checker {

// Decisions between two full checks unless told otherwise: at the figures of docs/performance.md
// a full check of a 100,000-device fleet with 200,000 jobs costs tens of milliseconds, about 5% of
// the time replaying 1,000,000 decisions takes.
inline constexpr std::uint64_t kDefaultFullEvery = 1000000;

struct ReplayOptions {
  // A full check after every `full_every` decisions; 0: only on the initial state and after the
  // last decision; 1: after every decision (what replay did before it was incremental).
  std::uint64_t full_every = kDefaultFullEvery;
  // Sampling of the incremental checks: after every `check_every`-th decision only (>= 1; 1, the
  // default, checks every decision). The shadow state is kept after every decision either way, so
  // a decision that is checked is checked against its true state before; the state invariants of
  // the decisions in between are still covered by the full checks, their step invariants are not.
  std::uint64_t check_every = 1;
  // Read, checksum and decode the journal on a second thread while this one commits and checks
  // (the results are the same; only the time differs).
  bool pipelined = true;
};

struct ReplayReport {
  bool ok = false;        // readable, replayable, and no invariant broken
  std::string error;      // unreadable journal, bad header, or a record that does not replay
  bool unreadable = false;  // the error is that the journal (or its fleet record) cannot be read
  std::uint64_t records = 0;    // good records (fleet record included)
  std::uint64_t decisions = 0;  // decisions replayed and checked
  // Invariant evaluations: the 11 state invariants on the initial state, then after each decision
  // the 11 state and 6 step invariants (incremental). Later full checks are counted in
  // full_checks only.
  std::uint64_t checks = 0;
  bool clean_tail = true;
  std::string tail_error;  // what was wrong past the last good record
  std::vector<std::string> violations;
  double seconds = 0;
  // Sampling (see ReplayOptions).
  std::uint64_t full_every = 0;      // as asked
  std::uint64_t checked_decisions = 0;  // decisions checked incrementally (see check_every)
  std::uint64_t full_checks = 0;     // whole-state checks run (the initial state and the end too)
  double full_check_seconds = 0;     // time spent in them
};

ReplayReport replay_journal(const std::string& path, const ReplayOptions& options = {});

}  // namespace orrery::checker
