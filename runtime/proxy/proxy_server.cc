#include "runtime/proxy/proxy_server.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <sstream>

#include "runtime/proxy/address_space.h"
#include "runtime/proxy/collective_negotiation.h"
#include "runtime/proxy/kernels.h"
#include "runtime/proxy/shard.h"

namespace orrery::runtime {
namespace {

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// code 1: the request failed; code 2: the worker's session is over (fenced, stopped, dropped).
Response error_response(const std::string& why, int code = 1) {
  Response r;
  r.code = code;
  std::snprintf(r.error, sizeof r.error, "%s", why.c_str());
  return r;
}

// The host group's step for the allreduce of worker step s: two ahead, so that the two steps
// before a job incarnation's first one (the negotiation's rounds) are never negative.
std::int64_t group_step(std::int64_t s) { return s + 2; }

}  // namespace

Result<std::unique_ptr<ProxyServer>> ProxyServer::create(const ProxyOptions& o,
                                                         std::unique_ptr<DeviceBackend> b) {
  std::unique_ptr<ProxyServer> p(new ProxyServer(o, std::move(b)));
  auto m = ShmMapping::create(o.shm_name, sizeof(ProxySegment));
  if (!m.ok()) return m.status();
  p->map_ = std::move(m.value());
  p->seg_ = new (p->map_.data()) ProxySegment;  // the object is zero-filled by ftruncate
  ProxyHeader& h = p->seg_->header;
  h.magic = kProxyMagic;
  h.version = kProxyVersion;
  h.device = o.device;
  h.pid = static_cast<std::int32_t>(::getpid());
  h.mem_bytes = p->be_->mem_info().total_bytes;
  std::random_device rd;
  p->nonce_ = ((static_cast<std::uint64_t>(rd()) << 32) ^ rd()) ^
              (static_cast<std::uint64_t>(::getpid()) << 20) ^ now_ns();
  // Every copy to or from a worker passes through the segment's data areas.
  p->be_->pin_host_memory(p->map_.data(), sizeof(ProxySegment));
  std::snprintf(h.backend, sizeof h.backend, "%s", p->be_->name().c_str());
  h.ready.store(1, std::memory_order_release);
  return p;
}

ProxyServer::~ProxyServer() {
  std::vector<int> jobs;
  for (auto& [j, s] : sessions_) jobs.push_back(j);
  for (int j : jobs) drop_session(j, "the proxy is shutting down");
  ::shm_unlink(opt_.shm_name.c_str());
}

void ProxyServer::request_stop() { stop_ = true; }

void ProxyServer::run() {
  while (!stop_ && (opt_.stop_flag == nullptr || *opt_.stop_flag == 0)) {
    const std::uint32_t bell = seg_->header.doorbell.load(std::memory_order_seq_cst);
    bool worked = process_commands();
    worked |= discover_slots();
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      Session& s = it->second;
      ++it;  // serve_session may finish the session (erasing it)
      worked |= serve_session(s);
    }
    if (++loops_ % 4096 == 0) check_dead_workers();
    if (worked && failed_.empty()) {
      if (std::string why = be_->broken(); !why.empty()) {
        // Nothing more can run on this device context: stop, and let the node runtime report
        // the jobs here as crashed (they fail over from their checkpoints) and start a fresh
        // proxy for the device.
        failed_ = why;
        std::fprintf(stderr, "orrery-proxy[%d]: the device is unusable (%s); exiting\n",
                     opt_.device, why.c_str());
        break;
      }
    }
    if (!worked) idle_wait(bell);
  }
}

