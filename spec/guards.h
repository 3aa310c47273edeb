// Guards: when a transition may be taken. Each guard is a type with a name and
//   template <class D> static Clauses<D> clauses(const D&, const ClusterVars<D>&, int job,
//                                               const Params<D>&);
// The core's Boost.MSM rows use these types (core/job_machine_table.h); the core evaluates them on
// concrete values before committing, the checker on solver terms when proving the rows.
#pragma once

#include "spec/model.h"

namespace orrery::spec {

// The submitted job spec is well formed: a known tier and device type, 1 <= min <= max <= W,
// memory per worker, and W splits evenly over some device count in [min, max] within the splice
// limit (otherwise the job could never be placed: infeasible, not "retry later").
struct GuardSubmit {
  static constexpr std::string_view name = "valid_spec";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>&, int, const Params<D>& p) {
    // W == f * c for some c in [min, max]  <=>  f divides W and min <= W / f <= max. Written with
    // division by the constant f: the parameters are unvalidated input, nothing may overflow.
    auto feasible = d.b(false);
    for (int f = 1; f <= kSpliceLimit; ++f)
      feasible = feasible || (d.mod(p.world, f) == d.k(0) && p.min_dev <= d.div(p.world, f) &&
                              d.div(p.world, f) <= p.max_dev);
    return {
        {"tier known", d.k(0) <= p.tier && p.tier < d.k(kNumTiers)},
        {"device type known", d.k(0) <= p.dtype},
        {"1 <= min_devices <= max_devices <= world <= 2^20",
         d.k(1) <= p.min_dev && p.min_dev <= p.max_dev && p.max_dev <= p.world &&
             p.world <= d.k(kMaxWorld)},
        {"1 <= memory per worker <= 2^40 MiB", d.k(1) <= p.mem && p.mem <= d.k(kMaxMemMib)},
        {"world splits evenly over a device count in range", feasible},
        {"preemption mode known", d.k(0) <= p.mode && p.mode < d.k(kNumPreemptions)},
        {"a signal or requeue job runs one worker per device: min_devices == max_devices == world",
         d.implies(!is(d, p.mode, Preemption::kTransparent),
                   p.min_dev == p.world && p.max_dev == p.world)},
    };
  }
};

// The gang fits on the selected devices (p.sel, p.splice) — placement, resume, and the fit part
// of migration and resize: every worker placed, the device count in range, at most kSpliceLimit
// workers per device, the right device type with enough memory for one worker (spliced workers
// take turns, each sees the whole device), no device held by another job or reserved for a job
// this one does not take precedence over (a reservation never blocks a job that outranks its
// beneficiary, so it cannot keep a higher tier waiting), every device not held already on a node
// that is Up (never on one draining, lost, down or still joining: INV-NODE), and
// on every node the job touches, device capacity and host memory for the swapped-out workers once
// the job's old devices are given back and the new ones taken. Visits only the selection and the
// job's held devices.
struct GuardGang {
  static constexpr std::string_view name = "gang_fits";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
    using Bool = typename D::Bool;
    const auto& job = s.jobs[j];
    const auto me = d.k(j);
    auto count = d.size(p.sel);
    auto type_ok = d.b(true);
    auto free = d.b(true);
    auto unreserved = d.b(true);
    auto up = d.b(true);
    auto sums = d.node_sums(s.nodes);
    auto old_swap = swap_per_device(d, job.splice, job.mem);
    auto new_swap = swap_per_device(d, p.splice, job.mem);
    d.members(job.held, [&](int dev, const Bool& in) {
      sums.add(s.node_of(dev), -indicator(d, in), d.ite(in, d.k(0) - old_swap, d.k(0)));
    });
    d.members(p.sel, [&](int dev, const Bool& in) {
      type_ok = type_ok && d.implies(in, s.dev_type(dev) == job.dtype && job.mem <= s.dev_mem(dev));
      free = free && d.implies(in, s.owner[dev] == d.k(-1) || s.owner[dev] == me);
      up = up && d.implies(in && !(s.owner[dev] == me), on_up_node(d, s, dev));
      unreserved = unreserved && d.implies(in, !reserved(d, s, dev) || s.resv_for[dev] == me ||
                                                   outranks(d, s, j, s.resv_for[dev]));
      sums.add(s.node_of(dev), indicator(d, in), d.ite(in, new_swap, d.k(0)));
    });
    auto cap_ok = d.b(true);
    sums.for_each([&](int n, const typename D::Int& devs, const typename D::Int& swap) {
      cap_ok = cap_ok && s.node_held[n] + devs <= s.node_devs[n] &&
               s.node_swap[n] + swap <= s.host_mem[n];
    });
    return {
        {"device count in [min_devices, max_devices]",
         job.min_dev <= count && count <= job.max_dev},
        {"world == devices * splice, splice <= limit", exact_split(d, job.world, count, p.splice)},
        {"only a transparent job is spliced", d.implies(!transparent(d, job), p.splice == d.k(1))},
        {"devices of the job's type, with memory for a worker", type_ok},
        {"devices not held by another job", free},
        {"devices not reserved for another job", unreserved},
        {"new devices on nodes that are Up", up},
        {"node capacity and host memory for swapped-out workers", cap_ok},
        {"not held by an operator (orrery resume releases it)", job.hold == d.k(0)},
    };
  }
};

