// Unit tests of the fleet config (core/fleet.h): parsing, to_text() round trips, the errors every
// kind of bad line gets, the default fleet and the spec's view of a fleet (empty_cluster()).
#include "core/fleet.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "spec/invariants.h"

namespace orrery::core {
namespace {

constexpr const char* kMultiRegion = R"(# two regions, three clusters, mixed device types
premium_reserve 3

region eu-west
cluster c1
node n1 host_mem_mib=1024        # a comment after a line
devices H100-80G count=2 mem_mib=81920
devices A100-40G count=1 mem_mib=40960
node n2 host_mem_mib=2048
devices A100-40G count=2 mem_mib=40960
cluster c2
node n3 host_mem_mib=0
devices H100-80G count=1 mem_mib=81920

region us-east
cluster c1
node n4   host_mem_mib=4096
	devices H200 count=3 mem_mib=143360
)";

// The device ids of a node (a contiguous range) and one device's attributes, as plain values.
std::vector<int> devices_of(const Node& n) {
  std::vector<int> out;
  for (int d = n.first_device; d < n.end_device; ++d) out.push_back(d);
  return out;
}
struct DeviceView {
  int type;
  std::int64_t mem_mib;
  int node;
};
DeviceView device(const Fleet& f, int d) {
  return {f.device_type(d), f.device_mem(d), f.device_node(d)};
}

// Fleet has no operator==: compare every field, saying which one differs.
void ExpectSameFleet(const Fleet& a, const Fleet& b) {
  EXPECT_EQ(a.premium_reserve, b.premium_reserve);
  EXPECT_EQ(a.device_types, b.device_types);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    SCOPED_TRACE("node " + std::to_string(i));
    EXPECT_EQ(a.nodes[i].name, b.nodes[i].name);
    EXPECT_EQ(a.nodes[i].cluster, b.nodes[i].cluster);
    EXPECT_EQ(a.nodes[i].region, b.nodes[i].region);
    EXPECT_EQ(a.nodes[i].host_mem_mib, b.nodes[i].host_mem_mib);
    EXPECT_EQ(devices_of(a.nodes[i]), devices_of(b.nodes[i]));
  }
  ASSERT_EQ(a.num_devices(), b.num_devices());
  for (int i = 0; i < a.num_devices(); ++i) {
    SCOPED_TRACE("device " + std::to_string(i));
    EXPECT_EQ(device(a, i).type, device(b, i).type);
    EXPECT_EQ(device(a, i).mem_mib, device(b, i).mem_mib);
    EXPECT_EQ(device(a, i).node, device(b, i).node);
  }
}

Fleet parse_ok(const std::string& text) {
  auto f = Fleet::parse(text);
  EXPECT_TRUE(f.ok()) << f.reason();
  return f.ok() ? std::move(f).value() : Fleet{};
}

// parse() fails and the reason contains every one of `needles`.
void ExpectParseError(const std::string& text, const std::vector<std::string>& needles) {
  SCOPED_TRACE("config:\n" + text);
  auto f = Fleet::parse(text);
  ASSERT_FALSE(f.ok()) << "parsed without an error: " << f->num_devices() << " devices";
  for (const auto& n : needles) EXPECT_NE(f.reason().find(n), std::string::npos)
      << "reason '" << f.reason() << "' lacks '" << n << "'";
}

constexpr const char* kHead = "region r\ncluster c\nnode n host_mem_mib=1\n";  // lines 1-3

TEST(FleetParseTest, MultiRegionConfig) {
  auto f = parse_ok(kMultiRegion);
  EXPECT_EQ(f.premium_reserve, 3);
  EXPECT_EQ(f.device_types, (std::vector<std::string>{"H100-80G", "A100-40G", "H200"}));
  ASSERT_EQ(f.nodes.size(), 4u);
  ASSERT_EQ(f.num_devices(), 9);

  const struct {
    const char* name;
    const char* cluster;
    const char* region;
    std::int64_t host_mem;
    std::vector<int> devices;
  } want[] = {
      {"n1", "c1", "eu-west", 1024, {0, 1, 2}},
      {"n2", "c1", "eu-west", 2048, {3, 4}},
      {"n3", "c2", "eu-west", 0, {5}},
      {"n4", "c1", "us-east", 4096, {6, 7, 8}},
  };
  for (std::size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(f.nodes[i].name, want[i].name);
    EXPECT_EQ(f.nodes[i].cluster, want[i].cluster);
    EXPECT_EQ(f.nodes[i].region, want[i].region);
    EXPECT_EQ(f.nodes[i].host_mem_mib, want[i].host_mem);
    EXPECT_EQ(devices_of(f.nodes[i]), want[i].devices);
    for (int dev : want[i].devices) EXPECT_EQ(f.device_node(dev), static_cast<int>(i));
  }
  const int h100 = f.type_id("H100-80G"), a100 = f.type_id("A100-40G"), h200 = f.type_id("H200");
  EXPECT_EQ(h100, 0);
  EXPECT_EQ(a100, 1);
  EXPECT_EQ(h200, 2);
  EXPECT_EQ(f.type_id("V100"), -1);
  const int types[] = {h100, h100, a100, a100, a100, h100, h200, h200, h200};
  const std::int64_t mems[] = {81920, 81920, 40960, 40960, 40960, 81920, 143360, 143360, 143360};
  for (int d = 0; d < 9; ++d) {
    EXPECT_EQ(f.device_type(d), types[d]) << "device " << d;
    EXPECT_EQ(f.device_mem(d), mems[d]) << "device " << d;
  }
}

