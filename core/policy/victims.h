// Choosing whom to preempt for a waiting job. The core reserves a preempted job's devices for the
// beneficiary until it is placed, and only an operator may release a reservation: a preemption
// that frees too few devices for the beneficiary would leave them reserved for a job that cannot
// start, blocking every job it outranks (and two such half-served jobs of equal rank would block
// each other for good). So the planners preempt only a set of victims whose devices cover the
// beneficiary's smallest gang, or none.
#pragma once

#include <cstdint>
#include <vector>

#include "core/policy/job_book.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {

// The shortest prefix of `candidates` (in the planner's order of preference; each a running job
// the beneficiary may preempt) whose devices add up to at least `need`; empty when all of them
// together hold fewer.
std::vector<int> victims_covering(const SchedulerCore& core, const std::vector<int>& candidates,
                                  std::int64_t need);

// Proposes Preempt of each victim for `beneficiary` (each checked with the core first) and notes
// the cuts in the book; the number started.
int preempt_for(const SchedulerCore& core, PlanContext& ctx, JobBook& book, const std::vector<int>& victims,
                int beneficiary);

}  // namespace orrery::core::policy
