// What the orrery CLI prints: the job and node tables, ages, and the progress bars of `watch`.
// Pure functions of the service's status structs, so their output is tested without a cluster.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/service/client_api.h"

namespace orrery::cli {

// "850ms", "12s", "4m03s", "2h05m", "3d04h"; "-" for a negative (unknown) age.
std::string format_age(std::int64_t ms);

// `orrery ls`: one header line and one line per job, columns
//   JOB NAME TIER STATE EPOCH DEV SPLICE STEP/STEPS CKPT NODES AGE NOTE
// padded to the widest cell; CKPT is "-" before the first checkpoint, NODES a comma list ("-"
// when none), NOTE last and unpadded.
std::string format_jobs(const std::vector<service::JobStatus>& jobs);

// `orrery nodes`: NODE STATE DEVICES HELD HEARTBEAT ("-" when never registered).
std::string format_nodes(const std::vector<service::NodeStatus>& nodes);

// A progress fact found in an event's text: "N/M bytes", "N/M shards" or "step N/M", as node
// reports of checkpoint, restore and migration phrase them.
struct Progress {
  std::int64_t done = 0;
  std::int64_t total = 0;
  std::string unit;  // "bytes", "shards", "steps"
};
std::optional<Progress> find_progress(std::string_view text);

// "[##########..........]  50%  1.0 MiB/2.0 MiB" (bytes shown in binary units), `width` cells.
std::string progress_bar(const Progress& p, int width = 30);

// One timeline line: "2026-11-25T12:04:05.123Z #41 job 2 train-a Running -> Checkpointing: ..."
// (UTC, ISO 8601; "-" for a time before service::kWallClockFloorMs, which is not a wall-clock one).
std::string format_event(const service::ClusterEvent& e);

}  // namespace orrery::cli
