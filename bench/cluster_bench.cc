// cluster_bench: preemption latency and migration time against job state size, measured between
// real processes on loopback (issue 6; docs/performance.md, "Runtime"). Not a Google Benchmark
// program: every figure needs a running cluster around it.
//
//   cluster_bench [--reps=N] [--sizes=MIB,MIB,...] [--timeout-s=S] [--step-delay-us=U] [--keep]
//
// It starts `orrery-core serve` and two `orrery-node` agents, n1 and n2 (2 host devices each,
// their orrery-proxy processes and orrery-train-mlp workers), as child processes
// (tests/service/local_cluster.h, the e2e tests' cluster), and talks to the core through
// rpc::connect_client like the `orrery` CLI, over one connection kept for the whole run. One
// thread follows the core's timeline (ClientApi::watch) and stamps each event with the time it
// arrived; every figure is the time from a client request to the arrival of the committed decision
// it waits for. Per state size (the job's whole checkpoint, W=2 ranks; the MLP
// shape is chosen to make it, and the shards in DATA/checkpoints are measured):
//
// 1. preemption, n2 not started so nothing else is free: a basic job runs on n1's 2 devices;
//    (a) a basic job is submitted and queues, then `preempt(victim, it)`;
//    (b) a premium job is submitted and the planner preempts the victim by itself;
//    each: request -> victim Suspended (its devices released), -> beneficiary Running; then the
//    beneficiary is cancelled and the victim resumes from its checkpoint (cancel -> Running).
// 2. migration, n2 up: a standard job moves back and forth between n1 and n2,
//    `migrate(job, other node)` -> Migrating -> Restoring (cut stored) -> Running on the other node.
// 3. the raw cost of the same bytes in this process: memcpy, write+fdatasync into a new file in
//    the data directory, read it back.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "runtime/common/bin_dir.h"
#include "rpc/client_connection.h"
#include "tests/service/local_cluster.h"

