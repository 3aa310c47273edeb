#include "runtime/cli/job_spec.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace orrery::cli {
namespace {

using service::JobSpec;

JobSpec parse_ok(const std::string& text) {
  auto r = parse_job_spec(text, "job.toml", "/jobs");
  EXPECT_TRUE(r.ok()) << r.reason();
  return r.ok() ? *r : JobSpec{};
}

std::string parse_error(const std::string& text) {
  auto r = parse_job_spec(text, "job.toml", "/jobs");
  EXPECT_FALSE(r.ok()) << "accepted:\n" << text;
  return r.reason();
}

TEST(JobSpec, MinimalSpecTakesDocumentedDefaults) {
  JobSpec s = parse_ok("name = \"a\"\nworld = 4\n");
  EXPECT_EQ(s.name, "a");
  EXPECT_EQ(s.world, 4);
  EXPECT_EQ(s.tier, spec::Tier::kStandard);
  EXPECT_EQ(s.device_type, "host");
  EXPECT_EQ(s.max_devices, 4);  // one worker per device
  EXPECT_EQ(s.min_devices, 4);  // not elastic unless asked
  EXPECT_EQ(s.mem_mib, 64);
  EXPECT_EQ(s.steps, 100);
  EXPECT_EQ(s.checkpoint_every, 0);
  // The built-in workload is a command like any other.
  EXPECT_EQ(s.command, (std::vector<std::string>{"orrery-train-mlp", "--steps=100"}));
  EXPECT_EQ(s.preemption, spec::Preemption::kTransparent);
  EXPECT_EQ(s.grace_ms, 30000);
  EXPECT_EQ(s.min_runtime_ms, 0);
  EXPECT_TRUE(s.env.empty());
  EXPECT_EQ(s.workdir, "/jobs");  // the spec's folder
}

// The built-in workload's arguments: its command without the program and "--steps=N".
std::vector<std::string> args_of(const JobSpec& s) {
  if (s.command.size() < 2) return {};
  return std::vector<std::string>(s.command.begin() + 1, s.command.end() - 1);
}

TEST(JobSpec, AUsersOwnProgram) {
  JobSpec s = parse_ok(R"(
name = "mine"
world = 2
command = ["/usr/bin/python3", "train.py", "--epochs", "3"]
workdir = "code"
preemption = "signal"
grace_s = 12.5
min_runtime_s = 600
[env]
OMP_NUM_THREADS = "1"
DATA = "/data/x y"
)");
  EXPECT_EQ(s.command, (std::vector<std::string>{"/usr/bin/python3", "train.py", "--epochs", "3"}));
  EXPECT_EQ(s.workdir, "/jobs/code");
  EXPECT_EQ(s.preemption, spec::Preemption::kSignal);
  EXPECT_EQ(s.grace_ms, 12500);
  EXPECT_EQ(s.min_runtime_ms, 600000);
  EXPECT_EQ(s.steps, 0);  // unknown: the program's own business
  ASSERT_EQ(s.env.size(), 2u);
  EXPECT_EQ(s.env[0], (std::pair<std::string, std::string>{"DATA", "/data/x y"}));
  EXPECT_EQ(s.env[1], (std::pair<std::string, std::string>{"OMP_NUM_THREADS", "1"}));
  JobSpec t = parse_ok(to_toml(s));
  EXPECT_EQ(t.command, s.command);
  EXPECT_EQ(t.workdir, s.workdir);
  EXPECT_EQ(t.preemption, s.preemption);
  EXPECT_EQ(t.grace_ms, s.grace_ms);
  EXPECT_EQ(t.min_runtime_ms, s.min_runtime_ms);
  EXPECT_EQ(t.env, s.env);
}

TEST(JobSpec, UsersProgramErrorsNameTheKey) {
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\ncommand = []\n"),
            "job.toml:3:11: command: must name the program to run, e.g. [\"/usr/bin/python3\", \"train.py\"]");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\ncommand = [\"x\", 3]\n"),
            "job.toml:3:17: command[1]: expected a string, got an integer");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\ncommand = [\"x\"]\nworkload = \"mlp\"\n"),
            "job.toml:3:11: command: give either command or workload/args, not both");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\ncommand = [\"x\"]\npreemption = \"kill\"\n"),
            "job.toml:4:14: preemption: must be transparent, signal or requeue, got \"kill\"");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\ncommand = [\"x\"]\ngrace_s = \"10\"\n"),
            "job.toml:4:11: grace_s: expected a number of seconds, got a string");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\ncommand = [\"x\"]\nenv = { \"1X\" = \"v\" }\n"),
            "job.toml:4:7: env: \"1X\" is not a variable name (A-Z a-z 0-9 _, not starting with a digit)");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\ncommand = [\"x\"]\nenv = [\"A=1\"]\n"),
            "job.toml:4:7: env: expected a table of strings (env = { NAME = \"value\" }), got an array");
  // Only a transparent job is spliced or resized, or checkpointed while it runs.
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4\nmin_devices = 2\ncommand = [\"x\"]\npreemption = \"signal\"\n"),
            "job.toml:3:15: a signal job runs one worker per device: min_devices and max_devices must equal "
            "world (4); only transparent jobs are spliced or resized");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\ncommand = [\"x\"]\npreemption = \"requeue\"\ncheckpoint_every = 5\n"),
            "job.toml:5:20: checkpoint_every: a requeue job checkpoints itself; orrery cuts only transparent "
            "jobs while they run");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\nworkload = \"bert\"\n"),
            "job.toml:3:12: workload: unknown built-in workload \"bert\" (there is \"mlp\"; run your own "
            "program with command)");
}

