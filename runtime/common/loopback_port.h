// A loopback port for a TCP collective's rendezvous, reserved for as long as the object lives:
// bound with SO_REUSEADDR and never listening, so the kernel hands the port to no one else (no
// ephemeral port, no other bind of port 0), while the proxy that serves the rendezvous may still
// bind and listen on it (it sets SO_REUSEADDR too). A port picked, closed and bound later by the
// proxy could be taken in between (allreduce_bench_tcp_smoke once timed out under load that way).
// Used by the benchmarks and tests that start a job across node runtimes on one machine.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace orrery::runtime {

class LoopbackPort {
 public:
  LoopbackPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    port_ = ntohs(a.sin_port);
  }
  ~LoopbackPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  LoopbackPort(const LoopbackPort&) = delete;
  LoopbackPort& operator=(const LoopbackPort&) = delete;
  // Whether a port is reserved; port() is 0 if not.
  bool ok() const { return fd_ >= 0; }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace orrery::runtime
