// ProxyServer: a rank's checkpoint shard (device memory streamed out, then its registered host
// states) and its restore at the same addresses (proxy_server.h, shard.h).
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/proxy/address_space.h"
#include "runtime/proxy/proxy_server.h"
#include "runtime/proxy/proxy_server_internal.h"
#include "runtime/proxy/shard.h"

namespace orrery::runtime {

using namespace proxy_internal;

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

Result<bool> ProxyServer::write_checkpoint(Session& s, Rank& rk, std::int64_t boundary,
                                           const WorkerSlot& ws, std::uint64_t nstates,
                                           bool may_defer) {
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
    bytes += len;
    off += len;
  }
  const std::string path = shard_file(opt_.ckpt_dir, s.job, boundary, rk.rank);
  // Snapshot, then persist: the rank goes on once its bytes are copied; the persister writes
  // and flushes them and the proxy publishes the shard when it is durable (publish_persisted).
  if (may_defer && persister_) {
    if (auto buf = persister_->reserve(bytes)) {
      char* p = buf.get();
      for (const auto& a : m.allocs) {
        auto st = be_->stream_out(a.addr, a.size, [&](const void* src, std::uint64_t n) {
          std::memcpy(p, src, n);
          p += n;
          return Status::Ok();
        });
        if (!st) {
          persister_->release(bytes);
          return st;
        }
      }
      for (std::size_t i = 0; i < states.size(); ++i) {
        std::memcpy(p, states[i], m.state_lens[i]);
        p += m.state_lens[i];
      }
      const ShardOwner owner{s.job, rk.rank, rk.slot, s.epoch, boundary};
      persister_->submit(StagedShard{owner, path, std::move(m), std::move(buf), bytes});
      stats_.ckpt_staged += 1;
      stats_.ckpt_ns += now_ns() - t0;
      return false;
    }
  }
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
  return true;
}

bool ProxyServer::publish_persisted() {
  if (!persister_) return false;
  auto done = persister_->take_done();
  for (const auto& d : done) {
    const ShardOwner& o = d.owner;
    if (!d.status) {
      // Not durable, so never reported: the job's last checkpoint stays the one before, and the
      // core asks for the next one as usual.
      std::fprintf(stderr, "orrery-proxy[%d]: checkpoint job %d rank %d step %lld not persisted: %s\n",
                   opt_.device, o.job, o.rank, static_cast<long long>(o.step),
                   d.status.reason().c_str());
      continue;
    }
    stats_.ckpt_bytes += d.bytes;
    stats_.persist_ns += d.ns;
    std::fprintf(stderr, "orrery-proxy[%d]: checkpoint job %d rank %d step %lld: %llu bytes -> %s (persisted in %.1f ms)\n",
                 opt_.device, o.job, o.rank, static_cast<long long>(o.step),
                 static_cast<unsigned long long>(d.bytes), d.path.c_str(), d.ns / 1e6);
    // Published only to the incarnation that cut it: a slot since freed or reused is left alone.
    if (o.slot < 0 || o.slot >= kMaxWorkers) continue;
    WorkerSlot& ws = seg_->slots[o.slot];
    if (ws.job != o.job || ws.epoch != o.epoch || ws.rank != o.rank) continue;
    std::int64_t cur = ws.checkpointed.load(std::memory_order_acquire);
    while (cur < o.step && !ws.checkpointed.compare_exchange_weak(cur, o.step, std::memory_order_acq_rel)) {
    }
  }
  return !done.empty();
}

}  // namespace orrery::runtime
