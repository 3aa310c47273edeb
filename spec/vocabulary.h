// The vocabulary of the job lifecycle: states, events, service tiers and the spec's constants.
// Plain enums, shared by the core's Boost.MSM machine, the checker and the journal format, so the
// numeric values are part of the on-disk format: append only, never renumber.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "spec/limits.h"

namespace orrery::spec {

enum class JobState : std::int64_t {
  kNew = 0,            // slot exists, job not yet submitted
  kSubmitted = 1,      // spec accepted, awaiting admission control
  kQueued = 2,         // admitted, waiting for devices (first start or after a failure)
  kPlaced = 3,         // gang placed on devices, new incarnation launching (in flight)
  kRunning = 4,        // training
  kCheckpointing = 5,  // preemption decided: the nodes take a consistent cut, devices still held
                       // (in flight)
  kSuspended = 6,      // checkpoint committed, devices released
  kMigrating = 7,      // migration decided: the nodes take a cut on the job's devices while the
                       // target devices are reserved for it (in flight)
  kRestoring = 8,      // a new incarnation restores the committed checkpoint on its devices
                       // (after a resume, a migration or a resize; in flight)
  kCompleted = 9,
  kFailed = 10,
  kCancelled = 11,
  kResizing = 12,      // resize decided: the nodes take a cut on the job's devices while the
                       // devices it grows onto are reserved for it (in flight)
};
inline constexpr int kNumJobStates = 13;

enum class EventKind : std::int64_t {
  kSubmit = 0,
  kAdmit = 1,
  kPlace = 2,
  kStart = 3,
  kProgress = 4,        // a training step was committed (and GPU time accounted)
  kCheckpoint = 5,      // periodic checkpoint committed while running
  kResizeUp = 6,        // decide a resize to more devices, same world size: less splicing
  kResizeDown = 7,      // decide a resize to fewer devices, same world size: more splicing
  kPreempt = 8,         // decide a preemption: the cut starts
  kCheckpointDone = 9,  // the in-flight cut is stored at the current step (preemption: suspend;
                        // migration or resize: a new incarnation takes the target devices)
  kResume = 10,         // suspended job placed again
  kRestoreDone = 11,    // restore (after resume, migration or resize) finished
  kMigrate = 12,        // decide a migration to other devices: the cut starts
  kComplete = 13,
  kWorkerCrash = 14,
  kNodeLoss = 15,
  kCancel = 16,
  kRelease = 17,        // give up the devices reserved for a waiting job (operators only)
  kAbort = 18,          // the in-flight operation failed, was refused or timed out: back to a
                        // safe state (runtime reports; the core's own timeouts)
  kRetype = 19,         // a waiting job is to run on another device type its spec allows (a job
                        // may name several: the core checks the type is one of them)
};
inline constexpr int kNumEventKinds = 20;

// Who may decide an event. The invariants about *decisions* (INV-TIER above all) hold for what
// planners decide; they rest on failures, progress and completion being facts the runtime reports,
// and submission and cancellation being the users' and operators' to decide. The core refuses an
// event from an origin that may not decide it, so a planner cannot free devices by claiming a
// worker crashed. (That a runtime report is authentic is the RPC layer's to ensure.)
enum class Origin : std::int64_t {
  kPlanner = 0,   // policies: Admit Place Resume Migrate ResizeUp ResizeDown Preempt Retype
  kRuntime = 1,   // node agents: Start Progress Checkpoint CheckpointDone RestoreDone Complete
                  //              WorkerCrash NodeLoss Abort
  kOperator = 2,  // users and administrators: trusted with every event (e.g. marking a node lost,
                  // giving up a reservation: a planner may not, or it could hand the devices a
                  // preemption freed to a job the preemption's beneficiary outranks)
  kCore = 3,      // the core's own timers (core/protocol/): Abort of an in-flight operation that
                  // did not end within its timeout, and nothing else
};
inline constexpr int kNumOrigins = 4;

constexpr bool planner_event(EventKind e) {
  switch (e) {
    case EventKind::kAdmit:
    case EventKind::kPlace:
    case EventKind::kResume:
    case EventKind::kMigrate:
    case EventKind::kResizeUp:
    case EventKind::kResizeDown:
    case EventKind::kPreempt:
    case EventKind::kRetype:
      return true;
    default:
      return false;
  }
}

constexpr bool may_decide(Origin o, EventKind e) {
  switch (o) {
    case Origin::kPlanner:
      return planner_event(e);
    case Origin::kRuntime:
      return !planner_event(e) && e != EventKind::kSubmit && e != EventKind::kCancel &&
             e != EventKind::kRelease;
    case Origin::kOperator:
      return true;
    case Origin::kCore:
      return e == EventKind::kAbort;
  }
  return false;
}

// The node lifecycle (the second verified machine, core/node_machine_table.h). A fresh core has
// every configured node Down; an agent's registration brings it to Joining, and the service
// readies it once reconciled. Draining takes no new devices; Lost means heartbeats were missed and
// the jobs holding its devices are being failed over; FailedOver returns it to Down once none is
// held, after which the agent may register again (rejoin).
enum class NodeState : std::int64_t {
  kDown = 0,
  kJoining = 1,
  kUp = 2,
  kDraining = 3,
  kLost = 4,
};
inline constexpr int kNumNodeStates = 5;

enum class NodeEvent : std::int64_t {
  kRegister = 0,       // Down -> Joining: an agent registered its devices (runtime)
  kReady = 1,          // Joining -> Up: reconciled with what the agent runs (runtime)
  kDrain = 2,          // Up -> Draining (operator)
  kUndrain = 3,        // Draining -> Up (operator)
  kHeartbeatLost = 4,  // Joining | Up | Draining -> Lost (runtime)
  kFailedOver = 5,     // Lost -> Down once no device of the node is held (runtime)
};
inline constexpr int kNumNodeEvents = 6;

// Planners decide no node event; drains are operators'; the rest are runtime facts.
constexpr bool may_decide_node(Origin o, NodeEvent e) {
  switch (o) {
    case Origin::kPlanner: return false;
    case Origin::kRuntime: return e != NodeEvent::kDrain && e != NodeEvent::kUndrain;
    case Origin::kOperator: return true;
    case Origin::kCore: return false;
  }
  return false;
}

constexpr std::string_view node_state_name(NodeState s) {
  constexpr std::string_view names[] = {"Down", "Joining", "Up", "Draining", "Lost"};
  auto i = static_cast<std::int64_t>(s);
  return (i >= 0 && i < kNumNodeStates) ? names[i] : "?";
}

constexpr std::string_view node_event_name(NodeEvent e) {
  constexpr std::string_view names[] = {"Register",  "Ready",        "Drain",
                                        "Undrain",   "HeartbeatLost", "FailedOver"};
  auto i = static_cast<std::int64_t>(e);
  return (i >= 0 && i < kNumNodeEvents) ? names[i] : "?";
}

enum class Tier : std::int64_t { kPremium = 0, kStandard = 1, kBasic = 2 };
inline constexpr int kNumTiers = 3;

// How a job's program is preempted (its TOML's `preemption`), fixed at submission.
//   transparent: the program runs through orrery's worker library (orrery-train-mlp, orrery.torch):
//                its state is cut at a safe point, so it is preempted, migrated, resized and
//                spliced bit-identically and loses only the time of the cut.
//   signal:      SIGTERM, then SIGKILL after the grace period; the program saves itself to
//                ORRERY_CHECKPOINT_DIR and resumes from there. One worker per device, no resize.
//   requeue:     killed and restarted from scratch: its progress is lost (its checkpoint is
//                always none). One worker per device, no resize.
enum class Preemption : std::int64_t { kTransparent = 0, kSignal = 1, kRequeue = 2 };
inline constexpr int kNumPreemptions = 3;

// At most this many workers of one job share a device by replica splicing.
inline constexpr int kSpliceLimit = 8;
// A job is requeued after each of its first kMaxRetries failures of its own (its program crashed or
// exited non-zero: WorkerCrash); the next one fails it for good.
inline constexpr int kMaxRetries = 3;
// Platform faults (NodeLoss: the node lost, its proxy killed, an incarnation superseded) relaunch
// a job from its last committed checkpoint without touching its retries. This separate, generous
// cap per job stops one that keeps landing on failing hardware.
inline constexpr int kMaxPlatformFaults = 100;

// The spec's bounds (kMaxWorld, kMaxMemMib, kMaxAttained, kMaxNodeDevices, kMaxFleetDevices) and
// every other limit live in spec/limits.h, included above.
static_assert(kMaxHostMemMib >= (kSpliceLimit - 1) * kMaxMemMib,
              "a node of one device must have room for the largest spliced gang");

constexpr std::string_view state_name(JobState s) {
  constexpr std::string_view names[] = {"New",       "Submitted",     "Queued",    "Placed",
                                        "Running",   "Checkpointing", "Suspended", "Migrating",
                                        "Restoring", "Completed",     "Failed",    "Cancelled",
                                        "Resizing"};
  auto i = static_cast<std::int64_t>(s);
  return (i >= 0 && i < kNumJobStates) ? names[i] : "?";
}

constexpr std::string_view event_name(EventKind e) {
  constexpr std::string_view names[] = {
      "Submit",   "Admit",      "Place",      "Start",          "Progress",    "Checkpoint",
      "ResizeUp", "ResizeDown", "Preempt",    "CheckpointDone", "Resume",      "RestoreDone",
      "Migrate",  "Complete",   "WorkerCrash", "NodeLoss",      "Cancel",      "Release",
      "Abort",    "Retype"};
  auto i = static_cast<std::int64_t>(e);
  return (i >= 0 && i < kNumEventKinds) ? names[i] : "?";
}

constexpr std::string_view origin_name(Origin o) {
  switch (o) {
    case Origin::kPlanner: return "planner";
    case Origin::kRuntime: return "runtime";
    case Origin::kOperator: return "operator";
    case Origin::kCore: return "core";
  }
  return "?";
}

constexpr std::string_view tier_name(Tier t) {
  switch (t) {
    case Tier::kPremium: return "premium";
    case Tier::kStandard: return "standard";
    case Tier::kBasic: return "basic";
  }
  return "?";
}

constexpr std::string_view preemption_name(Preemption m) {
  switch (m) {
    case Preemption::kTransparent: return "transparent";
    case Preemption::kSignal: return "signal";
    case Preemption::kRequeue: return "requeue";
  }
  return "?";
}

inline std::optional<Preemption> parse_preemption(std::string_view s) {
  for (int i = 0; i < kNumPreemptions; ++i)
    if (preemption_name(static_cast<Preemption>(i)) == s) return static_cast<Preemption>(i);
  return std::nullopt;
}

inline std::optional<Tier> parse_tier(std::string_view s) {
  for (int i = 0; i < kNumTiers; ++i)
    if (tier_name(static_cast<Tier>(i)) == s) return static_cast<Tier>(i);
  return std::nullopt;
}

inline std::optional<EventKind> parse_event(std::string_view s) {
  for (int i = 0; i < kNumEventKinds; ++i)
    if (event_name(static_cast<EventKind>(i)) == s) return static_cast<EventKind>(i);
  return std::nullopt;
}

}  // namespace orrery::spec