// Another device type for a waiting job (Retype): a known one, not its own, and not while an
// operator holds it. That the type is one the job's spec allows is the core's check (a job spec
// may name several types: core/scheduler_core.h); the spec's part is that the type changes only
// while the job waits, holding nothing, and that its reservations (of the old type) go with it
// (EffectRetype, INV-WORLD).
struct GuardRetype {
  static constexpr std::string_view name = "another_type";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
    const auto& job = s.jobs[j];
    return {{"device type known", d.k(0) <= p.dtype},
            {"another type than its own", !(p.dtype == job.dtype)},
            {"not held by an operator (orrery resume releases it)", job.hold == d.k(0)}};
  }
};

// The number of selected devices job j holds now.
template <class D>
typename D::Int kept_count(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
  auto n = d.k(0);
  d.members(p.sel, [&](int dev, const typename D::Bool& in) {
    n = n + indicator(d, in && s.owner[dev] == d.k(j));
  });
  return n;
}

// The checkpoint step reported is a consistent cut at the job's current step.
template <class D>
Clause<D> cut_at_progress(const D&, const JobVars<D>& job, const Params<D>& p) {
  return {"checkpoint cut at the current step", p.step == job.progress};
}

// Migration, decided: the gang fits on the target devices, on at least as many devices as now.
// The job keeps its devices while the nodes take the cut (Migrating); the target devices it does
// not hold are reserved for it meanwhile, and GuardMove checks the fit again when the cut is stored.
struct GuardMigrate {
  static constexpr std::string_view name = "gang_fits_target";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
    auto cs = GuardGang::clauses(d, s, j, p);
    // Moving to fewer devices would be a shrink, which only GuardShrink may allow.
    cs.push_back({"not fewer devices than now", s.jobs[j].devices <= d.size(p.sel)});
    return cs;
  }
};

// The parameters of the move a Migrating or Resizing job decided: its stored target.
template <class D>
Params<D> move_params(const D& d, const JobVars<D>& job, const Params<D>& p) {
  Params<D> q = p;
  q.sel = job.target;
  q.splice = job.tsplice;
  (void)d;
  return q;
}

// The cut of a migration or resize is stored at the current step, and the gang still fits on the
// target the decision named (the devices reserved for it may have gone to a job that outranks it,
// or a target node may have left Up: then the move is aborted instead).
struct GuardMove {
  static constexpr std::string_view name = "cut_and_target_fits";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
    auto cs = GuardGang::clauses(d, s, j, move_params(d, s.jobs[j], p));
    cs.push_back(cut_at_progress(d, s.jobs[j], p));
    return cs;
  }
};

// Grow at fixed world size: keep every held device (all of them are among the selection: by
// INV-INDEX the job holds exactly the devices it owns), add at least one, and fit.
struct GuardGrow {
  static constexpr std::string_view name = "grows_and_fits";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
    auto cs = GuardGang::clauses(d, s, j, p);
    cs.push_back({"only a transparent job is resized", transparent(d, s.jobs[j])});
    cs.push_back({"keeps every held device", kept_count(d, s, j, p) == s.jobs[j].devices});
    cs.push_back({"more devices than now", s.jobs[j].devices < d.size(p.sel)});
    return cs;
  }
};

