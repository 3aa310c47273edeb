// The CLI's argument handling, exit codes and output formats, in-process: usage errors exit 1,
// --help exits 0, a spec error is reported before any connection, an unreachable core or a lost
// connection is exit 2, a refusal 3, an unknown job or node 4 (against a fake ClientApi that answers
// with the codes the RPC layer delivers), a missed deadline 2; range errors in integers, an unknown
// command named, input quoted at most 64 bytes, watch --count. Commands against a running cluster
// are tested end to end by cli_e2e_test.sh and tests/operator/cli.cmake (operator_cli_*).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <sstream>
#include <utility>

#include "runtime/cli/commands.h"
#include "runtime/cli/format.h"

namespace orrery::cli {
namespace {

struct Outcome {
  int rc;
  std::string out, err;
  int connects;
};

// A core that knows job 0 ("train-a", world 2) and node "node1", refuses everything it is asked
// to do to job 0 as `refusal`, and whose connection is lost (kUnavailable, as rpc/client_connection.h
// reports it) for every call once `lost` is set. Its ranks' output is `streams`; at the
// `grow_after`-th output call each rank writes `growth` and the job completes.
class FakeApi final : public service::ClientApi {
 public:
  Status refusal = Status::FailedPrecondition("job 0 is Queued; preempt needs Running");
  bool lost = false;
  std::vector<std::string> streams = {"", ""};
  std::vector<std::string> growth = {"", ""};
  int grow_after = -1;
  bool ended = false;
  int output_calls = 0;
  std::vector<service::ClusterEvent> events;  // what watch delivers before the connection ends
  std::shared_ptr<int> watch_calls = std::make_shared<int>(0);  // shared by the copies connected

  Result<int> submit(const service::JobSpec&) override {
    if (lost) return gone();
    return 1;
  }
  Status cancel(int job) override { return act(job); }
  Result<std::vector<service::JobStatus>> jobs() override {
    if (lost) return gone();
    service::JobStatus j;
    j.job = 0;
    j.name = "train-a";
    j.world = 2;
    j.state = ended ? spec::JobState::kCompleted : spec::JobState::kRunning;
    if (ended) j.note = "digest 00ff";
    return std::vector<service::JobStatus>{j};
  }
  Result<std::vector<service::NodeStatus>> nodes() override {
    if (lost) return gone();
    return std::vector<service::NodeStatus>{};
  }
  Status preempt(int job, int) override { return act(job); }
  Status migrate(int job, std::optional<std::string>) override { return act(job); }
  Status resize(int job, int, int) override { return act(job); }
  Status suspend(int job) override { return act(job); }
  Status resume(int job) override { return act(job); }
  Status drain(const std::string& node) override { return on_node(node); }
  Status undrain(const std::string& node) override { return on_node(node); }
  Status watch(std::uint64_t, const std::function<bool(const service::ClusterEvent&)>& on_event) override {
    ++*watch_calls;
    for (const auto& e : events)
      if (!on_event(e)) return Status::Ok();
    return gone();  // the connection ends in the middle of watching
  }
  Result<std::vector<std::string>> logs(int job, int) override {
    if (lost) return gone();
    if (job != 0) return Status::NotFound("unknown job " + std::to_string(job));
    return std::vector<std::string>{"job 0 train-a Queued -> Running"};
  }
  Result<service::WorkerOutput> output(int job, int rank, std::uint64_t offset, std::uint32_t max_bytes) override {
    if (lost) return gone();
    if (job != 0) return Status::NotFound("unknown job " + std::to_string(job));
    if (rank < 0 || rank >= 2) return Status::NotFound("job 0 has no rank " + std::to_string(rank) + " (world 2)");
    if (++output_calls == grow_after) {
      for (int r = 0; r < 2; ++r) streams[r] += growth[r];
      ended = true;
    }
    const std::string& s = streams[static_cast<std::size_t>(rank)];
    service::WorkerOutput w;
    w.size = s.size();
    offset = std::min<std::uint64_t>(offset, s.size());
    w.data = s.substr(offset, max_bytes);
    w.next_offset = offset + w.data.size();
    w.job_ended = ended;
    return w;
  }