TEST(JobSpec, EveryKey) {
  JobSpec s = parse_ok(R"(
name = "train-b.2"
tier = "premium"
device_type = "cuda"
world = 16
min_devices = 2
max_devices = 8
mem_mib = 1024
steps = 5000
checkpoint_every = 250
workload = "mlp"
args = ["--hidden", "512", "--lr=0.01"]
tenant = "vision-team"
)");
  EXPECT_EQ(s.name, "train-b.2");
  EXPECT_EQ(s.tenant, "vision-team");
  EXPECT_EQ(s.tier, spec::Tier::kPremium);
  EXPECT_EQ(s.device_type, "cuda");
  EXPECT_EQ(s.world, 16);
  EXPECT_EQ(s.min_devices, 2);
  EXPECT_EQ(s.max_devices, 8);
  EXPECT_EQ(s.mem_mib, 1024);
  EXPECT_EQ(s.steps, 5000);
  EXPECT_EQ(s.checkpoint_every, 250);
  EXPECT_EQ(args_of(s), (std::vector<std::string>{"--hidden", "512", "--lr=0.01"}));
  EXPECT_EQ(s.command.back(), "--steps=5000");
}

TEST(JobSpec, MinDevicesAloneKeepsMaxAtWorld) {
  JobSpec s = parse_ok("name = \"a\"\nworld = 8\nmin_devices = 2\n");
  EXPECT_EQ(s.min_devices, 2);
  EXPECT_EQ(s.max_devices, 8);
}

TEST(JobSpec, ShippedExamplesParse) {
  for (const char* f : {"premium", "standard-elastic", "basic"}) {
    auto r = load_job_spec(std::string(ORRERY_SOURCE_DIR) + "/examples/jobs/" + f + ".toml");
    ASSERT_TRUE(r.ok()) << f << ": " << r.reason();
  }
  auto e = load_job_spec(std::string(ORRERY_SOURCE_DIR) + "/examples/jobs/standard-elastic.toml");
  EXPECT_EQ(e->min_devices, 2);
  EXPECT_EQ(e->max_devices, 8);
  EXPECT_EQ(e->world, 8);
}