TEST(FleetParseTest, PremiumReserveDefaultsToZeroAndMayEqualDeviceCount) {
  EXPECT_EQ(parse_ok(std::string(kHead) + "devices X count=2 mem_mib=1\n").premium_reserve, 0);
  EXPECT_EQ(parse_ok(std::string("premium_reserve 2\n") + kHead + "devices X count=2 mem_mib=1\n")
                .premium_reserve,
            2);
}

TEST(FleetParseTest, NodeWithoutDevicesIsAllowedWhenTheFleetHasSome) {
  auto f = parse_ok(std::string(kHead) + "node empty host_mem_mib=5\nnode m host_mem_mib=7\n" +
                    "devices X count=1 mem_mib=1\n");
  ASSERT_EQ(f.nodes.size(), 3u);
  EXPECT_TRUE(devices_of(f.nodes[1]).empty());
  EXPECT_EQ(devices_of(f.nodes[2]), std::vector<int>{0});
}

TEST(FleetRoundTripTest, ToTextParsesBackToAnEqualFleet) {
  for (const std::string& text :
       {std::string(kMultiRegion), default_fleet().to_text(),
        std::string(kHead) + "node empty host_mem_mib=5\nnode m host_mem_mib=7\ndevices X count=1 mem_mib=1\n",
        // The same type with different memory on one node, and types interleaved.
        std::string("premium_reserve 1\n") + kHead +
            "devices X count=1 mem_mib=1\ndevices X count=2 mem_mib=2\ndevices Y count=1 mem_mib=3\n"
            "devices X count=1 mem_mib=2\n"
            // Cluster names reused across regions, regions revisited.
            "region s\ncluster c\nnode n3 host_mem_mib=3\ndevices Y count=1 mem_mib=3\n"
            "region r\ncluster c\nnode n2 host_mem_mib=3\ndevices X count=1 mem_mib=1\n"}) {
    SCOPED_TRACE(text);
    auto f = parse_ok(text);
    auto again = Fleet::parse(f.to_text());
    ASSERT_TRUE(again.ok()) << again.reason() << "\nto_text():\n" << f.to_text();
    ExpectSameFleet(f, *again);
    EXPECT_EQ(again->to_text(), f.to_text());  // a fixed point
  }
}

TEST(FleetRoundTripTest, ToTextOfMultiRegionConfig) {
  EXPECT_EQ(parse_ok(kMultiRegion).to_text(),
            "premium_reserve 3\n"
            "region eu-west\n"
            "cluster c1\n"
            "node n1 host_mem_mib=1024\n"
            "devices H100-80G count=2 mem_mib=81920\n"
            "devices A100-40G count=1 mem_mib=40960\n"
            "node n2 host_mem_mib=2048\n"
            "devices A100-40G count=2 mem_mib=40960\n"
            "cluster c2\n"
            "node n3 host_mem_mib=0\n"
            "devices H100-80G count=1 mem_mib=81920\n"
            "region us-east\n"
            "cluster c1\n"
            "node n4 host_mem_mib=4096\n"
            "devices H200 count=3 mem_mib=143360\n");
}

TEST(FleetErrorTest, UnknownKeyword) {
  ExpectParseError(std::string(kHead) + "devices X count=1 mem_mib=1\ngpus X count=1\n",
                   {"fleet line 5", "unknown keyword 'gpus'"});
  ExpectParseError("Region r\n", {"fleet line 1", "unknown keyword 'Region'"});
}

TEST(FleetErrorTest, ClusterBeforeRegion) {
  ExpectParseError("# header\ncluster c\n", {"fleet line 2", "cluster before any region"});
}

TEST(FleetErrorTest, NodeBeforeCluster) {
  ExpectParseError("region r\nnode n host_mem_mib=1\n", {"fleet line 2", "node before any cluster"});
  // A new region forgets the previous region's cluster.
  ExpectParseError(std::string(kHead) + "devices X count=1 mem_mib=1\nregion s\nnode m host_mem_mib=1\n",
                   {"fleet line 6", "node before any cluster"});
}