 private:
  static Status gone() { return Status::Unavailable("connection to 127.0.0.1:7070 lost: EOF"); }
  Status act(int job) {
    if (lost) return gone();
    if (job != 0) return Status::NotFound("unknown job " + std::to_string(job));
    return refusal;
  }
  Status on_node(const std::string& node) {
    if (lost) return gone();
    if (node != "node1") return Status::NotFound("unknown node \"" + node + "\"");
    return refusal;
  }
};

std::int64_t last_timeout_ms = -1;  // what the last run passed to connect

// `api` set: connecting succeeds with it (FakeApi); otherwise it fails with `unreachable`.
Outcome run(std::vector<const char*> args, FakeApi* api = nullptr, Status unreachable = Status::Ok()) {
  args.insert(args.begin(), "orrery");
  std::ostringstream out, err;
  int connects = 0;
  CliContext ctx;
  ctx.connect = [&](const std::string& addr, const std::string&, std::int64_t timeout_ms)
      -> Result<std::unique_ptr<service::ClientApi>> {
    ++connects;
    last_timeout_ms = timeout_ms;
    if (api) return std::unique_ptr<service::ClientApi>(std::make_unique<FakeApi>(*api));
    if (!unreachable.ok()) return unreachable;
    return Status::Unavailable("cannot connect to " + addr + ": Connection refused");
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

constexpr const char* kCommands =
    "(commands: submit, ls, nodes, preempt, suspend, resume, migrate, resize, cancel, drain, undrain, "
    "watch, logs, up)";

// Issue 19: `orrery bogus` said "A subcommand is required".
TEST(Cli, AnUnknownCommandIsNamedAndTheCommandsListed) {
  for (std::vector<const char*> args : {std::vector<const char*>{"bogus"}, {"--core", "h:1", "bogus", "--x"},
                                        {"--timeout", "3", "bogus"}}) {
    Outcome r = run(args);
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.connects, 0);
    EXPECT_EQ(r.err, std::string("orrery: unknown command \"bogus\" ") + kCommands + "\nrun `orrery --help` for usage\n");
  }
  Outcome r = run({});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, std::string("orrery: a command is required ") + kCommands + "\nrun `orrery --help` for usage\n");
  const std::string big(10386, 'b');
  r = run({big.c_str()});
  EXPECT_EQ(r.err, "orrery: unknown command \"" + std::string(64, 'b') + "...\" (10386 bytes) " + kCommands +
                       "\nrun `orrery --help` for usage\n");
}

// Issue 19: CLI11's Range on an integer said "Value 0 not in range 0.000000 to 1797693134862315...".
TEST(Cli, RangeErrorsSayTheRangeInIntegers) {
  const std::pair<std::vector<const char*>, std::string> cases[] = {
      {{"resize", "3", "0"}, "N: 0 is out of range 1..4096"},
      {{"resize", "3", "4097"}, "N: 4097 is out of range 1..4096"},
      {{"resize", "3", "two"}, "N: \"two\" is not an integer"},
      {{"resize", "3", "99999999999999999999999"}, "N: 99999999999999999999999 is out of range 1..4096"},
      {{"resize", "3", "1.5"}, "N: \"1.5\" is not an integer"},
      {{"logs", "3", "-n", "0"}, "--lines: 0 is out of range 1..1000000"},
      {{"logs", "3", "--rank", "4096"}, "--rank: 4096 is out of range 0..4095"},
      {{"watch", "--after", "-5"}, "--after: -5 is out of range (at least 0)"},
      {{"watch", "--count", "-1"}, "--count: -1 is out of range (at least 0)"},
      {{"--timeout", "0", "ls"}, "--timeout: 0 is out of range 1..86400"},
      {{"--timeout", "1e3", "ls"}, "--timeout: \"1e3\" is not an integer"},
      {{"up", "--nodes", "0"}, "--nodes: 0 is out of range 1..64"},
      {{"up", "--devices", "0"}, "--devices: 0 is out of range 1..64"},
      {{"up", "--device-mem-mib", "-1"}, "--device-mem-mib: -1 is out of range 1..1099511627776"},
      {{"up", "--grace-ms", "600001"}, "--grace-ms: 600001 is out of range 0..600000"},
  };
  for (const auto& [args, message] : cases) {
    Outcome r = run(args);
    EXPECT_EQ(r.rc, 1) << message;
    EXPECT_EQ(r.connects, 0);
    EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "orrery: " + message);
  }
  // A global option's usage is the top level's.
  EXPECT_NE(run({"--timeout", "0", "ls"}).err.find("run `orrery --help` for usage"), std::string::npos);
}

// Issue 19, item 6: every call has a deadline, --timeout SECONDS (default 10, env ORRERY_TIMEOUT).
TEST(Cli, TheTimeoutReachesTheConnectionAndAMissedDeadlineExitsTwo) {
  FakeApi api;
  ASSERT_EQ(run({"--secret-file", "/x", "ls"}, &api).rc, 0);
  EXPECT_EQ(last_timeout_ms, 10000);
  ASSERT_EQ(run({"--secret-file", "/x", "--timeout", "3", "ls"}, &api).rc, 0);
  EXPECT_EQ(last_timeout_ms, 3000);
  ::setenv("ORRERY_TIMEOUT", "7", 1);
  ASSERT_EQ(run({"--secret-file", "/x", "ls"}, &api).rc, 0);
  EXPECT_EQ(last_timeout_ms, 7000);
  ASSERT_EQ(run({"--secret-file", "/x", "--timeout", "2", "ls"}, &api).rc, 0);  // the flag wins
  EXPECT_EQ(last_timeout_ms, 2000);
  ::setenv("ORRERY_TIMEOUT", "0", 1);
  Outcome r = run({"--secret-file", "/x", "ls"}, &api);
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "orrery: --timeout: 0 is out of range 1..86400");
  ::unsetenv("ORRERY_TIMEOUT");
  r = run({"--secret-file", "/x", "--timeout", "1", "ls"}, nullptr,
          Status::DeadlineExceeded("127.0.0.1:7070 did not answer within 1 s"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "orrery ls: 127.0.0.1:7070 did not answer within 1 s (--timeout SECONDS to wait longer)\n");
}

// Issue 19: `watch --count 0` printed one event; it prints none.
TEST(CliWatch, CountStopsAfterThatManyEventsZeroAfterNone) {
  FakeApi api;
  for (int i = 1; i <= 3; ++i) {
    service::ClusterEvent e;
    e.seq = static_cast<std::uint64_t>(i);
    e.time_ms = 1'795'000'000'000 + i;
    e.job = 0;
    e.text = "event " + std::to_string(i);
    api.events.push_back(e);
  }
  Outcome r = run({"--secret-file", "/x", "watch", "--count", "0"}, &api);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(*api.watch_calls, 0);
  r = run({"--secret-file", "/x", "watch", "--count", "2"}, &api);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "2026-11-18T11:06:40.001Z #1 event 1\n2026-11-18T11:06:40.002Z #2 event 2\n");
  r = run({"--secret-file", "/x", "watch"}, &api);  // then the connection ends: exit 2
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
}

