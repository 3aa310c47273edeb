// ProxyServer's loop: the segment, commands from the node runtime, workers' first requests, one
// turn of each session's resident rank, and the idle wait. The rest of the class, by concept:
// proxy_sessions.cc (attach and detach), proxy_requests.cc (the worker's requests),
// proxy_allreduce.cc (where the sum runs), proxy_splice.cc (swapping ranks), proxy_checkpoint.cc.
#include "runtime/proxy/proxy_server.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <new>
#include <random>

#include "runtime/proxy/proxy_server_internal.h"

namespace orrery::runtime {

using namespace proxy_internal;

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
  if (o.ckpt_staging_bytes > 0) {
    ProxySegment* seg = p->seg_;
    p->persister_ = std::make_unique<ShardPersister>(o.ckpt_staging_bytes, [seg] {
      seg->header.doorbell.fetch_add(1, std::memory_order_seq_cst);
      futex_wake(&seg->header.doorbell);
    });
  }
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
    worked |= publish_persisted();
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
  // What was staged is persisted before the proxy reports its counters and exits.
  if (persister_) {
    persister_->drain();
    publish_persisted();
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
    if (res == nullptr) {
      // A group that can no longer complete the step (a peer proxy gone): fail, do not wait.
      if (auto h = s.coll->health(); !h) return answer_reduce_error(rk, ws, fail_reduce(s, rk, h.reason()));
      return false;
    }
    if ((flags & kFlagReduceFailed) != 0) {
      return answer_reduce_error(
          rk, ws, fail_reduce(s, rk, "another proxy of the job failed its part of the allreduce "
                                     "on the devices (its log says why)"));
    }
    if (s.reduce == Session::Reduce::kDevice && !rk.reduce_host) {
      auto ready = s.dcoll->ready(rk.reduce_step);
      if (!ready) return answer_reduce_error(rk, ws, fail_reduce(s, rk, ready.reason()));
      if (!ready.value()) return false;
    }
    s.coll_done_once = true;
    const std::uint64_t t0 = now_ns();
    Response out;
    Status st;
    if (rk.reduce_host) {
      if (rk.reduce_count > 0 && res != rk.reduce_data) {  // else assembled there already
        std::memcpy(rk.reduce_data, res, rk.reduce_count * sizeof(float));
      }
    } else if (s.reduce == Session::Reduce::kDevice) {
      st = s.dcoll->deliver(rk.rank, rk.reduce_step, rk.reduce_buf, rk.reduce_count);
    } else {
      st = be_->copy_h2d(rk.reduce_buf, res, rk.reduce_count * sizeof(float));
    }
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

}  // namespace orrery::runtime
