// A decision: one lifecycle event for one job with its parameters, as proposed by a policy or an
// operator and committed by the core. Decisions are what the journal stores, so they have a
// stable binary encoding; decoding validates everything (a journal is input from outside).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "spec/vocabulary.h"

namespace orrery::core {

struct Decision {
  spec::EventKind event = spec::EventKind::kSubmit;
  spec::Origin origin = spec::Origin::kOperator;  // who decided it (see spec::may_decide)
  std::int64_t job = -1;  // ignored for Submit: the core assigns the next job id

  // Submit: the job spec.
  std::string name;
  spec::Tier tier = spec::Tier::kStandard;
  std::string device_type;
  std::int64_t world = 0;
  std::int64_t min_devices = 0;
  std::int64_t max_devices = 0;
  std::int64_t mem_mib = 0;  // device memory per worker
  std::string tenant;        // who submitted it; fair share among tenants inside a tier ("": default)
  spec::Preemption mode = spec::Preemption::kTransparent;  // how it is preempted (the spec's)
  // Submit: what the nodes run (the rest of the job spec, journaled with it so that the journal
  // alone rebuilds every job). Empty command: a job with nothing to run (the simulator's).
  std::vector<std::string> command;  // argv
  std::vector<std::string> env;      // "NAME=VALUE"
  std::string workdir;
  std::int64_t grace_ms = 0;         // signal: SIGTERM .. SIGKILL
  std::int64_t min_runtime_ms = 0;   // no planner eviction within this long of a start
  std::int64_t steps = 0;
  std::int64_t checkpoint_every = 0;

  std::int64_t step = 0;          // Progress, Checkpoint, CheckpointDone
  std::int64_t gpu_ms = 0;        // Progress
  std::int64_t splice = 0;        // Place, Resume, Migrate, ResizeUp, ResizeDown
  std::int64_t beneficiary = -1;  // Preempt, ResizeDown
  std::vector<std::int64_t> devices;  // Place, Resume, Migrate, ResizeUp, ResizeDown: full new set

  // One line for logs: "Preempt job 2 for job 3" (the origin is not part of it).
  std::string describe() const;

  // A planner's Retype of waiting `job` to device type `type` (a name its spec gives).
  static Decision retype(std::int64_t job, std::string type);
  // A Submit of a job spec by an operator (the origin that may submit).
  static Decision submit(std::string name, spec::Tier tier, std::string device_type, std::int64_t world,
                         std::int64_t min_devices, std::int64_t max_devices, std::int64_t mem_mib,
                         std::string tenant = {});
};

// A node decision: one node lifecycle event (core/node_machine_table.h) for one node.
struct NodeDecision {
  spec::NodeEvent event = spec::NodeEvent::kRegister;
  spec::Origin origin = spec::Origin::kRuntime;
  std::int64_t node = -1;  // index in Fleet::nodes

  // "Drain node 1"
  std::string describe() const;
};

// Journal records: the first is the fleet (as Fleet::to_text()), every other one a job decision
// or a node decision.
enum class RecordKind : char { kFleet = 'F', kDecision = 'D', kNode = 'N' };

std::string encode_fleet_record(std::string_view fleet_text);
std::string encode_decision_record(const Decision& d, std::int64_t time_ms);
std::string encode_node_record(const NodeDecision& d, std::int64_t time_ms);

struct DecodedRecord {
  RecordKind kind = RecordKind::kDecision;
  std::string fleet_text;  // kFleet
  Decision decision;       // kDecision
  NodeDecision node;       // kNode
  std::int64_t time_ms = 0;
};
Result<DecodedRecord> decode_record(std::string_view bytes);

}  // namespace orrery::core