TEST(JobSpec, RoundTripsThroughToToml) {
  JobSpec s = parse_ok(
      "name = \"x\"\ntier = \"basic\"\nworld = 6\nmin_devices = 1\nmax_devices = 3\ntenant = \"t.1\"\n"
      "args = [\"a\\\"b\", \"tab\\there\", \"back\\\\slash\"]\n");
  JobSpec t = parse_ok(to_toml(s));
  EXPECT_EQ(t.name, s.name);
  EXPECT_EQ(t.tenant, "t.1");
  EXPECT_EQ(t.tier, s.tier);
  EXPECT_EQ(t.world, s.world);
  EXPECT_EQ(t.min_devices, s.min_devices);
  EXPECT_EQ(t.max_devices, s.max_devices);
  EXPECT_EQ(t.mem_mib, s.mem_mib);
  EXPECT_EQ(t.steps, s.steps);
  EXPECT_EQ(t.command, s.command);
  EXPECT_EQ(args_of(t)[1], "tab\there");
}

TEST(JobSpec, MissingRequiredKeys) {
  EXPECT_EQ(parse_error("world = 2\n"), "job.toml: name: required key missing (a string)");
  EXPECT_EQ(parse_error("name = \"a\"\n"), "job.toml: world: required key missing (an integer)");
}

TEST(JobSpec, UnknownKeyNamesKeyAndPlace) {
  std::string e = parse_error("name = \"a\"\nworld = 2\n  wrold = 3\n");
  EXPECT_EQ(e.rfind("job.toml:3:3: wrold: unknown key", 0), 0u) << e;
  e = parse_error("name = \"a\"\nworld = 2\n[workload]\nname = \"mlp\"\n");
  EXPECT_EQ(e, "job.toml:3:1: workload: expected a string, got a table");
}

TEST(JobSpec, WrongTypes) {
  EXPECT_EQ(parse_error("name = \"a\"\nworld = \"4\"\n"),
            "job.toml:2:9: world: expected an integer, got a string");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4.0\n"),
            "job.toml:2:9: world: expected an integer, got a float");
  EXPECT_EQ(parse_error("name = 7\nworld = 4\n"), "job.toml:1:8: name: expected a string, got an integer");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4\nargs = \"--x\"\n"),
            "job.toml:3:8: args: expected an array of strings, got a string");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4\nargs = [\"--x\", 3]\n"),
            "job.toml:3:16: args[1]: expected a string, got an integer");
}

TEST(JobSpec, OutOfRange) {
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 0\n"),
            "job.toml:2:9: world: 0 out of range [1, 4096]");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 2000000\n"),
            "job.toml:2:9: world: 2000000 out of range [1, 4096]");
  // The spec allows 2^20 workers; the runtime runs at most spec::kMaxRunWorld.
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4097\n"),
            "job.toml:2:9: world: 4097 out of range [1, 4096]");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4\nmax_devices = 5\n"),
            "job.toml:3:15: max_devices: 5 out of range [1, 4]");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4\nmax_devices = 2\nmin_devices = 3\n"),
            "job.toml:4:15: min_devices: 3 out of range [1, 2]");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4\nmem_mib = 0\n"),
            "job.toml:3:11: mem_mib: 0 out of range [1, 1099511627776]");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4\nsteps = -1\n"),
            "job.toml:3:9: steps: -1 out of range [1, 8589934592]");
  // A user's program may leave steps unknown (0), never negative.
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4\ncommand = [\"x\"]\nsteps = -1\n"),
            "job.toml:4:9: steps: -1 out of range [0, 8589934592]");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 4\ncheckpoint_every = -5\n"),
            "job.toml:3:20: checkpoint_every: -5 out of range [0, 8589934592]");
  EXPECT_EQ(parse_error("name = \"a\"\ntier = \"gold\"\nworld = 4\n"),
            "job.toml:2:8: tier: must be premium, standard or basic, got \"gold\"");
}

