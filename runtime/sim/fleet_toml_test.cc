// The TOML fleet format: what it builds (the core's Fleet, read back equal by the core's parser),
// node runs, and the errors with SOURCE:LINE:COLUMN.
#include "runtime/sim/fleet_toml.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/sim/sim_test_util.h"

namespace orrery::sim {
namespace {

using testing::ExpectCoreReadsBack;

constexpr const char* kTypes = R"(
[device_types]
H100-80G = { mem_mib = 81920 }
A100-40G = { mem_mib = 40960 }
)";

std::string err_of(const std::string& text) {
  auto f = parse_fleet_toml(text, "f.toml");
  EXPECT_FALSE(f.ok()) << "parsed:\n" << text;
  return f.ok() ? "" : f.reason();
}

TEST(FleetTomlTest, AlibabaExampleHasTheTraceClustersModelsInProportion) {
  // examples/fleets/alibaba-16x8.toml: 16 nodes of 8, the models of the trace's node list by
  // their share of its 6,212 GPUs (11 G2, 2 T4, one each of G3, P100, V100M32).
  auto f = load_fleet_toml(ORRERY_SOURCE_DIR "/examples/fleets/alibaba-16x8.toml");
  ASSERT_TRUE(f.ok()) << f.reason();
  EXPECT_EQ(f->num_devices(), 128);
  EXPECT_EQ(f->nodes.size(), 16u);
  ASSERT_EQ(f->device_types, (std::vector<std::string>{"G2", "T4", "G3", "P100", "V100M32"}));
  std::vector<int> per_type(f->device_types.size(), 0);
  for (int d = 0; d < f->num_devices(); ++d) ++per_type[static_cast<std::size_t>(f->device_type(d))];
  EXPECT_EQ(per_type, (std::vector<int>{88, 16, 8, 8, 8}));
}

TEST(FleetTomlTest, ExampleFileBuildsTheCoreFleet) {
  auto f = load_fleet_toml(ORRERY_SOURCE_DIR "/examples/fleets/two-regions.toml");
  ASSERT_TRUE(f.ok()) << f.reason();
  EXPECT_EQ(f->premium_reserve, 16);
  EXPECT_EQ(f->num_devices(), 2 * 8 + 4 * 8 + 4);
  ASSERT_EQ(f->nodes.size(), 7u);
  EXPECT_EQ(f->device_types, (std::vector<std::string>{"H100-80G", "A100-40G", "H200"}));
  const char* names[] = {"h100-0", "a100-0", "a100-3", "h200-big"};
  const int index[] = {0, 2, 5, 6};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f->nodes[index[i]].name, names[i]);
  EXPECT_EQ(f->nodes[1].name, "h100-1");
  EXPECT_EQ(f->nodes[1].region, "us-east");
  EXPECT_EQ(f->nodes[1].cluster, "c0");
  EXPECT_EQ(f->nodes[2].cluster, "c1");
  EXPECT_EQ(f->nodes[6].region, "eu-west");
  EXPECT_EQ(f->nodes[6].host_mem_mib, 4194304);
  // Device 16 is the first A100-40G (a100-0); the last device is an H200 on node 6.
  EXPECT_EQ(f->device_types[f->device_type(16)], "A100-40G");
  EXPECT_EQ(f->device_mem(16), 40960);
  EXPECT_EQ(f->device_node(16), 2);
  EXPECT_EQ(f->device_types[f->device_type(51)], "H200");
  EXPECT_EQ(f->device_mem(51), 143360);
  EXPECT_EQ(f->device_node(51), 6);
  ExpectCoreReadsBack(*f);
}

TEST(FleetTomlTest, MixedNodesAndZeroPaddedRuns) {
  auto f = parse_fleet_toml(std::string(kTypes) + R"(
[[region]]
name = "r"
[[region.cluster]]
name = "c"
[[region.cluster.node]]
name = "mix"
count = 11
host_mem_mib = 0
devices = [{ type = "H100-80G", count = 2 }, { type = "A100-40G", count = 3 }, { type = "H100-80G", count = 1 }]
)", "f.toml");
  ASSERT_TRUE(f.ok()) << f.reason();
  ASSERT_EQ(f->nodes.size(), 11u);
  EXPECT_EQ(f->nodes[0].name, "mix-00");
  EXPECT_EQ(f->nodes[10].name, "mix-10");
  EXPECT_EQ(f->num_devices(), 66);
  EXPECT_EQ(f->premium_reserve, 0);
  EXPECT_EQ(f->groups.size(), 33u);  // three runs a node, in the order written
  EXPECT_EQ(f->device_mem(2), 40960);
  EXPECT_EQ(f->device_mem(5), 81920);
  ExpectCoreReadsBack(*f);
}

