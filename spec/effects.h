// Effects: what a transition does to the cluster. Each effect is a type with a name and
//   template <class D> static void apply(const D&, ClusterVars<D>&, int job, const Params<D>&);
// It changes only the acting job's variables, the devices the row names (those the job holds and
// those selected) and the counters, each counter by exactly the acting job's own delta (the
// checker proves both: FRAME and DELTA). The job's `state` variable is not set here: it is the
// row's target state, set by whoever fires the row (the MSM in the core, the transition relation
// in the checker), so the table is its single source. Effects run before it is set, so they read
// the source state in s.jobs[job].state.
//
// Every effect visits only the selection and the acting job's held devices: O(|sel| + |held|).
#pragma once

#include "spec/model.h"

namespace orrery::spec {

// A cut at `step` becomes the job's checkpoint. A requeue job keeps nothing of its run: its
// checkpoint is the start (step 0) and its progress goes back there (INV-MODE).
template <class D>
void commit_cut(const D& d, JobVars<D>& job, const typename D::Int& step) {
  const auto requeue = is(d, job.mode, Preemption::kRequeue);
  job.ckpt = d.ite(requeue, d.k(0), step);
  job.progress = d.ite(requeue, d.k(0), job.progress);
}

// Record the submitted job spec and start from a clean slate.
struct EffectSubmit {
  static constexpr std::string_view name = "record_spec";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    auto& job = s.jobs[j];
    job.tier = p.tier;
    job.dtype = p.dtype;
    job.world = p.world;
    job.min_dev = p.min_dev;
    job.max_dev = p.max_dev;
    job.mem = p.mem;
    job.mode = p.mode;
    job.devices = d.k(0);
    job.splice = d.k(0);
    job.epoch = d.k(0);
    job.progress = d.k(0);
    job.ckpt = d.k(-1);
    job.failures = d.k(0);
    job.faults = d.k(0);
    job.hold = d.k(0);
    job.spare = d.k(0);
    job.attained = d.k(0);
    job.ben = d.k(-1);
    job.tsplice = d.k(0);
    job.held = d.no_devices(s.num_devices());
    job.target = d.no_devices(s.num_devices());
    // resv_gen is left as it is: a reservation generation never goes back (INV-RESERVE).
  }
};

// Gives back every device job j holds, taking its share off the node counters. A freed device is
// reserved for job `for_job` (under that job's current reservation generation) when `reserve`.
template <class D>
void free_held(const D& d, ClusterVars<D>& s, int j, const typename D::Int& for_job,
               const typename D::Bool& reserve) {
  using Bool = typename D::Bool;
  auto& job = s.jobs[j];
  auto per_dev = swap_per_device(d, job.splice, job.mem);
  auto gen = d.select(
      s.num_jobs(), for_job, [&](int i) { return s.jobs[i].resv_gen; }, d.k(0));
  d.members(job.held, [&](int dev, const Bool& in) {
    const int n = s.node_of(dev);
    s.node_held[n] = s.node_held[n] - indicator(d, in);
    s.node_swap[n] = s.node_swap[n] - d.ite(in, per_dev, d.k(0));
    s.owner[dev] = d.ite(in, d.k(-1), s.owner[dev]);
    s.owner_epoch[dev] = d.ite(in, d.k(0), s.owner_epoch[dev]);
    s.resv_for[dev] = d.ite(in && reserve, for_job, s.resv_for[dev]);
    s.resv_gen[dev] = d.ite(in && reserve, gen, s.resv_gen[dev]);
  });
  job.held = d.no_devices(s.num_devices());
  job.devices = d.k(0);
  job.splice = d.k(0);
}

