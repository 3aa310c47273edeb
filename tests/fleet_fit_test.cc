// core::fits_fleet: whether any placement on the fleet could ever hold a job (admission refuses
// the others at submit, naming the limit).
#include "core/fleet_fit.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace orrery::core