// Issue 19: errors quote at most 64 bytes of bad input, then "..." and its length.
TEST(Cli, ErrorsQuoteAtMost64BytesOfInput) {
  const std::string big(10386, 'a');
  const std::string cut = std::string(64, 'a') + "...";
  FakeApi api;
  Outcome r = run({"--secret-file", "/x", "cancel", big.c_str()}, &api);
  EXPECT_EQ(r.rc, 4);
  EXPECT_EQ(r.err, "orrery cancel: no job named \"" + cut + "\" (10386 bytes)\n");
  r = run({"--secret-file", "/x", "drain", big.c_str()}, &api);  // not sent to the core
  EXPECT_EQ(r.rc, 4);
  EXPECT_EQ(r.connects, 0);
  EXPECT_EQ(r.err, "orrery drain: unknown node \"" + cut + "\" (10386 bytes)\n");
  r = run({"--secret-file", "/x", "migrate", "0", "--to", big.c_str()}, &api);
  EXPECT_EQ(r.rc, 4);
  EXPECT_EQ(r.err, "orrery migrate: unknown node \"" + cut + "\" (10386 bytes)\n");
  r = run({"ls", big.c_str()});  // CLI11's own message
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "orrery: The following argument was not expected: " + cut + " (10386 bytes)");
  const std::string core = "--core=" + big;
  r = run({core.c_str(), "ls"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "orrery: --core: \"" + cut + "\" (10386 bytes) is not a host:port address");
  ::setenv("ORRERY_CORE", big.c_str(), 1);
  r = run({"--secret-file", "/x", "ls"}, &api);
  ::unsetenv("ORRERY_CORE");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.connects, 0);
  EXPECT_EQ(r.err, "orrery ls: ORRERY_CORE: \"" + cut + "\" (10386 bytes) is not a host:port address\n");
  r = run({"resize", "0", big.c_str()});
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "orrery: N: \"" + cut + "\" (10386 bytes) is not an integer");
  for (const Outcome& o : {run({"--secret-file", "/x", "cancel", big.c_str()}, &api), run({"ls", big.c_str()}),
                           run({"submit", ("/" + big).c_str()})})
    EXPECT_LT(o.err.size(), 300u) << o.err.substr(0, 300);
}

