#include "runtime/cli/commands.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <string_view>
#include <thread>
#include <vector>

#include "base/quote.h"
#include "runtime/cli/format.h"
#include "runtime/cli/job_spec.h"
#include "runtime/cli/local_cluster.h"
#include "spec/limits.h"

namespace orrery::cli {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// A failed command: its reason on stderr, its exit code from its status code.
int failed(const CliContext& ctx, const std::string& what, const Status& st) {
  *ctx.err << "orrery " << what << ": " << st.reason()
           << (st.code() == StatusCode::kDeadlineExceeded ? " (--timeout SECONDS to wait longer)" : "")
           << "\n";
  return exit_code(st.code());
}

// An integer option or argument in [lo, hi], refused in words: "0 is out of range 1..4096",
// "-5 is out of range (at least 0)" (hi: no bound but int64's), "\"two\" is not an integer" (CLI11
// prefixes the option's name). CLI11's own Range on an integer prints its bounds as doubles, 309
// digits of them for the largest.
constexpr std::int64_t kNoBound = std::numeric_limits<std::int64_t>::max();
CLI::Validator int_range(std::int64_t lo, std::int64_t hi) {
  const std::string bounds =
      hi == kNoBound ? "at least " + std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
  const std::string range = hi == kNoBound ? "(" + bounds + ")" : bounds;
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        const bool whole = end == text.data() + text.size();
        if (ec == std::errc::result_out_of_range && whole) return clip_input(text) + " is out of range " + range;
        if (ec != std::errc() || !whole) return quote_input(text) + " is not an integer";
        if (v < lo || v > hi) return text + " is out of range " + range;
        return {};
      },
      hi == kNoBound ? bounds : "in " + bounds);
}

// Why `text` cannot be the core's host:port (a host name is at most 253 bytes), which every later
// message names; "" when it can be.
std::string bad_address(const std::string& text) {
  const bool odd = text.empty() || text.size() > 253 + 6 ||
                   std::any_of(text.begin(), text.end(), [](unsigned char c) { return c <= ' ' || c == 0x7f; });
  return odd ? quote_input(text) + " is not a host:port address" : "";
}

// The first argument that is neither a global option nor its value: the command the user meant.
std::optional<std::string> command_word(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") return i + 1 < argc ? std::optional<std::string>(argv[i + 1]) : std::nullopt;
    if (a.empty() || a[0] != '-') return std::string(a);
    if (a == "--core" || a == "--secret-file" || a == "--timeout") ++i;  // its value follows
  }
  return std::nullopt;
}

// CLI11 quotes arguments whole in its messages: each argument (or the value of --opt=value) longer
// than kMaxQuoted bytes is shown clipped (base/quote.h).
std::string clip_arguments(std::string msg, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    for (std::string_view piece : {a, a.substr(a.find('=') == std::string_view::npos ? a.size() : a.find('=') + 1)}) {
      if (piece.size() <= kMaxQuoted) continue;
      const std::string shown = clip_input(piece);
      for (auto at = msg.find(piece); at != std::string::npos; at = msg.find(piece, at + shown.size()))
        msg.replace(at, piece.size(), shown);
    }
  }
  return msg;
}

struct Session {
  const CliContext& ctx;
  std::string core;
  std::string secret_file;
  std::int64_t timeout_s = kDefaultTimeoutS;
  std::unique_ptr<service::ClientApi> api;

  // Connects on first use: kUnavailable when the core cannot be reached, kPermissionDenied
  // without a secret or with a wrong one (rpc/client_connection.h).
  Status open() {
    if (api) return Status::Ok();
    // --core was checked as it was parsed; ORRERY_CORE was not.
    if (auto why = bad_address(core); !why.empty()) return Status::InvalidArgument("ORRERY_CORE: " + why);
    if (secret_file.empty())
      return Status::PermissionDenied(
          "no secret: pass --secret-file FILE or set ORRERY_SECRET_FILE (orrery up prints it)");
    auto r = ctx.connect(core, secret_file, timeout_s * 1000);
    if (!r.ok()) return r.status();
    api = std::move(*r);
    return Status::Ok();
  }

