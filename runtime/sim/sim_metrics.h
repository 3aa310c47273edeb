// The simulator's bookkeeping for its report (runtime/sim/simulator.h, SimResult), apart from the
// event loop: what each planner action (preemption, migration, resize) cost in device time and
// in work thrown away, and the completion and queueing statistics of the jobs, per tier and per
// tenant. Everything is O(1) per commit or per job; percentiles sort once, at the end.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "spec/vocabulary.h"

namespace orrery::sim {

// The actions a planner takes on a running job, as the report counts them.
enum class Action : std::uint8_t { kPreemption, kMigration, kResize, kNone };
inline constexpr int kNumActions = 3;
inline constexpr const char* kActionNames[kNumActions] = {"preemption", "migration", "resize"};

struct ActionCost {
  std::int64_t count = 0;
  // Device time the job's devices were held while not computing because of the action: the cut
  // being written, the state moving, the restore (a preemption's restore when the job resumes).
  double stalled_gpu_s = 0;
  // Work thrown away and done again: a requeue job's progress at its cut (transparent and signal
  // jobs resume from their cut and lose nothing).
  double redone_gpu_s = 0;
};

// Follows each job from the planner's action that stopped it running until it runs again (or
// waits, or ends), charging the device time its devices were held meanwhile to that action.
class ActionLedger {
 public:
  // A commit for `job`, which held `devices_before` devices until now (ms on the sim clock).
  void committed(int job, spec::EventKind ev, spec::JobState to, std::int64_t devices_before, std::int64_t now_ms);
  // A requeue job's cut threw `gpu_s` of work away: charged to the action under way.
  void redone(int job, double gpu_s);
  const std::array<ActionCost, kNumActions>& costs() const { return costs_; }

 private:
  struct Open {
    Action action = Action::kNone;
    std::int64_t since_ms = 0;
  };
  std::vector<Open> open_;  // by job
  std::array<ActionCost, kNumActions> costs_{};
};

// Completion and queueing times of completed jobs, per tier and tenant.
class JobStats {
 public:
  explicit JobStats(std::size_t tenants) : tenant_queue_sum_(tenants, 0.0), tenant_done_(tenants, 0) {}
  // A completed job: its JCT (arrival to completion) and queueing delay (arrival to first start);
  // `gang`: its smallest gang is more than one device.
  void completed(spec::Tier tier, int tenant, double jct_s, double queue_s, double sla_queue_s, bool gang);

  struct Tier {
    std::int64_t jobs = 0;
    double avg_jct_s = 0, p50_jct_s = 0, p99_jct_s = 0;
    double avg_queue_s = 0, p99_queue_s = 0, max_queue_s = 0;
    double sla_attainment = 0;
    // The tier's jobs apart by size: those whose smallest gang is one device and the gangs.
    std::int64_t gang_jobs = 0;
    double avg_queue_one_s = 0, avg_queue_gang_s = 0;
  };
  struct Summary {
    double avg_jct_s = 0, p50_jct_s = 0, p95_jct_s = 0, p99_jct_s = 0;
    std::array<Tier, 3> tiers{};
    std::vector<std::pair<std::int64_t, double>> tenant_avg_queue;  // per tenant: completed jobs, average
    std::vector<double> jct_s;
  };
  // Sorts once; the statistics move out.
  Summary summarize();

 private:
  std::vector<double> jct_, tier_jct_[3], tier_queue_[3];
  std::array<std::int64_t, 3> sla_ok_{}, gangs_{};
  std::array<double, 3> gang_queue_sum_{};
  std::vector<double> tenant_queue_sum_;
  std::vector<std::int64_t> tenant_done_;
};

}  // namespace orrery::sim
