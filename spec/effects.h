// Effects: what a transition does to the cluster. Each effect is a type with a name and
//   template <class D> static void apply(const D&, ClusterVars<D>&, int job, const Params<D>&);
// It changes only the acting job's variables and its row of the hold matrix. The job's `state`
// variable is not set here: it is the row's target state, set by whoever fires the row (the MSM in
// the core, the transition relation in the checker), so the table is its single source.
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
  }
};

// Hold exactly the selected devices under the given epoch.
template <class D>
void take_devices(const D& d, ClusterVars<D>& s, int j, const Params<D>& p,
                  const typename D::Int& epoch) {
  for (int dev = 0; dev < s.num_devices(); ++dev) s.hold[j][dev] = d.ite(p.sel[dev], epoch, d.k(0));
  s.jobs[j].devices = sel_count(d, p.sel);
  s.jobs[j].splice = p.splice;
}

// Release every device of the job.
template <class D>
void release_devices(const D& d, ClusterVars<D>& s, int j) {
  for (int dev = 0; dev < s.num_devices(); ++dev) s.hold[j][dev] = d.k(0);
  s.jobs[j].devices = d.k(0);
  s.jobs[j].splice = d.k(0);
}

// A new incarnation takes the selected devices (placement, resume).
struct EffectAcquire {
  static constexpr std::string_view name = "new_epoch_take_devices";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].epoch = s.jobs[j].epoch + d.k(1);
    take_devices(d, s, j, p, s.jobs[j].epoch);
  }
};

// Commit the barrier checkpoint, then a new incarnation takes the target devices.
struct EffectMigrate {
  static constexpr std::string_view name = "checkpoint_new_epoch_move";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].ckpt = p.step;
    EffectAcquire::apply(d, s, j, p);
  }
};

// Same incarnation, new device set (elastic resize by splicing: the workers are re-spliced at a
// safe point, no restart).
struct EffectRegang {
  static constexpr std::string_view name = "resplice";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    take_devices(d, s, j, p, s.jobs[j].epoch);
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

// The preemption checkpoint is committed; the job gives its devices back.
struct EffectSuspend {
  static constexpr std::string_view name = "commit_checkpoint_release";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>& p) {
    s.jobs[j].ckpt = p.step;
    release_devices(d, s, j);
  }
};

// Completion and cancellation.
struct EffectRelease {
  static constexpr std::string_view name = "release";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    release_devices(d, s, j);
  }
};

// Worker crash or node loss: release, roll progress back to the last committed checkpoint (or the
// start), count the failure.
struct EffectFail {
  static constexpr std::string_view name = "release_rollback";
  template <class D>
  static void apply(const D& d, ClusterVars<D>& s, int j, const Params<D>&) {
    auto& job = s.jobs[j];
    release_devices(d, s, j);
    job.progress = d.ite(d.k(0) <= job.ckpt, job.ckpt, d.k(0));
    job.failures = job.failures + d.k(1);
  }
};

}  // namespace orrery::spec
