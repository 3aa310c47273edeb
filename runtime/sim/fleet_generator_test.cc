// The fleet generator: the 100,000-GPU fleet's shape, seeded determinism, the device mix, and
// option errors.
#include "runtime/sim/fleet_generator.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "runtime/sim/sim_test_util.h"

namespace orrery::sim {
namespace {

using testing::ExpectCoreReadsBack;

TEST(FleetGeneratorTest, HundredThousandGpusShape) {
  FleetGenOptions o;  // the defaults are the fleet
  auto f = generate_fleet(o);
  ASSERT_TRUE(f.ok()) << f.reason();
  EXPECT_EQ(f->num_devices(), 100000);
  ASSERT_EQ(f->nodes.size(), 12500u);
  std::map<std::string, int> nodes_per_cluster;
  std::set<std::string> regions, names;
  std::map<std::string, int> devices_per_type;
  for (std::size_t i = 0; i < f->nodes.size(); ++i) {
    const auto& n = f->nodes[i];
    ASSERT_EQ(n.num_devices(), 8) << n.name;
    ASSERT_EQ(n.host_mem_mib, std::int64_t{2} << 20);
    ASSERT_EQ(n.cluster.rfind(n.region + "-c", 0), 0u) << n.cluster << " not in " << n.region;
    ASSERT_EQ(n.name.rfind(n.cluster + "-n", 0), 0u) << n.name;
    ++nodes_per_cluster[n.cluster];
    regions.insert(n.region);
    names.insert(n.name);
    // One device type per node (one group), all eight devices alike.
    const int t = f->device_type(n.first_device);
    for (int d = n.first_device; d < n.end_device; ++d) ASSERT_EQ(f->device_type(d), t);
    devices_per_type[f->device_types[t]] += 8;
  }
  EXPECT_EQ(names.size(), 12500u);
  EXPECT_EQ(regions, (std::set<std::string>{"r0", "r1", "r2", "r3"}));
  ASSERT_EQ(nodes_per_cluster.size(), 20u);
  for (const auto& [c, n] : nodes_per_cluster) EXPECT_EQ(n, 625) << c;
  EXPECT_EQ(f->nodes.front().name, "r0-c0-n000");
  EXPECT_EQ(f->nodes.back().name, "r3-c4-n624");
  // The mix 5 : 3 : 2 over 12,500 node draws: each share within 3 standard deviations (about
  // 1.3 points) of its weight.
  const double expect[] = {0.5, 0.3, 0.2};
  const char* types[] = {"H100-80G", "A100-80G", "A100-40G"};
  for (int i = 0; i < 3; ++i) {
    const double share = devices_per_type[types[i]] / 100000.0;
    EXPECT_NEAR(share, expect[i], 0.015) << types[i];
  }
  EXPECT_EQ(f->device_mem(f->nodes.back().first_device),
            f->device_types[f->device_type(f->nodes.back().first_device)] == "A100-40G" ? 40960 : 81920);
  ExpectCoreReadsBack(*f);
  // The spec's view builds too (what the core starts from).
  EXPECT_EQ(f->empty_cluster().nodes, 12500);
}

TEST(FleetGeneratorTest, SameSeedSameFleetOtherSeedOtherTypes) {
  FleetGenOptions o;
  o.nodes = 500;
  o.regions = 2;
  o.clusters_per_region = 3;
  auto a = generate_fleet(o), b = generate_fleet(o);
  o.seed = 2;
  auto c = generate_fleet(o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->to_text(), b->to_text());
  EXPECT_NE(a->to_text(), c->to_text());
  // 500 nodes over 6 clusters: 84 in the first two, 83 in the others.
  std::map<std::string, int> per_cluster;
  for (const auto& n : a->nodes) ++per_cluster[n.cluster];
  EXPECT_EQ(per_cluster["r0-c0"], 84);
  EXPECT_EQ(per_cluster["r0-c1"], 84);
  EXPECT_EQ(per_cluster["r0-c2"], 83);
  EXPECT_EQ(per_cluster["r1-c2"], 83);
}

TEST(FleetGeneratorTest, HomogeneousClusters) {
  FleetGenOptions o;
  o.nodes = 1000;
  o.homogeneous_clusters = true;
  o.premium_reserve = 100;
  auto f = generate_fleet(o);
  ASSERT_TRUE(f.ok()) << f.reason();
  EXPECT_EQ(f->premium_reserve, 100);
  std::map<std::string, std::set<int>> types;
  for (const auto& n : f->nodes) types[n.cluster].insert(f->device_type(n.first_device));
  std::set<int> all;
  for (const auto& [c, t] : types) {
    EXPECT_EQ(t.size(), 1u) << c;
    all.insert(*t.begin());
  }
  EXPECT_GT(all.size(), 1u);  // 20 clusters drawn from three types: not all the same
  ExpectCoreReadsBack(*f);
}

TEST(FleetGeneratorTest, BadOptions) {
  auto err = [](auto edit) {
    FleetGenOptions o;
    edit(o);
    auto f = generate_fleet(o);
    return f.ok() ? std::string("ok") : f.reason();
  };
  EXPECT_NE(err([](auto& o) { o.regions = 0; }).find("regions must be >= 1"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.nodes = 19; }).find("at least one per cluster"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.devices_per_node = 4097; }).find("devices_per_node"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.devices_per_node = 100; }).find("devices per fleet"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.device_mix.clear(); }).find("device_mix is empty"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.device_mix[0].weight = -1; }).find("weight"), std::string::npos);
  EXPECT_NE(err([](auto& o) { for (auto& m : o.device_mix) m.weight = 0; }).find("sum to zero"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.device_mix[0].type = "H 100"; }).find("bad name"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.device_mix[0].mem_mib = 0; }).find("mem_mib"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.premium_reserve = 100001; }).find("premium_reserve"), std::string::npos);
}

}  // namespace
}  // namespace orrery::sim
