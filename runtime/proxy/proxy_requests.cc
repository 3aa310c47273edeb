// ProxyServer: one request of the resident rank (ring.h's Op), every address it names checked
// against the rank's own allocations first (proxy_server.h).
#include <algorithm>
#include <cstring>

#include "runtime/proxy/address_space.h"
#include "runtime/proxy/collective_negotiation.h"
#include "runtime/proxy/kernels.h"
#include "runtime/proxy/proxy_server.h"
#include "runtime/proxy/proxy_server_internal.h"

namespace orrery::runtime {

using namespace proxy_internal;

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
      if (count == 0 || count > (1ull << 28)) return fail("allreduce: bad count");
      auto c = check_range(s, rk, buf, count * sizeof(float), "allreduce buffer");
      if (!c) return fail(c.reason());
      return begin_reduce(s, rk, buf, count, static_cast<std::int64_t>(r.a[2]), false, out);
    }
    case Op::kAllreduceHost: {
      const std::uint64_t count = r.a[0], where = r.a[2];
      if (count > (1ull << 28)) return fail("allreduce_host: bad count");
      // In the window, or anywhere in the reduce buffer (summed where it lies: no copy).
      const ShmMapping& m = where == 0 ? rk.window : rk.reduce_window;
      const std::uint64_t at = where == 0 ? 0 : where - 1;
      if (at > (1ull << 28) || (at + count) * sizeof(float) > m.size()) {
        return fail("allreduce_host: " + std::to_string(count) + " floats do not fit the " +
                    (where == 0 ? "window" : "reduce buffer"));
      }
      rk.reduce_data = static_cast<float*>(m.data()) + at;
      return begin_reduce(s, rk, 0, count, static_cast<std::int64_t>(r.a[1]), true, out);
    }
    case Op::kWindow: {
      const std::string name(reinterpret_cast<const char*>(ws.data),
                             strnlen(reinterpret_cast<const char*>(ws.data), 255));
      if (name.empty() || name[0] != '/' || r.a[0] == 0 || r.a[0] > (1ull << 32)) {
        return fail("window: bad name or size");
      }
      auto m = ShmMapping::open(name, r.a[0]);
      if (!m) return fail("window: " + m.reason());
      (r.a[1] == 1 ? rk.reduce_window : rk.window) = std::move(m.value());
      return true;
    }
    case Op::kCopyH2DWindow: {
      if (r.a[1] > rk.window.size()) return fail("copy: more than the window");
      auto c = check_range(s, rk, r.a[0], r.a[1], "copy_h2d dst");
      if (!c) return fail(c.reason());
      if (auto st = be_->copy_h2d(r.a[0], rk.window.data(), r.a[1]); !st) return fail(st.reason());
      return true;
    }
    case Op::kCopyD2HWindow: {
      if (r.a[1] > rk.window.size()) return fail("copy: more than the window");
      auto c = check_range(s, rk, r.a[0], r.a[1], "copy_d2h src");
      if (!c) return fail(c.reason());
      if (auto st = be_->copy_d2h(rk.window.data(), r.a[0], r.a[1]); !st) return fail(st.reason());
      return true;
    }
    case Op::kStepBoundary: {
      const auto boundary = static_cast<std::int64_t>(r.a[0]);
      out->v[0] = 0;
      if (rk.last_reduce_step + 1 == boundary && (rk.last_flags & kFlagCheckpoint) != 0) {
        // A cut that stops the job is durable before the rank is let go (its exit ends the
        // incarnation); a periodic one may be persisted behind the rank's next steps.
        const bool stop = (rk.last_flags & kFlagStop) != 0;
        auto w = write_checkpoint(s, rk, boundary, ws, r.a[1], !stop);
        if (!w) return fail(w.reason());
        if (*w) ws.checkpointed.store(boundary, std::memory_order_release);
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

}  // namespace orrery::runtime