TEST(JobSpec, BadNames) {
  EXPECT_NE(parse_error("name = \"\"\nworld = 1\n").find("name: must be 1 to 64 characters"),
            std::string::npos);
  EXPECT_NE(parse_error("name = \"a b\"\nworld = 1\n").find("got \"a b\""), std::string::npos);
  EXPECT_NE(parse_error("name = \"-a\"\nworld = 1\n").find("job.toml:1:8: name:"), std::string::npos);
  EXPECT_NE(parse_error("name = \"" + std::string(65, 'x') + "\"\nworld = 1\n").find("name:"),
            std::string::npos);
  EXPECT_NE(parse_error("name = \"a\"\nworld = 1\nworkload = \"../x\"\n").find("workload:"),
            std::string::npos);
  EXPECT_NE(parse_error("name = \"a\"\nworld = 1\ntenant = \"a/b\"\n").find("job.toml:3:10: tenant:"),
            std::string::npos);
}

TEST(JobSpec, ArgsAndStepsWithinTheRuntimesLimits) {
  std::string many = "args = [";
  for (int i = 0; i <= 256; ++i) many += std::string(i ? ", " : "") + "\"x\"";
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\n" + many + "]\n"),
            "job.toml:3:8: args: at most 256 arguments, got 257");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\nargs = [\"--x\", \"a\\nb\"]\n"),
            "job.toml:3:16: args[1]: must be at most 4096 bytes without line breaks or NUL characters");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\nargs = [\"" + std::string(4097, 'x') + "\"]\n")
                .rfind("job.toml:3:9: args[0]: must be at most 4096 bytes", 0),
            0u);
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\nsteps = 0\n"),
            "job.toml:3:9: steps: 0 out of range [1, 8589934592]");
}

TEST(JobSpec, InfeasibleSplitIsTheCoresGuard) {
  // 9 workers on 1..1 devices would need 9 per device (limit 8).
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 9\nmax_devices = 1\n"),
            "job.toml:2:9: world 9 does not split evenly over any device count in [1, 1] with at "
            "most 8 workers per device: the job could never be placed");
  // 7 workers (prime) on 2..6 devices: no even split.
  EXPECT_NE(parse_error("name = \"a\"\nworld = 7\nmin_devices = 2\nmax_devices = 6\n")
                .find("job.toml:3:15: world 7 does not split evenly over any device count in [2, 6]"),
            std::string::npos);
}

TEST(JobSpec, TomlSyntaxErrorsNamePlace) {
  std::string e = parse_error("name = \"a\"\nworld = = 4\n");
  EXPECT_EQ(e.rfind("job.toml:2:", 0), 0u) << e;
  e = parse_error("name = \"a\nworld = 4\n");
  EXPECT_EQ(e.rfind("job.toml:1:", 0), 0u) << e;
  e = parse_error("name = \"a\"\nname = \"b\"\nworld = 1\n");
  EXPECT_EQ(e.rfind("job.toml:2:", 0), 0u) << e;
}

TEST(JobSpec, MissingFile) {
  auto r = load_job_spec("/nonexistent/x.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.reason(), "/nonexistent/x.toml: cannot open the job spec: No such file or directory");
}

// Issue 19: a directory read as an empty spec ("name: required key missing") and a FIFO blocked
// the reader forever. Both are refused before they are opened.
TEST(JobSpec, DirectoriesAndFifosAreNotJobFiles) {
  char dir_template[] = "/tmp/job_spec_test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  auto r = load_job_spec(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.reason(), dir + " is a directory, not a job file");
  const std::string fifo = dir + "/job.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = load_job_spec(fifo);  // no writer: opening it to read would wait forever
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.reason(), fifo + " is a FIFO, not a job file");
  r = load_job_spec("/dev/null");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.reason(), "/dev/null is a character device, not a job file");
  ::unlink(fifo.c_str());
  ::rmdir(dir.c_str());
}

