#include "runtime/node/node_runtime.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "runtime/node/output_tail.h"
#include "runtime/node/worker_spawn.h"
#include "runtime/proxy/collective.h"
#include "runtime/proxy/ring.h"
#include "runtime/proxy/shard.h"
#include "runtime/worker/worker.h"
#include "spec/limits.h"

namespace orrery::runtime {

std::string default_collective_name(int job, std::int64_t epoch) {
  return "/orrery-coll-j" + std::to_string(job) + "-e" + std::to_string(epoch);
}

namespace {

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "node" : out;
}

struct ProxyProc {
  int device = 0;
  pid_t pid = -1;
  std::string shm;
  std::string log;
  ShmMapping map;
  ProxySegment* seg = nullptr;
  bool dead = false;
};

struct RankProc {
  int rank = 0;
  int device = 0;
  pid_t pid = -1;
  bool exited = false;
  int status = 0;
  int slot = -1;  // in its proxy's segment, once found
  std::int64_t steps = 0, ckpt = -1, busy_ns = 0;
  bool hello = false;
  std::string result;
  std::string log;
};

struct JobRun {
  int job = 0;
  std::int64_t epoch = 0;
  int world = 0;
  spec::Preemption mode = spec::Preemption::kTransparent;
  std::int64_t grace_ms = 0;
  // A cut of a signal or requeue job: the ranks were signalled; SIGKILL at kill_at.
  bool cutting = false;
  std::chrono::steady_clock::time_point kill_at{}, last_busy{};
  std::string collective;
  std::vector<RankProc> ranks;
  std::int64_t reported_steps = 0;
  std::int64_t reported_ckpt = -1;
  std::int64_t reported_busy_ns = 0;
  bool started = false;
};

class LocalNodeRuntime final : public NodeRuntime {
 public:
  explicit LocalNodeRuntime(NodeRuntimeOptions o) : opt_(std::move(o)) {}
  ~LocalNodeRuntime() override;

  Status start_proxies();
  Status spawn_proxy(ProxyProc& p);
  Status wait_ready(ProxyProc& p);
  Status launch(const LaunchSpec& spec) override;
  Status checkpoint(int job, std::int64_t epoch, std::int64_t at_step, bool then_stop) override;
  Status stop(int job, std::int64_t epoch) override;
  std::vector<std::pair<int, std::int64_t>> running() const override;
  std::vector<JobEvent> poll() override;
  std::string shard_path(int job, std::int64_t step, int rank) const override {
    return shard_file(opt_.data_dir + "/ckpt", job, step, rank);
  }
  std::vector<OutputChunk> take_output(std::size_t max_bytes) override {
    std::lock_guard<std::mutex> l(mu_);
    return tail_.take(max_bytes);
  }

 private:
  Status fence(int job, std::int64_t epoch, const char* what) const;
  Status send(ProxyProc& p, const Command& c);
  void end_run(JobRun& run, bool kill_workers);
  Status cut_by_signal(JobRun& run, bool then_stop);
  // A signal or requeue job's cut is over (every rank exited): marker shards, kCheckpointed.
  void finish_signal_cut(JobRun& run);
  void refresh(JobRun& run);
  void emit(JobEvent::Kind k, const JobRun& run, std::int64_t step, std::string detail,
            std::int64_t gpu_ms = 0) {
    events_.push_back(JobEvent{k, run.job, run.epoch, step, gpu_ms, std::move(detail)});
  }
  // A crash that is the platform's (the proxy, the node's disk), not the job's program's.
  void emit_platform_fault(const JobRun& run, std::string detail) {
    emit(JobEvent::Kind::kCrashed, run, run.reported_steps, std::move(detail));
    events_.back().platform = true;
  }

  NodeRuntimeOptions opt_;
  mutable std::mutex mu_;
  std::vector<ProxyProc> proxies_;
  std::map<int, JobRun> runs_;
  std::map<int, std::int64_t> newest_;
  std::deque<JobEvent> events_;
  OutputTail tail_;  // every rank's log, followed for take_output()
};

LocalNodeRuntime::~LocalNodeRuntime() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [j, run] : runs_) end_run(run, true);
  runs_.clear();
  for (auto& p : proxies_) {
    if (p.pid > 0 && !p.dead) {
      ::kill(p.pid, SIGTERM);
      int st = 0;
      for (int i = 0; i < 200 && ::waitpid(p.pid, &st, WNOHANG) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (i == 199) {
          ::kill(p.pid, SIGKILL);
          ::waitpid(p.pid, &st, 0);
        }
      }
    }
    ::shm_unlink(p.shm.c_str());
  }
}