void ProxyServer::idle_wait(std::uint32_t bell) {
  ProxyHeader& h = seg_->header;
  // A session whose resident rank waits on the allreduce has something to watch besides the
  // doorbell: the collective's result.
  CollectiveGroup* coll = nullptr;
  std::int64_t coll_step = -1;
  bool on_device = false;
  for (auto& [j, s] : sessions_) {
    if (s.cur < s.order.size()) {
      auto r = s.ranks.find(s.order[s.cur]);
      if (r != s.ranks.end() && r->second.in_reduce && s.coll) {
        coll = s.coll.get();
        coll_step = group_step(r->second.reduce_step);
        if (s.reduce == Session::Reduce::kNegotiating) coll_step = s.negotiation_step;
        if (s.reduce == Session::Reduce::kBootstrapping) coll_step = s.negotiation_step + 1;
        on_device = s.reduce == Session::Reduce::kDevice;
      }
    }
  }
  // The flags are in and the device is summing: nothing on the host to watch; sleep briefly on
  // the doorbell rather than spin (a core spinning here starves NCCL's own threads).
  if (coll != nullptr && on_device && coll->result(coll_step, nullptr) != nullptr) {
    h.proxy_sleeping.store(1, std::memory_order_seq_cst);
    if (h.doorbell.load(std::memory_order_seq_cst) == bell) futex_wait(&h.doorbell, bell, 20'000);
    h.proxy_sleeping.store(0, std::memory_order_relaxed);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  int n = 0;
  while (h.doorbell.load(std::memory_order_seq_cst) == bell) {
    if (coll != nullptr && coll->result(coll_step, nullptr) != nullptr) return;
    spin_pause(++n);
    if (n % 64 == 0 &&
        std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(opt_.spin_ns)) {
      break;
    }
  }
  if (h.doorbell.load(std::memory_order_seq_cst) != bell) return;
  if (coll != nullptr) {
    // Requests of other jobs on this device wait at most this long behind the collective.
    coll->wait(coll_step, 2'000'000);
    check_dead_workers();
    return;
  }
  h.proxy_sleeping.store(1, std::memory_order_seq_cst);
  if (h.doorbell.load(std::memory_order_seq_cst) == bell) futex_wait(&h.doorbell, bell, 20'000'000);
  h.proxy_sleeping.store(0, std::memory_order_relaxed);
  check_dead_workers();
}

bool ProxyServer::process_commands() {
  ProxyHeader& h = seg_->header;
  bool any = false;
  std::uint32_t tail = h.cmd_tail.load(std::memory_order_relaxed);
  while (h.cmd_head.load(std::memory_order_acquire) != tail) {
    const Command c = h.cmds[tail % kCommandDepth];
    h.cmd_tail.store(++tail, std::memory_order_release);
    any = true;
    switch (c.kind) {
      case CommandKind::kCheckpoint: {
        auto ne = newest_epoch_.find(c.job);
        if (ne != newest_epoch_.end() && c.epoch < ne->second) break;  // fenced
        pending_[c.job] = PendingCheckpoint{c.epoch, c.at_step, c.then_stop != 0};
        std::fprintf(stderr, "orrery-proxy[%d]: checkpoint requested job=%d epoch=%lld at=%lld%s\n",
                     opt_.device, c.job, static_cast<long long>(c.epoch),
                     static_cast<long long>(c.at_step), c.then_stop ? " then stop" : "");
        break;
      }
      case CommandKind::kFreeJob: {
        auto it = sessions_.find(c.job);
        if (it != sessions_.end() && it->second.epoch <= c.epoch) {
          drop_session(c.job, "job " + std::to_string(c.job) + " epoch " +
                                  std::to_string(c.epoch) + " stopped by the node");
        }
        auto p = pending_.find(c.job);
        if (p != pending_.end() && p->second.epoch <= c.epoch) pending_.erase(p);
        break;
      }
      case CommandKind::kShutdown:
        stop_ = true;
        break;
    }
  }
  return any;
}

bool ProxyServer::discover_slots() {
  bool any = false;
  for (int i = 0; i < kMaxWorkers; ++i) {
    WorkerSlot& s = seg_->slots[i];
    if (owner_[i].job >= 0) continue;
    if (s.state.load(std::memory_order_acquire) != static_cast<std::uint32_t>(SlotState::kClaimed)) {
      continue;
    }
    const std::uint32_t tail = s.req_tail.load(std::memory_order_relaxed);
    if (s.req_head.load(std::memory_order_acquire) == tail) continue;
    const Request r = s.req[tail % kRingDepth];
    any = true;
    Status st = r.op == static_cast<std::uint32_t>(Op::kHello)
                    ? hello(i, r)
                    : Status::Error("the first request on a slot must be hello");
    if (!st) {
      s.req_tail.store(tail + 1, std::memory_order_release);
      publish_response(&s, error_response(st.reason()));
      s.state.store(static_cast<std::uint32_t>(SlotState::kClosed), std::memory_order_release);
    }
    // On success the hello stays queued: it is answered when the rank becomes resident.
  }
  return any;
}

Status ProxyServer::hello(int slot, const Request& r) {
  const int job = static_cast<int>(r.a[0]);
  const auto epoch = static_cast<std::int64_t>(r.a[1]);
  const int rank = static_cast<int>(r.a[2]);
  const int world = static_cast<int>(r.a[3]);
  const auto restore_step = static_cast<std::int64_t>(r.a[4]);
  const int pid = static_cast<int>(r.a[5]);
  if (job < 0 || world <= 0 || world > 65536 || rank < 0 || rank >= world) {
    return Status::Error("hello: bad job/rank/world");
  }
  // data: "<collective>\n<r>,<r>,..."
  WorkerSlot& ws = seg_->slots[slot];
  std::string text(reinterpret_cast<const char*>(ws.data),
                   strnlen(reinterpret_cast<const char*>(ws.data), 4096));
  const auto nl = text.find('\n');
  if (nl == std::string::npos || nl == 0) return Status::Error("hello: no collective name");
  const std::string collective = text.substr(0, nl);
  std::vector<int> order;
  std::stringstream ss(text.substr(nl + 1));
  for (std::string part; std::getline(ss, part, ',');) {
    if (part.empty()) continue;
    int v = std::atoi(part.c_str());
    if (v < 0 || v >= world) return Status::Error("hello: splice rank out of range");
    order.push_back(v);
  }
  if (std::find(order.begin(), order.end(), rank) == order.end()) {
    return Status::Error("hello: rank " + std::to_string(rank) + " is not in its splice group");
  }
  auto ne = newest_epoch_.find(job);
  if (ne != newest_epoch_.end() && epoch < ne->second) {
    return Status::Error("fenced: job " + std::to_string(job) + " epoch " + std::to_string(epoch) +
                         " is older than epoch " + std::to_string(ne->second));
  }
  auto it = sessions_.find(job);
  if (it != sessions_.end() && it->second.epoch < epoch) {
    drop_session(job, "superseded by epoch " + std::to_string(epoch));
    it = sessions_.end();
  }
  newest_epoch_[job] = epoch;
  if (it == sessions_.end()) {
    Session s;
    s.job = job;
    s.epoch = epoch;
    s.world = world;
    s.order = order;
    s.collective = collective;
    for (int rr : order) s.ranks[rr].rank = rr;
    it = sessions_.emplace(job, std::move(s)).first;
  }
  Session& s = it->second;
  if (s.order != order || s.world != world || s.collective != collective) {
    return Status::Error("hello: rank " + std::to_string(rank) +
                         " disagrees with its splice group's placement or collective");
  }
  Rank& rk = s.ranks[rank];
  if (rk.slot >= 0 || rk.gone) {
    return Status::Error("hello: rank " + std::to_string(rank) + " of job " + std::to_string(job) +
                         " is already attached");
  }
  rk.slot = slot;
  rk.pid = pid;
  rk.restore_step = restore_step;
  ws.job = job;
  ws.rank = rank;
  ws.epoch = epoch;
  ws.pid = pid;
  ws.steps_done.store(restore_step > 0 ? restore_step : 0);
  ws.checkpointed.store(-1);
  owner_[slot] = {job, rank};
  return Status::Ok();
}

bool ProxyServer::serve_session(Session& s) {
  if (s.cur >= s.order.size()) return false;
  Rank& rk = s.ranks[s.order[s.cur]];
  if (rk.slot < 0) return false;  // the resident rank has not attached yet
  WorkerSlot& ws = seg_->slots[rk.slot];
  be_->bind_worker(s.job, rk.rank);
  if (rk.in_reduce) {
    if (s.reduce == Session::Reduce::kNegotiating || s.reduce == Session::Reduce::kBootstrapping) {
      return serve_negotiation(s, rk, ws);
    }
    std::uint64_t flags = 0;
    const float* res = s.coll->result(group_step(rk.reduce_step), &flags);
    if (res == nullptr) return false;
    if ((flags & kFlagReduceFailed) != 0) {
      return answer_reduce_error(
          rk, ws, fail_reduce(s, rk, "another proxy of the job failed its part of the allreduce "
                                     "on the devices (its log says why)"));
    }
    if (s.reduce == Session::Reduce::kDevice) {
      auto ready = s.dcoll->ready(rk.reduce_step);
      if (!ready) return answer_reduce_error(rk, ws, fail_reduce(s, rk, ready.reason()));
      if (!ready.value()) return false;
    }
    s.coll_done_once = true;
    const std::uint64_t t0 = now_ns();
    Response out;
    Status st = s.reduce == Session::Reduce::kDevice
                    ? s.dcoll->deliver(rk.rank, rk.reduce_step, rk.reduce_buf, rk.reduce_count)
                    : be_->copy_h2d(rk.reduce_buf, res, rk.reduce_count * sizeof(float));
    rk.in_reduce = false;
    rk.last_flags = flags;
    rk.last_reduce_step = rk.reduce_step;
    if ((flags & kFlagCheckpoint) != 0) {
      // Agreed: this job's pending request is served by this boundary.
      auto p = pending_.find(s.job);
      if (p != pending_.end() && (p->second.at_step < 0 || p->second.at_step <= rk.reduce_step + 1)) {
        pending_.erase(p);
      }
    }
    if (!st && s.reduce == Session::Reduce::kDevice) st = fail_reduce(s, rk, st.reason());
    if (!st) out = error_response(st.reason());
    out.v[0] = flags;
    ws.busy_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    publish_response(&ws, out);
    return true;
  }
  const std::uint32_t tail = ws.req_tail.load(std::memory_order_relaxed);
  if (ws.req_head.load(std::memory_order_acquire) == tail) return false;
  const Request r = ws.req[tail % kRingDepth];
  ws.req_tail.store(tail + 1, std::memory_order_release);
  ++stats_.requests;
  const std::uint64_t t0 = now_ns();
  Response out;
  const bool answer = serve(s, rk, r, &out);
  ws.busy_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
  const int job = s.job;
  if (answer) publish_response(&ws, out);
  if (r.op == static_cast<std::uint32_t>(Op::kBye)) {
    finish_rank(s, rk, "bye");
    return true;  // `s` may be gone
  }
  if (rk.in_reduce && rk.contributed && s.order.size() > 1) {
    if (auto st = switch_to_next(s); !st) {
      std::fprintf(stderr, "orrery-proxy[%d]: splice switch failed for job %d: %s\n", opt_.device,
                   job, st.reason().c_str());
      drop_session(job, st.reason());
    }
  }
  return true;
}

Result<std::uint64_t> ProxyServer::check_range(const Session& s, const Rank& rk, std::uint64_t addr,
                                                std::uint64_t len, const std::string& what) const {
  auto it = rk.allocs.upper_bound(addr);
  if (it != rk.allocs.begin()) {
    --it;
    const std::uint64_t off = addr - it->first;
    if (off < it->second.size && len <= it->second.size - off) return addr;
  }
  return Status::Error(what + ": " + hex(addr) + "+" + std::to_string(len) +
                       " is not within an allocation of job " + std::to_string(s.job) + " rank " +
                       std::to_string(rk.rank) + " (refused, not dereferenced)");
}

// One proxy holds every rank: nothing to agree on; the backend sums on the device if it can.
// Several: each proxy contributes its offer for all its ranks two group steps before the first
// one, and the rank that asked waits (resident: no splice switch) until the rounds are decoded.
Status ProxyServer::choose_reduce(Session& s, std::int64_t step, std::uint64_t count) {
  if (s.world == static_cast<int>(s.order.size())) {
    DeviceCollectiveSetup setup;
    setup.world = s.world;
    setup.ranks_by_device = {s.order};
    std::sort(setup.ranks_by_device[0].begin(), setup.ranks_by_device[0].end());
    setup.count = count;
    auto d = be_->open_device_collective(setup);
    if (d) {
      s.dcoll = std::move(d.value());
      s.reduce = Session::Reduce::kDevice;
    } else {
      if (be_->name() != "host") {
        std::fprintf(stderr, "orrery-proxy[%d]: job %d sums on the host: %s\n", opt_.device,
                     s.job, d.reason().c_str());
      }
      s.reduce = Session::Reduce::kHost;
    }
    return Status::Ok();
  }
  const CollectiveOffer offer = be_->collective_offer();
  s.negotiation_step = group_step(step) - 2;
  for (int r : s.order) {
    const std::vector<float> v =
        negotiation_offer(s.world, r, nonce_, offer, static_cast<std::uint32_t>(count));
    if (auto st = s.coll->contribute(r, s.negotiation_step, v.data(), v.size(), 0); !st) return st;
  }
  s.reduce = Session::Reduce::kNegotiating;
  return Status::Ok();
}

// The rank that opened the negotiation stays resident until it is over; then it contributes,
// and the next rank gets the device.
bool ProxyServer::serve_negotiation(Session& s, Rank& rk, WorkerSlot& ws) {
  const bool round1 = s.reduce == Session::Reduce::kNegotiating;
  const float* sum = s.coll->result(s.negotiation_step + (round1 ? 0 : 1), nullptr);
  if (sum == nullptr) return false;
  Status st = round1 ? finish_negotiation(s, sum) : finish_bootstrap(s, sum);
  if (st && s.reduce == Session::Reduce::kBootstrapping) return true;  // round 2 is out
  if (st) st = contribute(s, rk);
  if (!st) return answer_reduce_error(rk, ws, fail_reduce(s, rk, st.reason()));
  if (s.order.size() > 1) {
    if (auto sw = switch_to_next(s); !sw) drop_session(s.job, sw.reason());
  }
  return true;
}

// Every proxy decodes the same sum: they all take the same way, or this one fails the job's
// allreduce (its workers exit and the node reports the job) rather than sum differently.
Status ProxyServer::finish_negotiation(Session& s, const float* sum) {
  auto n = decode_negotiation(sum, s.world, nonce_);
  if (!n) return n.status();
  if (!n->on_device) {
    if (be_->name() != "host") {
      std::fprintf(stderr, "orrery-proxy[%d]: job %d sums on the host: %s\n", opt_.device, s.job,
                   n->why.c_str());
    }
    s.reduce = Session::Reduce::kHost;
    return Status::Ok();
  }
  s.agreed = std::move(n->setup);
  // Round 2: the communicator's id, from the proxy holding rank 0.
  CollectiveId id{};
  bool have_id = false;
  if (std::find(s.order.begin(), s.order.end(), 0) != s.order.end()) {
    auto made = be_->new_collective_id();
    if (made) {
      id = made.value();
      have_id = true;
    } else {
      // Every proxy reads the missing id in round 2 and fails the job's allreduce alike.
      std::fprintf(stderr, "orrery-proxy[%d]: job %d: %s\n", opt_.device, s.job,
                   made.reason().c_str());
    }
  }
  for (int r : s.order) {
    const std::vector<float> v = id_offer(r, have_id ? &id : nullptr);
    if (auto st = s.coll->contribute(r, s.negotiation_step + 1, v.data(), v.size(), 0); !st) {
      return st;
    }
  }
  s.reduce = Session::Reduce::kBootstrapping;
  return Status::Ok();
}

Status ProxyServer::finish_bootstrap(Session& s, const float* sum) {
  auto id = decode_id(sum);
  if (!id) return id.status();
  s.agreed.id = id.value();
  auto d = be_->open_device_collective(s.agreed);
  if (!d) return Status::Error("the job's proxies agreed to sum on the devices, but " + d.reason());
  s.dcoll = std::move(d.value());
  s.reduce = Session::Reduce::kDevice;
  std::fprintf(stderr, "orrery-proxy[%d]: job %d sums on %zu devices over NCCL (device %d)\n",
               opt_.device, s.job, s.agreed.ranks_by_device.size(), s.agreed.device_rank);
  return Status::Ok();
}

Status ProxyServer::fail_reduce(Session& s, Rank& rk, const std::string& why) {
  if (s.reduce != Session::Reduce::kFailed) {
    s.reduce = Session::Reduce::kFailed;
    s.reduce_error = why;
    std::fprintf(stderr, "orrery-proxy[%d]: job %d: the allreduce fails: %s\n", opt_.device, s.job,
                 why.c_str());
  }
  if (!rk.contributed && s.coll) {
    (void)contribute_flags(s, rk, kFlagReduceFailed);
    rk.contributed = true;
  }
  return Status::Error(s.reduce_error);
}

bool ProxyServer::answer_reduce_error(Rank& rk, WorkerSlot& ws, const Status& st) {
  rk.in_reduce = false;
  publish_response(&ws, error_response("allreduce: " + st.reason()));
  return true;
}

// The step's flags without data: one float, so that every rank of the job sees the same flags.
Status ProxyServer::contribute_flags(Session& s, const Rank& rk, std::uint64_t flags) {
  const float none = 0.0f;
  return s.coll->contribute(rk.rank, group_step(rk.reduce_step), &none, 1, flags);
}

// On the device: the data to the device collective, and one float with the flags to the host
// group (the flags decide checkpoints and stops, and every rank must see the same).
Status ProxyServer::contribute(Session& s, Rank& rk) {
  const std::int64_t step = rk.reduce_step;
  const std::uint64_t count = rk.reduce_count;
  Status st;
  if (s.reduce == Session::Reduce::kDevice) {
    st = s.dcoll->contribute(rk.rank, step, rk.reduce_buf, count);
    if (st) st = contribute_flags(s, rk, flags_for(s, step));
  } else {
    const void* src = be_->host_view(rk.reduce_buf, count * sizeof(float));
    std::vector<float> staging;
    if (src == nullptr) {
      staging.resize(count);
      st = be_->copy_d2h(staging.data(), rk.reduce_buf, count * sizeof(float));
      src = staging.data();
    }
    if (st) {
      st = s.coll->contribute(rk.rank, group_step(step), static_cast<const float*>(src), count,
                              flags_for(s, step));
    }
  }
  rk.contributed = st.ok();
  return st;
}

std::uint64_t ProxyServer::flags_for(const Session& s, std::int64_t step) {
  auto p = pending_.find(s.job);
  if (p == pending_.end() || p->second.epoch < s.epoch) return 0;
  if (p->second.at_step >= 0 && p->second.at_step != step + 1) return 0;
  return kFlagCheckpoint | (p->second.then_stop ? kFlagStop : 0);
}

bool ProxyServer::serve(Session& s, Rank& rk, const Request& r, Response* out) {
  WorkerSlot& ws = seg_->slots[rk.slot];
  auto fail = [&](const std::string& why) {
    *out = error_response(why);
    return true;
  };
  switch (static_cast<Op>(r.op)) {
    case Op::kHello: {
      if (rk.restore_step >= 0) {
        // On failure the worker gets the error and exits; its death frees the rank.
        if (auto st = restore_rank(s, rk); !st) return fail(st.reason());
      }
      rk.hello_done = true;
      ws.hello_done.store(1, std::memory_order_release);
      out->v[0] = rk.restore_step >= 0 ? 1 : 0;
      out->v[1] = rk.restored_states.size();
      out->v[2] = be_->mem_info().total_bytes;
      return true;
    }
    case Op::kAlloc: {
      const std::uint64_t bytes = r.a[0];
      if (bytes == 0 || bytes > kWindowBytes) return fail("alloc: bad size " + std::to_string(bytes));
      const std::uint64_t size = round_granule(bytes);
      if (rk.replay_seq < rk.alloc_seq) {
        // After a restore the workload repeats its allocations: hand back the restored ones.
        for (auto& [addr, a] : rk.allocs) {
          if (a.seq == rk.replay_seq) {
            if (a.size != size) return fail("alloc: size differs from the checkpoint's allocation");
            ++rk.replay_seq;
            out->v[0] = addr;
            return true;
          }
        }
        return fail("alloc: allocation " + std::to_string(rk.replay_seq) +
                    " of the checkpoint was freed; the allocation sequence cannot be replayed");
      }
      if (rk.next_offset + size > kWindowBytes) return fail("alloc: the job's window is full");
      const std::uint64_t addr = job_window(s.job) + rk.next_offset;
      if (auto st = be_->allocate(addr, size); !st) return fail("alloc: " + st.reason());
      rk.allocs[addr] = Alloc{size, rk.alloc_seq};
      ++rk.alloc_seq;
      rk.replay_seq = rk.alloc_seq;
      rk.next_offset += size;
      out->v[0] = addr;
      return true;
    }
    case Op::kFree: {
      auto it = rk.allocs.find(r.a[0]);
      if (it == rk.allocs.end()) {
        return fail("free: " + hex(r.a[0]) + " is not an allocation of job " +
                    std::to_string(s.job) + " rank " + std::to_string(rk.rank));
      }
      be_->free(it->first, it->second.size);
      rk.allocs.erase(it);
      return true;
    }
    case Op::kCopyH2D: {
      if (r.a[1] > kDataBytes) return fail("copy: more than the data area");
      auto c = check_range(s, rk, r.a[0], r.a[1], "copy_h2d dst");
      if (!c) return fail(c.reason());
      if (auto st = be_->copy_h2d(r.a[0], ws.data, r.a[1]); !st) return fail(st.reason());
      return true;
    }
    case Op::kCopyD2H: {
      if (r.a[1] > kDataBytes) return fail("copy: more than the data area");
      auto c = check_range(s, rk, r.a[0], r.a[1], "copy_d2h src");
      if (!c) return fail(c.reason());
      if (auto st = be_->copy_d2h(ws.data, r.a[0], r.a[1]); !st) return fail(st.reason());
      return true;
    }
    case Op::kCopyD2D: {
      auto d = check_range(s, rk, r.a[0], r.a[2], "copy_d2d dst");
      if (!d) return fail(d.reason());
      auto c = check_range(s, rk, r.a[1], r.a[2], "copy_d2d src");
      if (!c) return fail(c.reason());
      if (auto st = be_->copy_d2d(r.a[0], r.a[1], r.a[2]); !st) return fail(st.reason());
      return true;
    }
    case Op::kLaunch: {
      const std::string name(r.name, strnlen(r.name, sizeof r.name));
      const KernelDef* k = find_kernel(name);
      if (k == nullptr) return fail("launch: no kernel named '" + name + "'");
      const int nargs = static_cast<int>(r.a[0]);
      if (nargs != k->nargs || nargs > kMaxKernelArgs) {
        return fail("launch " + name + ": takes " + std::to_string(k->nargs) + " arguments, " +
                    std::to_string(nargs) + " given");
      }
      const std::uint64_t* args = &r.a[1];
      std::vector<PointerExtent> ext;
      if (auto st = k->extents(args, &ext); !st) return fail("launch " + name + ": " + st.reason());
      for (const auto& e : ext) {
        auto c = check_range(s, rk, args[e.arg], e.bytes,
                             "launch " + name + " argument " + std::to_string(e.arg));
        if (!c) return fail(c.reason());
        // A GPU faults on a misaligned float access, and the fault takes the whole device context
        // down with it: refused here, on every backend alike.
        if (args[e.arg] % alignof(float) != 0) {
          return fail("launch " + name + " argument " + std::to_string(e.arg) + ": " +
                      hex(args[e.arg]) + " is not aligned to 4 bytes (refused)");
        }
      }
      if (auto st = be_->launch(name, args, nargs); !st) return fail(st.reason());
      return true;
    }
    case Op::kSync: {
      if (auto st = be_->synchronize(); !st) return fail(st.reason());
      return true;
    }
    case Op::kAllreduce: {
      const std::uint64_t buf = r.a[0], count = r.a[1];
      const auto step = static_cast<std::int64_t>(r.a[2]);
      if (count == 0 || count > (1ull << 28)) return fail("allreduce: bad count");
      auto c = check_range(s, rk, buf, count * sizeof(float), "allreduce buffer");
      if (!c) return fail(c.reason());
      if (!s.coll) {
        const bool rank0 = std::find(s.order.begin(), s.order.end(), 0) != s.order.end();
        // Every proxy of the job sizes it alike: the data, or a negotiation if that is larger.
        auto co = open_collective_group(
            s.collective, s.world,
            std::max({count, negotiation_floats(s.world), id_floats()}), rank0);
        if (!co) return fail("allreduce: " + co.reason());
        s.coll = std::move(co.value());
      }
      if (s.reduce == Session::Reduce::kUnset) {
        if (auto st = choose_reduce(s, step, count); !st) return fail("allreduce: " + st.reason());
      }
      rk.reduce_step = step;
      rk.reduce_buf = buf;
      rk.reduce_count = count;
      rk.contributed = false;
      if (s.reduce == Session::Reduce::kFailed) {
        return fail("allreduce: " + fail_reduce(s, rk, s.reduce_error).reason());
      }
      // While a negotiation is open (its first rank died, say) the contribution waits for it.
      if (s.reduce != Session::Reduce::kNegotiating &&
          s.reduce != Session::Reduce::kBootstrapping) {
        if (auto st = contribute(s, rk); !st) {
          if (s.reduce == Session::Reduce::kDevice) st = fail_reduce(s, rk, st.reason());
          return fail("allreduce: " + st.reason());
        }
      }
      rk.in_reduce = true;
      return false;  // answered when the sum is there (serve_session)
    }
    case Op::kStepBoundary: {
      const auto boundary = static_cast<std::int64_t>(r.a[0]);
      out->v[0] = 0;
      if (rk.last_reduce_step + 1 == boundary && (rk.last_flags & kFlagCheckpoint) != 0) {
        if (auto st = write_checkpoint(s, rk, boundary, ws, r.a[1]); !st) return fail(st.reason());
        ws.checkpointed.store(boundary, std::memory_order_release);
        out->v[0] = kFlagCheckpointed | (rk.last_flags & kFlagStop);
      }
      ws.steps_done.store(boundary, std::memory_order_release);
      return true;
    }
    case Op::kRestoredState: {
      if (r.a[0] >= rk.restored_states.size()) return fail("no restored host state " + std::to_string(r.a[0]));
      const std::string& st = rk.restored_states[r.a[0]];
      if (st.size() > kDataBytes) return fail("restored host state larger than the data area");
      std::memcpy(ws.data, st.data(), st.size());
      out->v[0] = st.size();
      return true;
    }
    case Op::kReport: {
      const std::size_t n = strnlen(reinterpret_cast<const char*>(ws.data), sizeof ws.result - 1);
      std::memcpy(ws.result, ws.data, n);
      ws.result[n] = '\0';
      return true;
    }
    case Op::kMemInfo: {
      const MemInfo m = be_->mem_info();
      out->v[0] = m.total_bytes;
      out->v[1] = m.used_bytes;
      return true;
    }
    case Op::kNop:
    case Op::kBye:
      return true;
  }
  return fail("unknown request " + std::to_string(r.op));
}

// Adjacent allocations (the usual case: the bump allocator packs them) are parked as one range:
// one page-table move instead of one per allocation. If the backend cannot move a run at once,
// its allocations are parked one by one.
Status ProxyServer::park_rank(Rank& rk) {
  if (!rk.parked.empty()) return Status::Ok();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;  // (addr, bytes)
  for (const auto& [addr, a] : rk.allocs) {
    if (!runs.empty() && runs.back().first + runs.back().second == addr) {
      runs.back().second += a.size;
    } else {
      runs.emplace_back(addr, a.size);
    }
  }
  Status st;
  for (const auto& [addr, bytes] : runs) {
    auto p = be_->park(addr, bytes);
    if (p) {
      rk.parked.push_back({addr, std::move(p.value())});
      continue;
    }
    for (auto it = rk.allocs.lower_bound(addr); st && it != rk.allocs.end() && it->first < addr + bytes; ++it) {
      auto one = be_->park(it->first, it->second.size);
      if (!one) st = one.status();
      else rk.parked.push_back({it->first, std::move(one.value())});
    }
    if (!st) break;
  }
  if (!st) (void)make_resident(rk);  // roll back: the rank stays resident
  return st;
}

Status ProxyServer::make_resident(Rank& rk) {
  Status st;
  for (auto& p : rk.parked) {
    if (st) st = be_->unpark(p.addr, std::move(p.mem));
  }
  rk.parked.clear();
  return st;
}

Status ProxyServer::switch_to_next(Session& s) {
  const std::uint64_t t0 = now_ns();
  Rank& old = s.ranks[s.order[s.cur]];
  std::size_t next = s.cur;
  for (std::size_t i = 1; i <= s.order.size(); ++i) {
    const std::size_t c = (s.cur + i) % s.order.size();
    if (!s.ranks[s.order[c]].gone) {
      next = c;
      break;
    }
  }
  if (next == s.cur) return Status::Ok();
  if (!old.gone) {
    if (auto st = park_rank(old); !st) return st;
  }
  s.cur = next;
  if (auto st = make_resident(s.ranks[s.order[next]]); !st) return st;
  ++stats_.switches;
  stats_.switch_ns += now_ns() - t0;
  return Status::Ok();
}

void ProxyServer::free_rank(Rank& rk) {
  if (rk.parked.empty()) {
    for (auto& [addr, a] : rk.allocs) be_->free(addr, a.size);
  }
  rk.parked.clear();  // parked memory is released by its destructor
  rk.allocs.clear();
}

void ProxyServer::finish_rank(Session& s, Rank& rk, const std::string& why) {
  (void)why;
  const int job = s.job;
  free_rank(rk);
  be_->release_worker(job, rk.rank);
  rk.gone = true;
  if (rk.slot >= 0) {
    WorkerSlot& ws = seg_->slots[rk.slot];
    // Nothing queued by a dead worker may be taken for the next one's hello.
    ws.req_tail.store(ws.req_head.load(std::memory_order_acquire), std::memory_order_release);
    ws.state.store(static_cast<std::uint32_t>(SlotState::kClosed), std::memory_order_release);
    owner_[rk.slot] = {};
    rk.slot = -1;
  }
  bool all_gone = true;
  for (auto& [r, x] : s.ranks) all_gone = all_gone && x.gone;
  if (all_gone) {
    end_session(sessions_.find(job), false);
    return;
  }
  if (s.order[s.cur] == rk.rank) {
    if (auto st = switch_to_next(s); !st) drop_session(job, st.reason());
  }
}

void ProxyServer::drop_session(int job, const std::string& why) {
  auto it = sessions_.find(job);
  if (it == sessions_.end()) return;
  for (auto& [r, rk] : it->second.ranks) {
    if (rk.slot >= 0) {
      WorkerSlot& ws = seg_->slots[rk.slot];
      // Answer what the worker waits for (a request taken and deferred, or ones still queued), so
      // it does not hang on a dropped session; then drop what is queued.
      // One answer per request the worker still waits for (asynchronous launches included).
      const std::uint32_t head = ws.req_head.load(std::memory_order_acquire);
      const std::uint32_t owed =
          (head - ws.req_tail.load(std::memory_order_relaxed)) + (rk.in_reduce ? 1u : 0u);
      ws.req_tail.store(head, std::memory_order_release);
      for (std::uint32_t i = 0; i < owed && i < static_cast<std::uint32_t>(kRingDepth); ++i) {
        publish_response(&ws, error_response(why, 2));
      }
      ws.state.store(static_cast<std::uint32_t>(SlotState::kClosed), std::memory_order_release);
      owner_[rk.slot] = {};
      rk.slot = -1;
    }
    free_rank(rk);
    be_->release_worker(job, r);
  }
  end_session(it, true);
}

// The shm collective's name is removed by whichever proxy's session ends first once every proxy
// has it open (after one completed allreduce: all W ranks contributed), or when the incarnation
// is dropped; open mappings stay valid, so the other proxies finish undisturbed, and nothing is
// left in /dev/shm when no node runtime is there to clean up.
void ProxyServer::end_session(std::map<int, Session>::iterator it, bool dead) {
  Session& s = it->second;
  if (s.coll && (s.coll_done_once || dead) && s.collective.rfind("tcp://", 0) != 0) {
    Collective::unlink(s.collective);
  }
  sessions_.erase(it);
}

void ProxyServer::check_dead_workers() {
  if (opt_.parent_pid > 0 && ::getppid() != opt_.parent_pid) {
    std::fprintf(stderr, "orrery-proxy[%d]: parent %d is gone; exiting\n", opt_.device, opt_.parent_pid);
    stop_ = true;
    return;
  }
  std::vector<std::pair<int, int>> dead;
  for (auto& [j, s] : sessions_) {
    for (auto& [r, rk] : s.ranks) {
      if (rk.slot >= 0 && rk.pid > 0 && ::kill(rk.pid, 0) != 0 && errno == ESRCH) {
        dead.emplace_back(j, r);
      }
    }
  }
  for (auto [j, r] : dead) {
    auto it = sessions_.find(j);
    if (it == sessions_.end()) continue;
    std::fprintf(stderr, "orrery-proxy[%d]: worker of job %d rank %d died; its memory is freed\n",
                 opt_.device, j, r);
    finish_rank(it->second, it->second.ranks[r], "died");
  }
}

Status ProxyServer::restore_rank(Session& s, Rank& rk) {
  const std::uint64_t t0 = now_ns();
  const std::string path = shard_file(opt_.ckpt_dir, s.job, rk.restore_step, rk.rank);
  auto rd = ShardReader::open(path);
  if (!rd) return Status::Error("restore: " + rd.reason());
  const ShardMeta& m = rd->meta();
  if (m.job != s.job || m.rank != rk.rank || m.step != rk.restore_step || m.world != s.world) {
    return Status::Error("restore: " + path + " is for job " + std::to_string(m.job) + " rank " +
                         std::to_string(m.rank) + " step " + std::to_string(m.step) + " world " +
                         std::to_string(m.world));
  }
  const std::uint64_t lo = job_window(s.job);
  std::uint64_t bytes = 0;
  Status st;
  for (const auto& a : m.allocs) {
    if (a.addr < lo || a.addr - lo >= kWindowBytes || a.size == 0 ||
        a.size > kWindowBytes - (a.addr - lo) || a.size % kAllocGranule != 0) {
      st = Status::Error("restore: " + path + ": allocation " + hex(a.addr) +
                         " lies outside the job's address window");
      break;
    }
    if (st = be_->allocate(a.addr, a.size); !st) break;
    rk.allocs[a.addr] = Alloc{a.size, a.seq};
    st = be_->stream_in(a.addr, a.size,
                        [&](void* p, std::uint64_t n) { return rd->read_next(p, n); });
    if (!st) break;
    bytes += a.size;
  }
  rk.restored_states.clear();
  for (std::size_t i = 0; st && i < m.state_lens.size(); ++i) {
    std::string buf(m.state_lens[i], '\0');
    st = rd->read_next(buf.data(), buf.size());
    rk.restored_states.push_back(std::move(buf));
  }
  if (st) st = rd->finish();
  if (!st) {
    free_rank(rk);
    rk.restored_states.clear();
    return st;
  }
  rk.next_offset = m.next_offset;
  rk.alloc_seq = m.alloc_seq;
  rk.replay_seq = 0;
  stats_.restore_bytes += bytes;
  stats_.restore_ns += now_ns() - t0;
  std::fprintf(stderr, "orrery-proxy[%d]: restored job %d rank %d from step %lld (%llu bytes)\n",
               opt_.device, s.job, rk.rank, static_cast<long long>(rk.restore_step),
               static_cast<unsigned long long>(bytes));
  return Status::Ok();
}

Status ProxyServer::write_checkpoint(Session& s, Rank& rk, std::int64_t boundary,
                                     const WorkerSlot& ws, std::uint64_t nstates) {
  const std::uint64_t t0 = now_ns();
  ShardMeta m;
  m.job = s.job;
  m.epoch = s.epoch;
  m.step = boundary;
  m.rank = rk.rank;
  m.world = s.world;
  m.next_offset = rk.next_offset;
  m.alloc_seq = rk.alloc_seq;
  std::uint64_t bytes = 0;
  for (auto& [addr, a] : rk.allocs) {
    m.allocs.push_back({addr, a.size, a.seq});
    bytes += a.size;
  }
  // Host states: nstates x u64 length, then the bytes, in the data area.
  if (nstates > 1024 || nstates * 8 > kDataBytes) return Status::Error("checkpoint: bad host state count");
  std::vector<const void*> states;
  std::uint64_t off = nstates * 8;
  for (std::uint64_t i = 0; i < nstates; ++i) {
    std::uint64_t len;
    std::memcpy(&len, ws.data + i * 8, 8);
    if (len > kDataBytes - off) return Status::Error("checkpoint: host state beyond the data area");
    m.state_lens.push_back(len);
    states.push_back(ws.data + off);
    off += len;
  }
  const std::string path = shard_file(opt_.ckpt_dir, s.job, boundary, rk.rank);
  auto sw = ShardWriter::open(path, m);
  if (!sw) return sw.status();
  // Device memory streams straight into the shard: no copy of the whole state is ever held.
  for (const auto& a : m.allocs) {
    auto st = be_->stream_out(a.addr, a.size,
                              [&](const void* p, std::uint64_t n) { return sw->append(p, n); });
    if (!st) return st;
  }
  for (std::size_t i = 0; i < states.size(); ++i) {
    if (auto st = sw->append(states[i], m.state_lens[i]); !st) return st;
  }
  auto w = sw->finish();
  if (!w) return w.status();
  stats_.ckpt_bytes += *w;
  stats_.ckpt_ns += now_ns() - t0;
  std::fprintf(stderr, "orrery-proxy[%d]: checkpoint job %d rank %d step %lld: %llu bytes -> %s\n",
               opt_.device, s.job, rk.rank, static_cast<long long>(boundary),
               static_cast<unsigned long long>(*w), path.c_str());
  return Status::Ok();
}

}  // namespace orrery::runtime