  // A job named by id or by name (the newest job of that name).
  Result<int> job(const std::string& ref) {
    int id = -1;
    auto [p, ec] = std::from_chars(ref.data(), ref.data() + ref.size(), id);
    if (ec == std::errc() && p == ref.data() + ref.size() && id >= 0) return id;
    auto jobs = api->jobs();
    if (!jobs.ok()) return jobs.status();
    int found = -1;
    for (const auto& j : *jobs)
      if (j.name == ref) found = std::max(found, j.job);
    if (found < 0) return Status::NotFound("no job named " + quote_input(ref));
    return found;
  }
};


// --- orrery logs: the workers' output ----------------------------------------------------------

constexpr std::uint32_t kOutputWindow = 1 << 20;  // the most the core returns a call
constexpr int kMaxRanksShown = 64;  // without --rank: the first ranks of a larger job
constexpr auto kFollowPoll = std::chrono::milliseconds(500);
constexpr std::int64_t kMaxLines = 1'000'000;  // -n: more is not a tail

// One rank's output as printed: prefixed "[rank R] " line by line (all ranks), or as it comes
// (one rank). A prefixed line is printed once whole; `flush` prints an unfinished one.
struct RankStream {
  int rank = 0;
  std::uint64_t offset = 0;  // where the next read goes on
  std::string partial;       // prefixed: an unfinished last line
  bool prefix = false;

  void emit(std::ostream& out, std::string_view data) {
    if (!prefix) {
      out << data << std::flush;
      return;
    }
    partial += data;
    std::size_t from = 0;
    for (std::size_t nl; (nl = partial.find('\n', from)) != std::string::npos; from = nl + 1)
      out << "[rank " << rank << "] " << std::string_view(partial).substr(from, nl + 1 - from);
    partial.erase(0, from);
    out << std::flush;
  }
  void flush(std::ostream& out) {
    if (prefix && !partial.empty()) out << "[rank " << rank << "] " << partial << "\n";
    partial.clear();
  }
};

// The last `n` lines of the rank's output: reads back from the end in growing windows until it
// has n line breaks before the end or the start of what the core keeps. Leaves `r.offset` at the
// end read, so following goes on from there.
Status tail_lines(service::ClientApi& api, int job, RankStream& r, int n, std::ostream& out) {
  auto head = api.output(job, r.rank, std::numeric_limits<std::uint64_t>::max(), 0);
  if (!head.ok()) return head.status();
  const std::uint64_t end = head->size;
  r.offset = end;
  std::string text;
  for (std::uint64_t window = 64 << 10;; window *= 8) {
    std::uint64_t at = end > window ? end - window : 0;
    text.clear();
    bool clamped = false;  // the core keeps nothing before what it returned
    while (at < end) {
      auto w = api.output(job, r.rank, at, static_cast<std::uint32_t>(std::min<std::uint64_t>(kOutputWindow, end - at)));
      if (!w.ok()) return w.status();
      if (w->data.empty()) break;
      if (w->next_offset - w->data.size() > at) clamped = true;
      text += w->data;
      at = w->next_offset;
    }
    const auto breaks = std::count(text.begin(), text.end(), '\n') - (!text.empty() && text.back() == '\n');
    if (breaks >= n || window >= end || clamped || window >= (64ull << 20)) break;
  }
  // The start of the last n lines (an unfinished last line counts as one): after the n-th line
  // break from the end, not counting the one that ends the text.
  std::size_t from = text.size();
  if (from > 0 && text.back() == '\n') --from;
  for (int found = 0; from > 0;) {
    auto nl = text.rfind('\n', from - 1);
    if (nl == std::string::npos) {
      from = 0;
    } else if (++found == n) {
      from = nl + 1;
      break;
    } else {
      from = nl;
    }
  }
  r.emit(out, std::string_view(text).substr(from));
  return Status::Ok();
}