TEST(FleetTomlTest, ErrorsNameTheLineAndColumn) {
  const std::string head = std::string(kTypes) + "[[region]]\nname = \"r\"\n[[region.cluster]]\nname = \"c\"\n";
  // kTypes starts with a blank line: [device_types] is line 2, [[region]] line 5, and in the cases
  // below [[region.cluster.node]] is line 9, its name line 10, host_mem_mib 11, devices 12.
  const std::string node = "[[region.cluster.node]]\nname = \"n\"\nhost_mem_mib = 1\n";
  struct Case {
    std::string text, error;
  } cases[] = {
      {head + node + "devices = [{ type = \"H100-80G\", count = 8 }]\ncolor = 1\n",
       "f.toml:13:1: color: unknown key in [[region.cluster.node]]"},
      {head + node + "devices = [{ type = \"B200\", count = 8 }]\n",
       "f.toml:12:21: devices[0].type: device type \"B200\" is not declared in [device_types]"},
      {head + node + "devices = [{ type = \"H100-80G\", count = 4097 }]\n",
       "f.toml:12:41: devices[0].count: 4097 out of range [1, 4096]"},
      {head + node + "devices = []\n", "f.toml:12:11: devices: a node needs at least one device"},
      {head + node + "devices = [{ type = \"H100-80G\" }]\n",
       "f.toml:12:12: devices[0].count: required key missing"},
      {head + "[[region.cluster.node]]\nname = \"n\"\ndevices = [{ type = \"H100-80G\", count = 1 }]\n",
       "f.toml:9:1: host_mem_mib: required key missing"},
      {head + "[[region.cluster.node]]\nname = \"n\"\nhost_mem_mib = \"lots\"\n",
       "f.toml:11:16: host_mem_mib: expected an integer, got a string"},
      {head + node + "devices = [{ type = \"H100-80G\", count = 1 }]\n" + node +
           "devices = [{ type = \"H100-80G\", count = 1 }]\n",
       "f.toml:14:8: node \"n\" defined twice"},
      {head + "[[region.cluster.node]]\nname = \"n x\"\nhost_mem_mib = 1\ndevices = [{ type = \"H100-80G\", count = 1 }]\n",
       "f.toml:10:8: node name \"n x\": must be 1 to 64 characters"},
      {"premium_reserve = 9\n" + head + node + "devices = [{ type = \"H100-80G\", count = 8 }]\n",
       "f.toml:1:19: premium_reserve: 9 exceeds the fleet's 8 devices"},
      {"region = 3\n" + std::string(kTypes), "f.toml:1:10: region: expected [[region]] sections"},
      // After [device_types], a key belongs to that table.
      {std::string(kTypes) + "region = 3\n", "f.toml:5:10: device_types.region: expected a table"},
      {std::string(kTypes), "f.toml:1:1: region: required key missing"},
      {"[[region]]\nname = \"r\"\n", "f.toml:1:1: device_types: required key missing"},
      {"[device_types]\nX = { mem_mib = 0 }\n", "f.toml:2:17: device_types.X.mem_mib: 0 out of range"},
      {head + "[[region.cluster.node]]\nname = \"n\"\nhost_mem_mib = 1\ndevices = [{ type = \"H100-80G\", count = 1 ",
       "f.toml:12:43: Error while parsing inline table"},  // toml++'s own error, with its place
      {"# Zürich\n" + head, "f.toml:1:4: non-ASCII character"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const auto e = err_of(c.text);
    EXPECT_EQ(e.rfind(c.error, 0), 0u) << e;
  }
}

TEST(FleetTomlTest, MissingFile) {
  auto f = load_fleet_toml("/nonexistent/fleet.toml");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.reason(), "/nonexistent/fleet.toml: cannot open the fleet file");
}

}  // namespace
}  // namespace orrery::sim