TEST(FleetErrorTest, DevicesBeforeNode) {
  ExpectParseError("region r\ncluster c\ndevices X count=1 mem_mib=1\n",
                   {"fleet line 3", "devices before any node"});
}

TEST(FleetErrorTest, MissingKeys) {
  ExpectParseError(std::string(kHead) + "devices X mem_mib=4\n", {"fleet line 4", "missing count="});
  ExpectParseError("region r\ncluster c\nnode n\n", {"fleet line 3", "missing host_mem_mib="});
  ExpectParseError(std::string(kHead) + "devices\n", {"fleet line 4", "devices needs a type"});
  ExpectParseError("region r\ncluster c\nnode\n", {"fleet line 3", "node needs a name"});
}

TEST(FleetErrorTest, NegativeOrGarbageNumbers) {
  const std::string dev = std::string(kHead) + "devices X ";
  for (const char* bad : {"count=-1", "count=abc", "count=3x", "count=", "count=1.5",
                          "count=99999999999999999999"})
    ExpectParseError(dev + bad + "\n", {"fleet line 4", "count must be a non-negative integer"});
  ExpectParseError(dev + "count=0\n", {"fleet line 4", "a node has at most 4096 devices"});
  ExpectParseError(dev + "count=4097\n", {"fleet line 4", "a node has at most 4096 devices"});
  ExpectParseError(dev + "count=1 mem_mib=-5\n",
                   {"fleet line 4", "'mem_mib=-5'", "mem_mib must be a non-negative integer"});
  ExpectParseError("region r\ncluster c\nnode n host_mem_mib=lots\n",
                   {"fleet line 3", "host_mem_mib must be a non-negative integer"});
  for (const char* bad : {"premium_reserve -1", "premium_reserve x", "premium_reserve",
                          "premium_reserve 1 2"})
    ExpectParseError(std::string(bad) + "\n",
                     {"fleet line 1", "premium_reserve takes one non-negative integer"});
}

// Trailing garbage after a number is rejected everywhere keyed_int() parses ("count=3x"), and
// must be for premium_reserve too.
TEST(FleetErrorTest, PremiumReserveWithTrailingGarbage) {
  ExpectParseError(std::string("premium_reserve 2x\n") + kHead + "devices X count=4 mem_mib=1\n",
                   {"fleet line 1", "premium_reserve takes one non-negative integer"});
}

// A misspelt key must not be silently ignored: "mem=81920" for "mem_mib=81920" would otherwise
// give devices of 0 MiB without a word (design.md: bad config always gets a clear error).
TEST(FleetErrorTest, UnknownKeyOnALine) {
  ExpectParseError(std::string(kHead) + "devices X count=4 mem=81920\n", {"fleet line 4", "mem="});
  ExpectParseError("region r\ncluster c\nnode n host_mem_mib=1 host_mem=2\ndevices X count=1 mem_mib=1\n",
                   {"fleet line 3", "host_mem="});
}

TEST(FleetErrorTest, ExtraWordsOnRegionOrCluster) {
  ExpectParseError("region a b\n", {"fleet line 1", "region takes one name"});
  ExpectParseError("region a\ncluster\n", {"fleet line 2", "cluster takes one name"});
}

TEST(FleetErrorTest, PremiumReserveOverDeviceCount) {
  ExpectParseError(std::string("premium_reserve 5\n") + kHead + "devices X count=4 mem_mib=1\n",
                   {"premium_reserve 5", "exceeds", "4 devices"});
}

TEST(FleetErrorTest, NoDevices) {
  ExpectParseError("", {"no devices"});
  ExpectParseError("# only comments\n\n", {"no devices"});
  ExpectParseError(kHead, {"no devices"});
}

TEST(FleetLoadTest, LoadsAFileAndNamesThePathInErrors) {
  char tmpl[] = "/tmp/orrery_fleet_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    std::ofstream(dir + "/good.conf") << kMultiRegion;
    std::ofstream(dir + "/bad.conf") << "region r\nbogus\n";
  }
  auto good = Fleet::load(dir + "/good.conf");
  ASSERT_TRUE(good.ok()) << good.reason();
  ExpectSameFleet(*good, parse_ok(kMultiRegion));

  auto bad = Fleet::load(dir + "/bad.conf");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.reason().find(dir + "/bad.conf"), std::string::npos) << bad.reason();
  EXPECT_NE(bad.reason().find("fleet line 2"), std::string::npos) << bad.reason();

  auto missing = Fleet::load(dir + "/missing.conf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.reason().find(dir + "/missing.conf"), std::string::npos) << missing.reason();
  std::filesystem::remove_all(dir);
}

