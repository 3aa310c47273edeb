// The Alibaba node list as a core Fleet: the real file's counts, reordered headers, errors.
#include "runtime/sim/alibaba_nodes.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "runtime/sim/sim_test_util.h"

namespace orrery::sim {
namespace {

using testing::ExpectCoreReadsBack;
using testing::TempDir;

const std::string kNodeList = ORRERY_ALIBABA_TRACE_DIR "/openb_node_list_gpu_node.csv";

TEST(AlibabaNodesTest, RealNodeList) {
  if (!std::filesystem::exists(kNodeList)) GTEST_SKIP() << "no trace at " << kNodeList;
  auto r = load_alibaba_nodes(kNodeList);
  ASSERT_TRUE(r.ok()) << r.reason();
  const auto& s = r->summary;
  const auto& f = r->fleet;
  // Counted independently with awk over the file: 1,213 rows, all with GPUs (24 x 1, 518 x 2,
  // 54 x 4, 617 x 8), 6,212 GPUs.
  EXPECT_EQ(s.rows, 1213);
  EXPECT_EQ(s.gpu_less, 0);
  EXPECT_EQ(s.nodes, 1213);
  EXPECT_EQ(s.devices, 6212);
  EXPECT_EQ(f.num_devices(), 6212);
  EXPECT_EQ(f.nodes.size(), 1213u);
  const std::map<std::string, std::int64_t> per_model = {
      {"A10", 2}, {"G2", 4392}, {"G3", 312}, {"P100", 265}, {"T4", 842}, {"V100M16", 195}, {"V100M32", 204}};
  EXPECT_EQ(s.devices_per_model, per_model);
  EXPECT_EQ(s.defaulted_models, (std::vector<std::string>{"G3", "G2"}));  // in order of first use (rows 24, 28)
  EXPECT_EQ(f.nodes[0].name, "openb-node-0000");
  EXPECT_EQ(f.nodes[0].host_mem_mib, 262144);
  EXPECT_EQ(f.nodes[0].num_devices(), 2);
  EXPECT_EQ(f.device_types[f.device_type(0)], "P100");
  EXPECT_EQ(f.device_mem(0), 16384);
  EXPECT_EQ(f.nodes[0].region, "alibaba");
  EXPECT_EQ(f.nodes[0].cluster, "openb");
  const int v100m32 = f.type_id("V100M32");
  ASSERT_GE(v100m32, 0);
  for (const auto& g : f.groups)
    if (g.type == v100m32) {
      EXPECT_EQ(g.mem_mib, 32768);
    }
  ExpectCoreReadsBack(f);
}

TEST(AlibabaNodesTest, ReorderedColumnsGpuLessRowsAndErrors) {
  TempDir dir;
  auto ok = load_alibaba_nodes(dir.write("n.csv",
                                         "model,extra,gpu,memory_mib,sn\n"
                                         "T4,x,4,1024,a\n"
                                         "T4,x,0,1024,cpu-only\n"
                                         "H9,x,2,2048,b\n"));
  ASSERT_TRUE(ok.ok()) << ok.reason();
  EXPECT_EQ(ok->summary.rows, 3);
  EXPECT_EQ(ok->summary.gpu_less, 1);
  EXPECT_EQ(ok->fleet.num_devices(), 6);
  EXPECT_EQ(ok->fleet.nodes[1].name, "b");
  EXPECT_EQ(ok->fleet.device_mem(5), 16384);  // H9: default_device_mem_mib
  EXPECT_EQ(ok->summary.defaulted_models, std::vector<std::string>{"H9"});

  AlibabaNodeOptions strict;
  strict.default_device_mem_mib = 0;
  auto unknown = load_alibaba_nodes(dir.write("u.csv", "sn,gpu,model,memory_mib\na,1,T4,1\nb,1,H9,1\n"), strict);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.reason(), dir.write("u.csv", "sn,gpu,model,memory_mib\na,1,T4,1\nb,1,H9,1\n") +
                                  ":3: model: no device memory known for \"H9\" (add it to device_mem_mib)");

  struct Case {
    std::string text, error;
  } cases[] = {
      {"sn,gpu,memory_mib\n", "n.csv:1: header lacks the column(s) model"},
      {"sn,gpu,model,memory_mib\na,x,T4,1\n", "n.csv:2: gpu: expected an integer in [0, 4096], got \"x\""},
      {"sn,gpu,model,memory_mib\na,1,T4,-5\n", "n.csv:2: memory_mib: expected an integer"},
      {"sn,gpu,model,memory_mib\na,1,T4,1\na,1,T4,1\n", "n.csv:3: node \"a\" defined twice"},
      {"sn,gpu,model,memory_mib\na,1,T 4,1\n", "n.csv:2: model: \"T 4\" is not a device type name"},
      {"sn,gpu,model,memory_mib\na,0,T4,1\n", "n.csv: fleet has no devices"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = load_alibaba_nodes(dir.write("n.csv", c.text));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.reason().find(c.error), std::string::npos) << r.reason();
  }
}

}  // namespace
}  // namespace orrery::sim