Status LocalNodeRuntime::start_proxies() {
  if (opt_.devices <= 0 || opt_.devices > spec::kMaxAgentDevices)
    return Status::Error("devices must be in 1.." + std::to_string(spec::kMaxAgentDevices));
  if (opt_.device_mem_mib <= 0) return Status::Error("device_mem_mib must be positive");
  if (opt_.data_dir.empty()) return Status::Error("data_dir is empty");
  std::error_code ec;
  std::filesystem::create_directories(opt_.data_dir + "/logs", ec);
  std::filesystem::create_directories(opt_.data_dir + "/ckpt", ec);
  if (ec) return Status::Error("cannot create " + opt_.data_dir + ": " + ec.message());
  const std::string bin = opt_.bin_dir + "/" + kProxyBinary;
  if (::access(bin.c_str(), X_OK) != 0) return Status::Error(bin + " is not an executable");
  // Segments left by earlier runtimes of this node name that were killed (a SIGKILLed proxy
  // cannot remove its own): /orrery-<node>-<pid>-dev<D> whose <pid> is gone.
  const std::string prefix = "orrery-" + sanitize(opt_.node_name) + "-";
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) != 0 || n.find("-dev", prefix.size()) == std::string::npos) continue;
    const long pid = std::atol(n.c_str() + prefix.size());
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      ::shm_unlink(("/" + n).c_str());
    }
  }
  ec.clear();
  const std::string base = "/orrery-" + sanitize(opt_.node_name) + "-" + std::to_string(::getpid());
  for (int d = 0; d < opt_.devices; ++d) {
    ProxyProc p;
    p.device = d;
    p.shm = base + "-dev" + std::to_string(d);
    p.log = opt_.data_dir + "/logs/proxy-dev" + std::to_string(d) + ".log";
    proxies_.push_back(std::move(p));
    if (auto st = spawn_proxy(proxies_.back()); !st) return st;
  }
  for (auto& p : proxies_) {
    if (auto st = wait_ready(p); !st) return st;
  }
  return Status::Ok();
}

Status LocalNodeRuntime::spawn_proxy(ProxyProc& p) {
  ::shm_unlink(p.shm.c_str());  // a leftover of a dead proxy or a crashed runtime of the same pid
  p.map = ShmMapping();
  p.seg = nullptr;
  SpawnSpec sp;
  sp.argv = {opt_.bin_dir + "/" + kProxyBinary, "--shm", p.shm, "--device", std::to_string(p.device),
             "--mem-mib", std::to_string(opt_.device_mem_mib), "--backend", opt_.backend, "--ckpt-dir",
             opt_.data_dir + "/ckpt", "--parent-pid", std::to_string(::getpid())};
  sp.log = p.log;
  auto pid = spawn_process(sp);
  if (!pid) return pid.status();
  p.pid = *pid;
  p.dead = false;
  return Status::Ok();
}

