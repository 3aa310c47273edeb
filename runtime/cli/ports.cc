#include "runtime/cli/ports.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace orrery::cli {
namespace {

namespace fs = std::filesystem;

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// The address to bind (`for_connect` false) or to connect to. "*" is every interface, reached on
// loopback; a name is resolved, and its first address taken (as the core's listener does).
Result<SocketAddress> resolve(const ListenAddress& a, bool for_connect) {
  SocketAddress out;
  if (a.host == "*") {
    auto* in = reinterpret_cast<sockaddr_in*>(&out.storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<std::uint16_t>(a.port));
    in->sin_addr.s_addr = htonl(for_connect ? INADDR_LOOPBACK : INADDR_ANY);
    out.len = sizeof(sockaddr_in);
    return out;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(a.port);
  if (int rc = ::getaddrinfo(a.host.c_str(), port.c_str(), &hints, &res); rc != 0 || !res) {
    return Status::InvalidArgument(a.text() + ": cannot resolve " + a.host + ": " +
                                   (rc != 0 ? ::gai_strerror(rc) : "no address"));
  }
  std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> cmdline(pid_t pid) {
  std::vector<std::string> args;
  std::string raw = read_text("/proc/" + std::to_string(pid) + "/cmdline");
  std::size_t start = 0;
  while (start < raw.size()) {
    std::size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    args.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

pid_t parent_of(pid_t pid) {
  // /proc/PID/stat: "PID (COMM) STATE PPID ...", COMM may hold spaces and parentheses.
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream ss(stat.substr(paren + 1));
  std::string state;
  long ppid = 0;
  ss >> state >> ppid;
  return static_cast<pid_t>(ppid);
}

std::string base_name(const std::string& path) { return fs::path(path).filename().string(); }

// The inodes (and owners' uids) of the sockets listening on TCP `port`, IPv4 and IPv6.
std::vector<std::pair<std::string, long>> listening_sockets(int port) {
  std::vector<std::pair<std::string, long>> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // the header
    while (std::getline(f, line)) {
      std::istringstream ss(line);
      std::string sl, local, remote, state, queues, timer, retransmits, timeout, inode;
      long uid = -1;
      ss >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (!ss || state != "0A") continue;  // 0A: LISTEN
      const auto colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      if (std::strtol(local.c_str() + colon + 1, nullptr, 16) == port) found.emplace_back(inode, uid);
    }
  }
  return found;
}

std::string describe(pid_t pid, bool& orrery) {
  const auto args = cmdline(pid);
  std::string name = args.empty() ? "" : base_name(args[0]);
  if (name.empty()) {
    name = read_text("/proc/" + std::to_string(pid) + "/comm");
    while (!name.empty() && name.back() == '\n') name.pop_back();
  }
  orrery = name == "orrery-core";
  if (!orrery) return name + " (pid " + std::to_string(pid) + ")";
  std::string d = name + (args.size() > 1 && args[1] == "serve" ? " serve" : "") + " (pid " +
                  std::to_string(pid);
  for (std::size_t i = 1; i + 1 < args.size(); ++i)
    if (args[i] == "--data") d += ", data " + args[i + 1];
  d += ")";
  // `orrery up` names its core's parent: the process to stop (Ctrl-C where it runs).
  if (pid_t parent = parent_of(pid); parent > 1) {
    const auto pargs = cmdline(parent);
    bool up = false;
    for (std::size_t i = 1; i < pargs.size(); ++i) up = up || pargs[i] == "up";
    if (!pargs.empty() && base_name(pargs[0]) == "orrery" && up)
      d += ", started by orrery up (pid " + std::to_string(parent) + ")";
  }
  return d;
}

// Whether one of the file descriptors of the process at `proc` (/proc/PID) is one of `sockets`.
bool holds_one_of(const fs::path& proc, const std::vector<std::pair<std::string, long>>& sockets) {
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator(proc / "fd", ec)) {
    std::error_code lec;
    const std::string target = fs::read_symlink(fd.path(), lec).string();
    if (lec) continue;
    for (const auto& s : sockets)
      if (target == "socket:[" + s.first + "]") return true;
  }
  return false;
}

}  // namespace

std::string ListenAddress::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ListenAddress> parse_listen_address(const std::string& text) {
  ListenAddress a;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return Status::InvalidArgument("address " + text + ": expected [IPV6]:PORT");
    a.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos)
      return Status::InvalidArgument("address " + text + ": expected HOST:PORT");
    a.host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (a.host.find(':') != std::string::npos)
      return Status::InvalidArgument("address " + text + ": an IPv6 host goes in brackets, [HOST]:PORT");
  }
  if (a.host.empty()) return Status::InvalidArgument("address " + text + ": no host (* for every interface)");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535)
    return Status::InvalidArgument("address " + text + ": the port must be a number in 0..65535");
  a.port = std::stoi(port);
  return a;
}

