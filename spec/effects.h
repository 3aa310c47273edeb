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
    job.devices = d.k(0);
    job.splice = d.k(0);
    job.epoch = d.k(0);
    job.progress = d.k(0);
    job.ckpt = d.k(-1);
    job.failures = d.k(0);
    job.attained = d.k(0);
    job.ben = d.k(-1);
    job.held = d.no_devices(s.num_devices());
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

// Admission: the job, now admitted, adds its share to the premium counter.
struct EffectAdmit {
  static constexpr std::string_view name = "count_admitted";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    const auto& job = s.jobs[j];
    s.premium_admitted.front() =
        s.premium_admitted.front() + d.ite(is(d, job.tier, Tier::kPremium), job.min_dev, d.k(0));
  }
};

// A new incarnation takes the selected devices (placement, resume). The job stops waiting, so
// the reservations made for it end (a new reservation generation).
struct EffectAcquire {
  static constexpr std::string_view name = "new_epoch_take_devices";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].epoch = s.jobs[j].epoch + d.k(1);
    s.jobs[j].resv_gen = s.jobs[j].resv_gen + d.k(1);
    move_to_selected(d, s, j, p, s.jobs[j].epoch);
  }
};

// Commit the barrier checkpoint, then a new incarnation takes the target devices.
struct EffectMigrate {
  static constexpr std::string_view name = "checkpoint_new_epoch_move";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].ckpt = p.step;
    s.jobs[j].epoch = s.jobs[j].epoch + d.k(1);
    move_to_selected(d, s, j, p, s.jobs[j].epoch);
  }
};

// Same incarnation, more devices (elastic resize by splicing: the workers are re-spliced at a safe
// point, no restart).
struct EffectGrow {
  static constexpr std::string_view name = "resplice";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    move_to_selected(d, s, j, p, s.jobs[j].epoch);
  }
};

// Same incarnation, fewer devices, in favour of a waiting job: the devices given up are reserved
// for it.
struct EffectShrink {
  static constexpr std::string_view name = "resplice_reserve_freed";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    free_held(d, s, j, p.beneficiary, waiting_job(d, s, p.beneficiary));
    take_selected(d, s, j, p, s.jobs[j].epoch);
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

// Preemption starts: remember whom it is for, so that the devices it frees can be reserved.
struct EffectPreempt {
  static constexpr std::string_view name = "remember_beneficiary";
  template <class D>
  static void apply(const D&, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].ben = p.beneficiary;
  }
};

// The preemption checkpoint is committed; the job gives its devices back, reserved for the job the
// preemption was for if that one is still waiting.
struct EffectSuspend {
  static constexpr std::string_view name = "commit_checkpoint_release_reserved";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].ckpt = p.step;
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
    s.jobs[j].resv_gen = s.jobs[j].resv_gen + d.k(1);
  }
};

// Worker crash or node loss: release, roll progress back to the last committed checkpoint (or the
// start), count the failure.
template <class D>
void fail(const D& d, ClusterVars<D>& s, int j) {
  auto& job = s.jobs[j];
  free_held_for_beneficiary(d, s, j);
  job.progress = d.ite(d.k(0) <= job.ckpt, job.ckpt, d.k(0));
  job.failures = job.failures + d.k(1);
}

// A failure with retries left: requeued, still admitted.
struct EffectRequeue {
  static constexpr std::string_view name = "release_rollback";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    fail(d, s, j);
  }
};

// A failure with none left: failed for good, no longer admitted.
struct EffectGiveUp {
  static constexpr std::string_view name = "release_rollback_unadmit";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    unadmit(d, s, j);
    fail(d, s, j);
  }
};

// A waiting job's reservations are given up: a new reservation generation voids them all, in O(1).
struct EffectUnreserve {
  static constexpr std::string_view name = "void_reservations";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    s.jobs[j].resv_gen = s.jobs[j].resv_gen + d.k(1);
  }
};

}  // namespace orrery::spec