// Waits until the proxy's segment is there and ready.
Status LocalNodeRuntime::wait_ready(ProxyProc& p) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto m = ShmMapping::open(p.shm, sizeof(ProxySegment));
    if (m.ok()) {
      auto* seg = static_cast<ProxySegment*>(m->data());
      if (seg->header.ready.load(std::memory_order_acquire) == 1 &&
          seg->header.pid == static_cast<std::int32_t>(p.pid)) {
        p.map = std::move(m.value());
        p.seg = seg;
        return Status::Ok();
      }
    }
    int st = 0;
    if (::waitpid(p.pid, &st, WNOHANG) == p.pid) {
      p.dead = true;
      return Status::Error("orrery-proxy for device " + std::to_string(p.device) + " " +
                           exit_text(st) + ": " + last_lines(p.log, 1));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(p.pid, SIGKILL);
      ::waitpid(p.pid, &st, 0);
      p.dead = true;
      return Status::Error("orrery-proxy for device " + std::to_string(p.device) +
                           " not ready within 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Status LocalNodeRuntime::fence(int job, std::int64_t epoch, const char* what) const {
  auto it = newest_.find(job);
  if (it != newest_.end() && epoch < it->second) {
    return Status::Error(std::string(what) + " refused: job " + std::to_string(job) + " epoch " +
                         std::to_string(epoch) + " is older than epoch " +
                         std::to_string(it->second) + " (fenced)");
  }
  return Status::Ok();
}

Status LocalNodeRuntime::send(ProxyProc& p, const Command& c) {
  if (p.dead || p.seg == nullptr) return Status::Error("the proxy of device " + std::to_string(p.device) + " is gone");
  ProxyHeader& h = p.seg->header;
  const std::uint32_t head = h.cmd_head.load(std::memory_order_relaxed);
  if (head - h.cmd_tail.load(std::memory_order_acquire) >= static_cast<std::uint32_t>(kCommandDepth)) {
    return Status::Error("the proxy of device " + std::to_string(p.device) + " is not taking commands");
  }
  h.cmds[head % kCommandDepth] = c;
  h.cmd_head.store(head + 1, std::memory_order_release);
  h.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (h.proxy_sleeping.load(std::memory_order_seq_cst) != 0) futex_wake(&h.doorbell);
  return Status::Ok();
}

Status LocalNodeRuntime::launch(const LaunchSpec& spec) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = fence(spec.job, spec.epoch, "launch"); !s) return s;
  // Every (re)start has a new, larger epoch: launching an epoch already launched here would run
  // an incarnation twice.
  if (auto it = newest_.find(spec.job); it != newest_.end() && spec.epoch == it->second) {
    return Status::Error("launch refused: job " + std::to_string(spec.job) + " epoch " +
                         std::to_string(spec.epoch) + " was launched here already (fenced)");
  }
  if (auto it = runs_.find(spec.job); it != runs_.end()) {
    return Status::Error("launch refused: job " + std::to_string(spec.job) + " epoch " +
                         std::to_string(it->second.epoch) + " still runs here");
  }
  if (spec.job < 0) return Status::Error("launch: job id must not be negative");
  if (spec.world <= 0 || spec.world > spec::kMaxRunWorld)
    return Status::Error("launch: world must be in 1.." + std::to_string(spec::kMaxRunWorld));
  if (spec.command.empty()) return Status::InvalidArgument("launch: no command");
  const std::string workdir = spec.workdir.empty() ? opt_.data_dir : spec.workdir;
  if (auto st = check_directory(workdir, "workdir"); !st) return st;
  const char* path_env = std::getenv("PATH");
  auto program = resolve_program(spec.command[0], workdir, opt_.bin_dir, path_env ? path_env : "");
  if (!program) return program.status();
  const std::string ckpt_dir = spec.checkpoint_dir.empty()
                                   ? opt_.data_dir + "/user/job-" + std::to_string(spec.job)
                                   : spec.checkpoint_dir;
  {
    std::error_code ec;
    std::filesystem::create_directories(ckpt_dir, ec);
    if (ec) return Status::FailedPrecondition("checkpoint dir " + ckpt_dir + ": " + ec.message());
  }
  if (spec.local.empty()) return Status::Error("launch: no local placement");
  if (spec.mode != spec::Preemption::kTransparent)
    for (const auto& lp : spec.local)
      if (lp.ranks.size() != 1)
        return Status::InvalidArgument(std::string("launch: a ") +
                                       std::string(spec::preemption_name(spec.mode)) +
                                       " job runs one rank per device (only transparent jobs are spliced)");
  std::set<int> seen_ranks, seen_devices;
  for (const auto& lp : spec.local) {
    if (lp.device < 0 || lp.device >= static_cast<int>(proxies_.size())) {
      return Status::Error("launch: device " + std::to_string(lp.device) + " out of range (this node has " +
                           std::to_string(proxies_.size()) + ")");
    }
    if (!seen_devices.insert(lp.device).second) return Status::Error("launch: device listed twice");
    if (lp.ranks.empty()) return Status::Error("launch: a device with no ranks");
    for (int r : lp.ranks) {
      if (r < 0 || r >= spec.world) return Status::Error("launch: rank " + std::to_string(r) + " out of range");
      if (!seen_ranks.insert(r).second) return Status::Error("launch: rank " + std::to_string(r) + " placed twice");
      if (spec.restore_step >= 0 && ::access(shard_path(spec.job, spec.restore_step, r).c_str(), R_OK) != 0) {
        return Status::Error("launch: no checkpoint shard " + shard_path(spec.job, spec.restore_step, r));
      }
    }
    if (proxies_[lp.device].dead) return Status::Error("launch: the proxy of device " + std::to_string(lp.device) + " is gone");
  }
  std::string coll = spec.collective.empty() ? default_collective_name(spec.job, spec.epoch) : spec.collective;
  const bool tcp = coll.rfind("tcp://", 0) == 0;
  if (coll.size() > 200 ||
      (!tcp && (coll.size() < 2 || coll[0] != '/' || coll.find('/', 1) != std::string::npos))) {
    return Status::Error("launch: collective name '" + coll +
                         "' is neither a shm name like /name nor tcp://HOST:PORT/ID");
  }
  JobRun run;
  run.job = spec.job;
  run.epoch = spec.epoch;
  run.world = spec.world;
  run.collective = coll;
  run.mode = spec.mode;
  run.grace_ms = spec.grace_ms;
  run.last_busy = std::chrono::steady_clock::now();
  int local_world = 0;
  for (const auto& lp : spec.local) local_world += static_cast<int>(lp.ranks.size());
  const int master_port =
      spec.master_port > 0 ? spec.master_port
                           : 29500 + static_cast<int>((spec.job * 97 + spec.epoch) % 2000);
  // What every rank sees (docs/pytorch.md): orrery's variables, torch.distributed's, then the job's
  // own (which win). orrery's Python package comes first on PYTHONPATH.
  std::vector<std::string> common = {
      "ORRERY_JOB=" + std::to_string(spec.job), "ORRERY_EPOCH=" + std::to_string(spec.epoch),
      "ORRERY_WORLD=" + std::to_string(spec.world), "ORRERY_COLLECTIVE=" + coll,
      "ORRERY_RESTORE_STEP=" + std::to_string(spec.restore_step),
      "ORRERY_CHECKPOINT_DIR=" + ckpt_dir,
      "ORRERY_RESTART_COUNT=" + std::to_string(spec.restart_count),
      "ORRERY_PREEMPTION=" + std::string(spec::preemption_name(spec.mode)),
      "WORLD_SIZE=" + std::to_string(spec.world), "LOCAL_WORLD_SIZE=" + std::to_string(local_world),
      "MASTER_ADDR=" + spec.master_addr, "MASTER_PORT=" + std::to_string(master_port),
      "PYTHONUNBUFFERED=1"};
  {
    const char* pp = std::getenv("PYTHONPATH");
    std::string py = opt_.bin_dir + "/../python";
    for (const auto& e : spec.env)
      if (e.rfind("PYTHONPATH=", 0) == 0) pp = e.c_str() + 11;
    if (pp != nullptr && *pp != '\0') py += std::string(":") + pp;
    common.push_back("PYTHONPATH=" + py);
  }
  for (const auto& e : spec.env)
    if (e.rfind("PYTHONPATH=", 0) != 0) common.push_back(e);
  int local_rank = 0;
  run.reported_steps = spec.restore_step > 0 ? spec.restore_step : 0;
  run.reported_ckpt = spec.restore_step;
  for (const auto& lp : spec.local) {
    std::string splice;
    for (std::size_t i = 0; i < lp.ranks.size(); ++i) splice += (i ? "," : "") + std::to_string(lp.ranks[i]);
    for (int r : lp.ranks) {
      RankProc rp;
      rp.rank = r;
      rp.device = lp.device;
      rp.steps = run.reported_steps;
      rp.ckpt = spec.restore_step;
      rp.log = opt_.data_dir + "/logs/job-" + std::to_string(spec.job) + "-epoch-" +
               std::to_string(spec.epoch) + "-rank-" + std::to_string(r) + ".log";
      SpawnSpec sp;
      sp.argv = spec.command;
      sp.argv[0] = *program;
      sp.workdir = workdir;
      sp.log = rp.log;
      sp.env = {"ORRERY_PROXY=" + proxies_[lp.device].shm, "ORRERY_RANK=" + std::to_string(r),
                "ORRERY_SPLICE=" + splice, "RANK=" + std::to_string(r),
                "LOCAL_RANK=" + std::to_string(local_rank++)};
      // `common` ends with the job's own variables: last, so they win over orrery's.
      sp.env.insert(sp.env.end(), common.begin(), common.end());
      auto pid = spawn_process(sp);
      if (!pid) {
        end_run(run, true);
        return pid.status();
      }
      rp.pid = *pid;
      tail_.add(spec.job, spec.epoch, r, rp.log);
      run.ranks.push_back(rp);
    }
  }
  newest_[spec.job] = spec.epoch;
  runs_.emplace(spec.job, std::move(run));
  return Status::Ok();
}

