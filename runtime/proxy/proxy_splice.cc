// ProxyServer: replica splicing: parking the resident rank's allocations in host memory and making
// the next rank resident, round robin (proxy_server.h).
#include <utility>
#include <vector>

#include "runtime/proxy/proxy_server.h"
#include "runtime/proxy/proxy_server_internal.h"

namespace orrery::runtime {

using namespace proxy_internal;

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

}  // namespace orrery::runtime
