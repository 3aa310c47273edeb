#include "runtime/proxy/tcp_collective.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/proxy/kernels.h"
#include "spec/limits.h"

namespace orrery::runtime {
namespace {

constexpr std::uint32_t kMagic = 0x4354524f;  // "ORTC"
constexpr std::uint32_t kContribution = 1, kResult = 2;

struct WireHeader {
  std::uint32_t magic, kind;
  std::int32_t rank;
  std::uint32_t pad;
  std::int64_t step;
  std::uint64_t flags, count;
};
static_assert(sizeof(WireHeader) == 40);

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Bytes received and not yet taken: recv() writes straight into its tail (a std::vector would
// zero what recv is about to overwrite), and taking a message moves only the bytes after it.
struct InBuf {
  std::unique_ptr<char[]> p;
  std::size_t n = 0, cap = 0;
  char* data() const { return p.get(); }
  std::size_t size() const { return n; }
  void reserve_tail(std::size_t more) {
    if (n + more <= cap) return;
    const std::size_t c = std::max(2 * cap, n + more);
    std::unique_ptr<char[]> q(new char[c]);
    if (n != 0) std::memcpy(q.get(), p.get(), n);
    p = std::move(q);
    cap = c;
  }
  void drop_front(std::size_t k) {
    std::memmove(p.get(), p.get() + k, n - k);
    n -= k;
  }
};

// A non-blocking connection with an input buffer of whole messages and an output queue.
struct Conn {
  int fd = -1;
  InBuf in;
  std::vector<char> out;
  std::size_t out_off = 0;
  bool broken = false;

  // Reads what is there; returns false on EOF or error.
  bool read_some() {
    constexpr std::size_t kStep = 1 << 20;
    for (;;) {
      in.reserve_tail(kStep);
      ssize_t r = ::recv(fd, in.data() + in.n, kStep, 0);
      if (r > 0) {
        in.n += static_cast<std::size_t>(r);
        continue;
      }
      if (r == 0) return false;
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
  }
  bool write_some() {
    while (out_off < out.size()) {
      ssize_t w = ::send(fd, out.data() + out_off, out.size() - out_off, MSG_NOSIGNAL);
      if (w > 0) {
        out_off += static_cast<std::size_t>(w);
        continue;
      }
      return w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
    }
    out.clear();
    out_off = 0;
    return true;
  }
  // The next whole message, if one is buffered (header checked).
  bool next(WireHeader* h, std::vector<float>* data, std::uint64_t max_count) {
    if (in.size() < sizeof(WireHeader)) return false;
    std::memcpy(h, in.data(), sizeof *h);
    if (h->magic != kMagic || h->count > max_count) {
      broken = true;
      return false;
    }
    const std::size_t total = sizeof *h + h->count * sizeof(float);
    if (in.size() < total) return false;
    data->resize(h->count);
    std::memcpy(data->data(), in.data() + sizeof *h, h->count * sizeof(float));
    in.drop_front(total);
    return true;
  }
  void queue(const WireHeader& h, const float* data) {
    const char* hp = reinterpret_cast<const char*>(&h);
    out.insert(out.end(), hp, hp + sizeof h);
    const char* dp = reinterpret_cast<const char*>(data);
    out.insert(out.end(), dp, dp + h.count * sizeof(float));
  }
};

Status parse(const std::string& name, std::string* host, int* port) {
  // tcp://HOST:PORT/ID
  const std::string rest = name.substr(6);
  const auto slash = rest.find('/');
  const std::string hp = rest.substr(0, slash);
  const auto colon = hp.rfind(':');
  if (colon == std::string::npos || colon == 0) return Status::Error("collective " + name + ": expected tcp://HOST:PORT/ID");
  *host = hp.substr(0, colon);
  *port = std::atoi(hp.c_str() + colon + 1);
  if (*port <= 0 || *port > 65535) return Status::Error("collective " + name + ": bad port");
  return Status::Ok();
}

Result<sockaddr_in> resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
    return Status::Error("cannot resolve " + host);
  }
  sockaddr_in a = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return a;
}

// The hub: collects all W contributions of a step and sends the rank-ordered sum to everyone.
class Hub {
 public:
  Hub(int listen_fd, int world) : lfd_(listen_fd), world_(world) {
    for (auto& p : phase_) p.slots.resize(world);
    thread_ = std::thread([this] { loop(); });
  }
  ~Hub() {
    stop_ = true;
    thread_.join();
    for (auto& c : conns_) ::close(c.fd);
    ::close(lfd_);
  }

 private:
  struct Phase {
    std::int64_t step = -1;
    std::vector<std::vector<float>> slots;
    std::vector<bool> got;
    int count = 0;
    std::uint64_t flags = 0, n = 0;
    std::vector<float> sum;  // kept: a fresh 64 MiB vector a step costs its page faults again
  };