// `orrery logs JOB [--rank R] [--follow] [-n N]`.
int run_logs(const CliContext& ctx, service::ClientApi& api, int job, int rank, bool follow, int lines) {
  std::vector<RankStream> ranks;
  if (rank >= 0) {
    ranks.push_back({rank, 0, "", false});
  } else {
    // The timeline first, as before there was output, then every rank's output.
    auto l = api.logs(job, lines);
    if (!l.ok()) return failed(ctx, "logs", l.status());
    for (const auto& line : *l) *ctx.out << line << "\n";
    auto jobs = api.jobs();
    if (!jobs.ok()) return failed(ctx, "logs", jobs.status());
    std::int64_t world = 0;
    for (const auto& j : *jobs)
      if (j.job == job) world = j.world;
    for (int r = 0; r < std::min<std::int64_t>(world, kMaxRanksShown); ++r) ranks.push_back({r, 0, "", true});
    if (world > kMaxRanksShown)
      *ctx.err << "orrery logs: showing ranks 0.." << kMaxRanksShown - 1 << " of " << world
               << " (orrery logs " << job << " --rank R for the others)\n";
  }
  for (auto& r : ranks) {
    if (auto st = tail_lines(api, job, r, lines, *ctx.out); !st.ok()) return failed(ctx, "logs", st);
    if (!follow) r.flush(*ctx.out);
  }
  if (!follow) return kExitOk;
  // Until the job has ended and a look after that finds nothing more (a node ships a job's output
  // before the report that ends it; the second look is for what was still on its way).
  bool ended = false;
  for (;;) {
    bool got = false, now_ended = false;
    for (auto& r : ranks) {
      for (;;) {
        auto w = api.output(job, r.rank, r.offset, kOutputWindow);
        if (!w.ok()) return failed(ctx, "logs", w.status());
        now_ended = w->job_ended;
        r.offset = w->next_offset;
        if (w->data.empty()) break;
        got = true;
        r.emit(*ctx.out, w->data);
        if (w->data.size() < kOutputWindow) break;
      }
    }
    if (ended && !got) break;
    if (now_ended && !ended) {
      ended = true;
      got = false;  // wait once more for output still on its way
    }
    if (!got) std::this_thread::sleep_for(kFollowPoll);
  }
  for (auto& r : ranks) r.flush(*ctx.out);
  auto jobs = api.jobs();
  if (!jobs.ok()) return failed(ctx, "logs", jobs.status());
  for (const auto& j : *jobs)
    if (j.job == job)
      *ctx.out << "job " << job << " " << spec::state_name(j.state) << (j.note.empty() ? "" : ": " + j.note) << "\n";
  return kExitOk;
}

}  // namespace

int exit_code(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument: return kExitUsage;
    case StatusCode::kUnavailable:
    case StatusCode::kPermissionDenied:
    case StatusCode::kDeadlineExceeded: return kExitUnreachable;
    case StatusCode::kNotFound: return kExitNotFound;
    case StatusCode::kInternal: return kExitInternal;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists:
    case StatusCode::kResourceExhausted:
    case StatusCode::kAborted:
    case StatusCode::kUnknown: return kExitRefused;
  }
  return kExitRefused;
}

