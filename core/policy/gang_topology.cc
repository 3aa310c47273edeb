// The gang placer's topology rules (core/policy/gang_placer.h, "Topology"): for one query, which
// nodes a placement of `need` devices takes: ONE node (best fit), else ONE cluster, else ONE
// region, else (where allowed) regions whole; the query's free devices per node as adjust() left
// them. The proposal itself, the query and its reservations: gang_placer.cc.
#include <algorithm>
#include <climits>
#include <tuple>

#include "core/policy/gang_placer.h"

namespace orrery::core::policy {

namespace {

constexpr int kNever = INT32_MAX;  // a fill that cannot be made

}  // namespace

std::int64_t GangPlacer::scope_total(int scope) const {
  return index_.total(level_, scope) + scope_delta_[static_cast<std::size_t>(scope)];
}

std::vector<std::pair<int, int>> GangPlacer::adjusted_in(int scope) const {
  std::vector<std::pair<int, int>> a;
  for (int n : adj_nodes_)
    if (eff(n) > 0 && index_.in_scope(scope, n)) a.emplace_back(eff(n), n);
  std::sort(a.begin(), a.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  return a;
}

int GangPlacer::best_node(int scope, int need) const {
  int best_e = INT_MAX, best_n = -1;
  for (int n : adj_nodes_) {
    const int e = eff(n);
    if (e >= need && !excluded(n) && index_.in_scope(scope, n) &&
        std::tie(e, n) < std::tie(best_e, best_n)) {
      best_e = e;
      best_n = n;
    }
  }
  const auto& nodes = index_.scope_nodes(scope);
  for (int k = index_.next_nonempty(level_, scope, need); k != 0 && k <= best_e;
       k = index_.next_nonempty(level_, scope, k + 1)) {
    const auto& b = index_.bucket(level_, scope, k);
    int found = -1;
    for (int local = b.first(); local >= 0; local = b.next(local + 1)) {
      const int n = nodes[static_cast<std::size_t>(local)];
      if (adjusted(n) || excluded(n)) continue;
      found = n;
      break;
    }
    if (found < 0) continue;
    if (k < best_e || found < best_n) {
      best_e = k;
      best_n = found;
    }
    break;
  }
  return best_n;
}

template <class F>
void GangPlacer::for_each_desc(int scope, F&& f) const {
  const auto adj = adjusted_in(scope);
  const auto& nodes = index_.scope_nodes(scope);
  std::size_t ai = 0;
  int k = index_.prev_nonempty(level_, scope, index_.max_per_node(level_));
  while (true) {
    for (; ai < adj.size() && adj[ai].first > k; ++ai)
      if (!f(adj[ai].second, adj[ai].first)) return;
    if (k == 0) return;
    const auto& b = index_.bucket(level_, scope, k);
    for (int local = b.first(); local >= 0; local = b.next(local + 1)) {
      const int n = nodes[static_cast<std::size_t>(local)];
      for (; ai < adj.size() && adj[ai].first == k && adj[ai].second < n; ++ai)
        if (!f(adj[ai].second, k)) return;
      if (adjusted(n)) continue;
      if (!f(n, k)) return;
    }
    for (; ai < adj.size() && adj[ai].first == k; ++ai)
      if (!f(adj[ai].second, k)) return;
    k = index_.prev_nonempty(level_, scope, k - 1);
  }
}

int GangPlacer::nodes_needed(int scope, int need) const {
  if (scope_total(scope) < need) return kNever;
  // Node counts per free-device count, descending: the buckets, corrected by the adjusted nodes.
  std::vector<std::pair<int, int>> corr;  // (k, +1 / -1)
  for (int n : adj_nodes_) {
    if (!index_.in_scope(scope, n)) continue;
    if (base(n) > 0) corr.emplace_back(base(n), -1);
    if (eff(n) > 0) corr.emplace_back(eff(n), +1);
  }
  std::sort(corr.begin(), corr.end(), std::greater<>());
  std::int64_t remaining = need;
  int used = 0;
  int k = index_.prev_nonempty(level_, scope, index_.max_per_node(level_));
  std::size_t ci = 0;
  while (k != 0 || ci < corr.size()) {
    const int kk = std::max(k, ci < corr.size() ? corr[ci].first : 0);
    std::int64_t count = 0;
    if (kk == k) {
      count += index_.bucket(level_, scope, k).size();
      k = index_.prev_nonempty(level_, scope, k - 1);
    }
    for (; ci < corr.size() && corr[ci].first == kk; ++ci) count += corr[ci].second;
    if (count <= 0) continue;
    if (count * kk >= remaining) return used + static_cast<int>((remaining + kk - 1) / kk);
    used += static_cast<int>(count);
    remaining -= count * kk;
  }
  return kNever;
}

bool GangPlacer::fill_cluster(int c, int need, std::vector<Pick>& picks) {
  const int sc = index_.cluster_scope(c);
  const int t = nodes_needed(sc, need);
  if (t == kNever) return false;
  // Exclusions mark the nodes this fill takes whole; a fresh mark for each fill.
  if (++excl_gen_ == 0) {
    std::fill(excl_stamp_.begin(), excl_stamp_.end(), 0);
    excl_gen_ = 1;
  }
  int remaining = need, taken = 0;
  if (t > 1)
    for_each_desc(sc, [&](int n, int e) {
      picks.push_back({n, e});
      exclude(n);
      remaining -= e;
      return ++taken < t - 1;
    });
  const int last = best_node(sc, remaining);
  if (last < 0) return false;  // cannot happen: the t-th node of the greedy order fits
  picks.push_back({last, remaining});
  return true;
}

void GangPlacer::take_whole(int scope, std::vector<Pick>& picks) {
  for_each_desc(scope, [&](int n, int e) {
    picks.push_back({n, e});
    return true;
  });
}

int GangPlacer::choose_cluster(const std::vector<int>& candidates, int need) const {
  int best = -1, best_nodes = kNever;
  std::int64_t best_total = 0;
  for (int c : candidates) {
    const int sc = index_.cluster_scope(c);
    const std::int64_t total = scope_total(sc);
    if (total < need) continue;
    const int nodes = nodes_needed(sc, need);
    if (best < 0 || std::tie(nodes, total, c) < std::tie(best_nodes, best_total, best)) {
      best = c;
      best_nodes = nodes;
      best_total = total;
    }
  }
  return best;
}

int GangPlacer::clusters_needed(int r, int need) const {
  std::vector<std::int64_t> totals;
  for (int c : index_.clusters_of_region(r)) totals.push_back(scope_total(index_.cluster_scope(c)));
  std::sort(totals.begin(), totals.end(), std::greater<>());
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < totals.size(); ++i)
    if ((sum += totals[i]) >= need) return static_cast<int>(i) + 1;
  return kNever;
}

bool GangPlacer::fill_region(int r, int need, std::vector<Pick>& picks) {
  const int t = clusters_needed(r, need);
  if (t == kNever) return false;
  std::vector<std::pair<std::int64_t, int>> order;  // (total, cluster), most free first
  for (int c : index_.clusters_of_region(r))
    order.emplace_back(scope_total(index_.cluster_scope(c)), c);
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  int remaining = need;
  std::vector<int> rest;
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    if (i < t - 1) {
      take_whole(index_.cluster_scope(order[static_cast<std::size_t>(i)].second), picks);
      remaining -= static_cast<int>(order[static_cast<std::size_t>(i)].first);
    } else {
      rest.push_back(order[static_cast<std::size_t>(i)].second);
    }
  }
  const int c = choose_cluster(rest, remaining);
  return c >= 0 && fill_cluster(c, remaining, picks);
}