// Job j, holding nothing, takes the selected devices under `epoch`, adding its share to the node
// counters; a reservation on a taken device is consumed.
template <class D>
void take_selected(const D& d, ClusterVars<D>& s, int j, const Params<D>& p,
                   const typename D::Int& epoch) {
  auto& job = s.jobs[j];
  auto per_dev = swap_per_device(d, p.splice, job.mem);
  d.members(p.sel, [&](int dev, const typename D::Bool& in) {
    const int n = s.node_of(dev);
    s.node_held[n] = s.node_held[n] + indicator(d, in);
    s.node_swap[n] = s.node_swap[n] + d.ite(in, per_dev, d.k(0));
    s.owner[dev] = d.ite(in, d.k(j), s.owner[dev]);
    s.owner_epoch[dev] = d.ite(in, epoch, s.owner_epoch[dev]);
    s.resv_for[dev] = d.ite(in, d.k(-1), s.resv_for[dev]);
    s.resv_gen[dev] = d.ite(in, d.k(0), s.resv_gen[dev]);
  });
  job.held = p.sel;
  job.devices = d.size(p.sel);
  job.splice = p.splice;
}

// Move job j onto the selection under `epoch`: give the old devices back (reserving none), take
// the new ones.
template <class D>
void move_to_selected(const D& d, ClusterVars<D>& s, int j, const Params<D>& p,
                      const typename D::Int& epoch) {
  free_held(d, s, j, d.k(-1), d.b(false));
  take_selected(d, s, j, p, epoch);
}

// The job leaves the admitted set (completion, failure for good, cancellation): its share of the
// premium counter goes.
template <class D>
void unadmit(const D& d, ClusterVars<D>& s, int j) {
  s.premium_admitted.front() = s.premium_admitted.front() - premium_share(d, s.jobs[j]);
}

// Admission: the job is admitted. A premium job that fits within the premium reserve adds its
// min_dev to the premium counter; one that does not is admitted spare (it counts nothing, and
// ranks below the premium jobs within the reserve until it joins it, join_reserve, or one of them
// leads it in service by more than kReserveLeadGpuMs: precedes).
struct EffectAdmit {
  static constexpr std::string_view name = "count_admitted_or_spare";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    auto& job = s.jobs[j];
    const auto premium = is(d, job.tier, Tier::kPremium);
    const auto within = premium && fits_reserve(d, s, job.min_dev);
    s.premium_admitted.front() = s.premium_admitted.front() + d.ite(within, job.min_dev, d.k(0));
    job.spare = d.ite(premium && !within, d.k(1), d.k(0));
  }
};

// A spare premium job joins the reserve when the reserve has room for it now (a guarantee, once
// given, is kept until the job leaves the admitted set: INV-ADMIT).
template <class D>
void join_reserve(const D& d, ClusterVars<D>& s, int j) {
  auto& job = s.jobs[j];
  const auto join = job.spare == d.k(1) && fits_reserve(d, s, job.min_dev);
  s.premium_admitted.front() = s.premium_admitted.front() + d.ite(join, job.min_dev, d.k(0));
  job.spare = d.ite(join, d.k(0), job.spare);
}

// A new incarnation takes the selected devices (placement, resume). The job stops waiting, so
// the reservations made for it end (a new reservation generation); a spare premium job joins the
// reserve if it has room now.
struct EffectAcquire {
  static constexpr std::string_view name = "new_epoch_take_devices";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].epoch = s.jobs[j].epoch + d.k(1);
    s.jobs[j].resv_gen = s.jobs[j].resv_gen + d.k(1);
    move_to_selected(d, s, j, p, s.jobs[j].epoch);
    join_reserve(d, s, j);
  }
};

// A move is decided (migration, resize up or down): the job keeps its devices and its incarnation
// while the nodes take the cut; the target is recorded, and the target devices it does not hold
// are reserved for it under a new reservation generation (so that no reservation from before is
// live, and only a job that outranks it may take them meanwhile). For a shrink, `ben` remembers
// the waiting job the devices it gives up are for.
template <class D>
void plan_move(const D& d, ClusterVars<D>& s, int j, const Params<D>& p,
               const typename D::Int& ben) {
  auto& job = s.jobs[j];
  job.resv_gen = job.resv_gen + d.k(1);
  d.members(p.sel, [&](int dev, const typename D::Bool& in) {
    const auto other = in && !(s.owner[dev] == d.k(j));
    s.resv_for[dev] = d.ite(other, d.k(j), s.resv_for[dev]);
    s.resv_gen[dev] = d.ite(other, job.resv_gen, s.resv_gen[dev]);
  });
  job.target = p.sel;
  job.tsplice = p.splice;
  job.ben = ben;
}