// Issue 19: errors show at most 64 bytes of any input (base/quote.h), then "..." and its length.
TEST(JobSpec, ErrorsQuoteAtMost64BytesOfInput) {
  const std::string big(10386, 'n');
  const std::string cut = std::string(64, 'n') + "...";
  EXPECT_EQ(parse_error("name = \"" + big + "\"\nworld = 1\n"),
            "job.toml:1:8: name: must be " + std::string(spec::kNameRule) + ", got \"" + cut +
                "\" (10386 bytes)");
  EXPECT_EQ(parse_error(big + " = 1\n"), "job.toml:1:1: " + cut + " (10386 bytes): unknown key (known: name, "
            "tier, device_type, world, min_devices, max_devices, mem_mib, command, env, workdir, preemption, "
            "grace_s, min_runtime_s, steps, checkpoint_every, workload, args, tenant)");
  for (const char* key : {"tier", "preemption", "workload", "tenant", "device_type"}) {
    const std::string e = parse_error("name = \"a\"\nworld = 1\n" + std::string(key) + " = \"" + big + "\"\n");
    EXPECT_NE(e.find("\"" + cut + "\" (10386 bytes)"), std::string::npos) << e.substr(0, 300);
    EXPECT_LT(e.size(), 400u) << key;
  }
  std::string e = parse_error("name = \"a\"\nworld = 1\n[env]\n" + big + " = 1\n");
  EXPECT_NE(e.find("env." + cut + " (10386 bytes): expected a string"), std::string::npos) << e.substr(0, 300);
  e = parse_error("name = \"a\"\nworld = 1\ncommand = [\"x\"]\n[env]\n" + big + " = \"1\"\n");
  EXPECT_NE(e.find("env: \"" + cut + "\" (10386 bytes) is not a variable name"), std::string::npos) << e.substr(0, 300);
  e = parse_error("name = \"a\"\nworld = 1\nworkdir = \"/" + big + "\"\n");
  EXPECT_LT(e.size(), 400u) << e.substr(0, 300);
  // toml++'s own messages quote keys ('...'): clipped too.
  e = parse_error("[" + big + "]\n[" + big + "]\n");
  EXPECT_NE(e.find("'" + cut), std::string::npos) << e.substr(0, 300);
  EXPECT_LT(e.size(), 400u);
  // The source name as well.
  auto r = parse_job_spec("world = 1\n", "/" + big + ".toml", "/jobs");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.reason(), "/" + std::string(63, 'n') + "... (10392 bytes): name: required key missing (a string)");
}

}  // namespace
}  // namespace orrery::cli

namespace orrery::cli {
namespace {

// Regression (job_spec_fuzz, crash-297726bb...): toml++ 3.3 reaches __builtin_unreachable when it
// classifies U+FEDF (and U+00A1..U+0499, ...) as whitespace. The parser refuses such characters
// wherever toml++ would classify them, and keeps them where it does not (value strings, comments).
TEST(JobSpec, FuzzRegressionNonAsciiWheretomlppWouldClassifyIt) {
  EXPECT_EQ(parse_error("\xEF\xBB\x9F["),
            "job.toml:1:1: non-ASCII character outside a string value or comment");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1 \xC3\xA9\n"),
            "job.toml:2:11: non-ASCII character outside a string value or comment");
  EXPECT_EQ(parse_error("\"caf\xC3\xA9\" = 1\n"),
            "job.toml:1:5: non-ASCII character outside a string value or comment");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\nx = { \"\xC3\xA9\" = 1 }\n"),
            "job.toml:3:8: non-ASCII character outside a string value or comment");
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\nargs = [\"\"\"\\\n \xC3\xA9\"\"\"]\n"),
            "job.toml:4:2: non-ASCII character outside a string value or comment");
  EXPECT_EQ(parse_error("[t\xC3\xA9]\n"),
            "job.toml:1:3: non-ASCII character outside a string value or comment");
}