// Issue 19: a directory given as the job spec said "name: required key missing"; a FIFO hung.
TEST(Cli, ADirectoryOrAFifoIsNotAJobFile) {
  Outcome r = run({"submit", "/tmp"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "orrery submit: /tmp is a directory, not a job file\n");
  char dir[] = "/tmp/cli_test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/job.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = run({"submit", "--dry-run", fifo.c_str()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "orrery submit: " + fifo + " is a FIFO, not a job file\n");
  ::unlink(fifo.c_str());
  ::rmdir(dir);
}

TEST(Cli, BadSpecIsUsageErrorBeforeConnecting) {
  Outcome r = run({"--secret-file", "/x", "submit", "/nonexistent/job.toml"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.connects, 0);
  EXPECT_EQ(r.err, "orrery submit: /nonexistent/job.toml: cannot open the job spec: No such file or directory\n");
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

TEST(Cli, ExitCodeOfEveryStatusCode) {
  // docs/runtime.md's table, code by code.
  const std::pair<StatusCode, int> table[] = {
      {StatusCode::kOk, 0},
      {StatusCode::kInvalidArgument, 1},
      {StatusCode::kUnavailable, 2},
      {StatusCode::kPermissionDenied, 2},
      {StatusCode::kDeadlineExceeded, 2},
      {StatusCode::kFailedPrecondition, 3},
      {StatusCode::kAlreadyExists, 3},
      {StatusCode::kResourceExhausted, 3},
      {StatusCode::kAborted, 3},
      {StatusCode::kUnknown, 3},
      {StatusCode::kNotFound, 4},
      {StatusCode::kInternal, 5},
  };
  static_assert(std::size(table) == kNumStatusCodes);
  for (auto [code, exit] : table) EXPECT_EQ(exit_code(code), exit) << status_code_name(code);
}

TEST(Cli, UnknownJobOrNodeExitsFour) {
  FakeApi api;
  Outcome r = run({"--secret-file", "/x", "cancel", "7"}, &api);  // the core does not know it
  EXPECT_EQ(r.rc, 4);
  EXPECT_EQ(r.err, "orrery cancel: unknown job 7\n");
  r = run({"--secret-file", "/x", "preempt", "no-such-job"}, &api);  // no job of that name
  EXPECT_EQ(r.rc, 4);
  EXPECT_EQ(r.err, "orrery preempt: no job named \"no-such-job\"\n");
  r = run({"--secret-file", "/x", "preempt", "train-a", "--for", "nope"}, &api);
  EXPECT_EQ(r.rc, 4);
  r = run({"--secret-file", "/x", "logs", "3"}, &api);
  EXPECT_EQ(r.rc, 4);
  r = run({"--secret-file", "/x", "drain", "node9"}, &api);
  EXPECT_EQ(r.rc, 4);
  EXPECT_EQ(r.err, "orrery drain: unknown node \"node9\"\n");
}

TEST(Cli, RefusalsExitThreeAndInternalErrorsFive) {
  FakeApi api;
  Outcome r = run({"--secret-file", "/x", "preempt", "train-a"}, &api);
  EXPECT_EQ(r.rc, 3);
  EXPECT_EQ(r.err, "orrery preempt: job 0 is Queued; preempt needs Running\n");
  api.refusal = Status::Error("a refusal without a code");  // kUnknown: still a refusal
  EXPECT_EQ(run({"--secret-file", "/x", "cancel", "0"}, &api).rc, 3);
  api.refusal = Status::InvalidArgument("devices must be within the job's elastic range [1, 2]");
  EXPECT_EQ(run({"--secret-file", "/x", "resize", "0", "4"}, &api).rc, 1);
  api.refusal = Status::Internal("cannot write /data/jobs/job-0.spec");
  EXPECT_EQ(run({"--secret-file", "/x", "migrate", "0"}, &api).rc, 5);
  api.refusal = Status::Ok();
  r = run({"--secret-file", "/x", "cancel", "train-a"}, &api);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "cancelling job 0\n");
}

TEST(Cli, LostConnectionExitsTwo) {
  FakeApi api;
  api.lost = true;
  for (auto* cmd : {"ls", "nodes", "cancel"}) {
    std::vector<const char*> args = {"--secret-file", "/x", cmd};
    if (std::string(cmd) == "cancel") args.push_back("0");
    Outcome r = run(args, &api);
    EXPECT_EQ(r.rc, 2) << cmd;
    EXPECT_EQ(r.err, "orrery " + std::string(cmd) + ": connection to 127.0.0.1:7070 lost: EOF\n");
  }
  api.lost = false;
  Outcome r = run({"--secret-file", "/x", "watch"}, &api);  // lost while watching
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "orrery watch: connection to 127.0.0.1:7070 lost: EOF\n");
}

TEST(CliLogs, LastLinesOfOneRank) {
  FakeApi api;
  api.streams[1] = "--- epoch 1 on node node1 ---\nx1\nx2\nx3\n";
  Outcome r = run({"--secret-file", "/x", "logs", "0", "--rank", "1", "-n", "2"}, &api);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "x2\nx3\n");
  r = run({"--secret-file", "/x", "logs", "train-a", "--rank", "1", "-n", "10"}, &api);
  EXPECT_EQ(r.out, api.streams[1]);
  api.streams[1] = "a\nunfinished";  // an unfinished last line counts as a line
  r = run({"--secret-file", "/x", "logs", "0", "--rank", "1", "-n", "1"}, &api);
  EXPECT_EQ(r.out, "unfinished");
  r = run({"--secret-file", "/x", "logs", "0", "--rank", "0"}, &api);  // wrote nothing
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "");
}

