#include "runtime/proxy/tcp_collective.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "runtime/proxy/collective_chunks.h"
#include "runtime/proxy/tcp_mesh.h"
#include "spec/limits.h"

namespace orrery::runtime {
namespace {

constexpr std::uint32_t kMagic = 0x4354524f;  // "ORTC"
constexpr std::uint32_t kContribution = 1, kSum = 2, kFailedStep = 3;
// How long the job's proxies have to find each other (a proxy opens the group at its ranks'
// first allreduce, which may come long after another's: a slow start, a restore).
constexpr auto kMeshDeadline = std::chrono::seconds(600);

struct WireHeader {
  std::uint32_t magic, kind;
  std::int32_t rank;
  std::uint32_t pad;
  std::int64_t step;
  std::uint64_t flags, count;
  std::uint32_t chunk, floats;
};
static_assert(sizeof(WireHeader) == 48);

bool send_msg(int fd, const WireHeader& h, const float* data) {
  iovec v[2] = {{const_cast<WireHeader*>(&h), sizeof h},
                {const_cast<float*>(data), h.floats * sizeof(float)}};
  int n = h.floats > 0 ? 2 : 1;
  iovec* p = v;
  while (n > 0) {
    msghdr m{};
    m.msg_iov = p;
    m.msg_iovlen = static_cast<std::size_t>(n);
    ssize_t w = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    auto left = static_cast<std::size_t>(w);
    while (n > 0 && left >= p->iov_len) {
      left -= p->iov_len;
      ++p;
      --n;
    }
    if (n > 0) {
      p->iov_base = static_cast<char*>(p->iov_base) + left;
      p->iov_len -= left;
    }
  }
  return true;
}

bool recv_all(int fd, void* dst, std::size_t n) {
  char* c = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::recv(fd, c, n, MSG_WAITALL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

Status parse(const std::string& name, std::string* host, int* port) {
  const std::string rest = name.substr(6);  // tcp://HOST:PORT/ID
  const std::string hp = rest.substr(0, rest.find('/'));
  const auto colon = hp.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::Error("collective " + name + ": expected tcp://HOST:PORT/ID");
  }
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

class TcpCollective final : public CollectiveGroup {
 public:
  TcpCollective(std::string name, int world, std::uint64_t cap, std::vector<int> ranks,
                std::unique_ptr<MeshRendezvous> rv, sockaddr_in hub)
      : name_(std::move(name)), world_(world), cap_(cap), ranks_(std::move(ranks)),
        rendezvous_(std::move(rv)) {
    scratch_.reset(new float[kMaxChunkFloats]);
    mesh_thread_ = std::thread([this, hub] { form(hub); });
  }

  ~TcpCollective() override {
    {
      std::unique_lock<std::mutex> l(mu_);
      // Sums others still wait for go out first (a proxy done with its last step must not cut
      // its peers off before they have it): bounded, a dead peer does not hold us here.
      cv_.wait_for(l, std::chrono::seconds(5), [&] {
        for (auto& p : peers_) {
          if ((!p.queue.empty() || p.sending) && !broken_) return false;
        }
        return true;
      });
      stopping_ = true;
    }
    stop_ = true;
    kick_all();
    mesh_thread_.join();
    for (auto& p : peers_) {
      if (p.fd >= 0) ::shutdown(p.fd, SHUT_RDWR);
    }
    for (auto& p : peers_) {
      if (p.sender.joinable()) p.sender.join();
      if (p.receiver.joinable()) p.receiver.join();
      if (p.fd >= 0) ::close(p.fd);
    }
    rendezvous_.reset();
  }

  Status contribute(int rank, std::int64_t step, const float* data, std::uint64_t count,
                    std::uint64_t flags) override {
    return contribute_into(rank, step, data, count, flags, nullptr);
  }

  // The sum assembled in `into`: the peers' sums received straight into it, ours summed into it
  // and sent to the peers from there, so no copy of the buffer is left at all. Our own pieces
  // are summed straight from `data` (the caller keeps it until it has read the result), not
  // copied into a slot first. Every remote piece of `data` is sent before its chunk's sum can
  // come back, and a chunk of ours is summed (in rank order, whichever rank is ours) only once
  // its every piece is in, so `into` may be `data`. The result reads as there only once our sums
  // have left too: `into` is the caller's again as soon as it has read the result.
  Status contribute_into(int rank, std::int64_t step, const float* data, std::uint64_t count,
                         std::uint64_t flags, float* into) override {
    if (count == 0 || count > cap_) return Status::Error("collective: bad buffer size");
    if (rank < 0 || rank >= world_) return Status::Error("collective: bad rank");
    std::unique_lock<std::mutex> l(mu_);
    if (broken_) return Status::Error(error_);
    Phase* ph = phase_for(step, count, flags);
    if (ph == nullptr) return broken_ ? Status::Error(error_) : Status::Ok();  // a failed step
    const bool in_place = into != nullptr && ranks_.size() == 1;
    if (in_place) {  // no sum of `step` exists before this: it needs our piece
      ph->into_step = step;
      ph->into = into;
    }
    float* slot = slot_of(*ph, rank);
    if (!ready_) {
      // The mesh is still forming: keep the data (the caller's buffer may be parked once we
      // return) and send it when the peers are there.
      l.unlock();
      std::memcpy(slot, data, count * sizeof(float));
      l.lock();
      // The mesh may have come up during the copy, after form() sent what was held: then this
      // one goes now.
      if (ready_) {
        send_held({rank, step, count, flags}, l);
      } else {
        held_.push_back({rank, step, count, flags});
      }
      return Status::Ok();
    }
    // Each chunk to its owner: the remote ones queued (sent from `data`, no copy), ours copied
    // into our slot while they go out; back only once `data` is no longer needed.
    std::uint64_t pending = 0;
    queue_remote(*ph, rank, step, count, flags, data, &pending);
    const std::uint64_t per = chunk_floats(count, world_);
    const std::uint64_t chunks = chunk_count(count, world_);
    if (in_place) ph->src[rank] = data;
    for (std::uint64_t c = 0; c < chunks; ++c) {
      if (mesh_.proxy_of[c % world_] != mesh_.self) continue;
      const std::uint64_t lo = c * per, n = std::min(per, count - lo);
      if (!in_place) {
        l.unlock();
        std::memcpy(slot + lo, data + lo, n * sizeof(float));
        l.lock();
      }
      if (ph->step != step) break;  // failed meanwhile and reused: impossible, but never sum it
      count_in(*ph, c, flags, l);
    }
    cv_.wait(l, [&] { return pending == 0 || broken_; });
    if (broken_ && pending != 0) return Status::Error(error_);
    return Status::Ok();
  }

  const float* result(std::int64_t step, std::uint64_t* flags) override {
    std::lock_guard<std::mutex> l(mu_);
    const Phase& ph = phase_[step & 1];
    if (ph.failed_step == step) {  // the sum's data mean nothing: the flags say so
      if (flags != nullptr) *flags = ph.fail_flags;
      return ph.res.get();
    }
    if (ph.res_step != step || !ph.done || ph.sums_unsent != 0) return nullptr;
    if (flags != nullptr) *flags = ph.result_flags;
    return ph.out;
  }

  void wait(std::int64_t step, long timeout_ns) override {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::nanoseconds(timeout_ns), [&] {
      const Phase& ph = phase_[step & 1];
      return broken_ || (ph.res_step == step && ph.done && ph.sums_unsent == 0) ||
             ph.failed_step == step;
    });
  }

  Status health() const override {
    std::lock_guard<std::mutex> l(mu_);
    return broken_ ? Status::Error(error_) : Status::Ok();
  }

 private:
  // Inputs (step: slots, counts), the result (res_step: res, chunks done) and a failure
  // (failed_step) turn over independently, each by its own step and never backwards. The inputs
  // of s + 2 may arrive while this proxy's ranks have not read the result of s yet: a job's
  // first allreduce after a (re)start at step s negotiates at group step s and sends its host
  // data at s + 2, so a proxy that has the sum of s (over its link to the chunk's owner) may
  // send pieces of s + 2 that overtake the sum of s on its way to us. That sum is still ours
  // to take: a sum (or a failure) of step s is judged by the result side alone, never by the
  // inputs' step. A sum of s + 2 exists only once every rank, ours included, has contributed
  // s + 2, i.e. read s: so the result side turns over at the first sum of a later step.
  struct Phase {
    std::int64_t step = -1;       // the inputs' step
    std::uint64_t count = 0, flags = 0, chunks = 0;
    bool failed = false;          // the ranks disagree on the inputs' step's size
    std::int64_t res_step = -1;   // the result's step
    std::uint64_t result_flags = 0, res_chunks = 0, chunks_done = 0;
    bool done = false;
    std::int64_t failed_step = -1;  // the latest step of this parity known to have failed
    std::uint64_t fail_flags = 0;
    float* out = nullptr;           // where the result's sum is assembled: res, or into
    std::int64_t into_step = -1;    // contribute_into's step and buffer
    float* into = nullptr;
    std::uint64_t sums_unsent = 0;  // our sums queued from `into`, not yet sent
    std::vector<std::uint32_t> got;  // per chunk we own: contributions in (W + 1: summed)
    std::vector<std::unique_ptr<float[]>> slots;  // per rank, allocated at first use (cap)
    std::vector<const float*> src;  // per rank: its pieces' buffer if not its slot (in place)
    std::unique_ptr<float[]> res;
  };
  struct Item {
    WireHeader h;
    const float* data;
    std::uint64_t* pending;  // decremented once sent (a contribution waits for its data)
  };
  struct Peer {
    int fd = -1;
    std::string where;
    std::deque<Item> queue;
    bool sending = false;               // an item popped and still on its way
    std::condition_variable cv;         // its sender's wake-up (queue, stop, failure)
    std::thread sender, receiver;
  };
  struct Held {
    int rank;
    std::int64_t step;
    std::uint64_t count, flags;
  };

  // The phase of `step`, set up at its first message; nullptr if the step failed (mismatched
  // counts: published as failed to everyone) or is older than the phase (a protocol error).
  Phase* phase_for(std::int64_t step, std::uint64_t count, std::uint64_t flags) {
    Phase& ph = phase_[step & 1];
    // Older than the phase: only a failed step's stragglers can be (a step s + 2 begins only
    // after every rank has the result of s); dropped.
    if (ph.step > step) return nullptr;
    if (ph.step < step) {
      ph.step = step;
      ph.count = count;
      ph.flags = 0;
      ph.chunks = chunk_count(count, world_);
      ph.failed = ph.failed_step == step;
      ph.got.assign(ph.chunks, 0);
      ph.src.assign(world_, nullptr);
      if (!ph.res) ph.res.reset(new float[cap_]);
      if (ph.slots.empty()) ph.slots.resize(world_);
    }
    if (ph.failed) return nullptr;
    if (ph.count != count) {
      fail_step(ph, step, flags | ph.flags, true);
      return nullptr;
    }
    return &ph;
  }

  // The result side of `step` (see Phase), turned over to it if it is later than the last one;
  // false if the result side is already past it (a stale message) or the step failed.
  bool to_result(Phase& ph, std::int64_t step, std::uint64_t count) {
    if (ph.failed_step == step || ph.res_step > step) return false;
    if (!ph.res) ph.res.reset(new float[cap_]);
    if (ph.res_step < step) {
      ph.res_step = step;
      ph.out = ph.into_step == step && ph.into != nullptr ? ph.into : ph.res.get();
      ph.result_flags = 0;
      ph.res_chunks = chunk_count(count, world_);
      ph.chunks_done = 0;
      ph.done = false;
    }
    return true;
  }

  float* slot_of(Phase& ph, int rank) {
    if (!ph.slots[rank]) ph.slots[rank].reset(new float[cap_]);
    return ph.slots[rank].get();
  }

  // `step` cannot give a sum (the ranks disagree on its size): done, marked failed, here and
  // (once) at every peer, so that every proxy fails it instead of waiting. Whatever the inputs'
  // step is by now (a later one's pieces may be in already), the result of `step` reads failed.
  void fail_step(Phase& ph, std::int64_t step, std::uint64_t flags, bool tell) {
    if (ph.failed_step > step) return;  // a straggler of an older failure
    if (ph.step == step) ph.failed = true;
    const bool first = ph.failed_step != step;
    if (first) {
      ph.failed_step = step;
      ph.fail_flags = 0;
    }
    ph.fail_flags |= flags | kFlagReduceFailed;
    if (first && tell && ready_) {
      WireHeader h{kMagic, kFailedStep, -1, 0, step, ph.fail_flags, ph.count, 0, 0};
      for (auto& p : peers_) {
        if (p.fd >= 0) p.queue.push_back({h, nullptr, nullptr});
      }
    }
    kick_all();
  }

  void fail_locked(const std::string& why) {
    if (!broken_) {
      broken_ = true;
      error_ = why;
    }
    kick_all();
  }

  void kick_all() {
    cv_.notify_all();
    for (auto& p : peers_) p.cv.notify_one();
  }

  void queue_remote(Phase& ph, int rank, std::int64_t step, std::uint64_t count,
                    std::uint64_t flags, const float* data, std::uint64_t* pending) {
    const std::uint64_t per = chunk_floats(count, world_);
    std::vector<bool> sent(peers_.size(), false);
    for (std::uint64_t c = 0; c < ph.chunks; ++c) {
      const int owner = mesh_.proxy_of[c % world_];
      if (owner == mesh_.self) continue;
      const std::uint64_t lo = c * per, n = std::min(per, count - lo);
      WireHeader h{kMagic, kContribution, rank, 0, step, flags, count,
                   static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(n)};
      peers_[owner].queue.push_back({h, data + lo, pending});
      if (pending != nullptr) ++*pending;
      sent[owner] = true;
    }
    // A peer that owns none of this step's chunks still hears from every rank once: a rank
    // whose count differs (a failing proxy's one float) must reach every proxy to fail the step.
    for (std::size_t p = 0; p < peers_.size(); ++p) {
      if (static_cast<int>(p) == mesh_.self || sent[p]) continue;
      peers_[p].queue.push_back(
          {WireHeader{kMagic, kContribution, rank, 0, step, flags, count, 0, 0}, nullptr, nullptr});
    }
    for (auto& p : peers_) p.cv.notify_one();
  }

  // One rank's piece of chunk c (which we own) is in; the last one sums it.
  void count_in(Phase& ph, std::uint64_t c, std::uint64_t flags, std::unique_lock<std::mutex>& l) {
    ph.flags |= flags;
    if (++ph.got[c] < static_cast<std::uint32_t>(world_)) return;
    ph.got[c] = world_ + 1;
    const std::int64_t step = ph.step;
    // A sum of this step: every rank, ours too, has read the last result of this parity.
    if (!to_result(ph, step, ph.count)) return;
    // Every rank's piece of c is in, each with its rank's flags: ph.flags is the whole OR.
    const std::uint64_t f = ph.flags, per = chunk_floats(ph.count, world_);
    const std::uint64_t lo = c * per, n = std::min(per, ph.count - lo);
    std::vector<const float*> in(world_);
    for (int r = 0; r < world_; ++r) in[r] = (ph.src[r] != nullptr ? ph.src[r] : slot_of(ph, r)) + lo;
    // Summed where the result is assembled and sent to the peers from there: res stays put
    // until every rank has read this step; `into` (contribute_into) is the caller's again once
    // it has read the result, so the result waits for these sends (sums_unsent).
    float* out = ph.out + lo;
    const bool in_into = ph.out != ph.res.get();
    l.unlock();
    sum_chunk_in_rank_order(in.data(), world_, n, out);
    l.lock();
    if (ph.step != step || ph.failed || ph.res_step != step) return;
    WireHeader h{kMagic, kSum, -1, 0, step, f, ph.count, static_cast<std::uint32_t>(c),
                 static_cast<std::uint32_t>(n)};
    for (auto& p : peers_) {
      if (p.fd >= 0) {
        p.queue.push_back({h, out, in_into ? &ph.sums_unsent : nullptr});
        if (in_into) ++ph.sums_unsent;
        p.cv.notify_one();
      }
    }
    chunk_done(ph, f);
  }

  void chunk_done(Phase& ph, std::uint64_t flags) {
    ph.result_flags |= flags;
    if (++ph.chunks_done == ph.res_chunks) ph.done = true;
    cv_.notify_all();
  }

  void form(sockaddr_in hub) {
    auto m = join_mesh(hub, mesh_id_hash(name_), world_, ranks_,
                       std::chrono::steady_clock::now() + kMeshDeadline, &stop_);
    std::unique_lock<std::mutex> l(mu_);
    if (!m) {
      if (!stopping_) fail_locked("collective " + name_ + ": " + m.reason());
      return;
    }
    mesh_ = std::move(m.value());
    peers_ = std::vector<Peer>(mesh_.peers.size());
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      peers_[i].fd = mesh_.peers[i].fd;
      peers_[i].where = mesh_.peers[i].where;
    }
    ready_ = true;
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      if (peers_[i].fd < 0) continue;
      peers_[i].sender = std::thread([this, i] { send_loop(i); });
      peers_[i].receiver = std::thread([this, i] { receive_loop(i); });
    }
    // What was contributed before the mesh was up: its data waits in our slots.
    for (const Held& h : held_) send_held(h, l);
    held_.clear();
    // A step that failed while the mesh formed: its held data never goes out, so say so.
    for (Phase& ph : phase_) {
      if (ph.failed) {
        WireHeader h{kMagic, kFailedStep, -1, 0, ph.step, ph.fail_flags, ph.count, 0, 0};
        for (auto& p : peers_) {
          if (p.fd >= 0) p.queue.push_back({h, nullptr, nullptr});
        }
      }
    }
    kick_all();
  }

