// The Alibaba 2023 trace loader: the real trace's counts per category (counted independently with
// awk over the file), columns in any order, every category's policy, and PATH:LINE errors.
#include "runtime/sim/alibaba_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/sim/offered_load.h"
#include "runtime/sim/sim_test_util.h"

namespace orrery::sim {
namespace {

using testing::TempDir;

const std::string kPodList = ORRERY_ALIBABA_TRACE_DIR "/openb_pod_list_default.csv";

#define REQUIRE_TRACE() \
  if (!std::filesystem::exists(kPodList)) GTEST_SKIP() << "no trace at " << kPodList

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
  if (!line.empty() && line.back() == ',') f.emplace_back();
  return f;
}

bool same_job(const SimJob& a, const SimJob& b) {
  return a.arrival_s == b.arrival_s && a.duration_s == b.duration_s && a.mem_mib == b.mem_mib &&
         a.device_types == b.device_types && a.world == b.world && a.min_devices == b.min_devices &&
         a.max_devices == b.max_devices && a.tenant == b.tenant && a.tier == b.tier;
}

TEST(AlibabaTraceTest, RealTraceCountsPerCategory) {
  REQUIRE_TRACE();
  auto t = load_alibaba_trace(kPodList);
  ASSERT_TRUE(t.ok()) << t.reason();
  const auto& s = t->summary;
  // awk -F, 'NR>1' over the file: 8,152 rows; num_gpu == 0 on 1,088; of the GPU rows, 861 have
  // no scheduled_time (505 of them fractional), none lacks a deletion_time only; of the 6,203 that
  // ran, 2,573 have gpu_milli < 1000 and 3,630 are whole GPUs.
  EXPECT_EQ(s.rows, 8152);
  EXPECT_EQ(s.cpu_only, 1088);
  EXPECT_EQ(s.never_scheduled, 861);
  EXPECT_EQ(s.unfinished, 0);
  EXPECT_EQ(s.fractional, 2573);
  EXPECT_EQ(s.whole, 3630);
  EXPECT_EQ(s.jobs, 6203);
  EXPECT_EQ(s.rows, s.cpu_only + s.never_scheduled + s.unfinished + s.fractional + s.whole);
  EXPECT_EQ(s.zero_duration, 0);
  // qos LS/Guaranteed, Burstable, BE among the jobs, and sum(num_gpu * (deletion - scheduled)).
  EXPECT_EQ(s.jobs_per_tier[0], 3596);
  EXPECT_EQ(s.jobs_per_tier[1], 97);
  EXPECT_EQ(s.jobs_per_tier[2], 2510);
  EXPECT_EQ(s.gpu_seconds_per_tier[0], 178495054.0);
  EXPECT_EQ(s.gpu_seconds_per_tier[1], 26853122.0);
  EXPECT_EQ(s.gpu_seconds_per_tier[2], 9255782.0);
  EXPECT_EQ(s.first_arrival_s, 0);
  EXPECT_EQ(s.last_arrival_s, 12901761);

  const Workload& w = t->workload;
  ASSERT_EQ(w.jobs.size(), 6203u);
  EXPECT_TRUE(w.device_types.empty());  // gpu_spec is empty on every row: any type
  EXPECT_EQ(w.tenants, std::vector<std::string>{"all"});
  EXPECT_TRUE(std::is_sorted(w.jobs.begin(), w.jobs.end(),
                             [](const SimJob& a, const SimJob& b) { return a.arrival_s < b.arrival_s; }));
  std::int64_t gangs[9] = {};
  for (const auto& j : w.jobs) {
    ASSERT_TRUE(check_job(j, w).ok()) << check_job(j, w).reason();
    ASSERT_EQ(j.min_devices, j.world);  // rigid by default
    ASSERT_EQ(j.device_types, 0u);
    ASSERT_LE(j.world, 8);
    ++gangs[j.world];
  }
  // num_gpu of the rows that ran: 1 for 6,129 (3,556 + 2,573 fractional), 2: 15, 4: 15, 8: 44.
  EXPECT_EQ(gangs[1], 6129);
  EXPECT_EQ(gangs[2], 15);
  EXPECT_EQ(gangs[4], 15);
  EXPECT_EQ(gangs[8], 44);
  // Line 2 (openb-pod-0000): LS, 1 GPU, created and scheduled at 0, deleted at 12537496.
  EXPECT_EQ(w.jobs[0].arrival_s, 0);
  EXPECT_EQ(w.jobs[0].duration_s, 12537496);
  EXPECT_EQ(w.jobs[0].tier, spec::Tier::kPremium);
  EXPECT_EQ(w.jobs[0].mem_mib, 16384);
  // Line 3 (openb-pod-0001): gpu_milli 460: one whole device, ceil(16384 * 0.46) MiB.
  EXPECT_EQ(w.jobs[1].arrival_s, 427061);
  EXPECT_EQ(w.jobs[1].mem_mib, 7537);
  EXPECT_EQ(w.jobs[1].world, 1);

  const std::string text = s.to_string();
  std::printf("%s", text.c_str());
  EXPECT_NE(text.find("8152 rows, 6203 jobs loaded\n"), std::string::npos) << text;
  EXPECT_NE(text.find("CPU-only (num_gpu == 0)                  1088  skipped\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fractional GPU (gpu_milli < 1000)        2573  loaded as whole devices\n"),
            std::string::npos) << text;
}

TEST(AlibabaTraceTest, FractionalSkipAndElasticPolicies) {
  REQUIRE_TRACE();
  AlibabaTraceOptions o;
  o.fractional = FractionalPolicy::kSkip;
  o.elastic = true;
  auto t = load_alibaba_trace(kPodList, o);
  ASSERT_TRUE(t.ok()) << t.reason();
  EXPECT_EQ(t->summary.fractional, 2573);  // still counted
  EXPECT_EQ(t->summary.jobs, 3630);
  EXPECT_FALSE(t->summary.fractional_loaded);
  EXPECT_NE(t->summary.to_string().find("fractional GPU (gpu_milli < 1000)        2573  skipped"), std::string::npos)
      << t->summary.to_string();
  for (const auto& j : t->workload.jobs) {
    ASSERT_EQ(j.mem_mib, 16384);
    ASSERT_EQ(j.min_devices, 1);  // worlds 1, 2, 4, 8: all fit on one device (splice <= 8)
    ASSERT_TRUE(check_job(j, t->workload).ok());
  }
}

// The same trace with its columns in another order (and an extra one) loads to the same jobs.
TEST(AlibabaTraceTest, HeaderReordering) {
  REQUIRE_TRACE();
  const auto lines = lines_of(kPodList);
  const auto header = split(lines[0]);
  std::vector<std::size_t> order(header.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;  // reversed
  std::ostringstream out;
  for (const auto& l : lines) {
    const auto f = split(l);
    ASSERT_EQ(f.size(), header.size()) << l;
    out << (&l == &lines[0] ? "note" : "x");
    for (auto i : order) out << ',' << f[i];
    out << '\n';
  }
  TempDir dir;
  auto a = load_alibaba_trace(kPodList);
  auto b = load_alibaba_trace(dir.write("reversed.csv", out.str()));
  ASSERT_TRUE(a.ok() && b.ok()) << a.reason() << b.reason();
  ASSERT_EQ(a->workload.jobs.size(), b->workload.jobs.size());
  for (std::size_t i = 0; i < a->workload.jobs.size(); ++i)
    ASSERT_TRUE(same_job(a->workload.jobs[i], b->workload.jobs[i])) << "job " << i;
  EXPECT_EQ(a->summary.to_string(), b->summary.to_string());
}

// The `name` column goes with its job through the sort by arrival (and a file without one has no
// names); repeat_workload keeps each copy's names.
TEST(AlibabaTraceTest, NamesFollowTheirJobsInArrivalOrder) {
  TempDir dir;
  const auto p = dir.write("n.csv",
                           "name,num_gpu,gpu_milli,gpu_spec,qos,creation_time,scheduled_time,deletion_time\n"
                           "pod-late,1,1000,,LS,50,50,60\n"
                           "pod-cpu,0,0,,LS,1,1,2\n"
                           "pod-early,2,1000,,BE,10,10,30\n"
                           "pod-tie,1,1000,,LS,50,50,70\n");
  auto t = load_alibaba_trace(p);
  ASSERT_TRUE(t.ok()) << t.reason();
  const Workload& w = t->workload;
  ASSERT_EQ(w.jobs.size(), 3u);
  EXPECT_EQ(w.names, (std::vector<std::string>{"pod-early", "pod-late", "pod-tie"}));
  EXPECT_EQ(w.jobs[0].world, 2);
  EXPECT_EQ(w.jobs[2].duration_s, 20);
  const Workload twice = repeat_workload(w, 2);
  ASSERT_EQ(twice.names.size(), 6u);
  EXPECT_EQ(twice.names[3], "pod-early");
  EXPECT_EQ(twice.jobs[3].world, 2);
  const auto q = dir.write("no-name.csv",
                           "num_gpu,gpu_milli,gpu_spec,qos,creation_time,scheduled_time,deletion_time\n"
                           "1,1000,,LS,5,5,6\n");
  auto u = load_alibaba_trace(q);
  ASSERT_TRUE(u.ok()) << u.reason();
  EXPECT_EQ(u->workload.jobs.size(), 1u);
  EXPECT_TRUE(u->workload.names.empty());
  EXPECT_TRUE(repeat_workload(u->workload, 2).names.empty());
}

// One row of every category, gpu_spec sets, a tenant column, a reordered minimal header.
TEST(AlibabaTraceTest, EveryCategoryOnASmallFile) {
  TempDir dir;
  const auto p = dir.write("t.csv",
                           "qos,user,deletion_time,scheduled_time,creation_time,gpu_spec,gpu_milli,num_gpu\n"
                           "BE,alice,20,15,10,,0,0\n"            // 2 cpu-only
                           "LS,bob,30,,10,,1000,1\n"             // 3 never scheduled
                           "Burstable,bob,,12,10,,1000,2\n"      // 4 unfinished
                           "Guaranteed,alice,112,12,5,V100M16|V100M32,250,1\n"  // 5 fractional
                           "BE,carol,100.5,40,40,T4,1000,6\n"    // 6 whole, 6 GPUs
                           "LS,alice,7,7,7,V100M32,1000,1\n");   // 7 whole, zero duration
  AlibabaTraceOptions o;
  o.elastic = true;
  auto t = load_alibaba_trace(p, o);
  ASSERT_TRUE(t.ok()) << t.reason();
  const auto& s = t->summary;
  EXPECT_EQ(s.rows, 6);
  EXPECT_EQ(s.cpu_only, 1);
  EXPECT_EQ(s.never_scheduled, 1);
  EXPECT_EQ(s.unfinished, 1);
  EXPECT_EQ(s.fractional, 1);
  EXPECT_EQ(s.whole, 2);
  EXPECT_EQ(s.jobs, 3);
  EXPECT_EQ(s.zero_duration, 1);
  const Workload& w = t->workload;
  EXPECT_EQ(w.device_types, (std::vector<std::string>{"V100M16", "V100M32", "T4"}));
  EXPECT_EQ(w.tenants, (std::vector<std::string>{"alice", "bob", "carol"}));
  ASSERT_EQ(w.jobs.size(), 3u);
  // Sorted by arrival: the fractional row (5 s), the zero-duration row (7 s), the 6-GPU row (40 s).
  const SimJob& frac = w.jobs[0];
  EXPECT_EQ(frac.arrival_s, 5);
  EXPECT_EQ(frac.duration_s, 100);
  EXPECT_EQ(frac.tier, spec::Tier::kPremium);
  EXPECT_EQ(frac.device_types, 0b011u);
  EXPECT_TRUE(frac.allows_type(0) && frac.allows_type(1) && !frac.allows_type(2));
  EXPECT_EQ(frac.mem_mib, 4096);  // 16384 * 250 / 1000
  EXPECT_EQ(frac.tenant, 0);
  EXPECT_EQ(w.jobs[1].duration_s, 0);
  EXPECT_EQ(w.jobs[1].device_types, 0b010u);
  const SimJob& six = w.jobs[2];
  EXPECT_EQ(six.duration_s, 60.5);
  EXPECT_EQ(six.tier, spec::Tier::kBasic);
  EXPECT_EQ(six.world, 6);
  EXPECT_EQ(six.max_devices, 6);
  EXPECT_EQ(six.min_devices, 1);  // 6 splits 6 a device
  EXPECT_EQ(six.tenant, 2);
  EXPECT_EQ(six.state_mib(), 6 * 16384);
  EXPECT_EQ(s.jobs_per_tier[0], 2);
  EXPECT_EQ(s.jobs_per_tier[2], 1);
  EXPECT_EQ(s.gpu_seconds_per_tier[2], 6 * 60.5);
  for (const auto& j : w.jobs) EXPECT_TRUE(check_job(j, w).ok()) << check_job(j, w).reason();
}

TEST(AlibabaTraceTest, MalformedRowsNameFileAndLine) {
  TempDir dir;
  const std::string head =
      "name,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time,scheduled_time\n"
      "ok,1,1000,,LS,0,10,0\n";
  struct Case {
    std::string row, error;
  } cases[] = {
      {"p,x,1000,,LS,0,10,0", "t.csv:3: num_gpu: expected an integer in [0, 2^20], got \"x\""},
      {"p,-1,1000,,LS,0,10,0", "t.csv:3: num_gpu: expected an integer in [0, 2^20], got \"-1\""},
      {"p,1,1001,,LS,0,10,0", "t.csv:3: gpu_milli: expected an integer in [0, 1000] (thousandths of one GPU), got \"1001\""},
      {"p,1,0,,LS,0,10,0", "t.csv:3: gpu_milli: a task with num_gpu >= 1 needs gpu_milli >= 1, got \"0\""},
      {"p,1,1000,,Gold,0,10,0", "t.csv:3: qos: expected LS, Guaranteed, Burstable or BE, got \"Gold\""},
      {"p,1,1000,A||B,LS,0,10,0", "t.csv:3: gpu_spec: expected device type names"},
      {"p,1,1000,,LS,,10,0", "t.csv:3: creation_time: expected a number of seconds >= 0, got \"\""},
      {"p,1,1000,,LS,5,10,abc", "t.csv:3: scheduled_time: expected a number of seconds >= 0, or nothing (never scheduled), got \"abc\""},
      {"p,1,1000,,LS,5,10,4", "t.csv:3: scheduled_time: before creation_time 5, got \"4\""},
      {"p,1,1000,,LS,5,8,9", "t.csv:3: deletion_time: before scheduled_time 9, got \"8\""},
      {"p,1,1000,,LS,5,4,", "t.csv:3: deletion_time: before creation_time 5, got \"4\""},
      {"p,1,1000,,LS,5,nan,6", "t.csv:3: deletion_time: expected a number of seconds >= 0, or nothing (still running), got \"nan\""},
      {"p,1,1000,,LS,0,10", "t.csv:3: 7 fields, the header has 8"},
      // CPU-only rows are validated too, though they are skipped.
      {"p,0,0,,Gold,0,10,0", "t.csv:3: qos: expected LS, Guaranteed, Burstable or BE, got \"Gold\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.row);
    const auto p = dir.write("t.csv", head + c.row + "\nok,1,1000,,LS,0,10,0\n");
    auto t = load_alibaba_trace(p);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.reason().rfind(p + ":3: ", 0), 0u) << t.reason();
    EXPECT_NE(t.reason().find(c.error), std::string::npos) << t.reason();
  }
  auto no_cols = load_alibaba_trace(dir.write("h.csv", "name,num_gpu,qos\n"));
  ASSERT_FALSE(no_cols.ok());
  EXPECT_NE(no_cols.reason().find("h.csv:1: header lacks the column(s) gpu_milli, gpu_spec, creation_time, "
                                  "scheduled_time, deletion_time"),
            std::string::npos)
      << no_cols.reason();
  // 65 device types in one file.
  std::string many = "num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time,scheduled_time\n";
  for (int i = 0; i < 65; ++i) many += "1,1000,T" + std::to_string(i) + ",BE,0,1,0\n";
  auto too_many = load_alibaba_trace(dir.write("m.csv", many));
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.reason().find("m.csv:66: gpu_spec: more than 64 device types"), std::string::npos)
      << too_many.reason();
}

// A bad row deep inside the real trace is reported at its line.
TEST(AlibabaTraceTest, BadRowInRealTraceNamesItsLine) {
  REQUIRE_TRACE();
  auto lines = lines_of(kPodList);
  ASSERT_EQ(lines.size(), 8153u);
  lines[4999] = "openb-pod-4998,32000,49152,0,0,,XX,Running,11979976,11980124,11979979";  // line 5000
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  TempDir dir;
  auto t = load_alibaba_trace(dir.write("bad.csv", text));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.reason().find("bad.csv:5000: qos: expected LS, Guaranteed, Burstable or BE, got \"XX\""),
            std::string::npos)
      << t.reason();
}

}  // namespace
}  // namespace orrery::sim