std::optional<PortHolder> port_holder(int port) {
  const auto sockets = listening_sockets(port);
  if (sockets.empty()) return std::nullopt;
  std::error_code ec;
  for (const auto& proc : fs::directory_iterator("/proc", ec)) {
    const std::string pid_text = proc.path().filename().string();
    if (pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    if (!holds_one_of(proc.path(), sockets)) continue;
    PortHolder h;
    h.pid = static_cast<pid_t>(std::stol(pid_text));
    h.description = describe(h.pid, h.orrery);
    return h;
  }
  // Listening, but in no process this user may look into.
  PortHolder h;
  const long uid = sockets.front().second;
  h.description = uid >= 0 && uid != static_cast<long>(::getuid())
                      ? "a process of user id " + std::to_string(uid)
                      : "another process";
  return h;
}

Status check_can_listen(const ListenAddress& address) {
  auto sa = resolve(address, false);
  if (!sa.ok()) return sa.status();
  const int fd = ::socket(sa->family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(address.text() + ": socket: " + std::strerror(errno));
  // As the core's listener (kj sets SO_REUSEADDR): connections of an earlier core left in
  // TIME_WAIT do not make the port busy, a listening socket does.
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int error = 0;
  if (::bind(fd, sa->get(), sa->len) != 0 || ::listen(fd, 1) != 0) error = errno;
  ::close(fd);
  switch (error) {
    case 0:
      return Status::Ok();
    case EADDRINUSE: {
      std::string reason = address.text() + " is in use";
      if (auto h = port_holder(address.port))
        reason += (h->orrery ? " by another orrery: " : " by ") + h->description;
      return Status::Unavailable(reason);
    }
    case EADDRNOTAVAIL:
      return Status::InvalidArgument(address.text() + ": " + address.host +
                                     " is not an address of this machine");
    case EACCES:
      return Status::PermissionDenied(address.text() + ": a port below 1024 needs privileges");
    default:
      return Status::Unavailable(address.text() + ": cannot listen: " + std::strerror(error));
  }
}

Result<ListenAddress> with_free_port(const ListenAddress& address) {
  if (address.port != 0) return address;
  auto sa = resolve(address, false);
  if (!sa.ok()) return sa.status();
  const int fd = ::socket(sa->family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(address.text() + ": socket: " + std::strerror(errno));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (::bind(fd, sa->get(), sa->len) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::Unavailable(address.text() + ": no free port: " + std::strerror(e));
  }
  ::close(fd);
  ListenAddress out = address;
  out.port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return out;
}

bool accepts_connections(const ListenAddress& address) {
  auto sa = resolve(address, true);
  if (!sa.ok()) return false;
  const int fd = ::socket(sa->family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::connect(fd, sa->get(), sa->len) == 0;
  ::close(fd);
  return ok;
}

bool process_listens_on(pid_t pid, int port) {
  const auto sockets = listening_sockets(port);
  return !sockets.empty() && holds_one_of("/proc/" + std::to_string(pid), sockets);
}

}  // namespace orrery::cli
