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
  kAdmit,  // INV-ADMIT
};
inline constexpr std::array<Inv, 9> kAllInvariants = {Inv::kWorld, Inv::kGang,  Inv::kExcl,
                                                      Inv::kCap,   Inv::kCkpt,  Inv::kEpoch,
                                                      Inv::kTier,  Inv::kTerm,  Inv::kAdmit};

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
  }
  return "INV-?";
}

constexpr std::string_view inv_summary(Inv i) {
  switch (i) {
    case Inv::kWorld: return "world size and job spec fixed and in range after submission";
    case Inv::kGang: return "a job holding devices has all W workers placed within its range";
    case Inv::kExcl: return "a device is held by at most one job";
    case Inv::kCap: return "no node exceeds its devices or host memory for spliced state";
    case Inv::kCkpt: return "suspended/migrating jobs have a checkpoint; progress monotone";
    case Inv::kEpoch: return "every (re)start takes a larger epoch; one incarnation holds";
    case Inv::kTier: return "preemption/shrinking only for a favoured job; attained in range";
    case Inv::kTerm: return "finished jobs hold nothing and never leave their state";
    case Inv::kAdmit: return "admitted premium demand within the premium reserve";
  }
  return "";
}

// ---- Initial state -------------------------------------------------------------------------

// A job slot before submission.
template <class D>
JobVars<D> new_job(const D& d) {
  auto z = d.k(0);
  return JobVars<D>{d.k(static_cast<std::int64_t>(JobState::kNew)), z, z, z, z, z, z, z, z, z, z,
                    d.k(-1), z, z};
}

// Appends a job slot in state New that holds nothing (the slot a Submit fills); returns its index.
template <class D>
int add_job_slot(const D& d, ClusterVars<D>& s) {
  s.jobs.push_back(new_job(d));
  s.hold.emplace_back(static_cast<std::size_t>(s.num_devices()), d.k(0));
  return s.num_jobs() - 1;
}

// What every fleet satisfies, and no transition changes: each node's capacity is the number of its
// devices, host memory and device types are non-negative, the premium reserve is between 0 and the
// fleet's devices. core/fleet.cc builds only such fleets; the checker assumes it in every state.
template <class D>
typename D::Bool fleet_wellformed(const D& d, const ClusterVars<D>& s) {
  auto ok = d.k(0) <= s.reserve() && s.reserve() <= d.k(s.num_devices());
  for (int n = 0; n < s.nodes; ++n)
    ok = ok && s.node_devs[n] == d.k(static_cast<std::int64_t>(s.node_members[n].size())) &&
         d.k(0) <= s.host_mem[n];
  for (int dev = 0; dev < s.num_devices(); ++dev) ok = ok && d.k(0) <= s.dev_type[dev];
  return ok;
}

// Init: a well-formed fleet, every job slot new, no device held.
template <class D>
typename D::Bool init_state(const D& d, const ClusterVars<D>& s) {
  auto ok = fleet_wellformed(d, s);
  auto fresh = new_job(d);
  constexpr auto fields = job_fields<D>();
  for (int j = 0; j < s.num_jobs(); ++j) {
    for (const auto& [name, member] : fields) ok = ok && (s.jobs[j].*member == fresh.*member);
    for (int dev = 0; dev < s.num_devices(); ++dev) ok = ok && s.hold[j][dev] == d.k(0);
  }
  return ok;
}

// ---- State invariants ----------------------------------------------------------------------

