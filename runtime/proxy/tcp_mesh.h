// How the proxies of a job spread over machines find each other for the TCP allreduce
// (tcp_collective.h): a full mesh of TCP connections, one per pair of proxies, formed through a
// rendezvous at the collective's HOST:PORT.
//
// The proxy holding rank 0 serves the rendezvous (MeshRendezvous, a thread of its own). Every
// proxy, that one included, listens on a port of its own (any free one), connects to HOST:PORT
// and says which ranks it holds and on which port it listens, with a hash of the collective's
// name (a proxy of another incarnation is refused, not mixed in). Once every rank 0..W-1 is
// claimed exactly once the rendezvous sends every proxy the table (its index, each proxy's
// address, port and ranks; proxies in the order of their lowest rank) and closes. Proxy i then
// connects to every proxy j < i and accepts one connection from every j > i, each opened with a
// hello naming the incarnation and the index. A rank claimed twice, a table that never comes
// (a proxy never showed up) or a peer that cannot be reached are errors naming what is missing.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"

namespace orrery::runtime {

struct MeshPeer {
  int fd = -1;             // connected socket (blocking); -1 for this proxy itself
  std::vector<int> ranks;  // the ranks that proxy holds
  std::string where;       // "HOST:PORT", for errors
};

struct Mesh {
  int self = -1;                // this proxy's index
  std::vector<int> proxy_of;    // rank -> proxy index
  std::vector<MeshPeer> peers;  // by proxy index
};

std::uint64_t mesh_id_hash(const std::string& name);

// The rendezvous, on the proxy holding rank 0: serves the table once every rank is claimed.
class MeshRendezvous {
 public:
  // Takes a bound, listening socket.
  MeshRendezvous(int listen_fd, int world, std::uint64_t id);
  ~MeshRendezvous();

 private:
  void loop();
  int lfd_;
  int world_;
  std::uint64_t id_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Joins the mesh: this proxy's `ranks`, the rendezvous at `hub`. Gives up at `deadline` or when
// *stop becomes true.
Result<Mesh> join_mesh(const sockaddr_in& hub, std::uint64_t id, int world,
                       const std::vector<int>& ranks, std::chrono::steady_clock::time_point deadline,
                       const std::atomic<bool>* stop);

}  // namespace orrery::runtime