// A decision that takes devices from job j (preemption, shrink) is for a waiting job the tier rules
// favour, whose workers fit the devices; or it is an operator's, for no one (orrery suspend,
// orrery resize): an operator may take a job's devices at will, a planner never.
template <class D>
Clauses<D> for_favoured_or_operator(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
  const auto op = operator_for_no_one(d, p);
  return {{"beneficiary favoured by rank or fair share (or an operator's, for no one)",
           op || favoured(d, s, p.beneficiary, j)},
          {"beneficiary's workers fit the devices (or an operator's, for no one)",
           op || fits_devices_of(d, s, p.beneficiary, j)}};
}

// Shrink at fixed world size, in favour of a waiting job the tier rules allow (or an operator's).
struct GuardShrink {
  static constexpr std::string_view name = "shrinks_for_favoured";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
    auto cs = GuardGang::clauses(d, s, j, p);
    cs.push_back({"only a transparent job is resized", transparent(d, s.jobs[j])});
    cs.push_back({"keeps a subset of the held devices", kept_count(d, s, j, p) == d.size(p.sel)});
    cs.push_back({"fewer devices than now", d.size(p.sel) < s.jobs[j].devices});
    for (auto& c : for_favoured_or_operator(d, s, j, p)) cs.push_back(c);
    return cs;
  }
};

// Preemption only in favour of a waiting job that takes precedence over the victim (precedes: a
// strictly higher tier; or the same rank with strictly less attained service; a premium job
// admitted beyond the reserve ranks below those within it until one leads it in service by more
// than kReserveLeadGpuMs), that can use the devices (they will be reserved for it); or an
// operator's suspension, for no one (the job is then held: EffectPreempt).
struct GuardPreempt {
  static constexpr std::string_view name = "favoured_beneficiary";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
    return for_favoured_or_operator(d, s, j, p);
  }
};

// A training step report never goes backwards and accounts non-negative GPU time, keeping the
// job's attained service within kMaxAttained.
struct GuardProgress {
  static constexpr std::string_view name = "monotone_step";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
    // Written as gpu_ms <= max - attained: attained is in [0, kMaxAttained], so nothing overflows
    // whatever gpu_ms a decision carries.
    return {{"step >= current step", s.jobs[j].progress <= p.step},
            {"0 <= gpu_ms <= 2^62 - attained",
             d.k(0) <= p.gpu_ms && p.gpu_ms <= d.k(kMaxAttained) - s.jobs[j].attained}};
  }
};

// A periodic checkpoint captures a real step (>= 0) between the last checkpoint and the current
// step.
struct GuardCheckpoint {
  static constexpr std::string_view name = "checkpoint_in_range";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
    const auto& job = s.jobs[j];
    return {{"0 <= step, last checkpoint <= step <= current step",
             d.k(0) <= p.step && job.ckpt <= p.step && p.step <= job.progress},
            // A signal or requeue job cannot be asked to save and go on: its only cut stops it.
            {"only a transparent job takes a checkpoint while it runs", transparent(d, job)}};
  }
};

// The preemption checkpoint is committed at the current step.
struct GuardCut {
  static constexpr std::string_view name = "cut_at_progress";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>& p) {
    return {cut_at_progress(d, s.jobs[j], p)};
  }
};

// After a failure of its own the job is requeued while it has retries left, and fails for good
// after.
struct GuardRetry {
  static constexpr std::string_view name = "retries_left";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>&) {
    return {{"failures < max retries", s.jobs[j].failures < d.k(kMaxRetries)}};
  }
};
struct GuardExhausted {
  static constexpr std::string_view name = "retries_exhausted";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>&) {
    return {{"failures >= max retries", d.k(kMaxRetries) <= s.jobs[j].failures}};
  }
};

// After a platform fault (NodeLoss) the job is relaunched from its last committed checkpoint while
// it is under the platform cap, and fails for good after; its retries are not touched.
struct GuardFaultsLeft {
  static constexpr std::string_view name = "platform_faults_left";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>&) {
    return {{"platform faults < platform cap", s.jobs[j].faults < d.k(kMaxPlatformFaults)}};
  }
};
struct GuardFaultsExhausted {
  static constexpr std::string_view name = "platform_faults_exhausted";
  template <class D>
  static Clauses<D> clauses(const D& d, const ClusterVars<D>& s, int j, const Params<D>&) {
    return {{"platform faults >= platform cap", d.k(kMaxPlatformFaults) <= s.jobs[j].faults}};
  }
};

}  // namespace orrery::spec
