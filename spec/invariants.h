// The invariants, each written once with its ID. An invariant has a *state* part, which must hold
// in every reachable cluster state, and may have a *step* part, a relation between the state
// before and after any transition (job `j` acting with parameters `p`), which must hold for every
// transition. The checker proves Init => Inv and Inv /\ Guard /\ Effect => Inv' (and => Step) for
// every row of the lifecycle table; the core and the property tests evaluate the same templates on
// concrete values. docs/spec.md explains each one in prose.
#pragma once

#include <array>
#include <string_view>

#include "spec/model.h"

namespace orrery::spec {

enum class Inv {
  kWorld,  // INV-WORLD
  kGang,   // INV-GANG
  kExcl,   // INV-EXCL
  kCap,    // INV-CAP
  kCkpt,   // INV-CKPT
  kEpoch,  // INV-EPOCH
  kTier,   // INV-TIER
  kTerm,   // INV-TERM
  kAdmit,    // INV-ADMIT
  kIndex,    // INV-INDEX
  kReserve,  // INV-RESERVE
  kNode,     // INV-NODE
  kSplice,   // INV-SPLICE
  kMode,     // INV-MODE
  kHold,     // INV-HOLD
};
inline constexpr std::array<Inv, 15> kAllInvariants = {
    Inv::kWorld, Inv::kGang,  Inv::kExcl,  Inv::kCap,     Inv::kCkpt,    Inv::kEpoch,
    Inv::kTier,  Inv::kTerm,  Inv::kAdmit, Inv::kIndex,   Inv::kReserve, Inv::kNode,
    Inv::kSplice, Inv::kMode, Inv::kHold};

constexpr std::string_view inv_id(Inv i) {
  switch (i) {
    case Inv::kWorld: return "INV-WORLD";
    case Inv::kGang: return "INV-GANG";
    case Inv::kExcl: return "INV-EXCL";
    case Inv::kCap: return "INV-CAP";
    case Inv::kCkpt: return "INV-CKPT";
    case Inv::kEpoch: return "INV-EPOCH";
    case Inv::kTier: return "INV-TIER";
    case Inv::kTerm: return "INV-TERM";
    case Inv::kAdmit: return "INV-ADMIT";
    case Inv::kIndex: return "INV-INDEX";
    case Inv::kReserve: return "INV-RESERVE";
    case Inv::kNode: return "INV-NODE";
    case Inv::kSplice: return "INV-SPLICE";
    case Inv::kMode: return "INV-MODE";
    case Inv::kHold: return "INV-HOLD";
  }
  return "INV-?";
}

constexpr std::string_view inv_summary(Inv i) {
  switch (i) {
    case Inv::kWorld:
      return "world size and job spec fixed and in range after submission; the device type "
             "changes only while the job waits, voiding its reservations";
    case Inv::kGang: return "a job holding devices has all W workers placed within its range";
    case Inv::kExcl: return "a device is held by at most one job";
    case Inv::kCap: return "no node exceeds its devices or host memory for spliced state";
    case Inv::kCkpt: return "suspended/restoring jobs have a checkpoint; progress monotone";
    case Inv::kEpoch: return "every (re)start takes a larger epoch; one incarnation holds";
    case Inv::kTier: return "preemption/shrinking only for a favoured job; attained in range";
    case Inv::kTerm: return "finished jobs hold nothing and never leave their state";
    case Inv::kAdmit:
      return "admitted premium demand within the premium reserve; beyond it only spare premium "
             "jobs, and a job within it stays within it";
    case Inv::kIndex: return "owners match held sets; each counter equals the sum it stands for";
    case Inv::kReserve: return "freed devices reserved for the beneficiary; only it may take them";
    case Inv::kNode: return "devices taken only on Up nodes; none held on a Down or Joining node";
    case Inv::kSplice:
      return "a move's target is a gang; a resize keeps a subset or superset; an epoch never swaps";
    case Inv::kMode:
      return "only transparent jobs are spliced or resized; a requeue job keeps no progress";
    case Inv::kHold:
      return "a job an operator suspended is not started again until released; budgets count up";
  }
  return "";
}

// ---- Initial state -------------------------------------------------------------------------

// A job slot before submission.
template <class D>
JobVars<D> new_job(const D& d, int devices) {
  auto z = d.k(0);
  return JobVars<D>{d.k(static_cast<std::int64_t>(JobState::kNew)),
                    z, z, z, z, z, z, z, z, z, z, d.k(-1), z, z, d.k(-1), z, z, z, z, z, z,
                    d.no_devices(devices), d.no_devices(devices)};
}

// Appends a job slot in state New that holds nothing (the slot a Submit fills); returns its index.
template <class D>
int add_job_slot(const D& d, ClusterVars<D>& s) {
  s.jobs.push_back(new_job(d, s.num_devices()));
  return s.num_jobs() - 1;
}

// Sets the per-device state and the counters to "nothing held, nothing reserved", sized to the
// shape (fleet builders call it once the devices and nodes are known).
template <class D>
void clear_state(const D& d, ClusterVars<D>& s) {
  const auto m = static_cast<std::size_t>(s.num_devices());
  const auto n = static_cast<std::size_t>(s.nodes);
  s.owner.assign(m, d.k(-1));
  s.owner_epoch.assign(m, d.k(0));
  s.resv_for.assign(m, d.k(-1));
  s.resv_gen.assign(m, d.k(0));
  s.node_state.assign(n, d.k(static_cast<std::int64_t>(NodeState::kDown)));
  s.node_held.assign(n, d.k(0));
  s.node_swap.assign(n, d.k(0));
  s.premium_admitted.assign(1, d.k(0));
}

// What every fleet satisfies, and no transition changes: each node's capacity is the number of its
// devices, host memory and device types are non-negative, the premium reserve is between 0 and the
// fleet's devices. core/fleet.cc builds only such fleets; the checker assumes it in every state.
template <class D>
typename D::Bool fleet_wellformed(const D& d, const ClusterVars<D>& s) {
  auto ok = d.k(0) <= s.reserve() && s.reserve() <= d.k(s.num_devices());
  std::vector<std::int64_t> devs(static_cast<std::size_t>(s.nodes), 0);
  for (int g = 0; g < s.num_groups(); ++g) {
    devs[s.group_node[g]] += s.group_first[g + 1] - s.group_first[g];
    ok = ok && d.k(0) <= s.group_type[g];
  }
  for (int n = 0; n < s.nodes; ++n)
    ok = ok && s.node_devs[n] == d.k(devs[n]) && d.k(0) <= s.host_mem[n];
  return ok;
}

// Init: a well-formed fleet, every job slot new, no device held or reserved, counters zero, and
// every node in some lifecycle state. A fresh core has every node Down; any other node state is
// reachable from there by node events alone while nothing is held, so starting the checker from
// any of them (BMC explores node rows too) covers exactly what a fresh core can reach.
template <class D>
typename D::Bool init_state(const D& d, const ClusterVars<D>& s) {
  auto ok = fleet_wellformed(d, s);
  auto fresh = new_job(d, s.num_devices());
  constexpr auto fields = job_fields<D>();
  for (int j = 0; j < s.num_jobs(); ++j) {
    for (const auto& [name, member] : fields) ok = ok && (s.jobs[j].*member == fresh.*member);
    ok = ok && d.size(s.jobs[j].held) == d.k(0) && d.size(s.jobs[j].target) == d.k(0);
  }
  for (int dev = 0; dev < s.num_devices(); ++dev)
    ok = ok && s.owner[dev] == d.k(-1) && s.owner_epoch[dev] == d.k(0) &&
         s.resv_for[dev] == d.k(-1) && s.resv_gen[dev] == d.k(0);
  for (int n = 0; n < s.nodes; ++n)
    ok = ok && s.node_held[n] == d.k(0) && s.node_swap[n] == d.k(0) &&
         d.k(0) <= s.node_state[n] && s.node_state[n] < d.k(kNumNodeStates);
  return ok && s.premium_admitted.front() == d.k(0);
}

// ---- State invariants, part by part -------------------------------------------------------
//
// Each state invariant is written as the conjunction of parts, each reading a bounded piece of the
// state:
//   job_invariant(d, inv, s, j)       job j's variables, its held set, and the per-device state
//                                     and fleet values of the devices in that set;
//   device_invariant(d, inv, s, dev)  device dev's state and the variables of the jobs it names
//                                     (its owner, the job it is reserved for);
//   node_invariant(d, inv, s, n)      node n's counters and capacities;
//   fleet_invariant(d, inv, s)        the fleet counter and the premium reserve;
//   sums_invariant(d, inv, s)         what relates all jobs at once: INV-EXCL's count of holders
//                                     per device and INV-INDEX's sums. Nothing else.
// state_invariant(d, inv, s) below is their conjunction over every job, device and node: what the
// checker proves and BMC, the property tests and the unit tests evaluate. The parts are the same
// formula text split where it already was a conjunction over jobs, devices or nodes; no part is
// a second copy of anything.
//
// Why split: a transition changes only the acting job, the per-device state of the devices the
// row names (those the job held and those selected), the counters of their nodes, and the counters
// by exactly the job's own change of share (FRAME and DELTA, proved per row). So after a decision
// the only parts that can turn false are the acting job's; the parts of the named devices and of
// any job that owned one of them before (its held set must still match the owners); the parts of
// those devices' nodes; and the fleet part. The part of an unnamed device reads the acting job only
// through its reservation generation, which never goes back (INV-RESERVE's step part). The sums
// are kept by DELTA, which checker/prover.cc states and `orrery-check replay` evaluates on the
// touched nodes; INV-EXCL's count is implied there by INV-INDEX's job and device parts (a device
// in two held sets would have to be owned by both jobs). That is how a journal replay checks each
// decision in O(|named devices|) and the whole state only now and then (docs/checker.md).

inline constexpr bool has_job_part(Inv inv) {
  return inv != Inv::kExcl && inv != Inv::kCap && inv != Inv::kNode;
}
inline constexpr bool has_device_part(Inv inv) {
  return inv == Inv::kIndex || inv == Inv::kReserve || inv == Inv::kNode;
}
inline constexpr bool has_node_part(Inv inv) { return inv == Inv::kCap || inv == Inv::kNode; }
inline constexpr bool has_fleet_part(Inv inv) { return inv == Inv::kAdmit; }
inline constexpr bool has_sums_part(Inv inv) { return inv == Inv::kExcl || inv == Inv::kIndex; }

template <class D>
typename D::Bool job_invariant(const D& d, Inv inv, const ClusterVars<D>& s, int j) {
  using Bool = typename D::Bool;
  const auto& job = s.jobs[j];
  switch (inv) {
    case Inv::kWorld:
      // The slot is in a lifecycle state; a submitted job's spec is well formed and in range.
      return d.k(0) <= job.state && job.state < d.k(kNumJobStates) &&
             d.implies(!is(d, job.state, JobState::kNew),
                       d.k(0) <= job.tier && job.tier < d.k(kNumTiers) && d.k(0) <= job.dtype &&
                           d.k(1) <= job.min_dev && job.min_dev <= job.max_dev &&
                           job.max_dev <= job.world && job.world <= d.k(kMaxWorld) &&
                           d.k(1) <= job.mem && job.mem <= d.k(kMaxMemMib));

    case Inv::kGang: {
      auto type_ok = d.b(true);
      d.members(job.held, [&](int dev, const Bool& in) {
        type_ok =
            type_ok && d.implies(in, s.dev_type(dev) == job.dtype && job.mem <= s.dev_mem(dev));
      });
      return job.devices == d.size(job.held) &&
             d.implies(holding_state(d, job.state),
                       job.min_dev <= job.devices && job.devices <= job.max_dev &&
                           exact_split(d, job.world, job.devices, job.splice) && type_ok) &&
             d.implies(!holding_state(d, job.state),
                       job.devices == d.k(0) && job.splice == d.k(0));
    }

    case Inv::kCkpt:
      // Migrating, Resizing and Checkpointing jobs run on until their cut: only a job whose cut
      // is committed (Suspended) or that restores one (Restoring) stands at its checkpoint.
      return d.k(0) <= job.progress && d.k(-1) <= job.ckpt && job.ckpt <= job.progress &&
             d.implies(one_of(d, job.state, {JobState::kSuspended, JobState::kRestoring}),
                       d.k(0) <= job.ckpt && job.progress == job.ckpt);

    case Inv::kEpoch: {
      auto ok = d.k(0) <= job.epoch;
      d.members(job.held, [&](int dev, const Bool& in) {
        ok = ok && d.implies(in, s.owner_epoch[dev] == job.epoch);
      });
      return ok;
    }

    case Inv::kTier:
      // Attained service, which the same-tier fair-share rule compares, stays in range.
      return d.k(0) <= job.attained && job.attained <= d.k(kMaxAttained);

    case Inv::kTerm:
      return d.implies(terminal_state(d, job.state),
                       job.devices == d.k(0) && d.size(job.held) == d.k(0));

    case Inv::kIndex: {
      // Every device the job holds is owned by it, and its device count is its held set's size.
      auto ok = job.devices == d.size(job.held);
      d.members(job.held, [&](int dev, const Bool& in) {
        ok = ok && d.implies(in, s.owner[dev] == d.k(j));
      });
      return ok;
    }

    case Inv::kReserve:
      // Only a job checkpointing for a preemption or resizing to fewer devices names a
      // beneficiary, never itself.
      return d.k(0) <= job.resv_gen &&
             d.implies(!(job.ben == d.k(-1)),
                       one_of(d, job.state, {JobState::kCheckpointing, JobState::kResizing}) &&
                           !(job.ben == d.k(j)));

    case Inv::kSplice: {
      // A move in flight names a gang of the job as its target: in its range, W split evenly
      // within the splice limit; a migration to no fewer devices, a resize to a subset (shrink) or
      // a superset (grow) of the devices held, so that resizing never swaps a device for another.
      // Nothing is targeted otherwise.
      auto count = d.size(job.target);
      return d.implies(moving_state(d, job.state),
                       job.min_dev <= count && count <= job.max_dev &&
                           exact_split(d, job.world, count, job.tsplice) &&
                           d.implies(is(d, job.state, JobState::kMigrating), job.devices <= count) &&
                           d.implies(is(d, job.state, JobState::kResizing),
                                     subset(d, job.target, job.held) ||
                                         subset(d, job.held, job.target))) &&
             d.implies(!moving_state(d, job.state), count == d.k(0) && job.tsplice == d.k(0));
    }

    case Inv::kMode:
      // The mode is known; a signal or requeue job runs one worker per device (its range is its
      // world), never resizes, and a requeue job's checkpoint is never past its start.
      return d.k(0) <= job.mode && job.mode < d.k(kNumPreemptions) &&
             d.implies(!is(d, job.state, JobState::kNew) && !transparent(d, job),
                       job.min_dev == job.world && job.max_dev == job.world &&
                           d.k(0) <= job.splice && job.splice <= d.k(1) &&
                           job.tsplice <= d.k(1) && !is(d, job.state, JobState::kResizing)) &&
             d.implies(is(d, job.mode, Preemption::kRequeue), job.ckpt <= d.k(0));

    case Inv::kAdmit:
      // Spare (admitted beyond the premium reserve) is 0 or 1, and only a premium job is spare.
      return (job.spare == d.k(0) || job.spare == d.k(1)) &&
             d.implies(job.spare == d.k(1), is(d, job.tier, Tier::kPremium));

    case Inv::kHold:
      // An operator's hold is 0 or 1, and a held job holds devices only while the cut that
      // suspends it is in flight (for no one): it is never placed, resumed or moved. The retry
      // and platform budgets are counts.
      return (job.hold == d.k(0) || job.hold == d.k(1)) &&
             d.implies(job.hold == d.k(1),
                       one_of(d, job.state,
                              {JobState::kCheckpointing, JobState::kSuspended, JobState::kQueued,
                               JobState::kCompleted, JobState::kFailed, JobState::kCancelled}) &&
                           d.implies(is(d, job.state, JobState::kCheckpointing),
                                     job.ben == d.k(-1))) &&
             d.k(0) <= job.failures && d.k(0) <= job.faults;

    case Inv::kExcl:
    case Inv::kCap:
    case Inv::kNode:
      break;
  }
  return d.b(true);
}

template <class D>
typename D::Bool device_invariant(const D& d, Inv inv, const ClusterVars<D>& s, int dev) {
  switch (inv) {
    case Inv::kIndex:
      // An owned device is held by its owner, a job.
      return s.owner[dev] == d.k(-1) ||
             d.select(
                 s.num_jobs(), s.owner[dev],
                 [&](int i) { return d.contains(s.jobs[i].held, dev); }, d.b(false));
    case Inv::kReserve:
      // A reservation is on a free device, for a job, under a generation that job has reached.
      return s.resv_for[dev] == d.k(-1) ||
             (s.owner[dev] == d.k(-1) &&
              d.select(
                  s.num_jobs(), s.resv_for[dev],
                  [&](int i) { return s.resv_gen[dev] <= s.jobs[i].resv_gen; }, d.b(false)));
    case Inv::kNode:
      // A held device is on a node that may hold devices: never on one Down (so a node goes Down
      // only once every job that held its devices has been failed over) or still Joining.
      return s.owner[dev] == d.k(-1) || node_may_hold(d, s.node_state[s.node_of(dev)]);
    default:
      return d.b(true);
  }
}

template <class D>
typename D::Bool node_invariant(const D& d, Inv inv, const ClusterVars<D>& s, int n) {
  if (inv == Inv::kCap)  // INV-CAP: devices held and host memory for swapped-out workers
    return s.node_held[n] <= s.node_devs[n] && s.node_swap[n] <= s.host_mem[n];
  if (inv == Inv::kNode)  // the node is in a lifecycle state
    return d.k(0) <= s.node_state[n] && s.node_state[n] < d.k(kNumNodeStates);
  return d.b(true);
}

template <class D>
typename D::Bool fleet_invariant(const D& d, Inv inv, const ClusterVars<D>& s) {
  if (inv == Inv::kAdmit) return s.premium_admitted.front() <= s.reserve();
  return d.b(true);
}

// INV-INDEX's per-element part: every job's and every device's part (each conjunct is about one
// job or one device). What the checker's local obligations may assume.
template <class D>
typename D::Bool index_local(const D& d, const ClusterVars<D>& s) {
  auto ok = d.b(true);
  for (int j = 0; j < s.num_jobs(); ++j) ok = ok && job_invariant(d, Inv::kIndex, s, j);
  for (int dev = 0; dev < s.num_devices(); ++dev)
    ok = ok && device_invariant(d, Inv::kIndex, s, dev);
  return ok;
}

// INV-INDEX's sums: each counter equals the sum over jobs of the job's share (premium_share,
// add_node_shares). With INV-EXCL's count, the only invariant text that is O(jobs) or O(devices)
// for the core; per row, the checker proves instead that every effect changes each counter by the
// acting job's delta (DELTA).
template <class D>
typename D::Bool index_sums(const D& d, const ClusterVars<D>& s) {
  std::vector<typename D::Int> held(static_cast<std::size_t>(s.nodes), d.k(0));
  std::vector<typename D::Int> swap(static_cast<std::size_t>(s.nodes), d.k(0));
  auto premium = d.k(0);
  for (int j = 0; j < s.num_jobs(); ++j) {
    premium = premium + premium_share(d, s.jobs[j]);
    add_node_shares(d, s, j, held, swap);
  }
  auto ok = s.premium_admitted.front() == premium;
  for (int n = 0; n < s.nodes; ++n)
    ok = ok && s.node_held[n] == held[n] && s.node_swap[n] == swap[n];
  return ok;
}

// DELTA: from `pre` to `post` (job j acting) every counter changed by exactly job j's change of
// share — what keeps index_sums for any number of jobs (docs/spec.md). The checker proves it for
// every row (checker/prover.cc), replay checks it after every decision (checker/replay.cc). The
// node counters are compared on the nodes where job j held devices before or after: with the
// concrete domain's sparse node sums those nodes only, O(|held before| + |held after|); with the
// checker's dense ones every node.
template <class D>
typename D::Bool counters_follow_shares(const D& d, const ClusterVars<D>& pre, int j,
                                        const ClusterVars<D>& post) {
  using Bool = typename D::Bool;
  const auto& a = pre.jobs[j];
  const auto& b = post.jobs[j];
  auto old_swap = swap_per_device(d, a.splice, a.mem);
  auto new_swap = swap_per_device(d, b.splice, b.mem);
  auto sums = d.node_sums(pre.nodes);
  d.members(a.held, [&](int dev, const Bool& in) {
    sums.add(pre.node_of(dev), -indicator(d, in), d.ite(in, d.k(0) - old_swap, d.k(0)));
  });
  d.members(b.held, [&](int dev, const Bool& in) {
    sums.add(post.node_of(dev), indicator(d, in), d.ite(in, new_swap, d.k(0)));
  });
  auto ok = post.premium_admitted.front() - pre.premium_admitted.front() ==
            premium_share(d, b) - premium_share(d, a);
  sums.for_each([&](int n, const typename D::Int& devs, const typename D::Int& swap) {
    ok = ok && post.node_held[n] - pre.node_held[n] == devs &&
         post.node_swap[n] - pre.node_swap[n] == swap;
  });
  return ok;
}

template <class D>
typename D::Bool sums_invariant(const D& d, Inv inv, const ClusterVars<D>& s) {
  using Bool = typename D::Bool;
  auto ok = d.b(true);
  if (inv == Inv::kExcl) {
    // No device is in two jobs' held sets (the owner index makes this so by construction; this
    // is the statement about the held sets that it implies).
    std::vector<typename D::Int> holders(static_cast<std::size_t>(s.num_devices()), d.k(0));
    for (const auto& job : s.jobs)
      d.members(job.held, [&](int dev, const Bool& in) {
        holders[dev] = holders[dev] + indicator(d, in);
      });
    for (const auto& h : holders) ok = ok && h <= d.k(1);
  } else if (inv == Inv::kIndex) {
    ok = index_sums(d, s);
  }
  return ok;
}

// ---- State invariants ----------------------------------------------------------------------

// The whole invariant: every part over every job, device and node. O(jobs + devices + nodes +
// held devices) on concrete values.
template <class D>
typename D::Bool state_invariant(const D& d, Inv inv, const ClusterVars<D>& s) {
  auto ok = d.b(true);
  if (has_job_part(inv))
    for (int j = 0; j < s.num_jobs(); ++j) ok = ok && job_invariant(d, inv, s, j);
  if (has_device_part(inv))
    for (int dev = 0; dev < s.num_devices(); ++dev) ok = ok && device_invariant(d, inv, s, dev);
  if (has_node_part(inv))
    for (int n = 0; n < s.nodes; ++n) ok = ok && node_invariant(d, inv, s, n);
  if (has_fleet_part(inv)) ok = ok && fleet_invariant(d, inv, s);
  if (has_sums_part(inv)) ok = ok && sums_invariant(d, inv, s);
  return ok;
}

// ---- Step invariants -----------------------------------------------------------------------

// A decision that takes devices from job i: it is sent to checkpoint for preemption, it is to
// resize to fewer devices, or it loses devices while it stays live other than by carrying out the
// shrink it was decided (Resizing: that decision was the preemptive one).
template <class D>
typename D::Bool preemptive(const D& d, const JobVars<D>& pre, const JobVars<D>& post) {
  auto resizing = is(d, pre.state, JobState::kResizing);
  return (is(d, pre.state, JobState::kRunning) && is(d, post.state, JobState::kCheckpointing)) ||
         (is(d, post.state, JobState::kResizing) && !resizing &&
          d.size(post.target) < pre.devices) ||
         (holding_state(d, pre.state) && holding_state(d, post.state) &&
          post.devices < pre.devices && !resizing);
}

// The job that the devices job j gives up in this transition are for: the one a preemption or a
// shrink was decided for — whether the cut is stored or the job fails or is cancelled first; -1
// for any other transition.
template <class D>
typename D::Int freed_for(const D& d, const ClusterVars<D>& pre, int j, const Params<D>&,
                          const ClusterVars<D>&) {
  const auto& a = pre.jobs[j];
  return d.ite(one_of(d, a.state, {JobState::kCheckpointing, JobState::kResizing}), a.ben,
               d.k(-1));
}

inline constexpr bool has_step_part(Inv inv) {
  return inv == Inv::kWorld || inv == Inv::kCkpt || inv == Inv::kEpoch || inv == Inv::kTier ||
         inv == Inv::kTerm || inv == Inv::kReserve || inv == Inv::kNode || inv == Inv::kSplice ||
         inv == Inv::kMode || inv == Inv::kHold || inv == Inv::kAdmit;
}
inline constexpr bool has_device_step_part(Inv inv) {
  return inv == Inv::kReserve || inv == Inv::kNode;
}

// A step invariant is split like the state invariants: a part per job i (job_step, for every step
// invariant) and a part per device (device_step, INV-RESERVE's (a) and (b)); step_invariant is
// their conjunction over every job and device. For a job other than the acting one j, or a device
// the row does not name, nothing the part reads changes (FRAME, and INV-INDEX/INV-RESERVE in the
// state before: a device j owned is one it held, a reserved device is free), so its part holds
// trivially; checking the acting job's part and the named devices' parts is checking the step.

// What INV-RESERVE's device parts need about the step as a whole: the job the devices job j gives
// up are for (freed_for) and whether that job is waiting. Computed once per step.
template <class D>
struct FreedFor {
  typename D::Int job;
  typename D::Bool waits;
};
template <class D>
FreedFor<D> freed_for_step(const D& d, const ClusterVars<D>& pre, int j, const Params<D>& p,
                           const ClusterVars<D>& post) {
  auto b = freed_for(d, pre, j, p, post);
  return {b, waiting_job(d, pre, b)};
}

// The part of step invariant `inv` about device dev, job j acting with parameters p; `f` is
// freed_for_step(d, pre, j, p, post).
template <class D>
typename D::Bool device_step(const D& d, Inv inv, const ClusterVars<D>& pre, int j,
                             const ClusterVars<D>& post, int dev, const FreedFor<D>& f) {
  if (inv == Inv::kNode)
    // No job enters a holding state on, or grows onto, a node that is not Up: a device the
    // acting job did not own before and owns now is on an Up node.
    return d.implies(post.owner[dev] == d.k(j) && !(pre.owner[dev] == d.k(j)),
                     on_up_node(d, pre, dev));
  if (inv != Inv::kReserve) return d.b(true);
  // (a) A reserved device is taken only by the job it is reserved for, or by one that takes
  // precedence over that job (a reservation never keeps a higher tier waiting); (d) likewise, a
  // live reservation is replaced by another (a move reserving its target) only for the acting job,
  // and only when it takes precedence over the job it was for. (b) A device the acting job gives
  // up is reserved for the job it was freed for, if that one is waiting.
  const auto taken_by = post.owner[dev];
  return d.implies(reserved(d, pre, dev) && !(taken_by == d.k(-1)),
                   taken_by == pre.resv_for[dev] ||
                       (taken_by == d.k(j) && outranks(d, pre, j, pre.resv_for[dev]))) &&
         d.implies(reserved(d, pre, dev) && taken_by == d.k(-1) &&
                       !(post.resv_for[dev] == pre.resv_for[dev]) && !(post.resv_for[dev] == d.k(-1)),
                   post.resv_for[dev] == d.k(j) && outranks(d, pre, j, pre.resv_for[dev])) &&
         d.implies(pre.owner[dev] == d.k(j) && post.owner[dev] == d.k(-1) && f.waits,
                   post.resv_for[dev] == f.job && reserved(d, post, dev));
}

// The part of step invariant `inv` about job i, job j acting with parameters p.
template <class D>
typename D::Bool job_step(const D& d, Inv inv, const ClusterVars<D>& pre, int j,
                          const Params<D>& p, const ClusterVars<D>& post, int i) {
  const auto& a = pre.jobs[i];
  const auto& b = post.jobs[i];
  auto submitted = !is(d, a.state, JobState::kNew);
  switch (inv) {
    case Inv::kWorld: {
      // The device type changes only while the job waits (it holds nothing), and its
      // reservations, of the old type, are voided with it (Retype).
      auto retyped = waiting_state(d, a.state) && waiting_state(d, b.state) && !(b.resv_gen == a.resv_gen);
      return d.implies(submitted, b.world == a.world && b.tier == a.tier &&
                                      (b.dtype == a.dtype || retyped) &&
                                      b.min_dev == a.min_dev && b.max_dev == a.max_dev &&
                                      b.mem == a.mem);
    }
    case Inv::kCkpt: {
      // Progress moves back only on failure or abort (leaving a holding state for Queued or
      // Failed, or restarting in place: Placed), and then exactly to the last committed
      // checkpoint (or the start); or to the start, for a requeue job.
      auto failure = holding_state(d, a.state) &&
                     one_of(d, b.state, {JobState::kQueued, JobState::kFailed, JobState::kPlaced});
      auto to_ckpt = b.progress == d.ite(d.k(0) <= a.ckpt, a.ckpt, d.k(0));
      // A requeue job's cut keeps nothing of its run: back to the start (INV-MODE).
      auto requeued = is(d, a.mode, Preemption::kRequeue) && b.progress == d.k(0);
      return d.implies(submitted, a.ckpt <= b.ckpt && (a.progress <= b.progress ||
                                                       (failure && to_ckpt) || requeued));
    }
    case Inv::kEpoch:
      return d.implies(submitted,
                       a.epoch <= b.epoch &&
                           d.implies(starting_state(d, b.state) && !(b.state == a.state),
                                     a.epoch < b.epoch));
    case Inv::kTier:
      // (An operator's decision for no one — orrery suspend, a shrink on demand — is the one
      // exception: operators may take devices at will; planners cannot make such a decision.)
      return d.implies(preemptive(d, a, b),
                       d.b(i == j) && (favoured(d, pre, p.beneficiary, j) ||
                                       operator_for_no_one(d, p)));
    case Inv::kTerm:
      return d.implies(terminal_state(d, a.state), b.state == a.state);
    case Inv::kReserve:
      // (c) Reservation generations never go back, and a job that stops waiting starts a new
      // one, so the reservations made for it while it waited never come back to life.
      return a.resv_gen <= b.resv_gen &&
             d.implies(waiting_state(d, a.state) && !waiting_state(d, b.state),
                       a.resv_gen < b.resv_gen);
    case Inv::kSplice:
      // A job that keeps its epoch across a row changes its devices only as splicing allows: it
      // keeps a subset or a superset, never swaps one device for another (a swap is a move, and a
      // move starts a new incarnation).
      return d.implies(b.epoch == a.epoch, subset(d, b.held, a.held) || subset(d, a.held, b.held));
    case Inv::kMode:
      // The mode is fixed once submitted.
      return d.implies(!is(d, a.state, JobState::kNew), b.mode == a.mode);
    case Inv::kHold:
      // The budgets never go back once submitted, and a hold starts only with an operator's
      // suspension.
      return d.implies(!is(d, a.state, JobState::kNew),
                       a.failures <= b.failures && a.faults <= b.faults) &&
             d.implies(a.hold == d.k(0) && b.hold == d.k(1), operator_for_no_one(d, p));
    case Inv::kAdmit:
      // A guarantee once given is kept: a job admitted within the reserve is never made spare
      // while it stays admitted (a spare job only joins the reserve).
      return d.implies(admitted_state(d, a.state) && admitted_state(d, b.state),
                       b.spare <= a.spare);
    case Inv::kGang:
    case Inv::kExcl:
    case Inv::kCap:
    case Inv::kIndex:
    case Inv::kNode:
      break;  // state invariants, or a device part only
  }
  return d.b(true);
}

template <class D>
typename D::Bool step_invariant(const D& d, Inv inv, const ClusterVars<D>& pre, int j,
                                const Params<D>& p, const ClusterVars<D>& post) {
  auto ok = d.b(true);
  if (!has_step_part(inv)) return ok;
  if (has_device_step_part(inv)) {
    const auto f = freed_for_step(d, pre, j, p, post);
    for (int dev = 0; dev < pre.num_devices(); ++dev)
      ok = ok && device_step(d, inv, pre, j, post, dev, f);
  }
  for (int i = 0; i < pre.num_jobs(); ++i) ok = ok && job_step(d, inv, pre, j, p, post, i);
  return ok;
}

}  // namespace orrery::spec