Status LocalNodeRuntime::checkpoint(int job, std::int64_t epoch, std::int64_t at_step, bool then_stop) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = fence(job, epoch, "checkpoint"); !s) return s;
  auto it = runs_.find(job);
  if (it == runs_.end() || it->second.epoch != epoch) {
    return Status::Error("checkpoint: job " + std::to_string(job) + " epoch " + std::to_string(epoch) +
                         " does not run here");
  }
  refresh(it->second);
  if (it->second.mode != spec::Preemption::kTransparent) return cut_by_signal(it->second, then_stop);
  std::int64_t furthest = 0;
  for (const auto& r : it->second.ranks) furthest = std::max(furthest, r.steps);
  if (at_step == 0 || (at_step > 0 && at_step <= furthest)) {
    // The boundary is behind a rank already (or is the start): it would never be cut.
    return Status::Error("checkpoint: job " + std::to_string(job) + " is past step " +
                         std::to_string(at_step) + " (at step " + std::to_string(furthest) +
                         " here); ask for a later boundary or the next one (at_step < 0)");
  }
  std::set<int> devices;
  for (const auto& r : it->second.ranks) devices.insert(r.device);
  Command c{CommandKind::kCheckpoint, job, epoch, at_step, then_stop ? 1u : 0u};
  for (int d : devices) {
    if (auto s = send(proxies_[d], c); !s) return s;
  }
  return Status::Ok();
}

