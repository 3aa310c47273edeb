// The CLI's argument handling and output formats, in-process: usage errors exit 1, --help exits 0,
// a spec error is reported before any connection, an unreachable core is exit 2. (Commands against
// a running cluster are tested end to end by cli_e2e_test.sh.)
#include <gtest/gtest.h>

#include <sstream>

#include "runtime/cli/commands.h"
#include "runtime/cli/format.h"

namespace orrery::cli {
namespace {

struct Outcome {
  int rc;
  std::string out, err;
  int connects;
};

Outcome run(std::vector<const char*> args) {
  args.insert(args.begin(), "orrery");
  std::ostringstream out, err;
  int connects = 0;
  CliContext ctx;
  ctx.connect = [&](const std::string& addr, const std::string&)
      -> Result<std::unique_ptr<service::ClientApi>> {
    ++connects;
    return Status::Error("cannot connect to " + addr + ": Connection refused");
  };
  ctx.self_path = "/nonexistent/orrery";
  ctx.out = &out;
  ctx.err = &err;
  int rc = run_cli(static_cast<int>(args.size()), args.data(), ctx);
  return {rc, out.str(), err.str(), connects};
}

TEST(Cli, HelpExitsZeroAndListsCommands) {
  for (auto* flag : {"--help", "-h"}) {
    Outcome r = run({flag});
    EXPECT_EQ(r.rc, 0);
    for (auto* cmd : {"submit", "ls", "nodes", "preempt", "migrate", "resize", "cancel", "drain",
                      "undrain", "watch", "logs", "up", "--core", "--secret-file"})
      EXPECT_NE(r.out.find(cmd), std::string::npos) << cmd;
  }
  Outcome r = run({"resize", "--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("--for"), std::string::npos);
}

TEST(Cli, UsageErrorsExitOne) {
  EXPECT_EQ(run({}).rc, 1);
  EXPECT_EQ(run({"frobnicate"}).rc, 1);
  EXPECT_EQ(run({"ls", "--bogus"}).rc, 1);
  EXPECT_EQ(run({"preempt"}).rc, 1);
  EXPECT_EQ(run({"resize", "3"}).rc, 1);
  EXPECT_EQ(run({"resize", "3", "0"}).rc, 1);
  EXPECT_EQ(run({"resize", "3", "two"}).rc, 1);
  EXPECT_EQ(run({"up", "--nodes", "0"}).rc, 1);
  Outcome r = run({"frobnicate"});
  EXPECT_EQ(r.connects, 0);
  EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;
}

TEST(Cli, BadSpecIsUsageErrorBeforeConnecting) {
  Outcome r = run({"--secret-file", "/x", "submit", "/nonexistent/job.toml"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.connects, 0);
  EXPECT_EQ(r.err, "orrery submit: /nonexistent/job.toml: cannot open the job spec\n");
}

TEST(Cli, DryRunPrintsSpecWithDefaults) {
  Outcome r = run({"submit", "--dry-run", ORRERY_SOURCE_DIR "/examples/jobs/basic.toml"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.connects, 0);
  EXPECT_NE(r.out.find("name = \"train-basic\"\ntier = \"basic\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("min_devices = 2\nmax_devices = 2\nmem_mib = 64"), std::string::npos);
}

TEST(Cli, UnreachableCoreExitsTwo) {
  Outcome r = run({"--core", "127.0.0.1:1", "--secret-file", "/x", "ls"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.connects, 1);
  EXPECT_EQ(r.err, "orrery ls: cannot connect to 127.0.0.1:1: Connection refused\n");
  r = run({"--core", "127.0.0.1:1", "nodes"});  // no secret at all
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.connects, 0);
  EXPECT_NE(r.err.find("no secret"), std::string::npos);
}

TEST(Cli, UpWithoutBinariesExitsTwo) {
  Outcome r = run({"up"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "orrery up: /nonexistent/orrery-core not found (orrery up runs the binaries "
                   "beside orrery; --core-bin, --node-bin)\n");
}

TEST(Format, JobsTable) {
  service::JobStatus a;
  a.job = 0;
  a.name = "train-a";
  a.tier = spec::Tier::kPremium;
  a.state = spec::JobState::kRunning;
  a.epoch = 3;
  a.devices = 2;
  a.splice = 2;
  a.progress = 40;
  a.steps = 200;
  a.checkpoint = 25;
  a.nodes = {"node1", "node2"};
  a.age_ms = 125000;
  a.tenant = "vision";
  service::JobStatus b;
  b.job = 1;
  b.name = "b";
  b.state = spec::JobState::kQueued;
  b.steps = 100;
  b.age_ms = 900;
  b.note = "waiting for 4 devices";
  EXPECT_EQ(format_jobs({a, b}),
            "JOB  NAME     TIER      STATE    EPOCH  DEV  SPLICE  STEP/STEPS  CKPT  NODES        AGE    TENANT  NOTE\n"
            "0    train-a  premium   Running  3      2    2       40/200      25    node1,node2  2m05s  vision\n"
            "1    b        standard  Queued   0      0    -       0/100       -     -            900ms  -       waiting for 4 devices\n");
}

TEST(Format, NodesTableAndAges) {
  service::NodeStatus n{"node1", spec::NodeState::kUp, 4, 2, 1500};
  service::NodeStatus m{"node2", spec::NodeState::kDown, 4, 0, -1};
  EXPECT_EQ(format_nodes({n, m}),
            "NODE   STATE  DEVICES  HELD  HEARTBEAT\n"
            "node1  Up     4        2     1s ago\n"
            "node2  Down   4        0     -\n");
  EXPECT_EQ(format_age(59999), "59s");
  EXPECT_EQ(format_age(3600000), "1h00m");
  EXPECT_EQ(format_age(90061000), "1d01h");
}

TEST(Format, ProgressFromEventText) {
  auto p = find_progress("job 2 checkpoint rank 1: 524288/1048576 bytes");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->done, 524288);
  EXPECT_EQ(p->total, 1048576);
  EXPECT_EQ(progress_bar(*p, 10), "[#####.....]  50%  512.0 KiB/1.0 MiB");
  p = find_progress("job 1 restore 3/4 shards");
  ASSERT_TRUE(p);
  EXPECT_EQ(progress_bar(*p, 4), "[###.]  75%  3/4 shards");
  EXPECT_TRUE(find_progress("job 1 at step 30/100"));
  EXPECT_FALSE(find_progress("job 1 Running -> Checkpointing: Preempt job 1 for job 2"));
  EXPECT_FALSE(find_progress("ratio 5/3 bytes"));  // done > total
}

}  // namespace
}  // namespace orrery::cli
