// One simulated job: what the simulator submits to the core when the job arrives, and what it
// needs to model the job's run (how long it takes, how much state a checkpoint moves).
//
// A plain value, 56 bytes, so that a million jobs take 56 MB. Names (device types, tenants) are
// interned by the Workload that holds the jobs (runtime/sim/workload.h).
//
// Field contract (every producer in runtime/sim/ guarantees it; the tests check it):
//   0 <= arrival_s, 0 <= duration_s (both finite);
//   1 <= min_devices <= max_devices <= world <= spec::kMaxWorld, and world splits evenly over
//   some device count in [min_devices, max_devices] with at most spec::kSpliceLimit workers per
//   device: the core's submit guard (spec/guards.h GuardSubmit) accepts the job;
//   1 <= mem_mib <= spec::kMaxMemMib.
#pragma once

#include <cstdint>

#include "spec/vocabulary.h"

namespace orrery::sim {

struct SimJob {
  // Seconds since the start of the workload (trace: the row's creation_time).
  double arrival_s = 0;
  // Service demand: seconds the job runs when each of its `world` workers has a device of its own
  // (D == W, no splicing). On D < W devices with replica splicing it takes about W/D times as
  // long plus the splicing overhead the simulator models.
  double duration_s = 0;
  // Device memory per worker, MiB: the spec's `mem` (a device must have at least this much), and
  // what a spliced-out worker holds in host memory.
  std::int64_t mem_mib = 1;
  // Allowed device types: bit i set = Workload::device_types[i] is allowed; 0 = any type.
  std::uint64_t device_types = 0;
  std::int32_t world = 1;        // W: workers (gang size), fixed for the job's life
  std::int32_t min_devices = 1;  // elastic range of device counts
  std::int32_t max_devices = 1;
  std::int32_t tenant = 0;  // index into Workload::tenants
  spec::Tier tier = spec::Tier::kStandard;

  // State a checkpoint, migration or restore moves, MiB: every worker's device memory. (The
  // workers' registered host state is small beside it and not modelled.)
  std::int64_t state_mib() const { return mem_mib * world; }
  bool elastic() const { return min_devices < max_devices; }
  bool allows_type(int workload_type) const {
    return device_types == 0 || ((device_types >> workload_type) & 1) != 0;
  }
};

static_assert(sizeof(SimJob) <= 56, "SimJob is meant to stay compact: a million of them in memory");

// The core's submit clause "world splits evenly over a device count in range": some device count c
// in [min_devices, max_devices] with world == c * f and 1 <= f <= spec::kSpliceLimit.
constexpr bool splits_evenly(std::int64_t world, std::int64_t min_devices, std::int64_t max_devices) {
  for (std::int64_t f = 1; f <= spec::kSpliceLimit; ++f)
    if (world % f == 0 && min_devices <= world / f && world / f <= max_devices) return true;
  return false;
}

}  // namespace orrery::sim