TEST(CliLogs, LastLinesOfALongStreamAndNotMoreThanAsked) {
  FakeApi api;
  for (int i = 0; i < 100000; ++i) api.streams[0] += "line " + std::to_string(i) + "\n";  // ~1.1 MB
  Outcome r = run({"--secret-file", "/x", "logs", "0", "--rank", "0", "-n", "3"}, &api);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "line 99997\nline 99998\nline 99999\n");
  r = run({"--secret-file", "/x", "logs", "0", "--rank", "0", "-n", "20000"}, &api);  // windows grow
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 20000);
  EXPECT_EQ(r.out.substr(0, 11), "line 80000\n");
}

TEST(CliLogs, TimelineThenEveryRankPrefixed) {
  FakeApi api;
  api.streams[0] = "a1\na2\na3";
  api.streams[1] = "b1\n";
  Outcome r = run({"--secret-file", "/x", "logs", "0", "-n", "2"}, &api);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "job 0 train-a Queued -> Running\n[rank 0] a2\n[rank 0] a3\n[rank 1] b1\n");
}

TEST(CliLogs, FollowPrintsNewOutputUntilTheJobEnds) {
  FakeApi api;
  api.streams[0] = "old\n";
  api.growth[0] = "new 1\nnew 2\n";
  api.grow_after = 4;  // after the tail's reads and a quiet poll
  Outcome r = run({"--secret-file", "/x", "logs", "0", "--rank", "0", "--follow"}, &api);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "old\nnew 1\nnew 2\njob 0 Completed: digest 00ff\n");
  // Every rank: lines prefixed, an unfinished last line printed at the end.
  api.streams = {"a\n", "b\n"};
  api.growth = {"a2\nhalf", "b2\n"};
  api.grow_after = 5;  // at the first poll of rank 0
  r = run({"--secret-file", "/x", "logs", "train-a", "-f", "-n", "5"}, &api);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "job 0 train-a Queued -> Running\n[rank 0] a\n[rank 1] b\n[rank 0] a2\n[rank 1] b2\n"
                   "[rank 0] half\njob 0 Completed: digest 00ff\n");
}

