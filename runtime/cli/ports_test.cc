// The addresses `orrery up` checks before it starts anything (runtime/cli/ports.h): parsing, a free
// port for port 0, a busy port named with what holds it (here: this test itself), and whether an
// address accepts connections. ctest names: operator_up_Ports.*.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "runtime/cli/ports.h"

namespace orrery::cli {
namespace {

TEST(Ports, Parse) {
  auto a = parse_listen_address("127.0.0.1:7070");
  ASSERT_TRUE(a.ok()) << a.reason();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 7070);
  EXPECT_EQ(a->text(), "127.0.0.1:7070");
  auto v6 = parse_listen_address("[::1]:0");
  ASSERT_TRUE(v6.ok()) << v6.reason();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->text(), "[::1]:0");
  EXPECT_TRUE(parse_listen_address("*:9090").ok());
  EXPECT_TRUE(parse_listen_address("localhost:65535").ok());
  for (const char* bad : {"7070", ":7070", "host:", "host:65536", "host:-1", "host:7x", "::1:80", "[::1]80"}) {
    auto r = parse_listen_address(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument) << bad;
  }
}

// A listening socket on 127.0.0.1:port, or -1.
int listen_on(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 4) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(Ports, FreePortThenBusyThenFreeAgain) {
  auto any = parse_listen_address("127.0.0.1:0");
  ASSERT_TRUE(any.ok());
  auto chosen = with_free_port(*any);
  ASSERT_TRUE(chosen.ok()) << chosen.reason();
  ASSERT_GT(chosen->port, 0);
  EXPECT_EQ(chosen->host, "127.0.0.1");
  EXPECT_TRUE(check_can_listen(*chosen).ok());
  EXPECT_FALSE(accepts_connections(*chosen));

  const int fd = listen_on(chosen->port);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(accepts_connections(*chosen));
  auto st = check_can_listen(*chosen);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  // Named with its holder: this very process, which /proc shows.
  const std::string expected = chosen->text() + " is in use by ";
  EXPECT_EQ(st.reason().rfind(expected, 0), 0u) << st.reason();
  EXPECT_NE(st.reason().find("(pid " + std::to_string(::getpid()) + ")"), std::string::npos) << st.reason();
  EXPECT_EQ(st.reason().find("orrery"), std::string::npos) << st.reason();  // not another orrery
  auto holder = port_holder(chosen->port);
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, ::getpid());
  EXPECT_FALSE(holder->orrery);
  EXPECT_TRUE(process_listens_on(::getpid(), chosen->port));
  EXPECT_FALSE(process_listens_on(::getppid(), chosen->port));
  // Busy on 127.0.0.1 is busy for every interface too.
  auto wildcard = parse_listen_address("*:" + std::to_string(chosen->port));
  EXPECT_EQ(check_can_listen(*wildcard).code(), StatusCode::kUnavailable);

  ::close(fd);
  EXPECT_TRUE(check_can_listen(*chosen).ok());
  EXPECT_FALSE(port_holder(chosen->port).has_value());
  EXPECT_FALSE(process_listens_on(::getpid(), chosen->port));
  // A port that is not 0 is kept as it is.
  EXPECT_EQ(with_free_port(*chosen)->port, chosen->port);
}

TEST(Ports, NotThisMachinesAddress) {
  auto a = parse_listen_address("192.0.2.1:0");  // TEST-NET-1: on no interface here
  auto st = check_can_listen(*a);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.reason();
  EXPECT_NE(st.reason().find("not an address of this machine"), std::string::npos) << st.reason();
  auto name = parse_listen_address("no-such-host.invalid:7070");
  EXPECT_EQ(check_can_listen(*name).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery::cli
