#include "runtime/proxy/tcp_mesh.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

namespace orrery::runtime {
namespace {

constexpr std::uint32_t kMagic = 0x4d54524f;  // "ORTM"
constexpr std::uint32_t kHello = 1, kTable = 2, kRefused = 3, kPeerHello = 4;
using Clock = std::chrono::steady_clock;

bool timed_out(Clock::time_point deadline, const std::atomic<bool>* stop) {
  return Clock::now() > deadline || (stop != nullptr && stop->load());
}

// Waits for `events` on fd in 100 ms slices, so that a stop request or the deadline is seen.
bool wait_fd(int fd, short events, Clock::time_point deadline, const std::atomic<bool>* stop) {
  for (;;) {
    if (timed_out(deadline, stop)) return false;
    pollfd p{fd, events, 0};
    if (::poll(&p, 1, 100) > 0) return true;
  }
}

bool send_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool recv_all(int fd, void* p, std::size_t n, Clock::time_point deadline,
              const std::atomic<bool>* stop) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    if (!wait_fd(fd, POLLIN, deadline, stop)) return false;
    ssize_t r = ::recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

template <class T>
void put(std::vector<char>& b, T v) {
  const char* p = reinterpret_cast<const char*>(&v);
  b.insert(b.end(), p, p + sizeof v);
}

std::string where(std::uint32_t ip, std::uint32_t port) {
  char b[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = ip;
  ::inet_ntop(AF_INET, &a, b, sizeof b);
  return std::string(b) + ":" + std::to_string(port);
}

// Keepalive finds a peer machine that vanished without closing (about 25 s); TCP_NODELAY
// sends each chunk as it is queued.
void tune(int fd) {
  int one = 1, idle = 10, intvl = 5, cnt = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

struct Joiner {
  int fd;
  std::uint32_t ip, port;
  std::vector<int> ranks;
};

}  // namespace

std::uint64_t mesh_id_hash(const std::string& name) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

MeshRendezvous::MeshRendezvous(int listen_fd, int world, std::uint64_t id)
    : lfd_(listen_fd), world_(world), id_(id) {
  thread_ = std::thread([this] { loop(); });
}

MeshRendezvous::~MeshRendezvous() {
  stop_ = true;
  thread_.join();
  if (lfd_ >= 0) ::close(lfd_);
}

void MeshRendezvous::loop() {
  std::vector<Joiner> joined;
  std::vector<int> claimed(world_, -1);
  int claimed_n = 0;
  std::string refusal;
  auto refuse = [](int fd, const std::string& why) {
    std::vector<char> b;
    put(b, kMagic);
    put(b, kRefused);
    put(b, static_cast<std::uint32_t>(why.size()));
    b.insert(b.end(), why.begin(), why.end());
    (void)send_all(fd, b.data(), b.size());
  };
  while (!stop_ && claimed_n < world_ && refusal.empty()) {
    pollfd p{lfd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    sockaddr_in from{};
    socklen_t len = sizeof from;
    int fd = ::accept4(lfd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    std::uint32_t head[6];  // magic, kind, id lo, id hi, port, nranks
    if (!recv_all(fd, head, sizeof head, deadline, &stop_) || head[0] != kMagic ||
        head[1] != kHello || head[5] == 0 || head[5] > static_cast<std::uint32_t>(world_)) {
      ::close(fd);  // not one of ours
      continue;
    }
    std::uint64_t id;
    std::memcpy(&id, head + 2, 8);
    std::vector<int> ranks(head[5]);
    if (!recv_all(fd, ranks.data(), ranks.size() * sizeof(int), deadline, &stop_)) {
      ::close(fd);
      continue;
    }
    if (id != id_) {
      refuse(fd, "the proxy at this address serves another job incarnation");
      ::close(fd);
      continue;
    }
    for (int r : ranks) {
      if (r < 0 || r >= world_) {
        refusal = "a proxy claims rank " + std::to_string(r) + " of a world of " + std::to_string(world_);
      } else if (claimed[r] >= 0) {
        refusal = "rank " + std::to_string(r) + " is claimed by two proxies";
      } else {
        claimed[r] = static_cast<int>(joined.size());
        ++claimed_n;
      }
    }
    joined.push_back({fd, from.sin_addr.s_addr, head[4], std::move(ranks)});
  }
  if (refusal.empty() && claimed_n == world_) {
    // Index order: by lowest rank, so every proxy's index is a function of the placement only.
    std::sort(joined.begin(), joined.end(), [](const Joiner& a, const Joiner& b) {
      return *std::min_element(a.ranks.begin(), a.ranks.end()) <
             *std::min_element(b.ranks.begin(), b.ranks.end());
    });
    std::vector<char> table;
    for (const auto& j : joined) {
      put(table, j.ip);
      put(table, j.port);
      put(table, static_cast<std::uint32_t>(j.ranks.size()));
      for (int r : j.ranks) put(table, r);
    }
    for (std::size_t i = 0; i < joined.size(); ++i) {
      std::vector<char> b;
      put(b, kMagic);
      put(b, kTable);
      put(b, static_cast<std::uint32_t>(joined.size()));
      put(b, static_cast<std::uint32_t>(i));
      put(b, static_cast<std::uint32_t>(table.size()));
      b.insert(b.end(), table.begin(), table.end());
      (void)send_all(joined[i].fd, b.data(), b.size());
    }
  } else if (!refusal.empty()) {
    for (const auto& j : joined) refuse(j.fd, refusal);
  }
  for (const auto& j : joined) ::close(j.fd);
  ::close(lfd_);
  lfd_ = -1;
}

Result<Mesh> join_mesh(const sockaddr_in& hub, std::uint64_t id, int world,
                       const std::vector<int>& ranks, Clock::time_point deadline,
                       const std::atomic<bool>* stop) {
  const std::string hub_at = where(hub.sin_addr.s_addr, ntohs(hub.sin_port));
  // Our own listening socket for the peers with a higher index.
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t alen = sizeof any;
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 || ::listen(lfd, 64) != 0 ||
      ::getsockname(lfd, reinterpret_cast<sockaddr*>(&any), &alen) != 0) {
    const std::string why = std::strerror(errno);
    ::close(lfd);
    return Status::Error("cannot listen for the job's other proxies: " + why);
  }
  Mesh mesh;
  auto fail = [&](const std::string& why) {
    ::close(lfd);
    for (auto& p : mesh.peers) {
      if (p.fd >= 0) ::close(p.fd);
    }
    return Status::Error(why);
  };
  // The rendezvous: retried while the proxy of rank 0 may still be starting.
  int hfd = -1;
  for (;;) {
    hfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(hfd, reinterpret_cast<const sockaddr*>(&hub), sizeof hub) == 0) break;
    const std::string why = std::strerror(errno);
    ::close(hfd);
    if (timed_out(deadline, stop)) return fail("cannot reach the rendezvous at " + hub_at + ": " + why);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<char> hello;
  put(hello, kMagic);
  put(hello, kHello);
  put(hello, id);
  put(hello, static_cast<std::uint32_t>(ntohs(any.sin_port)));
  put(hello, static_cast<std::uint32_t>(ranks.size()));
  for (int r : ranks) put(hello, r);
  std::uint32_t head[5];
  const bool sent = send_all(hfd, hello.data(), hello.size());
  if (!sent || !recv_all(hfd, head, 3 * sizeof(std::uint32_t), deadline, stop) || head[0] != kMagic) {
    ::close(hfd);
    return fail("the job's proxies did not all reach the rendezvous at " + hub_at +
                " in time (a proxy of the job never opened its collective)");
  }
  if (head[1] == kRefused) {
    std::string why(std::min<std::uint32_t>(head[2], 4096), '\0');
    (void)recv_all(hfd, why.data(), why.size(), deadline, stop);
    ::close(hfd);
    return fail("the rendezvous at " + hub_at + " refused us: " + why);
  }
  if (head[1] != kTable || !recv_all(hfd, head + 3, 2 * sizeof(std::uint32_t), deadline, stop) ||
      head[2] == 0 || head[2] > static_cast<std::uint32_t>(world) || head[3] >= head[2] ||
      head[4] > (1u << 24)) {
    ::close(hfd);
    return fail("the rendezvous at " + hub_at + " sent a bad table");
  }
  std::vector<char> table(head[4]);
  const bool got = recv_all(hfd, table.data(), table.size(), deadline, stop);
  ::close(hfd);
  if (!got) return fail("the rendezvous at " + hub_at + " sent a truncated table");
  mesh.self = static_cast<int>(head[3]);
  mesh.proxy_of.assign(world, -1);
  std::vector<std::uint32_t> ips, ports;
  std::size_t off = 0;
  auto take = [&](void* p, std::size_t n) {
    if (off + n > table.size()) return false;
    std::memcpy(p, table.data() + off, n);
    off += n;
    return true;
  };
  for (std::uint32_t i = 0; i < head[2]; ++i) {
    std::uint32_t e[3];
    if (!take(e, sizeof e) || e[2] > static_cast<std::uint32_t>(world)) return fail("bad mesh table");
    MeshPeer p;
    p.ranks.resize(e[2]);
    if (!take(p.ranks.data(), e[2] * sizeof(int))) return fail("bad mesh table");
    for (int r : p.ranks) {
      if (r < 0 || r >= world) return fail("bad mesh table");
      mesh.proxy_of[r] = static_cast<int>(i);
    }
    // The rendezvous saw us as the address we connected from; our own entry may be loopback.
    p.where = where(e[0], e[1]);
    ips.push_back(e[0]);
    ports.push_back(e[1]);
    mesh.peers.push_back(std::move(p));
  }
  const int n = static_cast<int>(mesh.peers.size());
  for (int j = 0; j < mesh.self; ++j) {  // connect down
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = ips[j];
    a.sin_port = htons(static_cast<std::uint16_t>(ports[j]));
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return fail("cannot reach the job's proxy at " + mesh.peers[j].where + ": " + why);
    }
    std::vector<char> ph;
    put(ph, kMagic);
    put(ph, kPeerHello);
    put(ph, id);
    put(ph, static_cast<std::uint32_t>(mesh.self));
    if (!send_all(fd, ph.data(), ph.size())) {
      ::close(fd);
      return fail("the job's proxy at " + mesh.peers[j].where + " closed the connection");
    }
    tune(fd);
    mesh.peers[j].fd = fd;
  }
  for (int k = mesh.self + 1; k < n;) {  // accept up
    if (!wait_fd(lfd, POLLIN, deadline, stop)) {
      return fail("the job's proxies with higher ranks did not connect in time");
    }
    int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::uint32_t ph[5];
    std::uint64_t pid;
    if (!recv_all(fd, ph, sizeof ph, Clock::now() + std::chrono::seconds(10), stop) ||
        ph[0] != kMagic || ph[1] != kPeerHello || (std::memcpy(&pid, ph + 2, 8), pid != id) ||
        ph[4] <= static_cast<std::uint32_t>(mesh.self) || ph[4] >= static_cast<std::uint32_t>(n) ||
        mesh.peers[ph[4]].fd >= 0) {
      ::close(fd);  // a stranger, another incarnation, or a duplicate
      continue;
    }
    tune(fd);
    mesh.peers[ph[4]].fd = fd;
    ++k;
  }
  ::close(lfd);
  return mesh;
}

}  // namespace orrery::runtime