template <class D>
typename D::Bool state_invariant(const D& d, Inv inv, const ClusterVars<D>& s) {
  auto ok = d.b(true);
  switch (inv) {
    case Inv::kWorld:
      // Every slot is in a lifecycle state; a submitted job's spec is well formed and in range.
      for (const auto& job : s.jobs)
        ok = ok && d.k(0) <= job.state && job.state < d.k(kNumJobStates) &&
             d.implies(!is(d, job.state, JobState::kNew),
                             d.k(0) <= job.tier && job.tier < d.k(kNumTiers) &&
                                 d.k(0) <= job.dtype && d.k(1) <= job.min_dev &&
                                 job.min_dev <= job.max_dev && job.max_dev <= job.world &&
                                 job.world <= d.k(kMaxWorld) && d.k(1) <= job.mem &&
                                 job.mem <= d.k(kMaxMemMib));
      return ok;

    case Inv::kGang:
      for (int j = 0; j < s.num_jobs(); ++j) {
        const auto& job = s.jobs[j];
        auto type_ok = d.b(true);
        for (int dev = 0; dev < s.num_devices(); ++dev)
          type_ok = type_ok && d.implies(held(d, s, j, dev), s.dev_type[dev] == job.dtype &&
                                                                 job.mem <= s.dev_mem[dev]);
        ok = ok && job.devices == held_count(d, s, j) &&
             d.implies(holding_state(d, job.state),
                       job.min_dev <= job.devices && job.devices <= job.max_dev &&
                           exact_split(d, job.world, job.devices, job.splice) && type_ok) &&
             d.implies(!holding_state(d, job.state),
                       job.devices == d.k(0) && job.splice == d.k(0));
      }
      return ok;

    case Inv::kExcl:
      for (int dev = 0; dev < s.num_devices(); ++dev) ok = ok && holders(d, s, dev) <= d.k(1);
      return ok;

    case Inv::kCap:
      for (int n = 0; n < s.nodes; ++n)
        ok = ok && node_held(d, s, n) <= s.node_devs[n] && host_use(d, s, n, -1) <= s.host_mem[n];
      return ok;

    case Inv::kCkpt:
      for (const auto& job : s.jobs)
        ok = ok && d.k(0) <= job.progress && d.k(-1) <= job.ckpt && job.ckpt <= job.progress &&
             d.implies(one_of(d, job.state,
                              {JobState::kSuspended, JobState::kMigrating, JobState::kRestoring}),
                       d.k(0) <= job.ckpt && job.progress == job.ckpt);
      return ok;

    case Inv::kEpoch:
      for (int j = 0; j < s.num_jobs(); ++j) {
        ok = ok && d.k(0) <= s.jobs[j].epoch;
        for (int dev = 0; dev < s.num_devices(); ++dev)
          ok = ok && d.implies(held(d, s, j, dev), s.hold[j][dev] == s.jobs[j].epoch);
      }
      return ok;

    case Inv::kTier:
      // Attained service, which the same-tier fair-share rule compares, stays in range.
      for (const auto& job : s.jobs)
        ok = ok && d.k(0) <= job.attained && job.attained <= d.k(kMaxAttained);
      return ok;

    case Inv::kTerm:
      for (int j = 0; j < s.num_jobs(); ++j) {
        auto nothing = s.jobs[j].devices == d.k(0);
        for (int dev = 0; dev < s.num_devices(); ++dev) nothing = nothing && !held(d, s, j, dev);
        ok = ok && d.implies(terminal_state(d, s.jobs[j].state), nothing);
      }
      return ok;

    case Inv::kAdmit:
      return premium_demand(d, s) <= s.reserve();
  }
  return ok;
}

// ---- Step invariants -----------------------------------------------------------------------

// Job i loses devices while it stays live, or is sent to checkpoint for preemption.
template <class D>
typename D::Bool preemptive(const D& d, const JobVars<D>& pre, const JobVars<D>& post) {
  return (is(d, pre.state, JobState::kRunning) && is(d, post.state, JobState::kCheckpointing)) ||
         (holding_state(d, pre.state) && holding_state(d, post.state) &&
          post.devices < pre.devices);
}

template <class D>
typename D::Bool step_invariant(const D& d, Inv inv, const ClusterVars<D>& pre, int j,
                                const Params<D>& p, const ClusterVars<D>& post) {
  auto ok = d.b(true);
  for (int i = 0; i < pre.num_jobs(); ++i) {
    const auto& a = pre.jobs[i];
    const auto& b = post.jobs[i];
    auto submitted = !is(d, a.state, JobState::kNew);
    switch (inv) {
      case Inv::kWorld:
        ok = ok && d.implies(submitted, b.world == a.world && b.tier == a.tier &&
                                            b.dtype == a.dtype && b.min_dev == a.min_dev &&
                                            b.max_dev == a.max_dev && b.mem == a.mem);
        break;
      case Inv::kCkpt: {
        // Progress moves back only on failure (leaving a holding state for Queued or Failed),
        // and then exactly to the last committed checkpoint (or the start).
        auto failure = holding_state(d, a.state) &&
                       one_of(d, b.state, {JobState::kQueued, JobState::kFailed});
        auto to_ckpt = b.progress == d.ite(d.k(0) <= a.ckpt, a.ckpt, d.k(0));
        ok = ok && d.implies(submitted, a.ckpt <= b.ckpt &&
                                            (a.progress <= b.progress || (failure && to_ckpt)));
        break;
      }
      case Inv::kEpoch:
        ok = ok && d.implies(submitted, a.epoch <= b.epoch &&
                                            d.implies(starting_state(d, b.state) &&
                                                          !(b.state == a.state),
                                                      a.epoch < b.epoch));
        break;
      case Inv::kTier:
        ok = ok && d.implies(preemptive(d, a, b), d.b(i == j) && favoured(d, pre, p.beneficiary, j));
        break;
      case Inv::kTerm:
        ok = ok && d.implies(terminal_state(d, a.state), b.state == a.state);
        break;
      case Inv::kGang:
      case Inv::kExcl:
      case Inv::kCap:
      case Inv::kAdmit:
        return ok;  // state invariants only
    }
  }
  return ok;
}

inline constexpr bool has_step_part(Inv inv) {
  return inv == Inv::kWorld || inv == Inv::kCkpt || inv == Inv::kEpoch || inv == Inv::kTier ||
         inv == Inv::kTerm;
}

}  // namespace orrery::spec