TEST(CliLogs, UnknownRankOrJobExitsFourALostConnectionTwo) {
  FakeApi api;
  Outcome r = run({"--secret-file", "/x", "logs", "0", "--rank", "5"}, &api);
  EXPECT_EQ(r.rc, 4);
  EXPECT_EQ(r.err, "orrery logs: job 0 has no rank 5 (world 2)\n");
  r = run({"--secret-file", "/x", "logs", "7", "--rank", "0"}, &api);
  EXPECT_EQ(r.rc, 4);
  EXPECT_EQ(r.err, "orrery logs: unknown job 7\n");
  EXPECT_EQ(run({"--secret-file", "/x", "logs", "0", "--rank", "-1"}, &api).rc, 1);
  api.lost = true;
  r = run({"--secret-file", "/x", "logs", "0", "--rank", "0", "--follow"}, &api);
  EXPECT_EQ(r.rc, 2);
  Outcome h = run({"logs", "--help"});
  EXPECT_EQ(h.rc, 0);
  for (auto* opt : {"--rank", "--follow", "--lines"}) EXPECT_NE(h.out.find(opt), std::string::npos) << opt;
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
  a.device_type = "H100-80G";
  service::JobStatus b;
  b.job = 1;
  b.name = "b";
  b.state = spec::JobState::kQueued;
  b.steps = 100;
  b.age_ms = 900;
  b.note = "waiting for 4 devices";
  EXPECT_EQ(format_jobs({a, b}),
            "JOB  NAME     TIER      STATE    EPOCH  DEV  SPLICE  STEP/STEPS  CKPT  NODES        AGE    TENANT  TYPE      NOTE\n"
            "0    train-a  premium   Running  3      2    2       40/200      25    node1,node2  2m05s  vision  H100-80G\n"
            "1    b        standard  Queued   0      0    -       0/100       -     -            900ms  -       -         waiting for 4 devices\n");
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

// Issue 19: watch stamped events with the time since boot; the core's times are wall-clock now,
// shown in UTC (ISO 8601). A time before kWallClockFloorMs (an older core's journal) shows "-".
TEST(Format, EventsInUtc) {
  service::ClusterEvent e;
  e.seq = 41;
  e.time_ms = 1'795'000'000'123;
  e.text = "job 2 a Running -> Checkpointing: Preempt job 2 for job 3";
  EXPECT_EQ(format_event(e), "2026-11-18T11:06:40.123Z #41 job 2 a Running -> Checkpointing: Preempt job 2 for job 3");
  e.seq = 0;
  e.time_ms = 20'000'000;  // 5.5 hours after some boot
  e.text = "job 1 restore 3/4 shards";
  EXPECT_EQ(format_event(e), "- job 1 restore 3/4 shards");
  EXPECT_EQ(format_age(-1), "-");
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