namespace {

using orrery::service::ClientApi;
using orrery::service::ClusterEvent;
using orrery::service::JobSpec;
using orrery::service::JobStatus;
using orrery::spec::JobState;
using orrery::spec::Tier;
using orrery::testing::eventually;
using orrery::testing::LocalCluster;
using orrery::testing::read_file;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// orrery-node, orrery-proxy, orrery-train-mlp, and orrery-core beside them when ORRERY_BIN_DIR
// names a pack of the binaries (scripts/gpu-test), else the build's.
const std::string kBin = orrery::bin_dir(ORRERY_BIN_DIR);
const std::string kCore =
    std::getenv("ORRERY_BIN_DIR") != nullptr ? kBin + "/orrery-core" : ORRERY_CORE_BIN;
constexpr int kWorld = 2;                   // ranks of the measured job, one device each
constexpr int kMaxMib = 256;                // the MLP workload holds at most 64 MiB of parameters per rank
constexpr int kDeviceMib = 256;             // LocalCluster's devices
const std::string kSecret = "test-secret";  // LocalCluster's

const char* kUsage =
    "usage: cluster_bench [--reps=N] [--sizes=MIB,...] [--timeout-s=S] [--step-delay-us=U] [--keep]\n"
    "\n"
    "Preemption latency and migration time against job state size, between real processes on\n"
    "loopback: orrery-core serve, two orrery-node agents with 2 host devices each (orrery-proxy),\n"
    "orrery-train-mlp workers. Per size, a W=2 MLP job whose checkpoint holds about MIB MiB\n"
    "(the bytes actually stored are measured and printed):\n"
    "  preemption: request (client preempt for a queued basic job, or a premium job's submit)\n"
    "              -> victim Suspended (devices released) -> beneficiary Running; and the victim's\n"
    "              resume from its checkpoint once the beneficiary is cancelled;\n"
    "  migration:  client migrate to the other node -> Migrating -> Restoring (cut stored) -> Running there;\n"
    "  raw:        memcpy, write+fdatasync, read of the same number of bytes.\n"
    "Prints the median and the maximum over the repetitions, in ms.\n"
    "\n"
    "  --reps=N           repetitions per size and kind (default 5)\n"
    "  --sizes=MIB,...    job state sizes in MiB, 1..256 (default 4,16,64,256)\n"
    "  --timeout-s=S      how long a job may take to reach each expected state (default 60)\n"
    "  --step-delay-us=U  the workload sleeps U us after each step (default 0: steps back to back)\n"
    "  --keep             keep the data directory (logs, journal, checkpoints) after a success\n"
    "  --device-type=T    the nodes' device type (default host: emulated in host memory); any\n"
    "                     other name runs the cuda backend on the machine's GPUs (with one GPU,\n"
    "                     ORRERY_CUDA_DEVICES=0,0 puts both devices of each node on it)\n"
    "  --help             this text\n"
    "\n"
    "Exit 0 when every job reached every expected state in time, 1 when one did not (the message\n"
    "names the job and the state, the data directory is kept), 2 on bad arguments.\n";

struct Options {
  int reps = 5;
  std::vector<int> sizes = {4, 16, 64, 256};
  int timeout_s = 60;
  long step_delay_us = 0;
  bool keep = false;
  std::string device_type = "host";  // any other: the nodes' devices run the cuda backend
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Stat {
  double med = 0, max = 0;
};
Stat summary(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return {n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v.back()};
}

// The MLP shape (batch 1) whose checkpoint is about `mib` MiB for the whole job: per rank, the
// parameters and the gradients (np floats each) and six small buffers, every allocation rounded up
// to the proxy's 64 KiB granule (8 granules per rank are set aside for the small buffers and the
// rounding); din = dout = d, hidden = 4d (np ~ 8 d^2).
struct Shape {
  std::uint64_t din = 1, hidden = 1, dout = 1;
  std::uint64_t params() const { return din * hidden + hidden + hidden * dout + dout; }
};
Shape shape_for(int mib) {
  const double per_rank = static_cast<double>(std::uint64_t(mib) << 20) / kWorld - 8 * 65536.0;
  const double per_rank_params = std::max(64.0, per_rank / (2 * 4));
  std::uint64_t d = std::max<std::uint64_t>(1, std::llround(std::sqrt(per_rank_params / 8)));
  Shape s;
  for (;; --d) {
    s = {std::min<std::uint64_t>(d, 4096), std::min<std::uint64_t>(4 * d, 8192),
         std::min<std::uint64_t>(d, 4096)};
    if (s.params() * 4 <= (64u << 20) || d == 1) return s;
  }
}

// The core's timeline as this process saw it: each event with the time it arrived.
class Timeline {
 public:
  struct Seen {
    Clock::time_point at;
    ClusterEvent e;
  };
  void add(const ClusterEvent& e) {
    std::lock_guard<std::mutex> l(m_);
    seen_.push_back({Clock::now(), e});
    cv_.notify_all();
  }
  void end(const std::string& why) {
    std::lock_guard<std::mutex> l(m_);
    ended_ = true;
    end_reason_ = why;
    cv_.notify_all();
  }
  std::size_t mark() {
    std::lock_guard<std::mutex> l(m_);
    return seen_.size();
  }
  // The first event from index `from` on that satisfies `pred`, waiting up to `timeout`.
  template <class P>
  std::optional<Seen> wait(std::size_t from, Clock::duration timeout, P pred, std::size_t* index = nullptr) {
    std::unique_lock<std::mutex> l(m_);
    const auto until = Clock::now() + timeout;
    for (std::size_t i = from;;) {
      for (; i < seen_.size(); ++i)
        if (pred(seen_[i].e)) {
          if (index) *index = i;
          return seen_[i];
        }
      if (ended_ || cv_.wait_until(l, until) == std::cv_status::timeout) {
        for (; i < seen_.size(); ++i)
          if (pred(seen_[i].e)) return seen_[i];
        return std::nullopt;
      }
    }
  }
  std::vector<std::string> lines_of(int job, std::size_t last) {
    std::lock_guard<std::mutex> l(m_);
    std::vector<std::string> out;
    for (const auto& s : seen_)
      if (s.e.job == job) out.push_back(s.e.text);
    if (out.size() > last) out.erase(out.begin(), out.end() - static_cast<long>(last));
    return out;
  }
  std::string end_reason() {
    std::lock_guard<std::mutex> l(m_);
    return ended_ ? end_reason_ : "";
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;
  bool ended_ = false;
  std::string end_reason_;
};

// A committed transition of `job`: `change` is "-> Suspended" (from any state) or
// "Restoring -> Running" (timeline text: "job 3 NAME Restoring -> Running: RestoreDone job 3").
auto into(int job, const std::string& change) {
  return [job, needle = " " + change + ":"](const ClusterEvent& e) {
    return e.seq != 0 && e.job == job && e.text.find(needle) != std::string::npos;
  };
}
std::int64_t number_after(const std::string& text, const std::string& what) {
  auto p = text.find(what);
  return p == std::string::npos ? -1 : std::atoll(text.c_str() + p + what.size());
}

// Pids of the children's process groups, for the signal handler.
std::atomic<int> g_groups[3] = {-1, -1, -1};
void on_signal(int sig) {
  for (auto& g : g_groups) {
    int pg = g.load();
    if (pg > 0) ::kill(-pg, SIGTERM);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

class Bench {
 public:
  explicit Bench(Options o) : o_(std::move(o)) {}
  int run();

 private:
  struct PreemptRep {
    double suspended = 0, beneficiary = 0, written = -1;
  };
  struct SizeResult {
    int mib = 0;
    Shape shape;
    std::uint64_t bytes = 0, rank_bytes = 0;  // a checkpoint of the job, and of one rank
    double step_ms = 0;
    std::vector<double> api_susp, api_ben, api_written, prem_susp, prem_ben, resume;
    std::vector<double> mig_cut, mig_run;
    std::vector<double> memcpy_ms, write_ms, read_ms;
  };

  [[noreturn]] void die(const std::string& why, int job = -1);
  void start_cluster();
  void start_node(int i);
  void stop_cluster();
  ClientApi& api() { return *api_; }
  std::optional<JobStatus> job(int id);
  int submit(const JobSpec& s);
  JobSpec measured_job(const std::string& name, Tier tier, const Shape& sh) const;
  JobSpec small_job(const std::string& name, Tier tier) const;
  Timeline::Seen expect(int job, const std::string& to, std::size_t from, const std::string& what);
  void settle(double step_ms);
  double measure_step_ms(int job, std::size_t from);
  std::uint64_t checkpoint_bytes(int job, std::int64_t step, std::uint64_t* per_rank);
  double shards_written_ms(const fs::path& node_dir, int job, std::int64_t step,
                           std::chrono::system_clock::time_point t0);
  PreemptRep preempt_once(int victim, bool premium, int n, SizeResult& r);
  void preemption(SizeResult& r);
  void migration(SizeResult& r);
  void raw(SizeResult& r);
  void forget_checkpoints(int job);
  void print(const std::vector<SizeResult>& rs) const;

  Options o_;
  fs::path dir_;
  std::string addr_;
  std::unique_ptr<LocalCluster> cl_;
  const std::string node_names_[2] = {"n1", "n2"};
  int node_pids_[2] = {-1, -1};
  int mem_mib_ = 16;                // per worker, for the largest size
  std::unique_ptr<ClientApi> api_;  // this thread's connection
  Timeline timeline_;
  std::thread watcher_;
  std::atomic<bool> stop_watch_{false};
};

void Bench::die(const std::string& why, int jid) {
  std::fprintf(stderr, "cluster_bench: FAILED: %s\n", why.c_str());
  if (jid >= 0) {
    if (api_) {
      if (auto j = job(jid))
        std::fprintf(stderr, "  job %d is %s, note: %s\n", jid,
                     std::string(orrery::spec::state_name(j->state)).c_str(), j->note.c_str());
    }
    std::fprintf(stderr, "  its last events:\n");
    for (auto& l : timeline_.lines_of(jid, 8)) std::fprintf(stderr, "    %s\n", l.c_str());
  }
  if (auto r = timeline_.end_reason(); !r.empty())
    std::fprintf(stderr, "  the timeline ended: %s\n", r.c_str());
  std::fprintf(stderr, "  logs, journal and checkpoints kept in %s\n", dir_.c_str());
  stop_cluster();
  std::fflush(nullptr);
  std::_Exit(1);
}

void Bench::start_node(int i) {
  const std::string& name = node_names_[i];
  cl_->start_node(name);
  node_pids_[i] = cl_->node_proc(name).pid();
  g_groups[1 + i] = node_pids_[i];
  if (!eventually(o_.timeout_s * 1000, [&] {
        auto ns = api().nodes();
        if (ns.ok())
          for (auto& n : *ns)
            if (n.name == name && n.state == orrery::spec::NodeState::kUp) return true;
        return false;
      }))
    die("node " + name + " did not come Up within " + std::to_string(o_.timeout_s) + " s; its output:\n" +
        cl_->node_proc(name).output());
}

void Bench::start_cluster() {
  const char* tmp = std::getenv("TMPDIR");
  dir_ = fs::path(tmp ? tmp : "/tmp") / ("orrery-cbench-" + std::to_string(::getpid()));
  // The local cluster of the e2e tests: nodes n1, n2 of 2 host devices of 256 MiB, premium reserve
  // 2; a heartbeat timeout that a loaded machine moving 256 MiB shards does not trip.
  cl_ = std::make_unique<LocalCluster>(kBin, kCore, dir_, 2, 5000, o_.device_type);
  // Device memory per worker: one rank of the largest job (parameters, gradients, batch buffers in
  // 64 KiB granules) with room to spare.
  for (int mib : o_.sizes) {
    const Shape s = shape_for(mib);
    mem_mib_ = std::max<int>(mem_mib_, static_cast<int>((2 * s.params() * 4 + (1u << 20)) >> 20) + 16);
  }
  if (mem_mib_ > kDeviceMib)
    die("a worker of the largest size needs " + std::to_string(mem_mib_) + " MiB, the devices have " +
        std::to_string(kDeviceMib));
  if (auto e = cl_->start_core(); !e.empty()) die(e);
  g_groups[0] = cl_->core().pid();
  addr_ = cl_->addr();
  auto c = orrery::rpc::connect_client(addr_, kSecret);
  if (!c.ok()) die("cannot connect to the core at " + addr_ + ": " + c.reason());
  api_ = std::move(*c);
  // The timeline, on a thread of its own (one KJ event loop and connection per thread).
  watcher_ = std::thread([this] {
    auto w = orrery::rpc::connect_client(addr_, kSecret);
    if (!w.ok()) {
      timeline_.end(w.reason());
      return;
    }
    auto st = (*w)->watch(0, [this](const ClusterEvent& e) {
      timeline_.add(e);
      return !stop_watch_.load();
    });
    timeline_.end(st.ok() ? "watch ended" : st.reason());
  });
  start_node(0);  // n2 joins for the migrations only: during the preemptions nothing else is free
}

void Bench::stop_cluster() {
  if (!cl_) return;
  // Agents first (each stops its workers and proxies, which remove their shared memory), then the
  // core; the watcher's connection ends with it.
  stop_watch_ = true;
  cl_->stop_all();
  for (auto& g : g_groups) g = -1;
  if (watcher_.joinable()) watcher_.join();
  cl_->remove_leftovers();  // shared memory of a process that did not get to clean up
}

std::optional<JobStatus> Bench::job(int id) {
  auto js = api().jobs();
  if (!js.ok()) return std::nullopt;
  for (auto& j : *js)
    if (j.job == id) return j;
  return std::nullopt;
}

int Bench::submit(const JobSpec& s) {
  auto r = api().submit(s);
  if (!r.ok()) die("submitting " + s.name + " was refused: " + r.reason());
  return *r;
}

JobSpec Bench::measured_job(const std::string& name, Tier tier, const Shape& sh) const {
  JobSpec s;
  s.name = name;
  s.tier = tier;
  s.world = kWorld;
  s.min_devices = s.max_devices = kWorld;
  s.device_type = o_.device_type;
  s.mem_mib = mem_mib_;
  s.steps = 1 << 30;       // runs until cancelled
  s.checkpoint_every = 0;  // only the cuts measured here
  s.command = {"orrery-train-mlp", "--batch=1", "--din=" + std::to_string(sh.din),
               "--hidden=" + std::to_string(sh.hidden), "--dout=" + std::to_string(sh.dout),
               "--steps=" + std::to_string(s.steps)};
  if (o_.step_delay_us > 0) s.command.push_back("--step-delay-us=" + std::to_string(o_.step_delay_us));
  return s;
}

// The beneficiary: one small worker, which barely loads the machine.
JobSpec Bench::small_job(const std::string& name, Tier tier) const {
  JobSpec s;
  s.name = name;
  s.tier = tier;
  s.world = s.min_devices = s.max_devices = 1;
  s.device_type = o_.device_type;
  s.mem_mib = 16;
  s.steps = 1 << 30;
  s.command = {"orrery-train-mlp", "--din=8", "--hidden=8", "--dout=8", "--step-delay-us=2000",
               "--steps=" + std::to_string(s.steps)};
  return s;
}

Timeline::Seen Bench::expect(int jid, const std::string& change, std::size_t from, const std::string& what) {
  auto s = timeline_.wait(from, std::chrono::seconds(o_.timeout_s), into(jid, change));
  if (!s)
    die(what + ": job " + std::to_string(jid) + " did not go " + change + " within " +
            std::to_string(o_.timeout_s) + " s",
        jid);
  return *s;
}

// Lets a job that just started (or restored) run a couple of steps before the next request.
void Bench::settle(double step_ms) {
  std::this_thread::sleep_for(
      std::chrono::microseconds(static_cast<long>(std::max(200.0, 2 * step_ms) * 1000)));
}

// Step time from the job's Progress decisions (committed at most once a second): the span between
// the first one from `from` on and a later one at least 5 steps or 2 s after it.
double Bench::measure_step_ms(int jid, std::size_t from) {
  auto progress = [jid](const ClusterEvent& e) {
    return e.seq != 0 && e.job == jid && e.text.find(": Progress job ") != std::string::npos;
  };
  std::size_t i = 0;
  auto a = timeline_.wait(from, std::chrono::seconds(o_.timeout_s), progress, &i);
  if (!a)
    die("job " + std::to_string(jid) + " reported no progress within " + std::to_string(o_.timeout_s) + " s",
        jid);
  const std::int64_t s0 = number_after(a->e.text, " step ");
  for (;;) {
    auto b = timeline_.wait(i + 1, std::chrono::seconds(o_.timeout_s), progress, &i);
    if (!b)
      die("job " + std::to_string(jid) + " made no progress within " + std::to_string(o_.timeout_s) + " s",
          jid);
    const std::int64_t s1 = number_after(b->e.text, " step ");
    const double dt = ms_between(a->at, b->at);
    if (s1 > s0 && (s1 - s0 >= 5 || dt >= 2000)) return dt / static_cast<double>(s1 - s0);
  }
}

// The bytes of the job's checkpoint at `step` in the core's store (DATA/checkpoints), all ranks.
std::uint64_t Bench::checkpoint_bytes(int jid, std::int64_t step, std::uint64_t* per_rank) {
  const fs::path d =
      dir_ / "data" / "checkpoints" / ("job-" + std::to_string(jid)) / ("step-" + std::to_string(step));
  std::uint64_t total = 0, largest = 0;
  int files = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d, ec))
    if (e.path().extension() == ".ckpt") {
      const std::uint64_t n = e.file_size(ec);
      total += n;
      largest = std::max(largest, n);
      ++files;
    }
  if (files != kWorld)
    die("expected " + std::to_string(kWorld) + " shards in " + d.string() + ", found " +
            std::to_string(files),
        jid);
  if (per_rank) *per_rank = largest;
  return total;
}

// When the victim's node wrote the last shard of the cut (its modification time: the last write
// before the fdatasync), in ms after t0; -1 when not found.
double Bench::shards_written_ms(const fs::path& node_dir, int jid, std::int64_t step,
                                std::chrono::system_clock::time_point t0) {
  const fs::path d = node_dir / "ckpt" / ("job-" + std::to_string(jid)) / ("step-" + std::to_string(step));
  double latest = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d, ec)) {
    struct stat st {};
    if (e.path().extension() != ".ckpt" || ::stat(e.path().c_str(), &st) != 0) continue;
    const auto m =
        std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
    latest = std::max(latest, std::chrono::duration<double, std::milli>(m - t0).count());
  }
  return latest;
}

// One preemption of the running `victim`: by the client's preempt for a queued basic job (the
// victim's tier, with less attained service: the spec's fair-share rule lets it, and the planner
// leaves it to the operator, as the victim has had less than an hour of service), or by a premium
// job's arrival; then the beneficiary is cancelled and the victim resumes.
Bench::PreemptRep Bench::preempt_once(int victim, bool premium, int n, SizeResult& r) {
  PreemptRep out;
  const std::string tag = std::to_string(r.mib) + "mib-" + std::to_string(n);
  std::size_t from = timeline_.mark();
  int ben = -1;
  Clock::time_point t0;
  std::chrono::system_clock::time_point t0_sys;
  if (!premium) {
    ben = submit(small_job("waiting-" + tag, Tier::kBasic));
    expect(ben, "-> Queued", from, "the beneficiary of a preemption");
    from = timeline_.mark();
    t0_sys = std::chrono::system_clock::now();
    t0 = Clock::now();
    if (auto st = api().preempt(victim, ben); !st.ok())
      die("preempt job " + std::to_string(victim) + " for job " + std::to_string(ben) +
              " was refused: " + st.reason(),
          victim);
  } else {
    t0_sys = std::chrono::system_clock::now();
    t0 = Clock::now();
    ben = submit(small_job("premium-" + tag, Tier::kPremium));
  }
  const auto susp =
      expect(victim, "-> Suspended", from, premium ? "preemption for a premium job" : "preemption");
  const auto run = expect(ben, "Placed -> Running", from, "the preemption's beneficiary");
  out.suspended = ms_between(t0, susp.at);
  out.beneficiary = ms_between(t0, run.at);
  if (auto v = job(victim); !v || v->state != JobState::kSuspended || v->devices != 0)
    die("job " + std::to_string(victim) + " was Suspended but does not show it with no devices held", victim);
  const std::int64_t step = number_after(susp.e.text, "ckpt@");
  r.bytes = checkpoint_bytes(victim, step, &r.rank_bytes);
  out.written = shards_written_ms(dir_ / ("node-" + node_names_[0]), victim, step, t0_sys);
  // The beneficiary leaves: the victim resumes from its checkpoint on the devices it had.
  from = timeline_.mark();
  const auto tc = Clock::now();
  if (auto st = api().cancel(ben); !st.ok())
    die("cancel job " + std::to_string(ben) + ": " + st.reason(), ben);
  expect(ben, "-> Cancelled", from, "cancelling the beneficiary");
  const auto back = expect(victim, "Restoring -> Running", from, "resuming the preempted job");
  r.resume.push_back(ms_between(tc, back.at));
  settle(r.step_ms);
  return out;
}

void Bench::preemption(SizeResult& r) {
  std::size_t from = timeline_.mark();
  const int victim = submit(measured_job("victim-" + std::to_string(r.mib) + "mib", Tier::kBasic, r.shape));
  expect(victim, "Placed -> Running", from, "the job to preempt");
  r.step_ms = measure_step_ms(victim, from);
  for (int k = 0; k < o_.reps; ++k) {
    // The two kinds alternate, so that both see the same conditions.
    auto a = preempt_once(victim, false, 2 * k, r);
    r.api_susp.push_back(a.suspended);
    r.api_ben.push_back(a.beneficiary);
    if (a.written >= 0) r.api_written.push_back(a.written);
    auto p = preempt_once(victim, true, 2 * k + 1, r);
    r.prem_susp.push_back(p.suspended);
    r.prem_ben.push_back(p.beneficiary);
  }
  from = timeline_.mark();
  if (auto st = api().cancel(victim); !st.ok())
    die("cancel job " + std::to_string(victim) + ": " + st.reason(), victim);
  expect(victim, "-> Cancelled", from, "cancelling the preempted job");
  forget_checkpoints(victim);
  // The raw baselines while no job of this program trains (its workers would compete for the cores).
  for (int k = 0; k < o_.reps; ++k) raw(r);
}

void Bench::migration(SizeResult& r) {
  std::size_t from = timeline_.mark();
  const int id = submit(measured_job("mover-" + std::to_string(r.mib) + "mib", Tier::kStandard, r.shape));
  expect(id, "Placed -> Running", from, "the job to migrate");
  settle(r.step_ms);
  for (int k = 0; k < o_.reps; ++k) {
    auto j = job(id);
    if (!j || j->nodes.size() != 1) die("job " + std::to_string(id) + " is not on exactly one node", id);
    const std::string to = j->nodes[0] == node_names_[0] ? node_names_[1] : node_names_[0];
    from = timeline_.mark();
    const auto t0 = Clock::now();
    if (auto st = api().migrate(id, to); !st.ok())
      die("migrate job " + std::to_string(id) + " to " + to + " was refused: " + st.reason(), id);
    // Decided (-> Migrating), the cut stored and the move carried out (Migrating -> Restoring:
    // CheckpointDone ckpt@S), then running on the target (Restoring -> Running).
    expect(id, "-> Migrating", from, "migration");
    const auto mig = expect(id, "Migrating -> Restoring", from, "migration");
    const auto run = expect(id, "Restoring -> Running", from, "migration");
    r.mig_cut.push_back(ms_between(t0, mig.at));
    r.mig_run.push_back(ms_between(t0, run.at));
    j = job(id);
    if (!j || j->nodes != std::vector<std::string>{to})
      die("job " + std::to_string(id) + " is Running again but not on " + to, id);
    r.bytes = checkpoint_bytes(id, number_after(mig.e.text, "ckpt@"), &r.rank_bytes);
    settle(r.step_ms);
  }
  from = timeline_.mark();
  if (auto st = api().cancel(id); !st.ok()) die("cancel job " + std::to_string(id) + ": " + st.reason(), id);
  expect(id, "-> Cancelled", from, "cancelling the migrated job");
  forget_checkpoints(id);
}

// A cancelled job's shards, in the core's store and on the nodes: nothing refers to them any more,
// and the larger sizes would otherwise leave gigabytes behind until the end of the run.
void Bench::forget_checkpoints(int jid) {
  std::error_code ec;
  const std::string j = "job-" + std::to_string(jid);
  fs::remove_all(dir_ / "data" / "checkpoints" / j, ec);
  for (const auto& n : node_names_) fs::remove_all(dir_ / ("node-" + n) / "ckpt" / j, ec);
}

// The raw cost of the checkpoint's bytes here: memcpy between two buffers, write+fdatasync into a
// new file beside the checkpoint store (1 MiB writes, like the shard code), read back.
void Bench::raw(SizeResult& r) {
  const std::size_t n = r.bytes;
  if (n == 0) return;
  const std::size_t chunk = 1 << 20;
  char* a =
      static_cast<char*>(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  char* b =
      static_cast<char*>(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (a == MAP_FAILED || b == MAP_FAILED) die("mmap of " + std::to_string(n) + " bytes failed");
  std::memset(a, 7, n);
  auto t = Clock::now();
  std::memcpy(b, a, n);  // into fresh pages, as a restore faults its pages in too
  r.memcpy_ms.push_back(ms_between(t, Clock::now()));
  ::munmap(b, n);
  const std::string file = (dir_ / "raw.bin").string();
  t = Clock::now();
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (std::size_t off = 0; off < n; off += chunk) {
    const std::size_t len = std::min(chunk, n - off);
    if (fd < 0 || ::write(fd, a + off, len) != static_cast<ssize_t>(len))
      die("raw write " + file + ": " + std::strerror(errno));
  }
  ::fdatasync(fd);
  ::close(fd);
  r.write_ms.push_back(ms_between(t, Clock::now()));
  b = static_cast<char*>(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  t = Clock::now();
  fd = ::open(file.c_str(), O_RDONLY);
  for (std::size_t off = 0; off < n; off += chunk) {
    const std::size_t len = std::min(chunk, n - off);
    if (fd < 0 || ::read(fd, b + off, len) != static_cast<ssize_t>(len))
      die("raw read " + file + ": " + std::strerror(errno));
  }
  ::close(fd);
  r.read_ms.push_back(ms_between(t, Clock::now()));
  ::munmap(a, n);
  ::munmap(b, n);
  fs::remove(file);
}

void Bench::print(const std::vector<SizeResult>& rs) const {
  // A cell is "median max" in ms, 15 characters; a header cell names it on two lines.
  auto mm = [](const std::vector<double>& v) {
    char buf[40];
    const Stat s = summary(v);
    if (v.empty())
      std::snprintf(buf, sizeof buf, "%15s", "-");
    else
      std::snprintf(buf, sizeof buf, "%7.0f %7.0f", s.med, s.max);
    return std::string(buf);
  };
  auto head = [](std::initializer_list<const char*> cells) {
    std::string out;
    for (const char* c : cells) {
      char buf[40];
      std::snprintf(buf, sizeof buf, " %15s", c);
      out += buf;
    }
    return out;
  };
  auto mib = [](std::uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::printf(
      "\nstate: the job's checkpoint as stored in DATA/checkpoints (%d shards: allocations in 64 KiB "
      "granules, host state, headers, CRC);\ntimes in ms from the request, median and max over %d reps\n",
      kWorld, o_.reps);
  std::printf(
      "\npreemption (victim: basic, W=%d on n1's 2 devices, n2 not started; beneficiary: 1 small worker)\n",
      kWorld);
  std::printf("%-8s %-14s %9s %8s |%s |%s |%s\n", "", "", "", "",
              head({"client preempt:", "victim", "beneficiary"}).c_str(),
              head({"premium submit:", "premium job"}).c_str(), head({"resume: cancel"}).c_str());
  std::printf("%-8s %-14s %9s %8s |%s |%s |%s\n", "size", "MLP (batch 1)", "state MiB", "step ms",
              head({"shards written", "Suspended", "Running"}).c_str(),
              head({"victim Susp.", "Running"}).c_str(), head({"-> Running"}).c_str());
  for (const auto& r : rs) {
    char shape[40];
    std::snprintf(shape, sizeof shape, "%llu-%llu-%llu", (unsigned long long)r.shape.din,
                  (unsigned long long)r.shape.hidden, (unsigned long long)r.shape.dout);
    std::printf("%4d MiB %-14s %9.2f %8.1f | %s %s %s | %s %s | %s\n", r.mib, shape, mib(r.bytes), r.step_ms,
                mm(r.api_written).c_str(), mm(r.api_susp).c_str(), mm(r.api_ben).c_str(),
                mm(r.prem_susp).c_str(), mm(r.prem_ben).c_str(), mm(r.resume).c_str());
  }
  std::printf("\nmigration (standard job, W=%d, from n1 to n2 and back; client migrate to the other node)\n",
              kWorld);
  std::printf("%-8s %9s |%s\n", "", "", head({"-> Restoring", "-> Running", "of which"}).c_str());
  std::printf("%-8s %9s |%s\n", "size", "state MiB",
              head({"(cut stored)", "on the other", "Rest.->Running"}).c_str());
  for (const auto& r : rs) {
    std::vector<double> restore;
    for (std::size_t i = 0; i < r.mig_run.size(); ++i) restore.push_back(r.mig_run[i] - r.mig_cut[i]);
    std::printf("%4d MiB %9.2f | %s %s %s\n", r.mib, mib(r.bytes), mm(r.mig_cut).c_str(),
                mm(r.mig_run).c_str(), mm(restore).c_str());
  }
  std::printf(
      "\nraw cost of the same bytes in this process (medians, ms), and its share of the medians above\n");
  std::printf("%-8s %9s | %8s %10s %8s %10s | %18s %18s\n", "", "", "", "write+", "read", "write+",
              "raw / preempt", "raw / migrate");
  std::printf("%-8s %9s | %8s %10s %8s %10s | %18s %18s\n", "size", "state MiB", "memcpy", "fdatasync",
              "back", "sync+read", "-> Suspended", "-> Running");
  for (const auto& r : rs) {
    const double cp = summary(r.memcpy_ms).med, wr = summary(r.write_ms).med, rd = summary(r.read_ms).med;
    const double tot = wr + rd, pre = summary(r.api_susp).med, mig = summary(r.mig_run).med;
    std::printf("%4d MiB %9.2f | %8.1f %10.1f %8.1f %10.1f | %17.0f%% %17.0f%%\n", r.mib, mib(r.bytes), cp,
                wr, rd, tot, pre > 0 ? 100 * tot / pre : 0.0, mig > 0 ? 100 * tot / mig : 0.0);
  }
}

int Bench::run() {
  {
    std::ifstream la("/proc/loadavg");
    std::string l1, l5;
    la >> l1 >> l5;
    std::printf("cluster_bench: %u cores, load average %s (1 min) %s (5 min) at start; %d reps; sizes",
                std::thread::hardware_concurrency(), l1.c_str(), l5.c_str(), o_.reps);
    for (int s : o_.sizes) std::printf(" %d", s);
    std::printf(" MiB\n");
  }
  const auto t_start = Clock::now();
  start_cluster();
  std::printf(
      "cluster: orrery-core serve and 2 orrery-node agents (n1, n2) with 2 host devices of %d MiB each, "
      "loopback; data in %s\n",
      kDeviceMib, dir_.c_str());
  std::fflush(stdout);
  std::vector<SizeResult> rs;
  for (int mib : o_.sizes) {
    SizeResult r;
    r.mib = mib;
    r.shape = shape_for(mib);
    const auto t = Clock::now();
    preemption(r);
    std::printf("  preemption, %d MiB: done in %.1f s\n", mib, ms_between(t, Clock::now()) / 1e3);
    std::fflush(stdout);
    rs.push_back(std::move(r));
  }
  start_node(1);
  for (auto& r : rs) {
    const auto t = Clock::now();
    migration(r);
    std::printf("  migration, %d MiB: done in %.1f s\n", r.mib, ms_between(t, Clock::now()) / 1e3);
    std::fflush(stdout);
  }
  print(rs);
  {
    std::ifstream la("/proc/loadavg");
    std::string l1;
    la >> l1;
    std::printf("\ntotal %.1f s; load average %s (1 min) at the end\n",
                ms_between(t_start, Clock::now()) / 1e3, l1.c_str());
  }
  stop_cluster();
  if (!o_.keep) fs::remove_all(dir_);
  return 0;
}

bool parse_int(const std::string& s, long lo, long hi, long* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  auto bad = [](const std::string& why) {
    std::fprintf(stderr, "cluster_bench: %s (--help lists the options)\n", why.c_str());
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    const std::string key = a.substr(0, eq), val = eq == std::string::npos ? "" : a.substr(eq + 1);
    long v = 0;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--keep") {
      o.keep = true;
    } else if (key == "--reps" && parse_int(val, 1, 1000, &v)) {
      o.reps = static_cast<int>(v);
    } else if (key == "--timeout-s" && parse_int(val, 1, 3600, &v)) {
      o.timeout_s = static_cast<int>(v);
    } else if (key == "--step-delay-us" && parse_int(val, 0, 10'000'000, &v)) {
      o.step_delay_us = v;
    } else if (key == "--device-type" && !val.empty()) {
      o.device_type = val;
    } else if (key == "--sizes" && !val.empty()) {
      o.sizes.clear();
      std::stringstream ss(val);
      for (std::string item; std::getline(ss, item, ',');) {
        if (!parse_int(item, 1, kMaxMib, &v))
          return bad("--sizes: '" + item + "' is not a size in MiB in 1.." + std::to_string(kMaxMib));
        o.sizes.push_back(static_cast<int>(v));
      }
    } else {
      return bad("bad argument '" + a + "'");
    }
  }
  for (int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, on_signal);
  Bench b(o);
  return b.run();
}