TEST(JobSpec, NonAsciiInValueStringsAndComments) {
  JobSpec s = parse_ok(
      "# caf\xC3\xA9 \xEF\xBB\x9F\nname = \"a\" # \xC3\xA9\nworld = 1\n"
      "args = [\n  \"caf\xC3\xA9\",  # \xC3\xA9\n  'na\xC3\xAFve',\n  \"\"\"\n\xC3\xA9\"\"\",\n"
      "  '''\xEF\xBB\x9F'''\n]\n");
  EXPECT_EQ(args_of(s), (std::vector<std::string>{"caf\xC3\xA9", "na\xC3\xAFve", "\xC3\xA9",
                                                 "\xEF\xBB\x9F"}));
  EXPECT_EQ(parse_error("name = \"caf\xC3\xA9\"\nworld = 1\n").rfind("job.toml:1:8: name: must be", 0), 0u);
}

}  // namespace
}  // namespace orrery::cli

namespace orrery::cli {
namespace {

// Regression (job_spec_fuzz, crash-0b95276d...): a quote inside a bare token opens no string for
// toml++, which scans on through what follows it, non-ASCII included.
TEST(JobSpec, FuzzRegressionQuoteInsideBareToken) {
  EXPECT_EQ(parse_error("steps = 00\"0000e\xC6\x96R\n"),
            "job.toml:1:17: non-ASCII character outside a string value or comment");
  EXPECT_EQ(parse_error("a\"b\xC3\xA9\" = 1\n"),
            "job.toml:1:4: non-ASCII character outside a string value or comment");
  // crash-bb8dab43...: a bracket and a quote inside the bare token "+[[[...".
  EXPECT_EQ(parse_error("A=+[[[[[[i[[[\"''4[trlas\xEF\xBA\xBF=\n"),
            "job.toml:1:24: non-ASCII character outside a string value or comment");
}

// Regression (job_spec_fuzz, crash-f242b5e2...): a bare key ends at the first byte no bare key
// has. In "A='...'" toml++ reads a key, '=' and a literal string, and classifies what follows the
// closing quote; the check took "A='+[" for one bare token and the '#' inside the string for a
// comment, and passed U+FE9B after the string to toml++.
TEST(JobSpec, FuzzRegressionBareKeyEndsAtEquals) {
  EXPECT_EQ(parse_error("A='+[#raas\xEF\xBA\x9F=='\xEF\xBA\x9B\xEF\xBA\x9B=\n"),
            "job.toml:1:15: non-ASCII character outside a string value or comment");
  EXPECT_EQ(parse_error("name='a'\xC3\xA9\n"),
            "job.toml:1:9: non-ASCII character outside a string value or comment");
  // In inline tables and dotted keys alike.
  EXPECT_EQ(parse_error("name = \"a\"\nworld = 1\nx = { b='#'\xC3\xA9 }\n"),
            "job.toml:3:12: non-ASCII character outside a string value or comment");
  EXPECT_EQ(parse_error("a.b='#'\xC3\xA9\n"),
            "job.toml:1:8: non-ASCII character outside a string value or comment");
  // A byte order mark that begins the file is skipped, as toml++ skips it; anywhere else it is
  // a character like any other.
  EXPECT_EQ(parse_ok("\xEF\xBB\xBFname='a'\nworld=1\n").name, "a");
  EXPECT_EQ(parse_error("\xEF\xBB\xBFname='a'\xC3\xA9\n"),
            "job.toml:1:9: non-ASCII character outside a string value or comment");
  EXPECT_EQ(parse_error("\xEF\xBB\xBF\xEF\xBB\xBFname='a'\n"),
            "job.toml:1:1: non-ASCII character outside a string value or comment");
  // A value string right after a key and '=' still takes non-ASCII.
  JobSpec s = parse_ok("name='a'\nworld=1\nargs=['caf\xC3\xA9']\n");
  EXPECT_EQ(args_of(s), (std::vector<std::string>{"caf\xC3\xA9"}));
}

}  // namespace
}  // namespace orrery::cli
