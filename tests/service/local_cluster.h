// A local cluster of real processes on loopback for tests and benchmarks: orrery-core serve and
// orrery-node agents (each with its proxies and workers in its own process group), a fleet of
// 2-device host nodes, and client calls over Cap'n Proto. Start-up helpers return "" or what went
// wrong, so that GoogleTest fixtures, RapidCheck properties and benchmarks can all report it their
// own way.
#pragma once

#include <future>
#include <map>
#include <optional>
#include <regex>

#include "rpc/client_connection.h"
#include "tests/service/cluster_harness.h"

namespace orrery::testing {

class LocalCluster {
 public:
  // `bin`: the directory of orrery-node, orrery-proxy and orrery-train-mlp; `core`: orrery-core.
  // The fleet has `nodes` nodes n1..nN of 2 devices (256 MiB each) of `device_type`: "host"
  // devices emulated in host memory, any other type served by the cuda backend (orrery-node).
  LocalCluster(std::string bin, std::string core, std::filesystem::path dir, int nodes = 2,
               int heartbeat_timeout_ms = 1500, std::string device_type = "host")
      : bin_(std::move(bin)), core_bin_(std::move(core)), dir_(std::move(dir)),
        heartbeat_timeout_ms_(heartbeat_timeout_ms), device_type_(std::move(device_type)) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    write(dir_ / "secret", "test-secret\n");
    std::string fleet = "premium_reserve 2\nregion local\ncluster c1\n";
    for (int i = 1; i <= nodes; ++i)
      fleet += "node n" + std::to_string(i) + " host_mem_mib=4096\ndevices " + device_type_ +
               " count=2 mem_mib=256\n";
    write(dir_ / "fleet", fleet);
  }
  // Stops every process cleanly (SIGTERM: agents stop their proxies, which remove their shared
  // memory), then removes what killed machines left in /dev/shm.
  ~LocalCluster() {
    stop_all();
    remove_leftovers();
    if (remove_dir_) std::filesystem::remove_all(dir_);
  }
  // Removes the shared memory that SIGKILLed machines of this cluster left behind.
  void remove_leftovers() {
    std::error_code ec;
    for (const auto& n : segments(true)) std::filesystem::remove("/dev/shm/" + n, ec);
  }
  // The directory goes too when the cluster is destroyed (keep it to look at a failure).
  void remove_dir_when_done() { remove_dir_ = true; }
  void stop_all() {
    for (auto& [name, p] : nodes_) p.terminate(5000);
    nodes_.clear();
    core_.terminate(5000);
  }
  // This cluster's collective segments in /dev/shm (/orrery-CLUSTERID-..., after DATA/cluster_id),
  // and with `devices` also its proxies' (/orrery-NODE-AGENTPID-devD of every agent started).
  std::vector<std::string> segments(bool devices = false) const {
    std::string id = read_file((dir_ / "data" / "cluster_id").string());
    while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.pop_back();
    std::vector<std::string> prefixes;
    if (!id.empty()) prefixes.push_back("orrery-" + id + "-");
    if (devices) prefixes.insert(prefixes.end(), agent_prefixes_.begin(), agent_prefixes_.end());
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
      auto n = e.path().filename().string();
      for (const auto& p : prefixes)
        if (n.rfind(p, 0) == 0) out.push_back(n);
    }
    return out;
  }
  static void write(const std::filesystem::path& p, const std::string& s) { std::ofstream(p) << s; }

  // Starts orrery-core serve on `port` (0: any); "" once it serves, else why not.
  std::string start_core(int port = 0) {
    std::string log = (dir_ / ("core-" + std::to_string(core_starts_++) + ".log")).string();
    core_ = Proc({core_bin_, "serve", "--listen", "127.0.0.1:" + std::to_string(port), "--data",
                  (dir_ / "data").string(), "--secret", (dir_ / "secret").string(), "--fleet",
                  (dir_ / "fleet").string(), "--metrics", "127.0.0.1:0", "--heartbeat-timeout-ms",
                  std::to_string(heartbeat_timeout_ms_)},
                 log);
    if (!eventually(10000, [&] { return read_file(log).find("metrics on") != std::string::npos; }))
      return "orrery-core serve did not come up:\n" + read_file(log);
    port_ = port_after(read_file(log), "listening on ");
    metrics_port_ = port_after(read_file(log), "metrics on http://");
    addr_ = "127.0.0.1:" + std::to_string(port_);
    return "";
  }
  // Kills the core (the whole process group) with `sig`; its exit status.
  int kill_core(int sig = SIGKILL) { return core_.kill_group(sig); }
  Proc& core() { return core_; }

  void start_node(const std::string& name, const std::string& secret_file = "secret") {
    nodes_[name] = Proc({bin_ + "/orrery-node", "--core", addr_, "--name", name, "--secret",
                         (dir_ / secret_file).string(), "--data", (dir_ / ("node-" + name)).string(),
                         "--devices", "2", "--device-mem-mib", "256", "--device-type", device_type_},
                        (dir_ / (name + ".log")).string());
    agent_prefixes_.push_back("orrery-" + name + "-" + std::to_string(nodes_[name].pid()) + "-");
  }
  // SIGKILLs the agent and everything it started (proxies, workers): the machine dies.
  void kill_node(const std::string& name) { nodes_[name].kill_group(SIGKILL); }
  Proc& node_proc(const std::string& name) { return nodes_[name]; }

  // Runs `f(ClientApi&)` with a fresh client connection on its own thread (one KJ event loop per
  // thread). With the core down, `f` is not run and a default value comes back.
  template <class F>
  auto with_client(F f) {
    return std::async(std::launch::async, [this, f] {
             auto api = rpc::connect_client(addr_, "test-secret");
             using R = decltype(f(**api));
             if (!api.ok()) return R{Status::Error(api.reason())};
             return f(**api);
           })
        .get();
  }
  std::vector<service::NodeStatus> nodes() {
    auto r = with_client([](service::ClientApi& c) { return c.nodes(); });
    return r.ok() ? *r : std::vector<service::NodeStatus>{};
  }
  // Every job the core knows, or nullopt when it cannot be asked.
  std::optional<std::vector<service::JobStatus>> jobs() {
    auto r = with_client([](service::ClientApi& c) { return c.jobs(); });
    if (!r.ok()) return std::nullopt;
    return *r;
  }
  std::optional<service::JobStatus> job(int id) {
    auto js = jobs();
    if (!js) return std::nullopt;
    for (auto& j : *js)
      if (j.job == id) return j;
    return std::nullopt;
  }
  bool job_in(int id, spec::JobState state) {
    auto j = job(id);
    return j && j->state == state;
  }
  bool node_up(const std::string& name) {
    for (auto& n : nodes())
      if (n.name == name) return n.state == spec::NodeState::kUp;
    return false;
  }
  Result<int> submit(const service::JobSpec& s) {
    return with_client([s](service::ClientApi& c) { return c.submit(s); });
  }
  // The job's timeline, one line per transition.
  std::string timeline(int id) {
    auto r = with_client([id](service::ClientApi& c) { return c.logs(id, 1000000); });
    std::string all;
    if (r.ok())
      for (auto& l : *r) all += l + "\n";
    return all;
  }
  std::string metrics() { return http_get(metrics_port_, "/metrics"); }
  // Waits for the job to complete while it makes progress: false when it ends otherwise, when
  // neither its state nor its step changes for `stall_ms`, or after `max_ms` in all (a job cut
  // and resumed for ever changes all the time; below ctest's 120 s, so that the test fails with
  // its message and cleans up). A fixed 30-40 s deadline failed jobs that were only slow on a
  // loaded machine.
  bool completes(int id, int stall_ms = 20000, int max_ms = 90000) {
    std::optional<std::pair<spec::JobState, std::int64_t>> seen;
    const auto start = std::chrono::steady_clock::now();
    auto last_change = start;
    for (;;) {
      auto j = job(id);
      if (j && j->state == spec::JobState::kCompleted) return true;
      if (j && (j->state == spec::JobState::kFailed || j->state == spec::JobState::kCancelled)) return false;
      const auto now = std::chrono::steady_clock::now();
      if (j && (!seen || *seen != std::pair(j->state, j->progress))) {
        seen = std::pair(j->state, j->progress);
        last_change = now;
      } else if (now - last_change > std::chrono::milliseconds(stall_ms)) {
        return false;
      }
      if (now - start > std::chrono::milliseconds(max_ms)) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // What a failed wait on a job prints: its state, progress and note, then its timeline.
  std::string describe(int id) {
    auto r = job(id);
    if (!r) return "job " + std::to_string(id) + ": not known to the core, or the core not reachable";
    return "job " + std::to_string(id) + ": " + std::string(spec::state_name(r->state)) + ", step " +
           std::to_string(r->progress) + ", checkpoint " + std::to_string(r->checkpoint) + ", note '" + r->note +
           "'\n" + timeline(id);
  }

  // The digest of the uninterrupted reference run of the MLP workload.
  std::string reference_digest(int world, int steps) const {
    std::string cmd = bin_ + "/orrery-train-mlp --reference --world=" + std::to_string(world) +
                      " --steps=" + std::to_string(steps);
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
    return digest_of(out);
  }
  static std::string digest_of(const std::string& note) {
    std::smatch m;
    if (std::regex_search(note, m, std::regex("digest=([0-9a-f]+)"))) return m[1];
    return "none: " + note;
  }
  // A data-parallel MLP job of world 2, elastic over 1..2 devices: the built-in workload's
  // command, orrery-train-mlp ARGS... --steps=STEPS.
  static service::JobSpec mlp_job(const std::string& name, int steps, int every,
                                  std::vector<std::string> args = {}) {
    auto s = elastic_pair(name, steps, every, 16);
    s.command = {"orrery-train-mlp"};
    s.command.insert(s.command.end(), args.begin(), args.end());
    s.command.push_back("--steps=" + std::to_string(steps));
    return s;
  }

  // examples/pytorch/train_orrery.py as a transparent job of world 2, elastic over 1..2 devices (the
  // shape of mlp_job): a small model (`--width 8 --hidden 64 --batch 4`), STEPS steps, a periodic
  // checkpoint every EVERY. `source_dir`: the repository (the script and its workdir).
  static service::JobSpec pytorch_job(const std::string& name, const std::string& source_dir,
                                      int steps, int every) {
    auto s = elastic_pair(name, steps, every, 64);
    const std::string dir = source_dir + "/examples/pytorch";
    s.command = {"/usr/bin/python3", dir + "/train_orrery.py", "--steps", std::to_string(steps),
                 "--width", "8", "--hidden", "64", "--batch", "4", "--log-every", "100000"};
    s.workdir = dir;
    return s;
  }
  // The spec both jobs above share: world 2, elastic over 1..2 devices, MEM MiB a worker, STEPS
  // steps, a periodic checkpoint every EVERY; its program is the caller's.
  static service::JobSpec elastic_pair(const std::string& name, int steps, int every, int mem) {
    service::JobSpec s;
    s.name = name;
    s.world = 2;
    s.min_devices = 1;
    s.max_devices = 2;
    s.mem_mib = mem;
    s.steps = steps;
    s.checkpoint_every = every;
    return s;
  }
  // All that rank `rank` of `job` wrote (every incarnation), as the core keeps it; "" when it
  // cannot be read.
  std::string rank_output(int job, int rank) {
    std::string all;
    std::uint64_t off = 0;
    for (int i = 0; i < 4096; ++i) {
      auto r = with_client([&](service::ClientApi& c) { return c.output(job, rank, off, 1u << 20); });
      if (!r.ok() || r->data.empty()) break;
      all += r->data;
      off = r->next_offset;
      if (off >= r->size) break;
    }
    return all;
  }
  // The last "digest HEX" line a PyTorch rank printed, or "none".
  static std::string printed_digest(const std::string& out) {
    std::string d = "none";
    static const std::regex re("(^|\n)digest ([0-9a-f]+)(?=\n|$)");
    for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) d = (*it)[2];
    return d;
  }

  const std::filesystem::path& dir() const { return dir_; }
  const std::string& addr() const { return addr_; }
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }

 private:
  std::string bin_, core_bin_;
  std::filesystem::path dir_;
  int heartbeat_timeout_ms_;
  std::string device_type_;
  bool remove_dir_ = false;
  Proc core_;
  std::map<std::string, Proc> nodes_;
  std::vector<std::string> agent_prefixes_;  // of the proxies' segments, one per agent started
  int core_starts_ = 0;
  int port_ = 0, metrics_port_ = 0;
  std::string addr_;
};

}  // namespace orrery::testing
