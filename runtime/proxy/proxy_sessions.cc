// ProxyServer: a job incarnation's session on this device: a worker attaching (hello, fencing by
// epoch), a rank finishing, a session dropped or ended (proxy_server.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "runtime/proxy/proxy_server.h"
#include "runtime/proxy/proxy_server_internal.h"
#include "spec/limits.h"

namespace orrery::runtime {

using namespace proxy_internal;

Status ProxyServer::hello(int slot, const Request& r) {
  const int job = static_cast<int>(r.a[0]);
  const auto epoch = static_cast<std::int64_t>(r.a[1]);
  const int rank = static_cast<int>(r.a[2]);
  const int world = static_cast<int>(r.a[3]);
  const auto restore_step = static_cast<std::int64_t>(r.a[4]);
  const int pid = static_cast<int>(r.a[5]);
  if (job < 0 || world <= 0 || world > spec::kMaxRunWorld || rank < 0 || rank >= world) {
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

}  // namespace orrery::runtime
