// Test helpers over the spec's concrete cluster state: a job's "hold row" (per device, the epoch
// the job holds it under, 0 when it does not) read from the per-device owner index, and a whole-
// state comparison that names the first field that differs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "spec/model.h"

namespace orrery::testing {

using Cluster = spec::ClusterVars<spec::Concrete>;

// Every node Up, as core::bring_up_all_nodes() leaves a core: for tests that build a cluster
// state by hand and place jobs on it.
inline void all_nodes_up(Cluster& s) {
  for (auto& st : s.node_state) st = static_cast<std::int64_t>(spec::NodeState::kUp);
}

// Per device: the owner's epoch where job j owns it, else 0.
inline std::vector<std::int64_t> hold_row(const Cluster& s, int j) {
  std::vector<std::int64_t> row(static_cast<std::size_t>(s.num_devices()), 0);
  for (int d = 0; d < s.num_devices(); ++d)
    if (s.owner[d] == j) row[d] = s.owner_epoch[d];
  return row;
}

// Every state variable and fleet value of two clusters is equal.
inline void ExpectSameCluster(const Cluster& a, const Cluster& b) {
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.group_first, b.group_first);
  EXPECT_EQ(a.group_node, b.group_node);
  EXPECT_EQ(a.group_type, b.group_type);
  EXPECT_EQ(a.group_mem, b.group_mem);
  EXPECT_EQ(a.node_devs, b.node_devs);
  EXPECT_EQ(a.host_mem, b.host_mem);
  EXPECT_EQ(a.premium_reserve, b.premium_reserve);
  EXPECT_EQ(a.owner, b.owner);
  EXPECT_EQ(a.owner_epoch, b.owner_epoch);
  EXPECT_EQ(a.resv_for, b.resv_for);
  EXPECT_EQ(a.resv_gen, b.resv_gen);
  EXPECT_EQ(a.node_state, b.node_state);
  EXPECT_EQ(a.node_held, b.node_held);
  EXPECT_EQ(a.node_swap, b.node_swap);
  EXPECT_EQ(a.premium_admitted, b.premium_admitted);
  ASSERT_EQ(a.num_jobs(), b.num_jobs());
  for (int j = 0; j < a.num_jobs(); ++j) {
    for (const auto& [field, member] : spec::job_fields<spec::Concrete>())
      EXPECT_EQ(a.jobs[j].*member, b.jobs[j].*member) << "job " << j << " " << field;
    EXPECT_EQ(a.jobs[j].held, b.jobs[j].held) << "job " << j << " held";
    EXPECT_EQ(a.jobs[j].target, b.jobs[j].target) << "job " << j << " target";
  }
}

}  // namespace orrery::testing
