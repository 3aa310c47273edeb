// Choosing whom to preempt for a waiting job: what each candidate would lose, and the set of
// victims covering the beneficiary's need that loses the least.
//
// Whole gangs or nothing. The core reserves a preempted job's devices for the beneficiary until it
// is placed, and only an operator may release a reservation: a preemption that frees too few
// devices for the beneficiary would leave them reserved for a job that cannot start, blocking
// every job it outranks (and two such half-served jobs of equal rank would block each other for
// good). So the planners preempt only a set of victims whose devices, with those free to the
// beneficiary now in their region (cut_need below; not those another job's cuts counted on in the
// same round), cover its smallest gang, or none. The free devices are not reserved: a job that
// takes them before the cuts end (one that outranks the beneficiary, or one after it in the
// planner's order) leaves it short, and its next search cuts for what it still lacks (a lower
// tier's job that took them is cut in turn).
//
// What a victim loses (device-milliseconds of work thrown away; docs/policies.md, "What a victim
// loses"), by its preemption mode (spec::Preemption, core.job_info(v).mode):
//   - transparent: nothing but the time of its cut: the cut is at its current step. Every victim
//     pays its cut's time, about the same per device whatever its mode, so that is not weighed:
//     among transparent victims the planner's own order decides, as it did before modes existed;
//   - requeue: everything it ran since it last started, from scratch (every start of a requeue
//     job is from scratch: its checkpoint is always step 0): devices x wall time since its start;
//   - signal: what it ran since its own last save, which orrery cannot see. It saves on SIGTERM
//     by contract, but a program that does not, or a node that fails in its grace period, loses
//     everything since its last save, at worst since its start: counted as devices x wall time
//     since its start, like a requeue job. With equal run times a signal job goes before a requeue
//     job (the mode breaks ties: transparent, signal, requeue): it has at least a chance to save.
// Start times are the book's (JobBook::running_since) on the core's injected clock.
//
// min_runtime_ms (a job's TOML min_runtime_s): a job whose current incarnation started less than
// that long ago is not a candidate for a planner's preemption, shrink or migration (operators may
// still do anything: this is policy, the spec knows nothing of it).
#pragma once

#include <cstdint>
#include <vector>

#include "core/policy/job_book.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {

// The node that holds every device running job `v` holds: -1 when it holds none or spans nodes.
int job_node(const SchedulerCore& core, int v);

// Ties between equal losses: transparent (0) before signal (1) before requeue (2).
int mode_rank(spec::Preemption m);

// Device-milliseconds of work job `v` (Running) loses if it is cut now, per device (the same on
// each): 0 for a transparent job.
std::int64_t loss_per_device_ms(const SchedulerCore& core, const JobBook& book, int v);

// Whether a planner must leave running job `v` alone now: its incarnation started less than its
// min_runtime_ms ago.
bool protected_now(const SchedulerCore& core, const JobBook& book, int v);

// When running job `v`'s attained service as of now (committed + PlanContext::unreported_gpu_ms)
// reaches `bound` GPU-ms, at the devices it holds (now, if it has; INT64_MAX for a job that holds
// none): a time after now means not yet. A LAS planner (tiresias, afs) passes over a candidate
// with too little service so, and when its search found no victim for a waiting job asks for a
// round when the first candidate it passed over for too little service will qualify
// (PlanContext::replan_at), as orrery-core, planning every 100 ms, would search again by then.
std::int64_t reaches_service_at(const SchedulerCore& core, const PlanContext& ctx, int v, std::int64_t bound);

struct VictimCandidate {
  int job = -1;
  std::int64_t devices = 0;      // the devices preempting it frees
  std::int64_t loss_per_device = 0;
  int mode_rank = 0;
  std::int64_t cls = 0;          // preference class: every job of a smaller class goes first
};

// The victims among `candidates` (each a running job the beneficiary may preempt, in the
// planner's order of preference, which breaks every tie) whose devices add up to at least `need`,
// with the least loss; empty when all of them together hold fewer. Classes are taken whole,
// smallest first, until the one in which the devices add up (the lowest tier first); inside that
// class: the cheapest per device first (greedy), then those the others make unneeded dropped
// where that saves work, or a single candidate that covers the rest alone if it loses less.
// Where every candidate loses nothing (all transparent) this is the planner's order's shortest
// covering prefix. O(n log n).
std::vector<int> cheapest_victims(std::vector<VictimCandidate> candidates, std::int64_t need);