bool GangPlacer::place_in_region(int r, int need, std::vector<Pick>& picks) {
  if (int n = best_node(index_.region_scope(r), need); n >= 0) {
    picks.push_back({n, need});
    return true;
  }
  if (int c = choose_cluster(index_.clusters_of_region(r), need); c >= 0)
    return fill_cluster(c, need, picks);
  return scope_total(index_.region_scope(r)) >= need && fill_region(r, need, picks);
}

bool GangPlacer::place_in_fleet(int need, bool cross_region, std::vector<Pick>& picks) {
  // One node.
  if (int n = best_node(index_.fleet_scope(), need); n >= 0) {
    picks.push_back({n, need});
    return true;
  }
  // One cluster.
  std::vector<int> all(static_cast<std::size_t>(index_.clusters()));
  for (int c = 0; c < index_.clusters(); ++c) all[static_cast<std::size_t>(c)] = c;
  if (int c = choose_cluster(all, need); c >= 0) return fill_cluster(c, need, picks);
  // One region: the fewest clusters, then the fewest free devices.
  auto choose_region = [&](const std::vector<int>& candidates, int want) {
    int best = -1, best_clusters = kNever;
    std::int64_t best_total = 0;
    for (int r : candidates) {
      const std::int64_t total = scope_total(index_.region_scope(r));
      if (total < want) continue;
      const int cl = clusters_needed(r, want);
      if (best < 0 || std::tie(cl, total, r) < std::tie(best_clusters, best_total, best)) {
        best = r;
        best_clusters = cl;
        best_total = total;
      }
    }
    return best;
  };
  std::vector<int> regions(static_cast<std::size_t>(index_.regions()));
  for (int r = 0; r < index_.regions(); ++r) regions[static_cast<std::size_t>(r)] = r;
  if (int r = choose_region(regions, need); r >= 0) return fill_region(r, need, picks);
  if (!cross_region) return false;
  // Across regions: the regions with the most free devices whole, the rest in one region.
  std::vector<std::pair<std::int64_t, int>> order;
  std::int64_t sum = 0;
  for (int r : regions) {
    order.emplace_back(scope_total(index_.region_scope(r)), r);
    sum += order.back().first;
  }
  if (sum < need) return false;
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  int remaining = need;
  std::size_t i = 0;
  for (; i < order.size() && remaining > order[i].first; ++i) {
    take_whole(index_.region_scope(order[i].second), picks);
    remaining -= static_cast<int>(order[i].first);
  }
  std::vector<int> rest;
  for (; i < order.size(); ++i) rest.push_back(order[i].second);
  const int r = choose_region(rest, remaining);
  return r >= 0 && fill_region(r, remaining, picks);
}

}  // namespace orrery::core::policy
