// The job lifecycle machine behind a plain interface, driven by EventKind values. The Boost.MSM
// back-end lives in core/job_machine.cc only (MSM is heavy to compile); its table is
// core/job_machine_table.h. An event the machine does not accept in its current state, or whose
// guard rejects it, returns an error and leaves the machine unchanged: it never aborts.
//
// One machine serves any number of jobs: `position(state)` puts it in a job's recorded state
// before an event is fired for that job. So a job record costs no machine of its own (the core
// keeps a million of them), and the MSM table still decides every transition.
#pragma once

#include <memory>
#include <vector>

#include "base/result.h"
#include "spec/model.h"

namespace orrery::core {

template <class D>
struct RowDesc;

// What a guard or action needs at run time: the concrete cluster, the acting job, the parameters.
struct FireContext {
  spec::ClusterVars<spec::Concrete>* cluster;
  int job;
  const spec::Params<spec::Concrete>* params;
};

class JobMachine {
 public:
  JobMachine();
  ~JobMachine();
  JobMachine(JobMachine&&) noexcept;
  JobMachine& operator=(JobMachine&&) noexcept;

  spec::JobState state() const;
  // Puts the machine in state `s` (the recorded state of the job an event is about to be fired
  // for), as restoring a serialized machine would.
  void position(spec::JobState s);

  // Runs the guard and, if it holds, the effect of the row for (state(), event) on ctx.cluster,
  // then moves to the row's target. Does not update the cluster's `state` variable: the caller
  // records state() there (the job's recorded state, which the next position() starts from), so
  // every transition is still the MSM table's.
  Status fire(spec::EventKind event, FireContext& ctx);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The rows of the real lifecycle table on concrete values, in table order.
const std::vector<RowDesc<spec::Concrete>>& job_rows();

}  // namespace orrery::core
