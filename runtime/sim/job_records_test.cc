// Each job's own figures (job_records.h, orrery-sim --jobs-csv): they add up to the report's, name
// what the planners did to each job, and are written as the CSV documented in docs/simulator.md.
#include "runtime/sim/job_records.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/sim/offered_load.h"
#include "runtime/sim/sim_test_util.h"
#include "runtime/sim/simulator.h"
#include "runtime/sim/synthetic_workload.h"

namespace orrery::sim {
namespace {

using orrery::sim::testing::h100_fleet;
using orrery::sim::testing::job;
using orrery::sim::testing::one_node;

SimOptions recording() {
  SimOptions o = orrery::sim::testing::small_case_options();
  o.job_records = true;
  return o;
}

TEST(JobRecords, NameTheCutsAndTimesOfEachJob) {
  // A basic job of 1,000 s on the node; a premium one arrives at 10 s and cuts it; a third asks
  // for a type the fleet lacks.
  Workload w;
  w.device_types = {"H100-80G", "T4"};
  auto t4 = job(20, 10, 1, spec::Tier::kStandard);
  t4.device_types = 1u << 1;
  w.jobs = {job(0, 1000, 4, spec::Tier::kBasic), job(10, 50, 4, spec::Tier::kPremium), t4};
  auto r = simulate(one_node(4), w, "orrery", recording());
  ASSERT_TRUE(r.ok()) << r.reason();
  ASSERT_EQ(r->job_records.size(), 3u);
  const JobRecord &basic = r->job_records[0], &premium = r->job_records[1], &none = r->job_records[2];
  EXPECT_STREQ(basic.state, "completed");
  EXPECT_EQ(basic.device_type, "H100-80G");
  EXPECT_EQ(basic.start_s, 0);
  EXPECT_EQ(basic.preemptions, 1);
  EXPECT_EQ(premium.preemptions, 0);
  EXPECT_GE(premium.start_s, 10);
  EXPECT_LT(premium.start_s, 20);  // a round and the basic job's cut
  EXPECT_NEAR(premium.end_s - premium.start_s, 50, 5);  // its run (and its launch's restore)
  EXPECT_GT(basic.end_s, premium.end_s);  // resumed after it, from its cut
  EXPECT_LT(basic.end_s, 1000 + 50 + 20);
  EXPECT_STREQ(none.state, "unschedulable");
  EXPECT_EQ(none.device_type, "");
  EXPECT_EQ(none.start_s, -1);
  EXPECT_EQ(none.end_s, -1);
  // Without the option nothing is kept.
  auto plain = recording();
  plain.job_records = false;
  auto q = simulate(one_node(4), w, "orrery", plain);
  ASSERT_TRUE(q.ok()) << q.reason();
  EXPECT_TRUE(q->job_records.empty());
}

TEST(JobRecords, AddUpToTheReportUnderEveryPolicy) {
  // 200 synthetic jobs (half of them elastic) at load 0.95 on 4 nodes of 8 over 2 regions.
  const auto fleet = h100_fleet(2, 4, 8);
  SyntheticOptions so;
  so.jobs = 200;
  so.max_gang = 8;
  so.seed = 3;
  so.device_types = {{"H100-80G", 81920, 1}};  // the fleet's one type
  so.arrival_rate_per_s = arrival_rate_for_load(so, fleet.num_devices(), 0.95);
  auto w = generate_synthetic(so);
  ASSERT_TRUE(w.ok()) << w.reason();
  std::int64_t cuts = 0, resizes = 0;
  for (const char* p : {"fifo", "tiresias", "afs", "orrery"}) {
    auto r = simulate(fleet, *w, p, recording());
    ASSERT_TRUE(r.ok()) << p << ": " << r.reason();
    ASSERT_EQ(r->job_records.size(), w->jobs.size()) << p;
    EXPECT_EQ(r->unschedulable, 0) << p;
    std::int64_t completed = 0, preemptions = 0, migrations = 0, resized = 0;
    double jct = 0;
    for (std::size_t i = 0; i < w->jobs.size(); ++i) {
      const JobRecord& rec = r->job_records[i];
      preemptions += rec.preemptions;
      migrations += rec.migrations;
      resized += rec.resizes;
      if (std::string(rec.state) != "completed") continue;
      ++completed;
      const double arrival = w->jobs[i].arrival_s;
      EXPECT_GE(rec.start_s, arrival - 0.001) << p << " job " << i;
      EXPECT_GE(rec.end_s - rec.start_s, w->jobs[i].duration_s - 0.001) << p << " job " << i;  // no faster than full size
      jct += rec.end_s - arrival;
    }
    EXPECT_EQ(completed, r->completed) << p;
    EXPECT_EQ(preemptions, r->preemptions) << p;
    EXPECT_EQ(migrations, r->migrations) << p;
    EXPECT_EQ(resized, r->resizes) << p;
    ASSERT_GT(completed, 0) << p;
    EXPECT_NEAR(jct / static_cast<double>(completed), r->avg_jct_s, 0.01) << p;
    cuts += preemptions;
    resizes += resized;
  }
  EXPECT_GT(cuts, 0);  // the run is contended enough for the counts to be tested
  EXPECT_GT(resizes, 0);
}

TEST(JobRecords, CsvHasARowPerJobAndPolicyWithEmptyTimesForWhatDidNotHappen) {
  Workload w;
  w.tenants = {"team a,b"};
  w.names = {"pod-a", ""};
  w.jobs = {job(5, 100, 2, spec::Tier::kPremium, /*min_dev=*/1), job(6, 30, 1, spec::Tier::kBasic)};
  SimResult a, b;
  a.policy = "afs";
  b.policy = "orrery";
  JobRecord done;
  done.state = "completed";
  done.device_type = "H100-80G";
  done.start_s = 7.5;
  done.end_s = 120.25;
  done.preemptions = 2;
  done.migrations = 1;
  done.resizes = 3;
  JobRecord waiting;
  waiting.state = "unfinished";
  waiting.device_type = "H100-80G";
  a.job_records = {done, waiting};
  b.job_records = {done, JobRecord{}};
  const std::string csv = jobs_csv({a, b}, w);
  std::istringstream in(csv);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0],
            "policy,job,name,tier,tenant,world,min_devices,max_devices,state,device_type,arrival_s,run_s,start_s,end_s,"
            "queue_s,jct_s,preemptions,migrations,resizes");
  EXPECT_EQ(lines[1], "afs,0,pod-a,premium,\"team a,b\",2,1,2,completed,H100-80G,5.000,100.000,7.500,120.250,2.500,115.250,2,1,3");
  EXPECT_EQ(lines[2], "afs,1,,basic,\"team a,b\",1,1,1,unfinished,H100-80G,6.000,30.000,,,,,0,0,0");
  EXPECT_EQ(lines[3].rfind("orrery,0,", 0), 0u);
  EXPECT_EQ(lines[4], "orrery,1,,basic,\"team a,b\",1,1,1,unschedulable,,6.000,30.000,,,,,0,0,0");
}

TEST(JobRecords, AFileThatCannotBeWrittenIsAnErrorNamingIt) {
  const auto st = write_jobs_csv({}, {}, "/nonexistent-dir/jobs.csv");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.reason().find("/nonexistent-dir/jobs.csv"), std::string::npos) << st.reason();
  orrery::sim::testing::TempDir dir;
  const std::string path = dir.file("jobs.csv");
  ASSERT_TRUE(write_jobs_csv({}, {}, path).ok());
  auto text = orrery::testing::read_bytes(path);
  EXPECT_EQ(text.rfind("policy,job,name,tier,", 0), 0u);
}

}  // namespace
}  // namespace orrery::sim