// A signal job's cut: SIGTERM to every local rank, SIGKILL after the grace period (poll()); a
// requeue job's: SIGKILL now. Only a cut that stops the job exists for them: the program saves
// itself (or not), orrery cannot ask it to save and go on.
Status LocalNodeRuntime::cut_by_signal(JobRun& run, bool then_stop) {
  if (!then_stop)
    return Status::FailedPrecondition("checkpoint: job " + std::to_string(run.job) + " is a " +
                                      std::string(spec::preemption_name(run.mode)) +
                                      " job: orrery takes no checkpoint of it without stopping it");
  if (run.cutting) return Status::Ok();
  run.cutting = true;
  const bool requeue = run.mode == spec::Preemption::kRequeue;
  run.kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(requeue ? 0 : run.grace_ms);
  for (auto& r : run.ranks)
    if (!r.exited) ::kill(r.pid, requeue ? SIGKILL : SIGTERM);
  return Status::Ok();
}

void LocalNodeRuntime::finish_signal_cut(JobRun& run) {
  // One empty shard per local rank at the step the core knows, so that the cut is committed and
  // restored like any other (restoring it restores nothing: the program reads its own files).
  for (const auto& r : run.ranks) {
    ShardMeta meta;
    meta.job = run.job;
    meta.epoch = run.epoch;
    meta.step = run.reported_steps;
    meta.rank = r.rank;
    meta.world = run.world;
    const std::string path = shard_path(run.job, run.reported_steps, r.rank);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    auto w = ShardWriter::open(path, meta);
    if (!w || !w->finish()) {
      emit_platform_fault(run, "cannot write the marker shard " + path + (w ? "" : ": " + w.reason()));
      return;
    }
  }
  int lowest = run.ranks[0].rank;
  for (const auto& r : run.ranks) lowest = std::min(lowest, r.rank);
  emit(JobEvent::Kind::kCheckpointed, run, run.reported_steps, shard_path(run.job, run.reported_steps, lowest));
  emit(JobEvent::Kind::kStopped, run, run.reported_steps,
       run.mode == spec::Preemption::kRequeue ? "killed (requeue: restarts from scratch)"
                                              : "stopped by SIGTERM (signal: resumes from its own checkpoint)");
}

Status LocalNodeRuntime::stop(int job, std::int64_t epoch) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = fence(job, epoch, "stop"); !s) return s;
  auto it = runs_.find(job);
  if (it == runs_.end() || it->second.epoch != epoch) {
    return Status::Error("stop: job " + std::to_string(job) + " epoch " + std::to_string(epoch) +
                         " does not run here");
  }
  JobRun& run = it->second;
  refresh(run);
  end_run(run, true);
  emit(JobEvent::Kind::kStopped, run, run.reported_steps, "killed on request (no checkpoint)");
  runs_.erase(it);
  return Status::Ok();
}

