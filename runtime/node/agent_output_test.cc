// runtime::Agent's shipping of the workers' output, in-process: shipped before the reports of the
// same pump (a job's last lines reach the core before its end), at most kOutputPerPump a pump,
// kept across a lost connection and sent first on the next, dropped when the core refuses it, and
// bounded (kOutputKept) while undelivered. The stand-ins record what happens; the real runtime and
// link are exercised between real processes by cli_e2e_test.sh.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/node/agent.h"

namespace orrery::runtime {
namespace {

class OutputRuntime final : public NodeRuntime {
 public:
  Status launch(const LaunchSpec&) override { return Status::Ok(); }
  Status checkpoint(int, std::int64_t, std::int64_t, bool) override { return Status::Ok(); }
  Status stop(int, std::int64_t) override { return Status::Ok(); }
  std::vector<std::pair<int, std::int64_t>> running() const override { return {}; }
  std::vector<JobEvent> poll() override { return std::exchange(events, {}); }
  std::string shard_path(int, std::int64_t, int) const override { return "/nonexistent"; }
  // Hands out `pending` in order, never more than asked.
  std::vector<OutputChunk> take_output(std::size_t max_bytes) override {
    asked.push_back(max_bytes);
    std::vector<OutputChunk> out;
    while (!pending.empty() && max_bytes > 0) {
      auto& c = pending.front();
      const std::size_t n = std::min(max_bytes, c.data.size());
      out.push_back({c.job, c.epoch, c.rank, c.data.substr(0, n)});
      c.data.erase(0, n);
      max_bytes -= n;
      if (c.data.empty()) pending.erase(pending.begin());
    }
    return out;
  }
  std::vector<JobEvent> events;
  std::vector<OutputChunk> pending;
  std::vector<std::size_t> asked;
};

// Records reports and output in one log; `up` false: the connection is gone. `fail_after`: the
// connection drops after that many more output calls. `refuse_job`: output of it is refused.
class OutputCore final : public CoreLink {
 public:
  Status report(const service::NodeReport& r) override {
    if (!up) return Status::Unavailable("connection lost");
    log.push_back("report " + std::string(service::report_kind_name(r.kind)) + " job " + std::to_string(r.job));
    return Status::Ok();
  }
  Status upload_shard(int, std::int64_t, std::int64_t, int, const std::string&) override { return Status::Ok(); }
  Status download_shard(int, std::int64_t, int, const std::string&) override { return Status::Ok(); }
  Status output(const OutputChunk& c) override {
    if (fail_after == 0) up = false;
    if (fail_after > 0) --fail_after;
    if (!up) return Status::Unavailable("connection lost");
    if (c.job == refuse_job) return Status::NotFound("unknown job " + std::to_string(c.job));
    log.push_back("output job " + std::to_string(c.job) + " rank " + std::to_string(c.rank) + ": " + c.data);
    bytes += c.data.size();
    return Status::Ok();
  }
  bool connected() const override { return up; }
  bool up = true;
  int fail_after = -1;
  int refuse_job = -1;
  std::size_t bytes = 0;
  std::vector<std::string> log;
};

TEST(AgentOutput, ShippedBeforeTheReportThatEndsTheJob) {
  OutputRuntime rt;
  OutputCore core;
  Agent a(rt);
  rt.events.push_back({JobEvent::Kind::kCompleted, 3, 1, 10, 0, "digest"});
  rt.pending.push_back({3, 1, 0, "last line\n"});
  a.pump(core);
  ASSERT_EQ(core.log.size(), 2u);
  EXPECT_EQ(core.log[0], "output job 3 rank 0: last line\n");
  EXPECT_EQ(core.log[1], "report completed job 3");
  ASSERT_FALSE(rt.asked.empty());
  EXPECT_EQ(rt.asked.front(), kOutputPerPump);
}

TEST(AgentOutput, AtMostAPumpsBudgetEachPump) {
  OutputRuntime rt;
  OutputCore core;
  Agent a(rt);
  rt.pending.push_back({1, 1, 0, std::string(kOutputPerPump + 1000, 'x')});
  a.pump(core);
  EXPECT_EQ(core.bytes, kOutputPerPump);
  a.pump(core);
  EXPECT_EQ(core.bytes, kOutputPerPump + 1000);
}

TEST(AgentOutput, KeptAcrossALostConnectionAndSentFirst) {
  OutputRuntime rt;
  OutputCore core;
  Agent a(rt);
  rt.pending.push_back({1, 1, 0, "a\n"});
  rt.pending.push_back({1, 1, 1, "b\n"});
  core.fail_after = 1;  // "a" goes through, then the connection drops
  a.pump(core);
  EXPECT_EQ(core.log, std::vector<std::string>{"output job 1 rank 0: a\n"});
  EXPECT_EQ(a.dropped_output_bytes(), 0u);
  // The next connection: the kept chunk first, then what the workers wrote meanwhile.
  OutputCore next;
  rt.pending.push_back({1, 1, 1, "c\n"});
  a.pump(next);
  EXPECT_EQ(next.log, (std::vector<std::string>{"output job 1 rank 1: b\n", "output job 1 rank 1: c\n"}));
}

TEST(AgentOutput, RefusedOutputIsDroppedAndCounted) {
  OutputRuntime rt;
  OutputCore core;
  core.refuse_job = 9;
  Agent a(rt);
  rt.pending.push_back({9, 1, 0, "stale\n"});
  rt.pending.push_back({2, 1, 0, "fresh\n"});
  a.pump(core);
  EXPECT_EQ(core.log, std::vector<std::string>{"output job 2 rank 0: fresh\n"});
  EXPECT_EQ(a.dropped_output_bytes(), 6u);
  core.refuse_job = -1;
  a.pump(core);  // not sent again
  EXPECT_EQ(core.log.size(), 1u);
}

TEST(AgentOutput, NothingNewIsTakenWhileOutputWaits) {
  OutputRuntime rt;
  Agent a(rt);
  rt.pending.push_back({1, 1, 0, std::string(kOutputPerPump, 'a')});
  rt.pending.push_back({1, 1, 0, "b\n"});
  for (int i = 0; i < 5; ++i) {
    OutputCore flaky;  // connected when the pump starts, lost at its first send
    flaky.fail_after = 0;
    a.pump(flaky);
  }
  // One take only: the undelivered output stayed within one pump's budget, the rest in the runtime.
  EXPECT_EQ(rt.asked.size(), 1u);
  EXPECT_EQ(a.dropped_output_bytes(), 0u);
  OutputCore core;
  a.pump(core);  // the kept budget's worth: nothing more this pump
  EXPECT_EQ(core.bytes, kOutputPerPump);
  a.pump(core);
  ASSERT_EQ(core.log.size(), 2u);
  EXPECT_EQ(core.log.back(), "output job 1 rank 0: b\n");
}

}  // namespace
}  // namespace orrery::runtime
