// Helpers shared by the simulator's tests (runtime/sim, tests/planner_actions_test.cc): temporary
// files, small H100 fleets and hand-made jobs, and the check that a fleet is one the core's own
// parser reads back equal (so every simulator fleet source yields a core fleet).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/fleet.h"
#include "runtime/sim/fleet_generator.h"
#include "runtime/sim/sim_job.h"
#include "runtime/sim/simulator.h"
#include "tests/temp_dir.h"

namespace orrery::sim::testing {

// `nodes` nodes of `devices` H100s over `regions` regions of one cluster each.
inline core::Fleet h100_fleet(int regions, int nodes, int devices) {
  FleetGenOptions o;
  o.regions = regions;
  o.clusters_per_region = 1;
  o.nodes = nodes;
  o.devices_per_node = devices;
  o.device_mix = {{"H100-80G", 81920, 1}};
  return *generate_fleet(o);
}
inline core::Fleet one_node(int devices) { return h100_fleet(1, 1, devices); }

// A job of `world` workers arriving at `arrival` and running `duration` s at full size: rigid, or
// elastic down to `min_dev` devices (min_dev >= 0).
inline SimJob job(double arrival, double duration, int world,
                  spec::Tier tier = spec::Tier::kStandard, int min_dev = -1) {
  SimJob j;
  j.arrival_s = arrival;
  j.duration_s = duration;
  j.world = world;
  j.min_devices = min_dev < 0 ? world : min_dev;
  j.max_devices = world;
  j.mem_mib = 1024;
  j.tier = tier;
  return j;
}

// Options for the small hand-made cases: a round every second, premium may take the whole
// fleet, periodic checkpoints every `checkpoint_every_s` (0: none; a LAS planner sees a running
// job's attained service at them).
inline SimOptions small_case_options(double checkpoint_every_s = 0) {
  SimOptions o;
  o.round_s = 1;
  o.cost.checkpoint_every_s = checkpoint_every_s;
  o.premium_share = 1;
  return o;
}

// tests/temp_dir.h's directory, with a write that returns the file's path.
class TempDir : public orrery::testing::TempDir {
 public:
  TempDir() : orrery::testing::TempDir("orrery_sim_test") {}
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = file(name);
    orrery::testing::write_bytes(p, text);
    return p;
  }
};

// The core's Fleet::parse reads `f.to_text()` back to a fleet equal field by field.
inline void ExpectCoreReadsBack(const core::Fleet& f) {
  auto again = core::Fleet::parse(f.to_text());
  ASSERT_TRUE(again.ok()) << again.reason();
  EXPECT_EQ(again->premium_reserve, f.premium_reserve);
  EXPECT_EQ(again->device_types, f.device_types);
  ASSERT_EQ(again->nodes.size(), f.nodes.size());
  for (std::size_t i = 0; i < f.nodes.size(); ++i) {
    const auto &a = again->nodes[i], &b = f.nodes[i];
    ASSERT_TRUE(a.name == b.name && a.cluster == b.cluster && a.region == b.region &&
                a.host_mem_mib == b.host_mem_mib && a.first_device == b.first_device &&
                a.end_device == b.end_device)
        << "node " << i << " (" << b.name << ") differs";
  }
  ASSERT_EQ(again->groups.size(), f.groups.size());
  for (std::size_t i = 0; i < f.groups.size(); ++i) {
    const auto &a = again->groups[i], &b = f.groups[i];
    ASSERT_TRUE(a.type == b.type && a.mem_mib == b.mem_mib && a.node == b.node &&
                a.first == b.first && a.count == b.count)
        << "device group " << i << " differs";
  }
}

}  // namespace orrery::sim::testing