TEST(DefaultFleetTest, Shape) {
  auto f = default_fleet();
  EXPECT_EQ(f.premium_reserve, 4);
  EXPECT_EQ(f.device_types, std::vector<std::string>{"H100-80G"});
  ASSERT_EQ(f.nodes.size(), 2u);
  ASSERT_EQ(f.num_devices(), 8);
  for (int n = 0; n < 2; ++n) {
    EXPECT_EQ(f.nodes[n].name, "node" + std::to_string(n));
    EXPECT_EQ(f.nodes[n].cluster, "c0");
    EXPECT_EQ(f.nodes[n].region, "local");
    EXPECT_EQ(f.nodes[n].host_mem_mib, 262144);
    EXPECT_EQ(devices_of(f.nodes[n]), (std::vector<int>{4 * n, 4 * n + 1, 4 * n + 2, 4 * n + 3}));
  }
  // One device group per node: nothing is stored per device.
  ASSERT_EQ(f.groups.size(), 2u);
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(f.device_type(d), 0);
    EXPECT_EQ(f.device_mem(d), 81920);
    EXPECT_EQ(f.device_node(d), d / 4);
  }
}

std::vector<int> nodes_of(const spec::ClusterVars<spec::Concrete>& s) {
  std::vector<int> out;
  for (int d = 0; d < s.num_devices(); ++d) out.push_back(s.node_of(d));
  return out;
}
std::vector<std::int64_t> types_of(const spec::ClusterVars<spec::Concrete>& s) {
  std::vector<std::int64_t> out;
  for (int d = 0; d < s.num_devices(); ++d) out.push_back(s.dev_type(d));
  return out;
}

TEST(EmptyClusterTest, DefaultFleet) {
  auto s = default_fleet().empty_cluster();
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.num_devices(), 8);
  EXPECT_EQ(s.num_jobs(), 0);
  EXPECT_EQ(nodes_of(s), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(types_of(s), std::vector<std::int64_t>(8, 0));
  EXPECT_EQ(s.node_devs, (std::vector<std::int64_t>{4, 4}));
  EXPECT_EQ(s.host_mem, (std::vector<std::int64_t>{262144, 262144}));
  ASSERT_EQ(s.premium_reserve.size(), 1u);
  EXPECT_EQ(s.reserve(), 4);
  EXPECT_TRUE(s.jobs.empty());
  EXPECT_EQ(s.owner, std::vector<std::int64_t>(8, -1));
  EXPECT_EQ(s.resv_for, std::vector<std::int64_t>(8, -1));
  EXPECT_EQ(s.node_held, (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(s.node_swap, (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(s.premium_admitted, std::vector<std::int64_t>{0});
  spec::Concrete d;
  EXPECT_TRUE(spec::fleet_wellformed(d, s));
  EXPECT_TRUE(spec::init_state(d, s));
  for (auto inv : spec::kAllInvariants) EXPECT_TRUE(spec::state_invariant(d, inv, s))
      << spec::inv_id(inv);
}

TEST(EmptyClusterTest, MultiRegion) {
  auto f = parse_ok(kMultiRegion);
  auto s = f.empty_cluster();
  EXPECT_EQ(s.nodes, 4);
  EXPECT_EQ(nodes_of(s), (std::vector<int>{0, 0, 0, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(types_of(s), (std::vector<std::int64_t>{0, 0, 1, 1, 1, 0, 2, 2, 2}));
  EXPECT_EQ(s.node_devs, (std::vector<std::int64_t>{3, 2, 1, 3}));
  EXPECT_EQ(s.host_mem, (std::vector<std::int64_t>{1024, 2048, 0, 4096}));
  EXPECT_EQ(s.reserve(), 3);
  EXPECT_TRUE(spec::fleet_wellformed(spec::Concrete{}, s));
}

}  // namespace
TEST(FleetErrorTest, DeviceMemoryIsRequired) {
  ExpectParseError(std::string(kHead) + "devices X count=2\n",
                   {"fleet line 4", "missing or zero mem_mib="});
  ExpectParseError(std::string(kHead) + "devices X count=2 mem_mib=0\n",
                   {"fleet line 4", "missing or zero mem_mib="});
}

TEST(FleetErrorTest, RepeatedDefinitions) {
  ExpectParseError(std::string("premium_reserve 1\npremium_reserve 2\n") + kHead +
                       "devices X count=2 mem_mib=1\n",
                   {"fleet line 2", "premium_reserve given twice"});
  ExpectParseError(std::string(kHead) + "devices X count=2 mem_mib=1\nnode n host_mem_mib=1\n",
                   {"fleet line 5", "node 'n' defined twice"});
}

TEST(FleetErrorTest, FleetSizeIsCapped) {
  std::string text = "region r\ncluster c\n";
  for (int n = 0; n < 257; ++n)
    text += "node n" + std::to_string(n) + " host_mem_mib=1\ndevices X count=4096 mem_mib=1\n";
  ExpectParseError(text, {"a fleet has at most 1048576 devices"});
}

}  // namespace orrery::core