  // A contribution made before the mesh was up: its data waits in our slot for its rank.
  void send_held(const Held& h, std::unique_lock<std::mutex>& l) {
    Phase& ph = phase_[h.step & 1];
    if (ph.step != h.step || ph.failed) return;
    queue_remote(ph, h.rank, h.step, h.count, h.flags, ph.slots[h.rank].get(), nullptr);
    for (std::uint64_t c = 0; c < ph.chunks; ++c) {
      if (mesh_.proxy_of[c % world_] == mesh_.self) count_in(ph, c, h.flags, l);
      if (ph.step != h.step) break;
    }
  }

  void send_loop(std::size_t i) {
    Peer& p = peers_[i];
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      p.cv.wait(l, [&] { return !p.queue.empty() || stopping_ || broken_; });
      if (p.queue.empty() || broken_) return;
      Item it = p.queue.front();
      p.queue.pop_front();
      p.sending = true;
      l.unlock();
      const bool ok = send_msg(p.fd, it.h, it.data);
      l.lock();
      p.sending = false;
      if (!ok) {
        if (!stopping_) lost(p, "sending");
        return;
      }
      if (it.pending != nullptr && --*it.pending == 0) cv_.notify_all();
      if (p.queue.empty()) cv_.notify_all();  // a closing group waits for its queues to drain
    }
  }