std::vector<std::pair<int, std::int64_t>> LocalNodeRuntime::running() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<int, std::int64_t>> out;
  for (const auto& [j, r] : runs_) out.emplace_back(j, r.epoch);
  return out;
}

void LocalNodeRuntime::end_run(JobRun& run, bool kill_workers) {
  tail_.finish(run.job, run.epoch);  // its logs are followed until read to the end
  for (auto& r : run.ranks) {
    if (r.pid > 0 && !r.exited) {
      if (kill_workers) ::kill(r.pid, SIGKILL);
      int st = 0;
      ::waitpid(r.pid, &st, 0);
      r.exited = true;
      r.status = st;
    }
  }
  std::set<int> devices;
  for (const auto& r : run.ranks) devices.insert(r.device);
  for (int d : devices) {
    (void)send(proxies_[d], Command{CommandKind::kFreeJob, run.job, run.epoch, -1, 0});
  }
  // Release the slots this incarnation's workers held (their result has been read).
  for (auto& r : run.ranks) {
    if (r.slot >= 0 && !proxies_[r.device].dead) {
      WorkerSlot& ws = proxies_[r.device].seg->slots[r.slot];
      std::uint32_t closed = static_cast<std::uint32_t>(SlotState::kClosed);
      if (ws.job == run.job && ws.epoch == run.epoch && ws.rank == r.rank) {
        ws.state.compare_exchange_strong(closed, static_cast<std::uint32_t>(SlotState::kFree));
      }
    }
  }
  if (run.collective.rfind("tcp://", 0) != 0) Collective::unlink(run.collective);
}

void LocalNodeRuntime::refresh(JobRun& run) {
  for (auto& r : run.ranks) {
    ProxyProc& p = proxies_[r.device];
    if (p.dead) continue;
    if (r.slot < 0) {
      for (int i = 0; i < kMaxWorkers; ++i) {
        const WorkerSlot& ws = p.seg->slots[i];
        if (ws.state.load(std::memory_order_acquire) != 0 && ws.job == run.job &&
            ws.epoch == run.epoch && ws.rank == r.rank && ws.pid == r.pid) {
          r.slot = i;
          break;
        }
      }
      if (r.slot < 0) continue;
    }
    const WorkerSlot& ws = p.seg->slots[r.slot];
    if (ws.pid != r.pid || ws.job != run.job || ws.epoch != run.epoch) continue;  // reused
    r.hello = r.hello || ws.hello_done.load(std::memory_order_acquire) == 1;
    r.steps = std::max<std::int64_t>(r.steps, ws.steps_done.load(std::memory_order_acquire));
    r.ckpt = std::max<std::int64_t>(r.ckpt, ws.checkpointed.load(std::memory_order_acquire));
    r.busy_ns = std::max<std::int64_t>(r.busy_ns, ws.busy_ns.load(std::memory_order_relaxed));
    if (ws.result[0] != '\0') r.result.assign(ws.result, strnlen(ws.result, sizeof ws.result));
  }
}