int run_cli(int argc, const char* const* argv, const CliContext& ctx) {
  CLI::App app{"orrery: submit and operate training jobs on an orrery cluster", "orrery"};
  app.require_subcommand(1);
  app.failure_message(CLI::FailureMessage::help);
  Session s{ctx, env_or("ORRERY_CORE", kDefaultCore), env_or("ORRERY_SECRET_FILE", ""), kDefaultTimeoutS, nullptr};
  app.add_option("--core", s.core, "address of orrery-core serve (env ORRERY_CORE)")
      ->capture_default_str()->check(CLI::Validator([](std::string& text) { return bad_address(text); }, ""));
  app.add_option("--secret-file", s.secret_file,
                 "file holding the cluster's shared secret (env ORRERY_SECRET_FILE)");
  app.add_option("--timeout", s.timeout_s,
                 "seconds to wait for the core: to connect, then for each call (watch and logs "
                 "--follow run on, but end when the core stops answering); past it, exit 2")
      ->envname("ORRERY_TIMEOUT")->capture_default_str()->check(int_range(1, kMaxTimeoutS));

  std::string job_file, job_ref, job2_ref, node;
  bool dry_run = false;
  int devices = 0, lines = 100;
  std::int64_t after = 0, count = -1;
  std::vector<std::string> watch_jobs;

  auto* submit = app.add_subcommand("submit", "check a job spec (TOML, docs/runtime.md) and submit it");
  submit->add_option("JOB.toml", job_file, "job spec file")->required();
  submit->add_flag("--dry-run", dry_run, "check the spec and print it with its defaults; submit nothing");
  auto* ls = app.add_subcommand("ls", "list jobs");
  auto* nodes = app.add_subcommand("nodes", "list nodes");
  auto* preempt = app.add_subcommand("preempt", "checkpoint and suspend a running job for a waiting one");
  preempt->add_option("JOB", job_ref, "job id or name")->required();
  preempt->add_option("--for", job2_ref, "the waiting job it makes room for (default: the core picks)");
  auto* suspend = app.add_subcommand(
      "suspend", "checkpoint a running job, free its devices and hold it until `orrery resume`");
  suspend->add_option("JOB", job_ref, "job id or name")->required();
  auto* resume = app.add_subcommand(
      "resume", "release a job `orrery suspend` holds: it restores when devices are free");
  resume->add_option("JOB", job_ref, "job id or name")->required();
  auto* migrate = app.add_subcommand("migrate", "checkpoint a running job and restore it on other devices");
  migrate->add_option("JOB", job_ref, "job id or name")->required();
  migrate->add_option("--to", node, "target node (default: the core picks)");
  auto* resize = app.add_subcommand(
      "resize", "change a running job's device count at the same world size (a shrink frees devices, for no one or --for a waiting job)");
  resize->add_option("JOB", job_ref, "job id or name")->required();
  resize->add_option("N", devices, "device count, within the job's elastic range")
      ->required()->check(int_range(1, spec::kMaxRunWorld));
  resize->add_option("--for", job2_ref,
                     "when shrinking: the waiting job the devices are reserved for (default: none)");
  auto* cancel = app.add_subcommand("cancel", "cancel a job");
  cancel->add_option("JOB", job_ref, "job id or name")->required();
  auto* drain = app.add_subcommand("drain", "take no new devices on a node; move its jobs off");
  drain->add_option("NODE", node, "node name")->required();
  auto* undrain = app.add_subcommand("undrain", "return a drained node to service");
  undrain->add_option("NODE", node, "node name")->required();
  auto* watch = app.add_subcommand(
      "watch", "print the cluster's timeline (UTC times), then follow it until Ctrl-C or the core goes away");
  watch->add_option("--after", after, "start after this decision seq (0: the whole timeline)")
      ->capture_default_str()->check(int_range(0, kNoBound));
  watch->add_option("--job", watch_jobs, "only these jobs' events (ids or names; repeatable)");
  watch->add_option("--count", count, "stop after this many events (0: print none; default: follow forever)")
      ->check(int_range(0, kNoBound));
  int rank = -1;
  bool follow = false;
  auto* logs = app.add_subcommand(
      "logs", "a job's timeline and its workers' output (stdout and stderr, every incarnation)");
  logs->add_option("JOB", job_ref, "job id or name")->required();
  logs->add_option("-n,--lines", lines, "last N lines (of the timeline and of each rank)")
      ->capture_default_str()->check(int_range(1, kMaxLines));
  logs->add_option("--rank", rank, "only this rank's output (default: the timeline, then the first 64 ranks')")
      ->check(int_range(0, spec::kMaxRunWorld - 1));
  logs->add_flag("-f,--follow", follow, "then print new output until the job ends (or Ctrl-C)");
  UpOptions up_opts;
  auto* up = app.add_subcommand(
      "up", "run a local cluster (core + nodes) in the foreground until Ctrl-C, restarting what dies");
  up->add_option("--nodes", up_opts.nodes, "node agents")->capture_default_str()->check(int_range(1, 64));
  up->add_option("--devices", up_opts.devices, "host devices per node")->capture_default_str()
      ->check(int_range(1, spec::kMaxAgentDevices));
  up->add_option("--device-mem-mib", up_opts.device_mem_mib, "memory per device, MiB")
      ->capture_default_str()->check(int_range(1, spec::kMaxMemMib));
  up->add_option("--data", up_opts.data,
                 "data directory, kept; an earlier cluster's is started again, its jobs recovered "
                 "(default: a temporary one, removed when stopped, kept if orrery up fails)");
  up->add_option("--listen", up_opts.listen, "core address (port 0: a free one)")->capture_default_str();
  up->add_option("--metrics", up_opts.metrics, "core /metrics address (default: none; port 0: a free one)");
  up->add_option("--core-bin", up_opts.core_bin, "orrery-core to run (default: beside orrery)");
  up->add_option("--node-bin", up_opts.node_bin, "orrery-node to run (default: beside orrery)");
  up->add_option("--grace-ms", up_opts.grace_ms, "SIGTERM to SIGKILL on shutdown")
      ->capture_default_str()->check(int_range(0, 600000));
  up->add_flag("--foreground")->description(
      "stay in the foreground (what orrery up always does; for scripts that say so)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    *ctx.out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp& e) {
    *ctx.out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (106, 109, ...) are not ours: every usage error is exit 1.
    if (e.get_exit_code() == 0) {
      app.exit(e, *ctx.out, *ctx.err);
      return kExitOk;
    }
    std::string commands;
    bool known = false;  // the command the user meant is one
    const auto word = command_word(argc, argv);
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      commands += (commands.empty() ? "" : ", ") + sub->get_name();
      known = known || (word && sub->get_name() == *word);
    }
    if (app.get_subcommands().empty() && word && !known) {
      *ctx.err << "orrery: unknown command " << quote_input(*word) << " (commands: " << commands << ")\n"
               << "run `orrery --help` for usage\n";
      return kExitUsage;
    }
    std::string what = e.what();
    if (what == "A subcommand is required") what = "a command is required (commands: " + commands + ")";
    *ctx.err << "orrery: " << clip_arguments(what, argc, argv) << "\n";
    // A global option's error: its help is the top level's.
    const bool global = what.rfind("--core", 0) == 0 || what.rfind("--secret-file", 0) == 0 ||
                        what.rfind("--timeout", 0) == 0;
    const CLI::App* sub = app.get_subcommands().empty() || global ? &app : app.get_subcommands().front();
    *ctx.err << "run `orrery " << (sub == &app ? "" : sub->get_name() + " ") << "--help` for usage\n";
    return kExitUsage;
  }

  if (submit->parsed()) {
    auto spec = load_job_spec(job_file);
    // A spec that cannot be loaded is a bad argument, whatever the loader's code (no such file).
    if (!spec.ok()) return failed(ctx, "submit", Status::InvalidArgument(spec.reason()));
    if (dry_run) {
      *ctx.out << to_toml(*spec);
      return kExitOk;
    }
    if (auto st = s.open(); !st.ok()) return failed(ctx, "submit", st);
    auto id = s.api->submit(*spec);
    if (!id.ok()) return failed(ctx, "submit", id.status());
    *ctx.out << "submitted job " << *id << " (" << spec->name << ")\n";
    return kExitOk;
  }
  if (up->parsed()) {
    const auto dir = std::filesystem::path(ctx.self_path).parent_path();
    auto pick = [&](std::string& chosen, const char* name, const std::string& built) {
      if (!chosen.empty()) return;
      chosen = (dir / name).string();
      if (::access(chosen.c_str(), X_OK) != 0 && !built.empty() && ::access(built.c_str(), X_OK) == 0)
        chosen = built;
    };
    pick(up_opts.core_bin, "orrery-core", ctx.build_core_bin);
    pick(up_opts.node_bin, "orrery-node", ctx.build_node_bin);
    return run_up(up_opts, *ctx.out, *ctx.err);
  }

  const std::string cmd = app.get_subcommands().front()->get_name();
  // A node name is at most 64 bytes of [A-Za-z0-9._-] (spec/limits.h), as the fleet's are: any
  // other is unknown, said here rather than sent to the core, which would echo it whole.
  if (!node.empty() && !spec::valid_name(node))
    return failed(ctx, cmd, Status::NotFound("unknown node " + quote_input(node)));
  if (auto st = s.open(); !st.ok()) return failed(ctx, cmd, st);
  auto resolve = [&](const std::string& ref, int& out_id) -> int {
    auto r = s.job(ref);
    if (!r.ok()) return failed(ctx, cmd, r.status());
    out_id = *r;
    return kExitOk;
  };
  auto done = [&](const Status& st, const std::string& what) -> int {
    if (!st.ok()) return failed(ctx, cmd, st);
    *ctx.out << what << "\n";
    return kExitOk;
  };
  int job = -1, job2 = -1;
  if (!job_ref.empty())
    if (int rc = resolve(job_ref, job)) return rc;
  if (!job2_ref.empty())
    if (int rc = resolve(job2_ref, job2)) return rc;

  if (ls->parsed()) {
    auto jobs = s.api->jobs();
    if (!jobs.ok()) return failed(ctx, cmd, jobs.status());
    *ctx.out << format_jobs(*jobs);
    return kExitOk;
  }
  if (nodes->parsed()) {
    auto ns = s.api->nodes();
    if (!ns.ok()) return failed(ctx, cmd, ns.status());
    *ctx.out << format_nodes(*ns);
    return kExitOk;
  }
  if (preempt->parsed())
    return done(s.api->preempt(job, job2),
                "preempting job " + std::to_string(job) +
                    (job2 >= 0 ? " for job " + std::to_string(job2) : ""));
  if (suspend->parsed()) return done(s.api->suspend(job), "suspending job " + std::to_string(job));
  if (resume->parsed()) return done(s.api->resume(job), "resuming job " + std::to_string(job));
  if (migrate->parsed())
    return done(s.api->migrate(job, node.empty() ? std::nullopt : std::optional(node)),
                "migrating job " + std::to_string(job) + (node.empty() ? "" : " to " + node));
  if (resize->parsed())
    return done(s.api->resize(job, devices, job2),
                "resizing job " + std::to_string(job) + " to " + std::to_string(devices) +
                    " devices" + (job2 >= 0 ? " for job " + std::to_string(job2) : ""));
  if (cancel->parsed()) return done(s.api->cancel(job), "cancelling job " + std::to_string(job));
  if (drain->parsed()) return done(s.api->drain(node), "draining node " + node);
  if (undrain->parsed()) return done(s.api->undrain(node), "node " + node + " back in service");
  if (logs->parsed()) return run_logs(ctx, *s.api, job, rank, follow, lines);
  if (watch->parsed()) {
    std::vector<int> only;
    for (const auto& ref : watch_jobs) {
      int id = -1;
      if (int rc = resolve(ref, id)) return rc;
      only.push_back(id);
    }
    if (count == 0) return kExitOk;  // asked for no events: the core was reached, the jobs found
    std::int64_t seen = 0;
    bool bar_open = false;  // a progress bar is on the current terminal line
    auto st = s.api->watch(static_cast<std::uint64_t>(after), [&](const service::ClusterEvent& e) {
      if (!only.empty() && std::find(only.begin(), only.end(), e.job) == only.end()) return true;
      auto p = find_progress(e.text);
      if (ctx.out_is_tty && p && e.seq == 0) {
        // A progress report (commits nothing): redraw the bar in place.
        *ctx.out << "\r\033[K" << "job " << e.job << " " << progress_bar(*p) << std::flush;
        bar_open = p->done < p->total;
        if (!bar_open) *ctx.out << "\n";
      } else {
        if (bar_open) *ctx.out << "\n";
        bar_open = false;
        *ctx.out << format_event(e) << "\n" << std::flush;
      }
      ++seen;
      return count < 0 || seen < count;
    });
    if (bar_open) *ctx.out << "\n";
    if (!st.ok()) return failed(ctx, cmd, st);
    return kExitOk;
  }
  *ctx.err << "orrery: no command\n";
  return kExitUsage;
}

}  // namespace orrery::cli
