// core::fits_fleet: whether any placement on the fleet could ever hold a job (admission refuses
// the others at submit, naming the limit).
#include "core/fleet_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "spec/model.h"

namespace orrery::core {
namespace {

Fleet fleet(const std::string& text) {
  auto f = Fleet::parse(text);
  EXPECT_TRUE(f.ok()) << f.reason();
  return *f;
}

// Two regions of one node each: 4 H100 (80 GiB) and 2 A100 (40 GiB); 8 GiB of host memory a node.
const char* kTwoRegions =
    "premium_reserve 2\n"
    "region east\ncluster e1\nnode e host_mem_mib=8192\ndevices H100 count=4 mem_mib=81920\n"
    "region west\ncluster w1\nnode w host_mem_mib=8192\ndevices A100 count=2 mem_mib=40960\n"
    "devices H100 count=2 mem_mib=81920\n";

FitRequest req(const Fleet& f, const char* type, std::int64_t world, std::int64_t min, std::int64_t max,
               std::int64_t mem) {
  FitRequest r;
  r.dtype = f.type_id(type);
  r.world = world;
  r.min_devices = min;
  r.max_devices = max;
  r.mem_mib = mem;
  return r;
}

std::string why(const Status& st) { return st.ok() ? "ok" : st.reason(); }

TEST(FleetFit, AGangFitsWithinOneRegion) {
  const auto f = fleet(kTwoRegions);
  EXPECT_EQ(why(fits_fleet(f, req(f, "H100", 4, 4, 4, 1024))), "ok");
  // 6 H100 in the fleet, but at most 4 in one region.
  EXPECT_NE(why(fits_fleet(f, req(f, "H100", 6, 6, 6, 1024))).find(
                "needs at least 6 devices of type \"H100\" with 1024 MiB (world 6, at most 8 workers "
                "per device), one region of the fleet has at most 4"),
            std::string::npos)
      << why(fits_fleet(f, req(f, "H100", 6, 6, 6, 1024)));
  // Spliced onto fewer devices it fits: 8 workers on 4 devices, one swapped out each.
  EXPECT_EQ(why(fits_fleet(f, req(f, "H100", 8, 1, 8, 1024))), "ok");
}

TEST(FleetFit, DeviceMemoryAndHostMemoryForSplicedOutWorkers) {
  const auto f = fleet(kTwoRegions);
  EXPECT_NE(why(fits_fleet(f, req(f, "A100", 1, 1, 1, 50000))).find("(the largest has 40960 MiB)"),
            std::string::npos);
  // 16 workers on at most 4 devices: 4 per device, 3 swapped out at 4096 MiB = 12 GiB of host
  // memory per device; a node has 8.
  auto st = fits_fleet(f, req(f, "H100", 16, 1, 4, 4096));
  EXPECT_NE(why(st).find("host memory"), std::string::npos) << why(st);
  // At 1024 MiB a worker, 3 GiB per device: 2 devices on the east node's 8 GiB are not enough for
  // 4 devices, so 16 workers do not fit either; 8 workers (1 GiB per device) do.
  EXPECT_FALSE(fits_fleet(f, req(f, "H100", 16, 1, 4, 1024)).ok());
  EXPECT_EQ(why(fits_fleet(f, req(f, "H100", 8, 1, 4, 1024))), "ok");
}

TEST(FleetFit, SignalAndRequeueJobsRunOneWorkerPerDevice) {
  const auto f = fleet(kTwoRegions);
  auto r = req(f, "H100", 8, 8, 8, 1024);
  r.mode = spec::Preemption::kSignal;
  EXPECT_FALSE(fits_fleet(f, r).ok());  // 8 devices, no splicing: no region has them
  r = req(f, "H100", 4, 4, 4, 1024);
  r.mode = spec::Preemption::kRequeue;
  EXPECT_EQ(why(fits_fleet(f, r)), "ok");
}

TEST(FleetFit, AWorldThatSplitsOverNoCountInRangeIsNamed) {
  const auto f = fleet(kTwoRegions);
  EXPECT_NE(why(fits_fleet(f, req(f, "H100", 7, 2, 3, 1024))).find("does not split evenly"),
            std::string::npos);
}

TEST(FleetFit, TheLimitIsNamedByKind) {
  const FleetFit fit(fleet(kTwoRegions));
  const auto f = fleet(kTwoRegions);
  EXPECT_EQ(fit.limit(req(f, "H100", 4, 4, 4, 1024)), FitLimit::kNone);
  EXPECT_EQ(fit.limit(req(f, "A100", 1, 1, 1, 50000)), FitLimit::kDeviceMemory);
  EXPECT_EQ(fit.limit(req(f, "H100", 7, 2, 3, 1024)), FitLimit::kSplit);
  EXPECT_EQ(fit.limit(req(f, "H100", 6, 6, 6, 1024)), FitLimit::kRegionDevices);
  EXPECT_EQ(fit.limit(req(f, "H100", 16, 1, 4, 4096)), FitLimit::kHostMemory);
  auto across = req(f, "H100", 6, 6, 6, 1024);
  across.across_regions = true;  // 4 + 2 H100 in the fleet
  EXPECT_EQ(fit.limit(across), FitLimit::kNone);
  std::string why;
  EXPECT_EQ(fit.limit(req(f, "H100", 16, 1, 4, 4096), &why), FitLimit::kHostMemory);
  EXPECT_EQ(why, fit.fits(req(f, "H100", 16, 1, 4, 4096)).reason());
}

TEST(FleetFit, HostMemoryIsCountedNodeByNodeWhereSomeNodeLimitsTheSplit) {
  // One region: node a holds 4 devices' swapped-out workers at 3 x 1024 MiB, node b one, node c
  // none: 5 devices at splice 4, where the region has 9.
  const auto f = fleet(
      "premium_reserve 0\nregion r\ncluster c1\n"
      "node a host_mem_mib=12288\ndevices H100 count=4 mem_mib=81920\n"
      "node b host_mem_mib=3072\ndevices H100 count=4 mem_mib=81920\n"
      "node c host_mem_mib=0\ndevices H100 count=1 mem_mib=81920\n");
  const FleetFit fit(f);
  EXPECT_EQ(fit.limit(req(f, "H100", 20, 5, 5, 1024)), FitLimit::kNone);       // 5 devices, splice 4
  EXPECT_EQ(fit.limit(req(f, "H100", 24, 6, 6, 1024)), FitLimit::kHostMemory); // 6 devices, splice 4
  EXPECT_EQ(fit.limit(req(f, "H100", 9, 9, 9, 1024)), FitLimit::kNone);        // unspliced: all 9
}

TEST(FleetFit, AGangKeptToOneNodeNeedsOneNodesHostMemory) {
  // Kept to one node (GangPlacer::set_one_node_gangs), a gang's spliced-out workers need one
  // node's host memory. Two nodes of 4 devices and 6 GiB: 16 workers of 1 GiB on 4 devices swap 3
  // GiB a device, so each node holds 2 such devices: 2 + 2 spanning, no node alone. 8 workers
  // (1 GiB a device) fit one node; 5 devices are more than one node has, and still span.
  const auto f = fleet(
      "premium_reserve 0\nregion r\ncluster c1\n"
      "node a host_mem_mib=6144\ndevices H100 count=4 mem_mib=81920\n"
      "node b host_mem_mib=6144\ndevices H100 count=4 mem_mib=81920\n");
  const FleetFit fit(f);
  auto one_node = [&](FitRequest r) {
    r.one_node = true;
    return r;
  };
  EXPECT_EQ(fit.limit(req(f, "H100", 16, 4, 4, 1024)), FitLimit::kNone) << "spanning: 2 + 2";
  EXPECT_EQ(fit.limit(one_node(req(f, "H100", 16, 4, 4, 1024))), FitLimit::kHostMemory);
  EXPECT_EQ(fit.limit(one_node(req(f, "H100", 8, 4, 4, 1024))), FitLimit::kNone);
  EXPECT_EQ(fit.limit(one_node(req(f, "H100", 5, 5, 5, 1024))), FitLimit::kNone);
}

// The rule as written (per split, per region, node by node), against FleetFit on random fleets and
// requests: the precomputed levels and the shortcut where no node limits a split give the same
// answer, and the same limit.
FitLimit reference(const Fleet& f, const FitRequest& r) {
  std::vector<std::int64_t> usable(f.nodes.size(), 0);
  std::map<std::string, std::int64_t> in_region;
  std::int64_t total = 0;
  for (const auto& g : f.groups)
    if (g.type == r.dtype && g.mem_mib >= r.mem_mib) {
      usable[static_cast<std::size_t>(g.node)] += g.count;
      in_region[r.across_regions ? "" : f.nodes[static_cast<std::size_t>(g.node)].region] += g.count;
    }
  for (const auto& [reg, n] : in_region) total = std::max(total, n);
  if (total == 0) return FitLimit::kDeviceMemory;
  const int max_splice = r.mode == spec::Preemption::kTransparent ? spec::kSpliceLimit : 1;
  std::int64_t fewest = -1;
  for (int splice = max_splice; splice >= 1; --splice) {
    if (r.world % splice != 0 || r.world / splice < r.min_devices || r.world / splice > r.max_devices) continue;
    const std::int64_t count = r.world / splice;
    fewest = fewest < 0 ? count : std::min(fewest, count);
    const std::int64_t swap = spec::swap_per_device(spec::Concrete{}, splice, r.mem_mib);
    std::map<std::string, std::int64_t> offered;
    for (std::size_t n = 0; n < f.nodes.size(); ++n) {
      const std::int64_t k = swap > 0 ? std::min(usable[n], f.nodes[n].host_mem_mib / swap) : usable[n];
      if ((offered[r.across_regions ? "" : f.nodes[n].region] += k) >= count) return FitLimit::kNone;
    }
  }
  if (fewest < 0) return FitLimit::kSplit;
  return fewest > total ? FitLimit::kRegionDevices : FitLimit::kHostMemory;
}

TEST(FleetFit, AgreesWithTheRuleAsWrittenOnRandomFleets) {
  std::mt19937_64 rng(7);
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  const std::int64_t mems[] = {16384, 40960, 81920};
  int answers[5] = {0, 0, 0, 0, 0};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text = "premium_reserve 0\n";
    const auto regions = pick(1, 3);
    for (std::int64_t r = 0; r < regions; ++r) {
      text += "region r" + std::to_string(r) + "\ncluster c" + std::to_string(r) + "\n";
      for (std::int64_t n = pick(1, 4); n > 0; --n) {
        text += "node n" + std::to_string(r) + "_" + std::to_string(n) + " host_mem_mib=" +
                std::to_string(pick(0, 8) * 16384) + "\n";
        for (std::int64_t g = pick(1, 2); g > 0; --g)
          text += std::string("devices ") + (pick(0, 1) ? "H100" : "A100") + " count=" + std::to_string(pick(1, 8)) +
                  " mem_mib=" + std::to_string(mems[pick(0, 2)]) + "\n";
      }
    }
    const auto f = fleet(text);
    const FleetFit fit(f);
    for (int q = 0; q < 50; ++q) {
      FitRequest r;
      r.dtype = static_cast<int>(pick(0, static_cast<std::int64_t>(f.device_types.size()) - 1));
      r.world = std::int64_t{1} << pick(0, 6);
      r.min_devices = std::max<std::int64_t>(1, r.world >> pick(0, 4));
      r.max_devices = std::max(r.min_devices, r.world >> pick(0, 2));
      r.mem_mib = pick(1, 90000);
      r.mode = pick(0, 3) == 0 ? spec::Preemption::kSignal : spec::Preemption::kTransparent;
      r.across_regions = pick(0, 3) == 0;
      const FitLimit got = fit.limit(r);
      ASSERT_EQ(got, reference(f, r)) << "trial " << trial << " query " << q << "\n" << text;
      ++answers[static_cast<int>(got)];
    }
  }
  for (int k = 0; k < 5; ++k) EXPECT_GT(answers[k], 0) << "limit " << k << " never came up";
}

}  // namespace
}  // namespace orrery::core