std::vector<JobEvent> LocalNodeRuntime::poll() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& p : proxies_) {
    int st = 0;
    if (!p.dead && p.pid > 0 && ::waitpid(p.pid, &st, WNOHANG) == p.pid) {
      p.dead = true;
      for (auto it = runs_.begin(); it != runs_.end();) {
        bool uses = false;
        for (const auto& r : it->second.ranks) uses = uses || r.device == p.device;
        if (uses) {
          emit_platform_fault(it->second, "the proxy of device " + std::to_string(p.device) + " " + exit_text(st));
          end_run(it->second, true);
          it = runs_.erase(it);
        } else {
          ++it;
        }
      }
      // The device stays usable: a fresh proxy takes it over (its jobs restart from their
      // checkpoints with new epochs, as the core decides). If that fails it stays gone.
      if (spawn_proxy(p).ok() && !wait_ready(p).ok()) p.dead = true;
    }
  }
  for (auto it = runs_.begin(); it != runs_.end();) {
    JobRun& run = it->second;
    for (auto& r : run.ranks) {
      int st = 0;
      if (!r.exited && ::waitpid(r.pid, &st, WNOHANG) == r.pid) {
        r.exited = true;
        r.status = st;
      }
    }
    refresh(run);
    const bool own_lib = run.mode == spec::Preemption::kTransparent;
    if (!own_lib) {
      const auto now = std::chrono::steady_clock::now();
      if (run.cutting && now >= run.kill_at)
        for (auto& r : run.ranks)
          if (!r.exited) ::kill(r.pid, SIGKILL);  // the grace period is over
      bool all_gone = true;
      for (const auto& r : run.ranks) all_gone = all_gone && r.exited;
      if (run.cutting && all_gone) {
        finish_signal_cut(run);
        end_run(run, true);
        it = runs_.erase(it);
        continue;
      }
      // A program outside the worker library reports no steps; its service is its wall time on
      // the devices it holds, accounted every few seconds.
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - run.last_busy).count();
      if (run.started && ms >= 5000 && !run.cutting) {
        std::set<int> devs;
        for (const auto& r : run.ranks) devs.insert(r.device);
        emit(JobEvent::Kind::kProgress, run, run.reported_steps, "", ms * static_cast<std::int64_t>(devs.size()));
        run.last_busy = now;
      }
    }
    bool all_hello = true, all_exited = true;
    std::int64_t min_steps = INT64_MAX, min_ckpt = INT64_MAX, busy = 0;
    const RankProc* crashed = nullptr;
    for (const auto& r : run.ranks) {
      all_hello = all_hello && (r.hello || r.exited || !own_lib);
      all_exited = all_exited && r.exited;
      min_steps = std::min(min_steps, r.steps);
      min_ckpt = std::min(min_ckpt, r.ckpt);
      busy += r.busy_ns;
      const bool clean = r.exited && WIFEXITED(r.status) &&
                         (WEXITSTATUS(r.status) == 0 || (own_lib && WEXITSTATUS(r.status) == kExitStopped));
      if (r.exited && !clean && crashed == nullptr && !run.cutting) crashed = &r;
    }
    if (!run.started && all_hello && crashed == nullptr) {
      run.started = true;
      emit(JobEvent::Kind::kStarted, run, run.reported_steps, "");
    }
    if (min_ckpt > run.reported_ckpt && min_ckpt >= 0) {
      run.reported_ckpt = min_ckpt;
      int lowest = run.ranks[0].rank;
      for (const auto& r : run.ranks) lowest = std::min(lowest, r.rank);
      emit(JobEvent::Kind::kCheckpointed, run, min_ckpt, shard_path(run.job, min_ckpt, lowest));
    }
    if (min_steps > run.reported_steps && own_lib) {
      run.reported_steps = min_steps;
      emit(JobEvent::Kind::kProgress, run, min_steps, "", (busy - run.reported_busy_ns) / 1'000'000);
      run.reported_busy_ns = busy;
    }
    bool done = false;
    if (crashed != nullptr) {
      std::string detail = "rank " + std::to_string(crashed->rank) + " (pid " +
                           std::to_string(crashed->pid) + ") " + exit_text(crashed->status);
      const std::string tail = last_lines(crashed->log, 5, 1024);
      if (!tail.empty()) detail += ": " + tail;
      emit(JobEvent::Kind::kCrashed, run, run.reported_steps, detail);
      done = true;
    } else if (all_exited) {
      bool stopped = false;
      for (const auto& r : run.ranks) stopped = stopped || (own_lib && WEXITSTATUS(r.status) == kExitStopped);
      if (stopped) {
        emit(JobEvent::Kind::kStopped, run, run.reported_steps, "stopped after the checkpoint of step " +
                                                                     std::to_string(run.reported_ckpt));
      } else {
        const RankProc* first = &run.ranks[0];
        for (const auto& r : run.ranks) first = r.rank < first->rank ? &r : first;
        emit(JobEvent::Kind::kCompleted, run, run.reported_steps, first->result);
      }
      done = true;
    }
    if (done) {
      end_run(run, true);
      it = runs_.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<JobEvent> out(events_.begin(), events_.end());
  events_.clear();
  return out;
}

}  // namespace

Result<std::unique_ptr<NodeRuntime>> start_node_runtime(const NodeRuntimeOptions& options) {
  auto rt = std::make_unique<LocalNodeRuntime>(options);
  if (auto s = rt->start_proxies(); !s) return s;
  return std::unique_ptr<NodeRuntime>(std::move(rt));
}

}  // namespace orrery::runtime
