// An independent reference model of the scheduler core, for the property tests.
//
// Written from the lifecycle's prose rules (docs, design.md, the comments of spec/guards.h and
// spec/effects.h), NOT by calling spec/ templates: the point is a second, plain implementation
// that the real SchedulerCore is compared with. It shares only the vocabulary (state and event
// enums) and core::Decision, the input both sides read.
//
// The model also describes its fleet itself (FleetDesc) and renders the text the core parses, so
// the device numbering and node layout are not taken from the core either.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/decision.h"
#include "spec/vocabulary.h"

namespace orrery::proptest {

// The model's own copies of the spec's constants, written down from design.md.
inline constexpr std::int64_t kRefSpliceLimit = 8;  // workers per device at most
// A failure requeues the job while fewer than this many failures came before it, so the job
// fails on its fourth failure (three retries).
inline constexpr std::int64_t kRefMaxRetries = 3;
// Platform faults (NodeLoss) a job survives before it fails for good; its retries untouched.
inline constexpr std::int64_t kRefMaxPlatformFaults = 100;
inline constexpr int kRefNumTiers = 3;
// Between a premium job within the reserve and a spare one, the reserve's order gives way to a
// lead in service of more than a day (GPU-ms); the job within goes first again at half of it.
inline constexpr std::int64_t kRefReserveLeadGpuMs = std::int64_t{24} * 3600 * 1000;
// Input bounds, so that nothing overflows 64-bit arithmetic: workers per job, MiB per worker,
// GPU-ms of attained service per job.
inline constexpr std::int64_t kRefMaxWorld = std::int64_t{1} << 20;
inline constexpr std::int64_t kRefMaxMemMib = std::int64_t{1} << 40;
inline constexpr std::int64_t kRefMaxAttained = std::int64_t{1} << 62;

struct FleetDesc {
  struct Group {
    std::string type;
    int count = 0;
    std::int64_t mem_mib = 81920;  // device memory
  };
  struct NodeDesc {
    std::string name;
    std::string cluster;
    std::int64_t host_mem_mib = 0;
    std::vector<Group> groups;
  };
  std::int64_t premium_reserve = 0;
  std::vector<NodeDesc> nodes;

  std::string to_text() const;  // the config core::Fleet::parse reads
};

// The small fleets the tests use: few devices, two device types, tight host memory.
const std::vector<FleetDesc>& test_fleets();

struct RefJob {
  spec::JobState state = spec::JobState::kSubmitted;
  std::int64_t tier = 0;
  std::int64_t dtype = 0;
  std::int64_t world = 0;
  std::int64_t min_dev = 0;
  std::int64_t max_dev = 0;
  std::int64_t mem = 0;
  std::set<int> devices;  // held now
  std::int64_t splice = 0;
  std::int64_t epoch = 0;
  std::int64_t progress = 0;
  std::int64_t ckpt = -1;
  std::int64_t failures = 0;
  std::int64_t attained = 0;
  // While Checkpointing for a preemption, or Resizing to fewer devices: the job the decision is
  // for (else -1); the devices the job gives up are reserved for it if it is still waiting then.
  std::int64_t ben = -1;
  // While Migrating or Resizing: where the job goes once its cut is stored (the devices it does
  // not hold are reserved for it meanwhile) and the workers per device there; empty and 0
  // otherwise.
  std::set<int> target;
  std::int64_t tsplice = 0;
  // How the job's program is preempted (spec::Preemption's value), fixed at submission:
  // transparent (cut at a safe point: spliced, resized, checkpointed while it runs), signal or
  // requeue (one worker per device, never resized or spliced, no checkpoint while it runs; a
  // requeue job's every cut is its start: checkpoint step 0, progress back to 0).
  std::int64_t mode = 0;
  // Platform faults so far (NodeLoss: they do not spend the job's retries, `failures`).
  std::int64_t faults = 0;
  // An operator suspended it (a preemption for no one) and has not resumed it (Release): it is
  // not placed or resumed meanwhile.
  bool hold = false;
  // A premium job admitted beyond the premium reserve: it counts nothing against the reserve and
  // ranks below the premium jobs within it (unless one leads it by more than
  // kRefReserveLeadGpuMs of service), until a (re)start finds room in the reserve.
  bool spare = false;
  // The device types its spec allows when it names several ("A|B", the first its type at
  // submission); empty when it names one. Retype moves a waiting job to another of them.
  std::vector<int> types;
  bool transparent() const { return mode == static_cast<std::int64_t>(spec::Preemption::kTransparent); }
  bool requeue() const { return mode == static_cast<std::int64_t>(spec::Preemption::kRequeue); }
};

struct RefModel {
  // Fleet.
  int fleet_index = 0;
  std::vector<std::string> type_names;  // interned in order of first appearance
  std::vector<int> dev_type;            // device -> type id
  std::vector<std::int64_t> dev_mem;    // device -> MiB of device memory
  std::vector<int> dev_node;            // device -> node
  std::vector<std::int64_t> host_mem;   // node -> MiB
  std::int64_t reserve = 0;