  void receive_loop(std::size_t i) {
    Peer& p = peers_[i];
    for (;;) {
      WireHeader h;
      if (!recv_all(p.fd, &h, sizeof h)) break;
      std::unique_lock<std::mutex> l(mu_);
      const std::uint64_t per = h.count > 0 ? chunk_floats(h.count, world_) : 0;
      if (h.magic != kMagic || h.step < 0 || h.count == 0 || h.count > cap_ ||
          h.floats > kMaxChunkFloats || (h.floats > 0 && (h.chunk * per + h.floats > h.count)) ||
          h.kind < kContribution || h.kind > kFailedStep ||
          (h.kind == kContribution && (h.rank < 0 || h.rank >= world_))) {
        fail_locked("collective " + name_ + ": a malformed message from the proxy at " + p.where);
        return;
      }
      Phase& phase = phase_[h.step & 1];
      const bool owned = mesh_.proxy_of[h.chunk % world_] == mesh_.self;
      if (h.kind == kFailedStep) {
        (void)phase_for(h.step, h.count, h.flags);  // a later step's inputs turn over to it
        fail_step(phase, h.step, h.flags, false);
        continue;
      }
      if (h.kind == kSum) {
        // The result side's alone (see Phase): the inputs may be a step further on by now.
        const bool take = h.floats > 0 && !owned && to_result(phase, h.step, h.count);
        float* dst = take ? phase.out + h.chunk * per : scratch_.get();
        l.unlock();
        if (h.floats > 0 && !recv_all(p.fd, dst, h.floats * sizeof(float))) break;
        l.lock();
        if (take && phase.res_step == h.step && phase.failed_step != h.step) {
          chunk_done(phase, h.flags);
        }
        continue;
      }
      // A contribution: ours to take if it is to a chunk we own. Anything else (a failed or
      // older step's stragglers) is read into scratch and dropped.
      Phase* ph = phase_for(h.step, h.count, h.flags);
      const bool take = ph != nullptr && h.floats > 0 && owned && h.kind == kContribution;
      float* dst = take ? slot_of(*ph, h.rank) + h.chunk * per : scratch_.get();
      l.unlock();
      if (h.floats > 0 && !recv_all(p.fd, dst, h.floats * sizeof(float))) break;
      l.lock();
      if (ph == nullptr || ph->step != h.step || ph->failed || h.kind != kContribution) continue;
      if (h.floats == 0) {
        ph->flags |= h.flags;  // a rank's word to a proxy owning none of the step's chunks
      } else if (take) {
        count_in(*ph, h.chunk, h.flags, l);
      }
    }
    std::lock_guard<std::mutex> l(mu_);
    if (!stopping_) lost(p, "receiving");
  }

