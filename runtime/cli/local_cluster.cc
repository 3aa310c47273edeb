#include "runtime/cli/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/cli/commands.h"
#include "runtime/cli/ports.h"
#include "runtime/cli/supervisor.h"

namespace orrery::cli {
namespace {

namespace fs = std::filesystem;

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

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The last `n` lines of a log, indented, for a failure message: the log's path alone is not
// enough when the reader has to go and find it.
std::string log_tail(const std::string& path, std::size_t n) {
  std::ifstream f(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(f, line);) {
    lines.push_back(line);
    if (lines.size() > n) lines.pop_front();
  }
  if (lines.empty()) return "    (empty)\n";
  std::string out;
  for (const auto& l : lines) out += "    " + l + "\n";
  return out;
}

std::string fleet_text(const UpOptions& o) {
  std::ostringstream f;
  f << "# written by orrery up: " << o.nodes << " nodes of " << o.devices << " host devices\n"
    << "premium_reserve " << o.devices << "\n"
    << "region local\ncluster local\n";
  for (int i = 1; i <= o.nodes; ++i)
    f << "node node" << i << " host_mem_mib=65536\n"
      << "devices host count=" << o.devices << " mem_mib=" << o.device_mem_mib << "\n";
  return f.str();
}

// A usable address for --listen or --metrics: parsed, port 0 made a free port, and free now.
Result<ListenAddress> free_address(const std::string& text, const char* flag) {
  auto a = parse_listen_address(text);
  if (!a.ok()) return a.status().with_reason(std::string(flag) + " " + a.reason());
  auto chosen = with_free_port(*a);
  if (!chosen.ok()) return chosen.status().with_reason(std::string(flag) + " " + chosen.reason());
  if (auto st = check_can_listen(*chosen); !st.ok()) {
    std::string reason = std::string(flag) + " " + st.reason();
    if (st.code() == StatusCode::kUnavailable)
      reason += std::string("; stop what holds it, or choose another address with ") + flag +
                " (port 0: a free one)";
    return st.with_reason(reason);
  }
  return chosen;
}

}  // namespace

int run_up(const UpOptions& o, std::ostream& out, std::ostream& err) {
  for (const auto& b : {o.core_bin, o.node_bin}) {
    if (::access(b.c_str(), X_OK) != 0) {
      err << "orrery up: " << b << " not found (orrery up runs the binaries beside orrery; --core-bin, --node-bin)\n";
      return kExitUnreachable;
    }
  }
  // The ports first: a cluster that cannot have them must not print a banner, nor touch the data.
  auto listen = free_address(o.listen, "--listen");
  if (!listen.ok()) {
    err << "orrery up: " << listen.reason() << "\n";
    return exit_code(listen.code());
  }
  std::optional<ListenAddress> metrics;
  if (!o.metrics.empty()) {
    auto m = free_address(o.metrics, "--metrics");
    if (!m.ok()) {
      err << "orrery up: " << m.reason() << "\n";
      return exit_code(m.code());
    }
    if (m->port == listen->port) {
      err << "orrery up: --metrics " << m->text() << " and --listen " << listen->text()
          << " name the same port\n";
      return kExitUsage;
    }
    metrics = *m;
  }
  // What the nodes and clients connect to: a wildcard listener is reached on loopback.
  const std::string core_address =
      listen->host == "*" ? "127.0.0.1:" + std::to_string(listen->port) : listen->text();

  std::string data = o.data;
  const bool temp = data.empty();
  if (temp) {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/orrery-up-XXXXXX";
    if (!::mkdtemp(tmpl.data())) {
      err << "orrery up: cannot create a data directory under " << tmpl << ": " << std::strerror(errno) << "\n";
      return kExitUnreachable;
    }
    data = tmpl;
  }
  std::error_code ec;
  fs::create_directories(data + "/logs", ec);
  if (ec) {
    err << "orrery up: cannot create " << data << "/logs: " << ec.message() << "\n";
    return kExitUnreachable;
  }
  data = fs::absolute(data).string();
  const bool again = fs::exists(data + "/core/journal", ec);

  // A folder of an earlier cluster is started again as it was: its fleet is in the core's journal,
  // which refuses another one, so a different shape is refused here, with the flags to change.
  const std::string fleet_path = data + "/fleet.txt";
  const std::string fleet = fleet_text(o);
  if (fs::exists(fleet_path, ec)) {
    const std::string before = read_file(fleet_path);
    if (before != fleet) {
      const std::string first = before.substr(0, before.find('\n'));
      err << "orrery up: " << data << " holds another cluster (" << fleet_path << ": \"" << first
          << "\"); start it with the --nodes, --devices and --device-mem-mib it was made with, or use another --data\n";
      return kExitUnreachable;
    }
  } else {
    std::ofstream f(fleet_path);
    f << fleet;
    if (!f) {
      err << "orrery up: cannot write " << fleet_path << "\n";
      return kExitUnreachable;
    }
  }
  // The secret is kept across restarts of the folder: clients that read it before still log in.
  const std::string secret_path = data + "/secret";
  std::string secret = read_file(secret_path);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == ' ')) secret.pop_back();
  if (secret.empty()) {
    secret = random_secret();
    ::unlink(secret_path.c_str());
    int fd = ::open(secret_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    const std::string line = secret + "\n";
    if (secret.empty() || fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      err << "orrery up: cannot write the secret " << secret_path << "\n";
      if (fd >= 0) ::close(fd);
      return kExitUnreachable;
    }
    ::close(fd);
  }

  Supervisor sup(BackoffPolicy{}, err);
  const Millis grace(o.grace_ms);
  // A failure keeps the data directory, temporary or not: the logs it points at must still exist.
  auto failed = [&]() {
    sup.stop(grace);
    if (temp) err << "orrery up: kept " << data << " (logs in " << data << "/logs/)\n";
    return kExitUnreachable;
  };
  auto stopped = [&](int sig) {
    out << "orrery up: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping\n" << std::flush;
    sup.stop(grace);
    if (temp) fs::remove_all(data, ec);
    return kExitOk;
  };
  auto start = [&](const std::string& name, const std::string& label, std::vector<std::string> args) {
    auto st = sup.start({name, label, std::move(args), data + "/logs/" + name + ".log"});
    if (!st.ok()) err << "orrery up: " << st.reason() << "\n";
    return st.ok();
  };

  std::vector<std::string> core_args = {o.core_bin,  "serve",          "--listen", listen->text(),
                                        "--data",    data + "/core", "--secret", secret_path,
                                        "--fleet",   fleet_path};
  if (metrics) {
    core_args.push_back("--metrics");
    core_args.push_back(metrics->text());
  }
  fs::create_directories(data + "/core", ec);
  if (!start("core", "core", core_args)) return failed();
  // Wait for the core to listen before starting nodes (they would retry, but a core that fails to
  // start should be reported as such, not as nodes failing to connect). The socket must be the
  // core's own: a port taken by someone else since it was checked also accepts connections. Only
  // then are exits restarts: a core that cannot start at all would fail the same way again.
  const std::string core_log = data + "/logs/core.log";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!process_listens_on(sup.pid("core"), listen->port) || !accepts_connections(*listen)) {
    if (int sig = sup.wait(Millis(50))) return stopped(sig);
    if (auto st = sup.exit_status("core")) {
      err << "orrery up: orrery-core serve exited (" << describe_exit(*st) << ") before it listened on "
          << listen->text() << "; " << core_log << " ends:\n" << log_tail(core_log, 10);
      return failed();
    }
    if (std::chrono::steady_clock::now() > deadline) {
      err << "orrery up: orrery-core serve is not listening on " << listen->text() << " after 15 s; "
          << core_log << " ends:\n" << log_tail(core_log, 10);
      return failed();
    }
  }
  sup.set_restarting(true);
  for (int i = 1; i <= o.nodes; ++i) {
    const std::string name = "node" + std::to_string(i);
    fs::create_directories(data + "/" + name, ec);
    if (!start(name, "node " + name,
               {o.node_bin, "--core", core_address, "--name", name, "--secret", secret_path, "--data",
                data + "/" + name, "--devices", std::to_string(o.devices), "--device-mem-mib",
                std::to_string(o.device_mem_mib)}))
      return failed();
  }

  out << "orrery up: core on " << listen->text() << ", " << o.nodes << " node(s) of " << o.devices
      << " host device(s); data in " << data
      << (temp ? " (temporary: removed when orrery up stops)"
               : " (kept: `orrery up --data " + data + "` starts this cluster again)")
      << "\n";
  if (again) out << "  started again: the core recovers its jobs from " << data << "/core/journal\n";
  if (metrics) out << "  metrics: http://" << metrics->text() << "/metrics\n";
  out << "  logs: " << data << "/logs/\n"
      << "  export ORRERY_CORE=" << core_address << " ORRERY_SECRET_FILE=" << secret_path << "\n"
      << "  then: orrery nodes; orrery submit examples/jobs/premium.toml; orrery ls\n"
      << "A node agent or the core that dies is restarted. Ctrl-C stops the cluster.\n"
      << std::flush;

  while (true) {
    if (int sig = sup.wait(Millis(1000))) return stopped(sig);
  }
}

}  // namespace orrery::cli
