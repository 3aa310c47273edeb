// Random lifecycle steps for the property tests, steered by the reference model so that sequences
// often reach the interesting parts of the lifecycle (running, preemption and suspension,
// migration and resizing decided, their cuts stored or aborted, launches and restores aborted,
// progress and checkpoints while a cut is in flight, reservations made for waiting and for moving
// jobs, consumed, voided, trespassed on and taken by a job that outranks their holder), while
// every event keeps a small weight in every state, so illegal events are tried too.
//
// Shared by lifecycle_proptest (which compares the core with the model step by step) and
// domain_equivalence_proptest (which only needs reachable states). Everything here draws its
// randomness with RapidCheck's `*gen`, so it must be called inside a generation context (a
// property or rc::gen::exec); draws shrink towards the unsurprising choice.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "core/decision.h"
#include "proptests/reference_model.h"
#include "spec/vocabulary.h"

namespace orrery::proptest {

// rc::gen::inRange scales its range with the generation size (small early in a run, and never
// the full range with max_size < 100): these draw from the whole range [lo, hi) at every size,
// and still shrink towards `lo`.
template <class T>
rc::Gen<T> uniform_gen(T lo, T hi) {
  return rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
}
template <class T>
T uniform(T lo, T hi) {
  return *uniform_gen<T>(lo, hi);
}

// One step of a random sequence.
struct Step {
  enum class Kind {
    kDecision,  // one fixed decision
    kNodeLoss,  // a node is lost: a NodeLoss decision for every job holding a device on it
    kClock,     // the injected clock moves (a negative amount must not move it back)
  };
  Kind kind = Kind::kDecision;
  core::Decision decision;                       // kDecision
  int node = 0;                                  // kNodeLoss
  spec::Origin origin = spec::Origin::kRuntime;  // kNodeLoss: who reports it
  std::int64_t ms = 0;                           // kClock

  // The decisions the step stands for in model state `m`. A node loss is resolved against the
  // state it is applied to, not the one it was drawn in: shrinking removes earlier steps.
  std::vector<core::Decision> decisions(const RefModel& m) const;
  std::string show() const;
};

// The next step for model state `m`.
Step next_step(const RefModel& m);

// A Submit: mostly a well-formed spec in one of the three preemption modes (a signal or requeue
// one mostly with min = max = world, sometimes not: refused), sometimes one at or past the input
// bounds, sometimes anything (job_spec_gen.cc).
core::Decision gen_submit(const RefModel& m);

// The origin a generated decision for event `e` claims: mostly the one that decides it in
// practice, sometimes an operator, now and then one that may not decide it (origin_gen.cc).
spec::Origin pick_origin(spec::EventKind e);

// "Preempt job 1 for job 2 [planner]" (describe() leaves the origin out; a Submit also shows its
// memory and tier, which describe() does not).
std::string show_decision(const core::Decision& d);

// Devices reserved for job j now, per the model.
std::vector<int> reserved_devices(const RefModel& m, int j);

// How many sequences or states a property test runs: environment variable `name` when set (a
// positive integer), else `dflt`; nullopt, with the reason on stderr, when it is set to anything
// else (the test's main then exits 2).
std::optional<long> count_from_env(const char* name, long dflt);

}  // namespace orrery::proptest