// Migration or growth decided: record the target, reserve its new devices.
struct EffectPlanMove {
  static constexpr std::string_view name = "record_target_reserve";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    plan_move(d, s, j, p, d.k(-1));
  }
};

// Shrink decided, in favour of a waiting job: record the target (a subset of the held devices)
// and the beneficiary; the devices go when the cut is stored (EffectMove), reserved for it then.
struct EffectPlanShrink {
  static constexpr std::string_view name = "record_target_beneficiary";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    plan_move(d, s, j, p, p.beneficiary);
  }
};

// The target and the beneficiary of an in-flight operation are forgotten.
template <class D>
void clear_move(const D& d, ClusterVars<D>& s, int j) {
  auto& job = s.jobs[j];
  job.target = d.no_devices(s.num_devices());
  job.tsplice = d.k(0);
  job.ben = d.k(-1);
}

// The cut of a migration or resize is stored: commit it as the checkpoint, and a new incarnation
// takes the target devices. The devices left behind are reserved for the shrink's beneficiary if it
// still waits; the job stops reserving (a new generation voids whatever is left of its
// reservations).
struct EffectMove {
  static constexpr std::string_view name = "checkpoint_new_epoch_take_target";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    auto& job = s.jobs[j];
    const auto q = move_params(d, job, p);
    commit_cut(d, job, p.step);
    job.epoch = job.epoch + d.k(1);
    job.resv_gen = job.resv_gen + d.k(1);
    free_held(d, s, j, job.ben, waiting_job(d, s, job.ben));
    take_selected(d, s, j, q, job.epoch);
    clear_move(d, s, j);
  }
};

// An in-flight cut (preemption, migration, resize) failed, was refused or timed out: a new
// incarnation restarts on the devices the job holds, from its last committed checkpoint. Nothing
// is given up or taken; the target's reservations are voided, and the beneficiary forgotten.
struct EffectRestartInPlace {
  static constexpr std::string_view name = "new_epoch_rollback_in_place";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    auto& job = s.jobs[j];
    job.epoch = job.epoch + d.k(1);
    job.resv_gen = job.resv_gen + d.k(1);
    job.progress = d.ite(d.k(0) <= job.ckpt, job.ckpt, d.k(0));
    d.members(job.held, [&](int dev, const typename D::Bool& in) {
      s.owner_epoch[dev] = d.ite(in, job.epoch, s.owner_epoch[dev]);
    });
    clear_move(d, s, j);
    job.hold = d.k(0);  // an operator's suspension that did not happen holds nothing
  }
};

struct EffectProgress {
  static constexpr std::string_view name = "advance_and_account";
  template <class D>
  static void apply(const D&, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].progress = p.step;
    s.jobs[j].attained = s.jobs[j].attained + p.gpu_ms;
  }
};

struct EffectCheckpoint {
  static constexpr std::string_view name = "commit_checkpoint";
  template <class D>
  static void apply(const D&, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].ckpt = p.step;
  }
};

// Preemption starts: remember whom it is for, so that the devices it frees can be reserved. An
// operator's, for no one, holds the job: once suspended it waits for an operator's Release.
struct EffectPreempt {
  static constexpr std::string_view name = "remember_beneficiary";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].ben = p.beneficiary;
    s.jobs[j].hold = d.ite(operator_for_no_one(d, p), d.k(1), d.k(0));
  }
};

// The preemption checkpoint is committed; the job gives its devices back, reserved for the job the
// preemption was for if that one is still waiting.
struct EffectSuspend {
  static constexpr std::string_view name = "commit_checkpoint_release_reserved";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    commit_cut(d, s.jobs[j], p.step);
    free_held_for_beneficiary(d, s, j);
  }
};

// Completion.
struct EffectComplete {
  static constexpr std::string_view name = "release_unadmit";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    unadmit(d, s, j);
    free_held(d, s, j, d.k(-1), d.b(false));
  }
};