// What cuts for waiting job `ben` must free, and where: per region that can hold its smallest
// gang, the gang less the devices free to it there now (GangPlacer::shortfall) and less those
// other jobs' cuts counted on this round (JobBook::claim_free), from jobs in that region (region
// -1: anywhere, a one-region fleet or a job allowed across regions). The whole gang (`whole`, its
// min_devices), anywhere, where the count is not what stands in the way (host memory, topology);
// 0 where it fits now. Counting the free devices matters where they are many: a gang of 8 with 6
// devices free needs 2 cut, not 8 (before, such a gang waited until victims alone covered it).
//
// A gang kept to one node (GangPlacer::one_node) needs its devices freed on one node: `one_node`,
// no `options` and no fallback anywhere; `devices` is then a lower bound (the gang less the most
// one node has open), and cover_need chooses the node: of the nodes that can hold the gang where
// the candidates hold devices, the one whose cover cuts the lowest tier only, then the fewest
// devices, then loses least (ties: the least lacking, the lowest node). What it lacks on a node is
// the gang less the node's devices of its level free to it (open, or reserved for it or for a job
// it outranks: its earlier cuts' devices count where they are), less those other jobs' cuts
// counted on there this round.
struct CutNeed {
  std::int64_t devices = 0;  // the least of `options`' (the whole gang where there are none)
  int region = -1;
  std::int64_t whole = 0;
  bool one_node = false;
  int level = -1;            // the gang's level in the placer's index (one_node)
  std::int64_t dtype = -1;   // its device type
  int job = -1;              // the waiting job
  // Per region that can hold the gang (-1: the fleet), what cuts there must free, the least
  // first; only those below the whole gang. `node`: the node the cuts free it on (one_node).
  struct Option {
    int region = -1;
    std::int64_t devices = 0;
    int node = -1;
  };
  std::vector<Option> options;
  bool counts_free() const { return devices < whole; }
  // What cutting running job `v` must free with others of its region: its region's option, else
  // the whole gang anywhere (region -1, `whole`: the fallback below). For a gang kept to one node:
  // what it lacks on v's node, where v holds devices on that node only, the node can hold the
  // gang and it lacks some there; else more than any job holds (no shrink of v frees it).
  Option for_victim(const SchedulerCore& core, JobBook& book, int v) const;
  // What a gang kept to one node lacks on `node` (one_node).
  std::int64_t lack_on(const SchedulerCore& core, JobBook& book, int node) const;
};
CutNeed cut_need(const SchedulerCore& core, JobBook& book, int ben);
// The victims among `candidates` (cheapest_victims' order and rules) that cover `need`: region by
// region, the least lacking first, among those in the region what it lacks there; where no region
// can (each holds too little that may be cut), the whole gang among all of them, as before free
// devices were counted. `chosen` (may be null): the option taken, region -1 and `whole` devices
// for the fallback.
std::vector<int> cover_need(const SchedulerCore& core, JobBook& book, const std::vector<VictimCandidate>& candidates,
                            const CutNeed& need, CutNeed::Option* chosen);
// After cuts for `ben` started by option `chosen`: the free devices they counted on (the gang
// less `chosen.devices`) are not counted again for another job's cuts this round
// (JobBook::claim_free).
void claim_free(const SchedulerCore& core, JobBook& book, int ben, const CutNeed& need, const CutNeed::Option& chosen);

// Proposes Preempt of each victim for `beneficiary` (each checked with the core first) and notes
// the cuts in the book; the number started.
int preempt_for(const SchedulerCore& core, PlanContext& ctx, JobBook& book, const std::vector<int>& victims,
                int beneficiary);

// Proposes ResizeDown of running job `v` to its first `devices` devices (world / devices workers
// a device: nothing is lost) for `beneficiary`, checked with the core first; true if proposed.
bool shrink_for(const SchedulerCore& core, PlanContext& ctx, int v, std::int64_t devices, int beneficiary);

}  // namespace orrery::core::policy