  void loop() {
    std::vector<float> data;
    while (!stop_) {
      std::vector<pollfd> pfd;
      pfd.push_back({lfd_, POLLIN, 0});
      for (auto& c : conns_) pfd.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      if (::poll(pfd.data(), pfd.size(), 50) <= 0) continue;
      if (pfd[0].revents & POLLIN) {
        int fd = ::accept(lfd_, nullptr, nullptr);
        if (fd >= 0) {
          set_nonblocking(fd);
          Conn c;
          c.fd = fd;
          conns_.push_back(std::move(c));
        }
      }
      for (std::size_t i = 0; i + 1 < pfd.size(); ++i) {
        Conn& c = conns_[i];
        if (pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) {
          if (!c.read_some()) c.broken = true;
        }
        WireHeader h;
        while (!c.broken && c.next(&h, &data, 1ull << 28)) take(h, data);
        if (!c.out.empty() && !c.write_some()) c.broken = true;
      }
      for (std::size_t i = 0; i < conns_.size();) {
        if (conns_[i].broken) {
          ::close(conns_[i].fd);
          conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
    }
  }

  void take(const WireHeader& h, std::vector<float>& data) {
    if (h.kind != kContribution || h.rank < 0 || h.rank >= world_ || h.step < 0) return;
    Phase& p = phase_[h.step & 1];
    if (p.step != h.step) {
      p.step = h.step;
      p.got.assign(world_, false);
      p.count = 0;
      p.flags = 0;
      p.n = h.count;
    }
    if (p.got[h.rank] || h.count != p.n) return;  // a duplicate or a mismatched buffer
    p.slots[h.rank].swap(data);  // no copy; `data` gets a buffer to decode the next one into
    p.got[h.rank] = true;
    p.flags |= h.flags;
    if (++p.count < world_) return;
    std::vector<const float*> in(world_);
    for (int r = 0; r < world_; ++r) in[r] = p.slots[r].data();
    p.sum.resize(p.n);
    sum_in_rank_order(in.data(), world_, p.n, p.sum.data());
    WireHeader out{kMagic, kResult, -1, 0, h.step, p.flags, p.n};
    for (auto& c : conns_) {
      c.queue(out, p.sum.data());
      if (!c.write_some()) c.broken = true;
    }
  }

  int lfd_;
  int world_;
  std::atomic<bool> stop_{false};
  std::vector<Conn> conns_;
  Phase phase_[2];
  std::thread thread_;
};

class TcpCollective final : public CollectiveGroup {
 public:
  TcpCollective(std::unique_ptr<Hub> hub, int fd, std::uint64_t cap) : hub_(std::move(hub)), cap_(cap) {
    conn_.fd = fd;
  }
  ~TcpCollective() override {
    ::close(conn_.fd);
    hub_.reset();
  }

  Status contribute(int rank, std::int64_t step, const float* data, std::uint64_t count,
                    std::uint64_t flags) override {
    if (count > cap_) return Status::Error("collective: buffer larger than the first one");
    conn_.queue(WireHeader{kMagic, kContribution, rank, 0, step, flags, count}, data);
    // Keep reading results while the contribution goes out: the hub may be writing to us.
    while (!conn_.out.empty()) {
      if (!conn_.write_some() || !pump()) return Status::Error("collective: the hub connection broke");
      if (!conn_.out.empty()) {
        pollfd p{conn_.fd, POLLIN | POLLOUT, 0};
        ::poll(&p, 1, 100);
      }
    }
    return Status::Ok();
  }

  const float* result(std::int64_t step, std::uint64_t* flags) override {
    pump();
    const Cached& c = cache_[step & 1];
    if (c.step != step) return nullptr;
    if (flags != nullptr) *flags = c.flags;
    return c.data.data();
  }

  void wait(std::int64_t step, long timeout_ns) override {
    if (cache_[step & 1].step == step) return;
    pollfd p{conn_.fd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(timeout_ns / 1'000'000) + 1);
    pump();
  }

 private:
  struct Cached {
    std::int64_t step = -1;
    std::uint64_t flags = 0;
    std::vector<float> data;
  };
  bool pump() {
    if (!conn_.read_some()) return false;
    WireHeader h;
    while (conn_.next(&h, &scratch_, cap_)) {
      if (h.kind != kResult) continue;
      Cached& c = cache_[h.step & 1];
      c.step = h.step;
      c.flags = h.flags;
      c.data.swap(scratch_);  // buffers rotate, none is allocated again once sized
    }
    return !conn_.broken;
  }

  std::unique_ptr<Hub> hub_;
  std::uint64_t cap_;
  Conn conn_;
  Cached cache_[2];
  std::vector<float> scratch_;
};

}  // namespace

Result<std::unique_ptr<CollectiveGroup>> open_tcp_collective(const std::string& name, int world,
                                                             std::uint64_t capacity,
                                                             bool serve_hub) {
  if (world <= 0 || world > spec::kMaxRunWorld) return Status::Error("collective: bad world size");
  if (capacity == 0 || capacity > (1ull << 28)) return Status::Error("collective: bad buffer size");
  std::string host;
  int port = 0;
  if (auto s = parse(name, &host, &port); !s) return s;
  auto addr = resolve(host, port);
  if (!addr) return addr.status();
  std::unique_ptr<Hub> hub;
  if (serve_hub) {
    int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(lfd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0 ||
        ::listen(lfd, 64) != 0) {
      const std::string why = std::strerror(errno);
      ::close(lfd);
      return Status::Error("collective " + name + ": cannot serve the hub: " + why);
    }
    hub = std::make_unique<Hub>(lfd, world);
  }
  // Connect, retrying while the hub's proxy may still be starting.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) == 0) {
      set_nonblocking(fd);
      return std::unique_ptr<CollectiveGroup>(new TcpCollective(std::move(hub), fd, capacity));
    }
    const std::string why = std::strerror(errno);
    ::close(fd);
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::Error("collective " + name + ": cannot reach the hub: " + why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace orrery::runtime