// Gives back every device job j holds; if j was checkpointing for a preemption, they are reserved
// for the job the preemption was for, if it still waits (the preemption's purpose survives the
// victim failing or being cancelled before its checkpoint is committed). Outside Checkpointing
// `ben` is -1, and nothing is reserved.
template <class D>
void free_held_for_beneficiary(const D& d, ClusterVars<D>& s, int j) {
  auto ben = s.jobs[j].ben;
  free_held(d, s, j, ben, waiting_job(d, s, ben));
  s.jobs[j].ben = d.k(-1);
}

// Cancellation, from any live state: release, leave the admitted set, end the job's reservations.
struct EffectCancel {
  static constexpr std::string_view name = "release_unreserve_unadmit";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    unadmit(d, s, j);
    free_held_for_beneficiary(d, s, j);
    clear_move(d, s, j);
    s.jobs[j].resv_gen = s.jobs[j].resv_gen + d.k(1);
  }
};

// Whose a failure is, and so which budget it uses.
enum class Fault { kOwn, kPlatform, kNone };

// Worker crash, node loss, or an aborted launch or restore: release, roll progress back to the last
// committed checkpoint (or the start), forget any move in flight (a new reservation generation
// voids its target's reservations), and count the failure against the job's retries (kOwn) or
// the platform cap (kPlatform).
template <class D>
void fail(const D& d, ClusterVars<D>& s, int j, Fault fault) {
  auto& job = s.jobs[j];
  free_held_for_beneficiary(d, s, j);
  clear_move(d, s, j);
  job.resv_gen = job.resv_gen + d.k(1);
  job.progress = d.ite(d.k(0) <= job.ckpt, job.ckpt, d.k(0));
  if (fault == Fault::kOwn) job.failures = job.failures + d.k(1);
  if (fault == Fault::kPlatform) job.faults = job.faults + d.k(1);
}

// A failure of the job's own with retries left: requeued, still admitted.
struct EffectRequeue {
  static constexpr std::string_view name = "release_rollback";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    fail(d, s, j, Fault::kOwn);
  }
};

// A platform fault under the job (NodeLoss) below the platform cap: requeued from its last
// committed checkpoint, its retries untouched.
struct EffectRequeuePlatform {
  static constexpr std::string_view name = "release_rollback_platform";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    fail(d, s, j, Fault::kPlatform);
  }
};

// A launch or a restore failed or timed out (Placed, Restoring): the job gives its devices back and
// waits again, from its last committed checkpoint. Not a failure of the job's own: no retry is
// counted.
struct EffectRequeueNoFault {
  static constexpr std::string_view name = "release_rollback_uncounted";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    fail(d, s, j, Fault::kNone);
  }
};

// A failure of its own with no retry left: failed for good, no longer admitted.
struct EffectGiveUp {
  static constexpr std::string_view name = "release_rollback_unadmit";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    unadmit(d, s, j);
    fail(d, s, j, Fault::kOwn);
  }
};

// A platform fault at the platform cap: failed for good (the reason names the cap), unadmitted.
struct EffectGiveUpPlatform {
  static constexpr std::string_view name = "release_rollback_unadmit_platform";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    unadmit(d, s, j);
    fail(d, s, j, Fault::kPlatform);
  }
};

// A waiting job is released (operators only): its reservations are given up (a new reservation
// generation voids them all, in O(1)), and an operator's hold on it ends, so the planners may
// place or resume it again (orrery resume).
struct EffectUnreserve {
  static constexpr std::string_view name = "void_reservations_release_hold";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    s.jobs[j].resv_gen = s.jobs[j].resv_gen + d.k(1);
    s.jobs[j].hold = d.k(0);
  }
};

// A waiting job takes another device type (GuardRetype): the devices reserved for it, of its old
// type, are given up (a new reservation generation voids them, as Release does).
struct EffectRetype {
  static constexpr std::string_view name = "take_type_void_reservations";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].dtype = p.dtype;
    s.jobs[j].resv_gen = s.jobs[j].resv_gen + d.k(1);
  }
};

}  // namespace orrery::spec
