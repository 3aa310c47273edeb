#include "runtime/cli/local_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace orrery::cli {
namespace {

namespace fs = std::filesystem;

struct Child {
  std::string name;  // "core", "node1", ...
  pid_t pid = -1;    // also its process group: its own proxies and workers are in it
  bool running = false;
  int status = 0;
};

std::string random_secret() {
  unsigned char b[32];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  std::size_t got = 0;
  while (fd >= 0 && got < sizeof b) {
    ssize_t n = ::read(fd, b + got, sizeof b - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (fd >= 0) ::close(fd);
  if (got < sizeof b) return {};
  std::string hex;
  static const char* digits = "0123456789abcdef";
  for (unsigned char c : b) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

// Starts `argv` in its own process group with stdout and stderr to `log`; the signals the parent
// blocks are unblocked again, and the child is sent SIGTERM should the parent die.
pid_t spawn(const std::vector<std::string>& args, const std::string& log, const sigset_t& old_mask) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid != 0) {
    if (pid > 0) ::setpgid(pid, pid);  // also in the child: whichever runs first
    return pid;
  }
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ::execv(argv[0], argv.data());
  ::dprintf(2, "orrery up: cannot run %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

bool tcp_ready(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  int port = std::atoi(address.c_str() + colon + 1);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  if (host == "localhost") host = "127.0.0.1";
  if (::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) return false;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

void reap(std::vector<Child>& children) {
  for (auto& c : children) {
    if (!c.running) continue;
    int st = 0;
    pid_t r = ::waitpid(c.pid, &st, WNOHANG);
    if (r == c.pid) {
      c.running = false;
      c.status = st;
    }
  }
}

std::string describe_exit(int st) {
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by ") + ::strsignal(WTERMSIG(st));
  return "stopped";
}

// SIGTERM to every child's group (nodes first, so they stop their workers while the core is still
// there to hear it; the core last), SIGKILL to what is left after `grace_ms`, and every child
// reaped. The groups are signalled even after their leader exited: a proxy or worker left behind
// in a group is killed too.
void stop_all(std::vector<Child>& children, int grace_ms, std::ostream& out) {
  for (auto it = children.rbegin(); it != children.rend(); ++it) ::kill(-it->pid, SIGTERM);
  // A group is gone once its leader is reaped and kill(-pgid, 0) finds no member left.
  auto group_alive = [](const Child& c) { return c.running || ::kill(-c.pid, 0) == 0; };
  auto wait_groups = [&](std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
      reap(children);
      bool any = false;
      for (const auto& c : children) any = any || group_alive(c);
      if (!any || std::chrono::steady_clock::now() >= deadline) return any;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  if (!wait_groups(std::chrono::milliseconds(grace_ms))) return;
  for (auto& c : children) {
    if (!group_alive(c)) continue;
    out << "orrery up: " << c.name << (c.running ? "" : "'s processes") << " did not stop in "
        << grace_ms << " ms: SIGKILL\n";
    ::kill(-c.pid, SIGKILL);
  }
  for (auto& c : children) {
    if (c.running) {
      int st = 0;
      while (::waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {
      }
      c.running = false;
      c.status = st;
    }
  }
  // Members other than the leader are reparented and reaped by init: give that a moment, so that
  // when orrery up returns nothing it started is left.
  wait_groups(std::chrono::milliseconds(2000));
}

}  // namespace

int run_up(const UpOptions& o, std::ostream& out, std::ostream& err) {
  const std::string& core_bin = o.core_bin;
  const std::string& node_bin = o.node_bin;
  for (const auto& b : {core_bin, node_bin}) {
    if (::access(b.c_str(), X_OK) != 0) {
      err << "orrery up: " << b << " not found (orrery up runs the binaries beside orrery; --core-bin, --node-bin)\n";
      return 2;
    }
  }
  std::string data = o.data;
  const bool temp = data.empty();
  if (temp) {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/orrery-up-XXXXXX";
    if (!::mkdtemp(tmpl.data())) {
      err << "orrery up: cannot create a data directory under " << tmpl << ": " << std::strerror(errno) << "\n";
      return 2;
    }
    data = tmpl;
  }
  std::error_code ec;
  fs::create_directories(data + "/logs", ec);
  if (ec) {
    err << "orrery up: cannot create " << data << "/logs: " << ec.message() << "\n";
    return 2;
  }
  data = fs::absolute(data).string();

  const std::string secret_path = data + "/secret";
  const std::string secret = random_secret();
  {
    ::unlink(secret_path.c_str());
    int fd = ::open(secret_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    const std::string line = secret + "\n";
    if (secret.empty() || fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      err << "orrery up: cannot write the secret " << secret_path << "\n";
      if (fd >= 0) ::close(fd);
      return 2;
    }
    ::close(fd);
  }
  const std::string fleet_path = data + "/fleet.txt";
  {
    std::ofstream f(fleet_path);
    f << "# written by orrery up: " << o.nodes << " nodes of " << o.devices << " host devices\n"
      << "premium_reserve " << o.devices << "\n"
      << "region local\ncluster local\n";
    for (int i = 1; i <= o.nodes; ++i)
      f << "node node" << i << " host_mem_mib=65536\n"
        << "devices host count=" << o.devices << " mem_mib=" << o.device_mem_mib << "\n";
    if (!f) {
      err << "orrery up: cannot write " << fleet_path << "\n";
      return 2;
    }
  }

  // Signals are taken synchronously (sigtimedwait) so that shutdown runs in ordinary code. A shell
  // starts background jobs with SIGINT ignored: restore the default so it is delivered (blocked).
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGCHLD);
  ::pthread_sigmask(SIG_BLOCK, &mask, &old_mask);

  std::vector<Child> children;
  auto start = [&](const std::string& name, std::vector<std::string> args) {
    pid_t pid = spawn(args, data + "/logs/" + name + ".log", old_mask);
    if (pid < 0) {
      err << "orrery up: cannot start " << name << ": " << std::strerror(errno) << "\n";
      return false;
    }
    children.push_back({name, pid, true, 0});
    return true;
  };
  auto finish = [&](int rc) {
    stop_all(children, o.grace_ms, err);
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    if (temp) fs::remove_all(data, ec);
    return rc;
  };

  std::vector<std::string> core_args = {core_bin,     "serve",  "--listen",   o.listen,
                                        "--data",     data + "/core", "--secret", secret_path,
                                        "--fleet",    fleet_path};
  if (!o.metrics.empty()) {
    core_args.push_back("--metrics");
    core_args.push_back(o.metrics);
  }
  fs::create_directories(data + "/core", ec);
  if (!start("core", core_args)) return finish(2);
  // Wait for the core to listen before starting nodes (they would retry, but a core that fails to
  // start should be reported as such, not as nodes failing to connect).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!tcp_ready(o.listen)) {
    reap(children);
    if (!children[0].running) {
      err << "orrery up: orrery-core serve " << describe_exit(children[0].status) << "; see "
          << data << "/logs/core.log\n";
      return finish(2);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      err << "orrery up: orrery-core serve is not listening on " << o.listen << " after 15 s; see "
          << data << "/logs/core.log\n";
      return finish(2);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int i = 1; i <= o.nodes; ++i) {
    const std::string name = "node" + std::to_string(i);
    fs::create_directories(data + "/" + name, ec);
    if (!start(name, {node_bin, "--core", o.listen, "--name", name, "--secret", secret_path,
                      "--data", data + "/" + name, "--devices", std::to_string(o.devices),
                      "--device-mem-mib", std::to_string(o.device_mem_mib)}))
      return finish(2);
  }

  out << "orrery up: core on " << o.listen << ", " << o.nodes << " node(s) of " << o.devices
      << " host device(s); data in " << data << (temp ? " (removed on exit)" : "") << "\n"
      << "  logs: " << data << "/logs/\n"
      << "  export ORRERY_CORE=" << o.listen << " ORRERY_SECRET_FILE=" << secret_path << "\n"
      << "  then: orrery nodes; orrery submit examples/jobs/premium.toml; orrery ls\n"
      << "Ctrl-C stops the cluster.\n"
      << std::flush;

  while (true) {
    siginfo_t info{};
    timespec ts{1, 0};
    int sig = ::sigtimedwait(&mask, &info, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      out << "orrery up: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping\n" << std::flush;
      return finish(0);
    }
    // SIGCHLD or the periodic check: who exited?
    reap(children);
    for (auto& c : children) {
      if (c.running || c.status == -1) continue;
      err << "orrery up: " << c.name << " " << describe_exit(c.status) << "; see " << data
          << "/logs/" << c.name << ".log\n";
      if (&c == &children[0]) return finish(2);
      c.status = -1;  // reported; a lost node is the cluster's to handle
    }
  }
}

}  // namespace orrery::cli