  // Jobs and counters.
  std::vector<RefJob> jobs;
  // Device -> the job it is reserved for, -1 when none. Only *live* reservations are kept: a
  // reservation is recorded when a shrink or a preemption frees the device for a waiting job, or
  // when a migration or growth is decided (its target devices the job does not hold, for the
  // moving job), and erased as soon as it ends (the device is taken, or the job is placed,
  // resumed, cancelled, fails, aborts, carries its move out or releases its reservations). The
  // core's generations are its own bookkeeping for the same thing.
  std::vector<int> reserved_for;
  std::int64_t now_ms = 0;
  std::uint64_t committed = 0;
  std::uint64_t rejected = 0;

  static RefModel from_fleet(int fleet_index, std::int64_t start_ms);
  int num_devices() const { return static_cast<int>(dev_type.size()); }
  int num_nodes() const { return static_cast<int>(host_mem.size()); }
  int num_jobs() const { return static_cast<int>(jobs.size()); }
  int holder_of(int dev) const;  // -1 when free
  // The counters the core keeps, computed here as the sums they stand for.
  std::int64_t node_held(int node) const;  // devices held on the node
  std::int64_t node_swap(int node) const;  // MiB of host memory used by swapped-out workers
  std::int64_t premium_admitted() const;   // min_dev summed over admitted premium jobs
};

struct Prediction {
  bool accepted = false;
  bool wrong_origin = false;  // rejected because its origin may not decide its event
  int job = -1;
  spec::JobState from = spec::JobState::kNew;
  spec::JobState to = spec::JobState::kNew;
  std::string why;  // for a rejection: the rule that rejects (for failure messages)
  // Rejected because a selected device is reserved for another job (and every rule checked
  // before that one held).
  bool blocked_by_reservation = false;
  // What the decision did to reservations, in devices: newly reserved, taken by the job they were
  // reserved for, and ended otherwise (voided by Release, Cancel, or the job being placed or
  // resumed on other devices).
  int resv_created = 0;
  int resv_consumed = 0;
  int resv_voided = 0;
  // Devices reserved for another job that this one took because it is favoured over that job.
  int resv_overridden = 0;
  // A preemption checkpoint committed while its beneficiary no longer waits: nothing reserved.
  bool suspend_without_reservation = false;
  // The cut of a migration or resize was stored but its target no longer fits (a device of it
  // was taken by a job that outranks the mover, or is reserved for another job now): rejected,
  // the move is to be aborted.
  bool move_target_lost = false;
};

// Predicts what the core does with `d`, and applies it to `m` (counters included). The origin is
// checked before anything else: a decision from an origin that may not decide its event is
// rejected whatever its job and parameters.
Prediction predict(RefModel& m, const core::Decision& d);

// Who may decide event `e`: the model's own table, from design.md's and docs/spec.md's prose
// (planners place, resize, migrate and preempt; the runtime reports progress, cuts, completion,
// failures and aborted operations; the core's own timers decide Abort and nothing else; operators
// anything), not spec::may_decide.
bool ref_may_decide(spec::Origin o, spec::EventKind e);

// Helpers the command generators use too.
bool ref_holding(spec::JobState s);
bool ref_waiting(spec::JobState s);
bool ref_admitted(spec::JobState s);
bool ref_moving(spec::JobState s);     // Migrating, Resizing: a move decided, its cut in flight
bool ref_in_flight(spec::JobState s);  // the runtime is carrying a decision out: Abort applies
// May waiting job b take resources from job v (the tier / fair-share rule)?
bool ref_favoured(const RefModel& m, std::int64_t b, int v);
// Does job j's gang fit on `sel` with `splice` workers per device (count, split, type,
// exclusivity, reservations, node capacity, host memory), given every other job? (All nodes are
// Up in the model.) For a moving job, `ref_gang_fits(m, j, job.target, job.tsplice)` is whether
// its move can still be carried out.
bool ref_gang_fits(const RefModel& m, int j, const std::set<int>& sel, std::int64_t splice);
// Device counts c in [min, max] with world == c * splice for a splice within the limit.
std::vector<std::int64_t> ref_feasible_counts(const RefJob& job);

std::string describe_job(const RefJob& j);

}  // namespace orrery::proptest