  void lost(const Peer& p, const char* doing) {
    std::string ranks;
    for (int r = 0; r < world_; ++r) {
      if (&peers_[mesh_.proxy_of[r]] == &p) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    }
    fail_locked("collective " + name_ + ": lost the connection to the proxy of ranks " + ranks +
                " at " + p.where + " (" + doing + "; that proxy or its machine is gone)");
  }

  const std::string name_;
  const int world_;
  const std::uint64_t cap_;
  const std::vector<int> ranks_;
  std::unique_ptr<MeshRendezvous> rendezvous_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  bool stopping_ = false, ready_ = false, broken_ = false;
  std::string error_;
  Mesh mesh_;
  std::vector<Peer> peers_;
  std::vector<Held> held_;
  Phase phase_[2];
  std::unique_ptr<float[]> scratch_;
  std::thread mesh_thread_;
};

}  // namespace

Result<std::unique_ptr<CollectiveGroup>> open_tcp_collective(const std::string& name, int world,
                                                             std::uint64_t capacity,
                                                             bool serve_rendezvous,
                                                             const std::vector<int>& ranks) {
  if (world <= 0 || world > spec::kMaxRunWorld) return Status::Error("collective: bad world size");
  if (capacity == 0 || capacity > (1ull << 28)) return Status::Error("collective: bad buffer size");
  if (ranks.empty()) return Status::Error("collective " + name + ": no ranks to contribute");
  std::string host;
  int port = 0;
  if (auto s = parse(name, &host, &port); !s) return s;
  auto addr = resolve(host, port);
  if (!addr) return addr.status();
  std::unique_ptr<MeshRendezvous> rv;
  if (serve_rendezvous) {
    int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(lfd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0 ||
        ::listen(lfd, 64) != 0) {
      const std::string why = std::strerror(errno);
      ::close(lfd);
      return Status::Error("collective " + name + ": cannot serve the rendezvous: " + why);
    }
    rv = std::make_unique<MeshRendezvous>(lfd, world, mesh_id_hash(name));
  }
  return std::unique_ptr<CollectiveGroup>(
      new TcpCollective(name, world, capacity, ranks, std::move(rv), *addr));
}

}  // namespace orrery::runtime
