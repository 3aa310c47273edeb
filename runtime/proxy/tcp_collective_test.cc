// The TCP collective (tcp_collective.h) is bit-identical to the sequential rank-order sum for
// W = 2..8 ranks placed over 2 and 3 "nodes" (proxies, each with its own connections and its
// own thread, as separate machines would be), round robin and in blocks, odd sizes and sizes at
// chunk boundaries; keeps what is contributed before the mesh is up; and fails a step with a
// clear error, never a hang, when a peer proxy is gone or the ranks disagree on the size.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/common/loopback_port.h"
#include "runtime/proxy/collective_chunks.h"
#include "runtime/proxy/rank_order_inputs.h"
#include "runtime/proxy/ring.h"
#include "runtime/proxy/tcp_collective.h"
#include "runtime/proxy/tcp_mesh.h"

namespace orrery::runtime {
namespace {

using testing::inputs;
using testing::rank_order_sum;

// A free loopback port for a case's rendezvous, reserved for the rest of the test process (the
// reservation is never released: a case's groups may still be serving it when the case ends).
int next_port() {
  auto* p = new LoopbackPort();  // NOLINT: kept for the process's life on purpose
  EXPECT_TRUE(p->ok());
  return p->port();
}

std::string tcp_name(int port) { return "tcp://127.0.0.1:" + std::to_string(port) + "/t"; }

// One group per node, holding `placement[node]`'s ranks.
std::vector<std::unique_ptr<CollectiveGroup>> open_groups(
    const std::string& name, int w, std::uint64_t cap,
    const std::vector<std::vector<int>>& placement) {
  std::vector<std::unique_ptr<CollectiveGroup>> g;
  for (const auto& ranks : placement) {
    const bool rank0 = std::find(ranks.begin(), ranks.end(), 0) != ranks.end();
    auto o = open_tcp_collective(name, w, cap, rank0, ranks);
    EXPECT_TRUE(o.ok()) << o.reason();
    g.push_back(o.ok() ? std::move(o.value()) : nullptr);
  }
  return g;
}

const float* wait_result(CollectiveGroup& g, std::int64_t step, std::uint64_t* flags) {
  const float* res = nullptr;
  for (int t = 0; t < 20000 && (res = g.result(step, flags)) == nullptr && g.health().ok(); ++t) {
    g.wait(step, 1'000'000);
  }
  return res;
}

std::vector<std::vector<int>> place(int w, int nodes, bool blocks) {
  std::vector<std::vector<int>> p(nodes);
  for (int r = 0; r < w; ++r) p[blocks ? r * nodes / w : r % nodes].push_back(r);
  return p;
}

TEST(CollectiveTcp, BitIdenticalForW2To8OverTwoAndThreeNodes) {
  for (int w = 2; w <= 8; ++w) {
    for (int nodes : {2, 3}) {
      if (nodes > w) continue;
      const bool blocks = (w + nodes) % 2 == 0;
      const auto placement = place(w, nodes, blocks);
      const std::uint64_t cf = chunk_floats(300'001, w);
      const std::vector<std::uint64_t> sizes = {300'001, 1, 3, 1023, 4097, cf * 2 - 1, cf * 2 + 1,
                                                cf * static_cast<std::uint64_t>(w) + 5};
      auto g = open_groups(tcp_name(next_port()), w, 300'001, placement);
      ASSERT_EQ(g.size(), placement.size());
      std::vector<int> bad(nodes, 0), order_sensitive(nodes, 0);
      std::vector<std::thread> threads;
      for (int i = 0; i < nodes; ++i) {
        threads.emplace_back([&, i] {
          std::int64_t step = 0;
          for (std::uint64_t n : sizes) {
            const auto x = inputs(w, n, static_cast<unsigned>(n * 7 + w));
            for (int r : placement[i]) {
              const std::uint64_t f = r == w - 1 ? 2u : (r == 0 ? 1u : 0u);
              if (!g[i]->contribute(r, step, x[r].data(), n, f).ok()) ++bad[i];
            }
            std::uint64_t flags = 0;
            const float* res = wait_result(*g[i], step, &flags);
            const auto want = rank_order_sum(x);
            if (res == nullptr || std::memcmp(res, want.data(), n * sizeof(float)) != 0 ||
                flags != 3u) {
              ++bad[i];
            }
            ++step;
          }
        });
      }
      for (auto& t : threads) t.join();
      for (int i = 0; i < nodes; ++i) {
        EXPECT_EQ(bad[i], 0) << "w=" << w << " nodes=" << nodes << " node " << i;
      }
    }
  }
}

// A proxy may contribute long before the others open the group: its data is kept, not lost,
// and the caller's buffer may change as soon as contribute() returns.
TEST(CollectiveTcp, ContributionsBeforeTheMeshFormsAreKept) {
  const int w = 3;
  const std::string name = tcp_name(next_port());
  const auto x = inputs(w, 70'001, 5);
  auto a = open_tcp_collective(name, w, 70'001, true, {0, 2});
  ASSERT_TRUE(a.ok()) << a.reason();
  std::vector<float> buf = x[0];
  ASSERT_TRUE((*a)->contribute(0, 0, buf.data(), buf.size(), 0).ok());
  std::fill(buf.begin(), buf.end(), 99.f);
  ASSERT_TRUE((*a)->contribute(2, 0, x[2].data(), x[2].size(), 4).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto b = open_tcp_collective(name, w, 70'001, false, {1});
  ASSERT_TRUE(b.ok()) << b.reason();
  ASSERT_TRUE((*b)->contribute(1, 0, x[1].data(), x[1].size(), 0).ok());
  const auto want = rank_order_sum(x);
  for (auto* g : {a->get(), b->get()}) {
    std::uint64_t flags = 0;
    const float* res = wait_result(*g, 0, &flags);
    ASSERT_NE(res, nullptr);
    EXPECT_EQ(std::memcmp(res, want.data(), want.size() * sizeof(float)), 0);
    EXPECT_EQ(flags, 4u);
  }
}

// A peer proxy that goes away (its process died: its sockets close) fails the step at the
// others with an error naming the ranks it held, instead of leaving them waiting.
TEST(CollectiveTcp, ADeadPeerFailsTheStepWithAClearError) {
  const int w = 2;
  const std::string name = tcp_name(next_port());
  auto g = open_groups(name, w, 1000, {{0}, {1}});
  const std::vector<float> x(1000, 1.f);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(g[i]->contribute(i, 0, x.data(), 1000, 0).ok());
  ASSERT_NE(wait_result(*g[0], 0, nullptr), nullptr);
  ASSERT_NE(wait_result(*g[1], 0, nullptr), nullptr);
  g[1].reset();  // the proxy of rank 1 is gone
  (void)g[0]->contribute(0, 1, x.data(), 1000, 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_result(*g[0], 1, nullptr), nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  const Status h = g[0]->health();
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.reason().find("lost the connection to the proxy of ranks 1"), std::string::npos)
      << h.reason();
}

// Ranks that disagree on a step's size (a failing proxy sends one float of flags) fail that
// step on every proxy, with the flags: nobody waits for chunks that will never come.
TEST(CollectiveTcp, MismatchedCountsFailTheStepEverywhere) {
  const int w = 4;
  auto g = open_groups(tcp_name(next_port()), w, 200'000, {{0, 3}, {1}, {2}});
  const std::vector<float> x(200'000, 1.f);
  const float one = 0.f;
  std::vector<std::thread> t;
  t.emplace_back([&] {
    (void)g[0]->contribute(0, 0, x.data(), x.size(), 0);
    (void)g[0]->contribute(3, 0, x.data(), x.size(), 0);
  });
  t.emplace_back([&] { (void)g[1]->contribute(1, 0, &one, 1, 8); });
  t.emplace_back([&] { (void)g[2]->contribute(2, 0, x.data(), x.size(), 0); });
  for (auto& th : t) th.join();
  for (auto& gi : g) {
    std::uint64_t flags = 0;
    EXPECT_NE(wait_result(*gi, 0, &flags), nullptr);
    EXPECT_NE(flags & kFlagReduceFailed, 0u);
  }
}

}  // namespace
}  // namespace orrery::runtime
namespace orrery::runtime {
namespace {

// Buffers of gradient size (16 MiB: hundreds of chunks, more than the sockets buffer at once),
// the first step contributed before the mesh is up on one side.
TEST(CollectiveTcp, LargeBuffersOverTwoNodes) {
  const int w = 3;
  const std::uint64_t n = 4'000'003;
  const std::string name = tcp_name(next_port());
  const auto x = inputs(w, n, 11);
  const auto want = rank_order_sum(x);
  auto a = open_tcp_collective(name, w, n, true, {0, 2});
  ASSERT_TRUE(a.ok()) << a.reason();
  std::vector<int> bad(2, 0);
  std::thread ta([&] {
    for (std::int64_t step = 0; step < 3; ++step) {
      for (int r : {0, 2}) (void)(*a)->contribute(r, step, x[r].data(), n, 0);
      const float* res = wait_result(**a, step, nullptr);
      if (res == nullptr || std::memcmp(res, want.data(), n * sizeof(float)) != 0) ++bad[0];
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto b = open_tcp_collective(name, w, n, false, {1});
  ASSERT_TRUE(b.ok()) << b.reason();
  for (std::int64_t step = 0; step < 3; ++step) {
    (void)(*b)->contribute(1, step, x[1].data(), n, 0);
    const float* res = wait_result(**b, step, nullptr);
    if (res == nullptr || std::memcmp(res, want.data(), n * sizeof(float)) != 0) ++bad[1];
  }
  ta.join();
  EXPECT_EQ(bad[0], 0);
  EXPECT_EQ(bad[1], 0);
  EXPECT_TRUE((*a)->health().ok()) << (*a)->health().reason();
}

}  // namespace
}  // namespace orrery::runtime
namespace orrery::runtime {
namespace {

// A negotiation goes from its step s straight to s + 2 (host data): a proxy that has read s
// may send s + 2 before another has read s; that one's result of s must still be there.
TEST(CollectiveTcp, TheResultOfSStaysUntilReadWhenSPlus2Begins) {
  const int w = 2;
  auto g = open_groups(tcp_name(next_port()), w, 5000, {{0}, {1}});
  const auto x0 = inputs(w, 100, 1), x2 = inputs(w, 5000, 2);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(g[i]->contribute(i, 0, x0[i].data(), 100, 0).ok());
  ASSERT_NE(wait_result(*g[1], 0, nullptr), nullptr);
  ASSERT_TRUE(g[1]->contribute(1, 2, x2[1].data(), 5000, 0).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // its pieces reach g[0]
  const float* r0 = wait_result(*g[0], 0, nullptr);
  ASSERT_NE(r0, nullptr);
  const auto want0 = rank_order_sum(x0);
  EXPECT_EQ(std::memcmp(r0, want0.data(), 100 * sizeof(float)), 0);
  ASSERT_TRUE(g[0]->contribute(0, 2, x2[0].data(), 5000, 0).ok());
  const auto want2 = rank_order_sum(x2);
  for (auto& gi : g) {
    const float* r2 = wait_result(*gi, 2, nullptr);
    ASSERT_NE(r2, nullptr);
    EXPECT_EQ(std::memcmp(r2, want2.data(), 5000 * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace orrery::runtime
namespace orrery::runtime {
namespace {

// ---- a scripted peer: the test speaks the wire format (tcp_collective.h) itself, so that it
// decides the order in which one proxy's messages arrive ----

struct Wire {
  std::uint32_t magic = 0x4354524f, kind = 0;  // "ORTC"; 1 contribution, 2 sum
  std::int32_t rank = -1;
  std::uint32_t pad = 0;
  std::int64_t step = 0;
  std::uint64_t flags = 0, count = 0;
  std::uint32_t chunk = 0, floats = 0;
};
static_assert(sizeof(Wire) == 48);

void send_wire(int fd, const Wire& h, const float* data) {
  ASSERT_EQ(::send(fd, &h, sizeof h, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof h));
  const auto bytes = static_cast<ssize_t>(h.floats * sizeof(float));
  if (bytes > 0) {
    ASSERT_EQ(::send(fd, data, static_cast<std::size_t>(bytes), MSG_NOSIGNAL), bytes);
  }
}

// The next message on fd (its floats in *data), or false after 5 s.
bool recv_wire(int fd, Wire* h, std::vector<float>* data) {
  auto recv_n = [fd](void* p, std::size_t n) {
    char* c = static_cast<char*>(p);
    while (n > 0) {
      pollfd pf{fd, POLLIN, 0};
      if (::poll(&pf, 1, 5000) <= 0) return false;
      const ssize_t r = ::recv(fd, c, n, 0);
      if (r <= 0) return false;
      c += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  };
  if (!recv_n(h, sizeof *h)) return false;
  data->resize(h->floats);
  return recv_n(data->data(), h->floats * sizeof(float));
}

// At most `seconds`: a lost message must fail the test, not hang it.
const float* result_within(CollectiveGroup& g, std::int64_t step, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  const float* res = nullptr;
  while ((res = g.result(step, nullptr)) == nullptr && g.health().ok() &&
         std::chrono::steady_clock::now() < deadline) {
    g.wait(step, 1'000'000);
  }
  return res;
}

// The hang of an 8-rank job restored across two nodes (cli_e2e_local_cluster, 36bd75c), made
// deterministic. A job's first allreduce after a (re)start at step s negotiates at group step s
// and sends host data at s + 2 (s + 1 is skipped). The negotiation's one chunk is owned by rank
// 0's proxy, whose sum reaches each peer over its own link: a proxy P that has it reads s and
// sends its pieces of s + 2 to proxy Y, and these may overtake the sum of s on its way to Y.
// Y must still take that sum (its result side is still at s), and then sum s + 2 with it.
// Here rank 1 is the real group Y; ranks 0 (owner of step s's chunk, serving the rendezvous)
// and 2 (P) are scripted, and P's piece of s + 2 is sent before the sum of s.
TEST(CollectiveTcp, ASumOfSOvertakenByAPieceOfSPlus2IsStillTaken) {
  const int w = 3;
  const std::int64_t s = 288;  // a restored job's steps start mid-way
  const int port = next_port();
  const std::string name = tcp_name(port);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  at.sin_port = htons(static_cast<std::uint16_t>(port));
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  ASSERT_EQ(::listen(lfd, 16), 0);
  const std::uint64_t id = mesh_id_hash(name);
  MeshRendezvous rendezvous(lfd, w, id);
  const std::uint64_t n0 = 100, n2 = 5000;  // s: one chunk (rank 0's); s + 2: two (ranks 0, 1)
  ASSERT_EQ(chunk_count(n0, w), 1u);
  ASSERT_EQ(chunk_count(n2, w), 2u);
  const std::uint64_t per2 = chunk_floats(n2, w);
  auto y = open_tcp_collective(name, w, n2, false, {1});
  ASSERT_TRUE(y.ok()) << y.reason();
  Result<Mesh> m0 = Status::Error("not joined"), m2 = Status::Error("not joined");
  std::thread j0([&] { m0 = join_mesh(at, id, w, {0}, std::chrono::steady_clock::now() + std::chrono::seconds(10), nullptr); });
  std::thread j2([&] { m2 = join_mesh(at, id, w, {2}, std::chrono::steady_clock::now() + std::chrono::seconds(10), nullptr); });
  j0.join();
  j2.join();
  ASSERT_TRUE(m0.ok()) << m0.reason();
  ASSERT_TRUE(m2.ok()) << m2.reason();
  ASSERT_EQ(m0->self, 0);
  ASSERT_EQ(m2->self, 2);
  const int to_y0 = m0->peers[1].fd, to_y2 = m2->peers[1].fd;  // rank 0's and rank 2's link to Y
  const auto x0 = inputs(w, n0, 21), x2 = inputs(w, n2, 22);
  const auto want0 = rank_order_sum(x0), want2 = rank_order_sum(x2);

  // Step s: Y's piece goes to rank 0's proxy, a word (no floats) to rank 2's.
  ASSERT_TRUE((*y)->contribute(1, s, x0[1].data(), n0, 0).ok());
  Wire h;
  std::vector<float> got;
  ASSERT_TRUE(recv_wire(to_y0, &h, &got));
  EXPECT_EQ(h.kind, 1u);
  EXPECT_EQ(h.step, s);
  EXPECT_EQ(got, x0[1]);
  ASSERT_TRUE(recv_wire(to_y2, &h, &got));
  EXPECT_EQ(h.floats, 0u);
  send_wire(to_y0, Wire{0x4354524f, 1, 0, 0, s, 0, n0, 0, 0}, nullptr);  // ranks 0 and 2 own
  send_wire(to_y2, Wire{0x4354524f, 1, 2, 0, s, 0, n0, 0, 0}, nullptr);  // nothing of Y's
  // Rank 2's proxy has the sum of s (over its own link) and sends its piece of s + 2 (chunk 1,
  // Y's) before the sum of s reaches Y.
  send_wire(to_y2, Wire{0x4354524f, 1, 2, 0, s + 2, 0, n2, 1, static_cast<std::uint32_t>(n2 - per2)},
            x2[2].data() + per2);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Y has taken it
  send_wire(to_y0, Wire{0x4354524f, 2, -1, 0, s, 0, n0, 0, static_cast<std::uint32_t>(n0)},
            want0.data());
  const float* r0 = result_within(**y, s, 5);
  ASSERT_NE(r0, nullptr) << "the sum of step " << s << " was dropped: "
                         << ((*y)->health().ok() ? "no error" : (*y)->health().reason());
  EXPECT_EQ(std::memcmp(r0, want0.data(), n0 * sizeof(float)), 0);

  // Step s + 2 completes with it: Y sums chunk 1 and sends it out; rank 0 sends chunk 0's sum.
  ASSERT_TRUE((*y)->contribute(1, s + 2, x2[1].data(), n2, 0).ok());
  send_wire(to_y0, Wire{0x4354524f, 1, 0, 0, s + 2, 0, n2, 1, static_cast<std::uint32_t>(n2 - per2)},
            x2[0].data() + per2);
  ASSERT_TRUE(recv_wire(to_y0, &h, &got));  // Y's piece of chunk 0
  EXPECT_EQ(h.chunk, 0u);
  EXPECT_EQ(std::memcmp(got.data(), x2[1].data(), per2 * sizeof(float)), 0);
  for (int fd : {to_y0, to_y2}) {
    do {
      ASSERT_TRUE(recv_wire(fd, &h, &got));
    } while (h.kind != 2);  // the word to rank 2's proxy comes first
    EXPECT_EQ(h.step, s + 2);
    EXPECT_EQ(h.chunk, 1u);
    EXPECT_EQ(std::memcmp(got.data(), want2.data() + per2, (n2 - per2) * sizeof(float)), 0);
  }
  send_wire(to_y0, Wire{0x4354524f, 2, -1, 0, s + 2, 0, n2, 0, static_cast<std::uint32_t>(per2)},
            want2.data());
  const float* r2 = result_within(**y, s + 2, 5);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(std::memcmp(r2, want2.data(), n2 * sizeof(float)), 0);
  y->reset();
  for (auto* m : {&m0, &m2}) {
    for (auto& p : (*m)->peers) {
      if (p.fd >= 0) ::close(p.fd);
    }
  }
}

}  // namespace
}  // namespace orrery::runtime
namespace orrery::runtime {
namespace {

// contribute_into with the contribution's own buffer as the destination (what a proxy of one
// rank does with its worker's bulk window): the sum is assembled there, bit-identical, over
// steps of changing sizes (the first one large: hundreds of chunks both ways).
TEST(CollectiveTcp, TheSumIsAssembledInTheContributionsOwnBuffer) {
  const int w = 4;
  const std::vector<std::uint64_t> sizes = {2'000'003, 1, 70'001, 4097, 2'000'003};
  auto g = open_groups(tcp_name(next_port()), w, 2'000'003, {{0}, {1}, {2}, {3}});
  std::vector<int> bad(w, 0);
  std::vector<std::thread> t;
  for (int i = 0; i < w; ++i) {
    t.emplace_back([&, i] {
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        const std::uint64_t n = sizes[k];
        const auto x = inputs(w, n, static_cast<unsigned>(n + k));
        std::vector<float> buf = x[i];
        const auto step = static_cast<std::int64_t>(k);
        if (!g[i]->contribute_into(i, step, buf.data(), n, 0, buf.data()).ok()) ++bad[i];
        const float* res = wait_result(*g[i], step, nullptr);
        const auto want = rank_order_sum(x);
        if (res != buf.data() || std::memcmp(buf.data(), want.data(), n * sizeof(float)) != 0) {
          ++bad[i];
        }
      }
    });
  }
  for (auto& th : t) th.join();
  for (int i = 0; i < w; ++i) EXPECT_EQ(bad[i], 0) << "rank " << i;
}

// The sum is assembled in the contribution's own buffer and our sums go to the peers from there:
// the buffer is the caller's again as soon as it has read the result (a worker writes the next
// step's gradients into it at once), so a rank scribbling over it right after reading must not
// change what any other rank gets.
TEST(CollectiveTcp, TheOwnBufferIsTheCallersAgainOnceTheResultIsRead) {
  for (int w : {2, 3}) {
    const std::uint64_t n = 3'000'017;  // many chunks per rank, a ragged last one
    std::vector<std::vector<int>> placement;
    for (int r = 0; r < w; ++r) placement.push_back({r});
    auto g = open_groups(tcp_name(next_port()), w, n, placement);
    std::vector<int> bad(w, 0);
    std::vector<std::thread> t;
    for (int i = 0; i < w; ++i) {
      t.emplace_back([&, i] {
        std::vector<float> buf(n), got(n);
        for (std::int64_t step = 0; step < 4; ++step) {
          const auto x = inputs(w, n, static_cast<unsigned>(100 * w + step));
          std::memcpy(buf.data(), x[i].data(), n * sizeof(float));
          if (!g[i]->contribute_into(i, step, buf.data(), n, 0, buf.data()).ok()) ++bad[i];
          const float* res = wait_result(*g[i], step, nullptr);
          if (res != buf.data()) {
            ++bad[i];
            continue;
          }
          std::memcpy(got.data(), buf.data(), n * sizeof(float));
          std::memset(buf.data(), 0xff, n * sizeof(float));  // NaNs: the next step's, say
          const auto want = rank_order_sum(x);
          if (std::memcmp(got.data(), want.data(), n * sizeof(float)) != 0) ++bad[i];
        }
      });
    }
    for (auto& th : t) th.join();
    for (int i = 0; i < w; ++i) EXPECT_EQ(bad[i], 0) << "W=" << w << " rank " << i;
  }
}

}  // namespace
}  // namespace orrery::runtime
