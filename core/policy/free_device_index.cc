#include "core/policy/free_device_index.h"

#include <algorithm>
#include <bit>
#include <map>
#include <utility>

namespace orrery::core::policy {

namespace {

bool test_bit(const std::vector<std::uint64_t>& bits, std::size_t i) {
  return bits[i >> 6] >> (i & 63) & 1;
}
void put_bit(std::vector<std::uint64_t>& bits, std::size_t i, bool on) {
  const std::uint64_t b = std::uint64_t{1} << (i & 63);
  if (on)
    bits[i >> 6] |= b;
  else
    bits[i >> 6] &= ~b;
}

}  // namespace

FreeDeviceIndex::FreeDeviceIndex(const SchedulerCore& core) : core_(core) {
  build_topology();
  read_all();
}

void FreeDeviceIndex::build_topology() {
  const auto& fleet = core_.fleet();
  const auto& s = core_.cluster();
  nodes_ = s.nodes;

  // Regions and clusters, numbered in the order they first appear (a cluster is named within its
  // region).
  std::map<std::string, int> region_id;
  std::map<std::pair<std::string, std::string>, int> cluster_id;
  node_cluster_.assign(static_cast<std::size_t>(nodes_), 0);
  for (int n = 0; n < nodes_; ++n) {
    const auto& node = fleet.nodes[static_cast<std::size_t>(n)];
    auto [r, r_new] = region_id.emplace(node.region, static_cast<int>(region_clusters_.size()));
    if (r_new) region_clusters_.emplace_back();
    auto [c, c_new] = cluster_id.emplace(std::make_pair(node.region, node.cluster),
                                         static_cast<int>(cluster_nodes_.size()));
    if (c_new) {
      cluster_nodes_.emplace_back();
      cluster_region_.push_back(r->second);
      region_clusters_[static_cast<std::size_t>(r->second)].push_back(c->second);
    }
    node_cluster_[static_cast<std::size_t>(n)] = c->second;
    cluster_nodes_[static_cast<std::size_t>(c->second)].push_back(n);
  }
  scope_nodes_.assign(static_cast<std::size_t>(scopes()), {});
  local_in_region_.assign(static_cast<std::size_t>(nodes_), 0);
  local_in_cluster_.assign(static_cast<std::size_t>(nodes_), 0);
  for (int n = 0; n < nodes_; ++n) {
    scope_nodes_[0].push_back(n);
    auto& rs = scope_nodes_[static_cast<std::size_t>(region_scope(region_of(n)))];
    local_in_region_[static_cast<std::size_t>(n)] = static_cast<int>(rs.size());
    rs.push_back(n);
    auto& cs = scope_nodes_[static_cast<std::size_t>(cluster_scope(cluster_of(n)))];
    local_in_cluster_[static_cast<std::size_t>(n)] = static_cast<int>(cs.size());
    cs.push_back(n);
  }

  // Device bits: each node's devices are a contiguous id range, given whole words.
  node_first_.assign(static_cast<std::size_t>(nodes_), 0);
  node_word_.assign(static_cast<std::size_t>(nodes_) + 1, 0);
  for (int n = 0; n < nodes_; ++n) {
    const auto& node = fleet.nodes[static_cast<std::size_t>(n)];
    node_first_[static_cast<std::size_t>(n)] = node.first_device;
    node_word_[static_cast<std::size_t>(n) + 1] =
        node_word_[static_cast<std::size_t>(n)] +
        (static_cast<std::size_t>(node.num_devices()) + 63) / 64;
  }
  const std::size_t words = node_word_.back();

  // Levels: per type, its distinct memory sizes, largest first.
  int types = 0;
  for (auto t : s.group_type) types = std::max(types, static_cast<int>(t) + 1);
  std::vector<std::vector<std::int64_t>> mems(static_cast<std::size_t>(types));
  for (int g = 0; g < s.num_groups(); ++g)
    mems[static_cast<std::size_t>(s.group_type[g])].push_back(s.group_mem[g]);
  type_levels_.assign(static_cast<std::size_t>(types), {});
  for (int t = 0; t < types; ++t) {
    auto& m = mems[static_cast<std::size_t>(t)];
    std::sort(m.begin(), m.end(), std::greater<>());
    m.erase(std::unique(m.begin(), m.end()), m.end());
    for (auto mem : m) {
      type_levels_[static_cast<std::size_t>(t)].push_back(static_cast<int>(levels_.size()));
      Level L;
      L.type = t;
      L.mem = mem;
      L.cap.assign(static_cast<std::size_t>(nodes_), 0);
      L.scope_cap.assign(static_cast<std::size_t>(scopes()), 0);
      L.mask.assign(words, 0);
      levels_.push_back(std::move(L));
    }
  }
  group_levels_.assign(static_cast<std::size_t>(s.num_groups()), {});
  node_levels_.assign(static_cast<std::size_t>(nodes_), {});
  for (int g = 0; g < s.num_groups(); ++g) {
    const auto& tl = type_levels_[static_cast<std::size_t>(s.group_type[g])];
    const int node = s.group_node[g];
    for (int level : tl) {
      if (levels_[static_cast<std::size_t>(level)].mem > s.group_mem[g]) continue;
      group_levels_[static_cast<std::size_t>(g)].push_back(level);
      auto& nl = node_levels_[static_cast<std::size_t>(node)];
      if (std::find(nl.begin(), nl.end(), level) == nl.end()) nl.push_back(level);
      auto& L = levels_[static_cast<std::size_t>(level)];
      for (int dev = s.group_first[g]; dev < s.group_first[g + 1]; ++dev) {
        const std::size_t bit = node_word_[static_cast<std::size_t>(node)] * 64 +
                                static_cast<std::size_t>(dev - node_first_[static_cast<std::size_t>(node)]);
        put_bit(L.mask, bit, true);
      }
      const int count = s.group_first[g + 1] - s.group_first[g];
      L.cap[static_cast<std::size_t>(node)] += count;
    }
  }
  for (auto& L : levels_) {
    for (int n = 0; n < nodes_; ++n) {
      const int c = L.cap[static_cast<std::size_t>(n)];
      L.max_per_node = std::max(L.max_per_node, c);
      L.scope_cap[0] += c;
      L.scope_cap[static_cast<std::size_t>(region_scope(region_of(n)))] += c;
      L.scope_cap[static_cast<std::size_t>(cluster_scope(cluster_of(n)))] += c;
    }
  }

  host_leaves_ = 1;
  while (host_leaves_ < nodes_) host_leaves_ *= 2;
}

void FreeDeviceIndex::read_all() {
  const auto& s = core_.cluster();
  cursor_ = core_.changes().end();
  const std::size_t words = node_word_.back();
  open_bits_.assign(words, 0);
  tagged_bits_.assign(words, 0);
  up_.assign(static_cast<std::size_t>(nodes_), 0);
  tag_for_.assign(static_cast<std::size_t>(s.num_devices()), -1);
  tagged_by_job_.clear();
  tagged_total_ = 0;
  for (int n = 0; n < nodes_; ++n)
    up_[static_cast<std::size_t>(n)] = s.node_state[n] == static_cast<std::int64_t>(spec::NodeState::kUp);
  for (auto& L : levels_) {
    L.cnt.assign(static_cast<std::size_t>(nodes_), 0);
    L.scope.assign(static_cast<std::size_t>(scopes()), Scope{});
    for (int sc = 0; sc < scopes(); ++sc) {
      auto& S = L.scope[static_cast<std::size_t>(sc)];
      const int universe = static_cast<int>(scope_nodes_[static_cast<std::size_t>(sc)].size());
      S.bucket.assign(static_cast<std::size_t>(L.max_per_node) + 1, NodeSet(universe));
      S.nonempty.assign(static_cast<std::size_t>(L.max_per_node) / 64 + 1, 0);
    }
  }
  for (int g = 0; g < s.num_groups(); ++g) {
    const int node = s.group_node[g];
    for (int dev = s.group_first[g]; dev < s.group_first[g + 1]; ++dev) {
      if (s.owner[dev] != -1) continue;
      const bool tagged = maybe_reserved(dev);
      const std::size_t bit = node_word_[static_cast<std::size_t>(node)] * 64 +
                              static_cast<std::size_t>(dev - node_first_[static_cast<std::size_t>(node)]);
      put_bit(tagged ? tagged_bits_ : open_bits_, bit, true);
      if (tagged) {
        tag(dev, static_cast<int>(s.resv_for[dev]));
        continue;
      }
      for (int level : group_levels_[static_cast<std::size_t>(g)])
        ++levels_[static_cast<std::size_t>(level)].cnt[static_cast<std::size_t>(node)];
    }
  }
  for (std::size_t li = 0; li < levels_.size(); ++li) {
    auto& L = levels_[li];
    for (int n = 0; n < nodes_; ++n) {
      const int k = L.cnt[static_cast<std::size_t>(n)];
      if (!up_[static_cast<std::size_t>(n)] || k == 0) continue;
      const int scopes3[3] = {0, region_scope(region_of(n)), cluster_scope(cluster_of(n))};
      const int locals[3] = {n, local_in_region_[static_cast<std::size_t>(n)],
                             local_in_cluster_[static_cast<std::size_t>(n)]};
      for (int i = 0; i < 3; ++i) {
        bucket_insert(L, scopes3[i], locals[i], k);
        L.scope[static_cast<std::size_t>(scopes3[i])].total += k;
      }
    }
  }
  for (auto& L : levels_) L.supply += std::uint64_t{1} << 40;  // read again: anything may have grown
  ++host_supply_;
  node_open_.assign(static_cast<std::size_t>(nodes_), 0);
  for (int n = 0; n < nodes_; ++n)
    for (std::size_t w = node_word_[static_cast<std::size_t>(n)]; w < node_word_[static_cast<std::size_t>(n) + 1]; ++w)
      node_open_[static_cast<std::size_t>(n)] += std::popcount(open_bits_[w]);
  host_min_.assign(2 * static_cast<std::size_t>(host_leaves_), INT64_MAX);
  host_free_.assign(static_cast<std::size_t>(nodes_), 0);
  for (int n = 0; n < nodes_; ++n) {
    host_free_[static_cast<std::size_t>(n)] = s.host_mem[n] - s.node_swap[n];
    if (node_open_[static_cast<std::size_t>(n)] > 0)
      host_min_[static_cast<std::size_t>(host_leaves_ + n)] = host_free_[static_cast<std::size_t>(n)];
  }
  for (std::size_t i = static_cast<std::size_t>(host_leaves_) - 1; i >= 1; --i)
    host_min_[i] = std::min(host_min_[2 * i], host_min_[2 * i + 1]);
}

void FreeDeviceIndex::rebuild() {
  ++rebuilds_;
  read_all();
}

void FreeDeviceIndex::sync() {
  const auto& feed = core_.changes();
  if (cursor_ == feed.end()) return;
  const auto& s = core_.cluster();
  const bool ok = feed.since(
      cursor_,
      [&](int dev) {
        read_device(dev);
        host_update(s.node_of(dev));
      },
      [&](int node) {
        read_node(node);
        host_update(node);
      },
      [&](int job) { read_job(job); });
  if (!ok) {
    rebuild();
    return;
  }
  synced_entries_ += feed.end() - cursor_;
  cursor_ = feed.end();
}

bool FreeDeviceIndex::maybe_reserved(int dev) const {
  const auto& s = core_.cluster();
  const auto r = s.resv_for[dev];
  if (r < 0) return false;
  if (r >= s.num_jobs()) return true;  // cannot be judged: the placer checks it per query
  return s.resv_gen[dev] >= s.jobs[static_cast<std::size_t>(r)].resv_gen;
}

void FreeDeviceIndex::read_device(int dev) {
  const auto& s = core_.cluster();
  const int g = s.group_of(dev);
  const int node = s.group_node[g];
  const std::size_t bit = node_word_[static_cast<std::size_t>(node)] * 64 +
                          static_cast<std::size_t>(dev - node_first_[static_cast<std::size_t>(node)]);
  const bool free = s.owner[dev] == -1;
  const bool now_tagged = free && maybe_reserved(dev);
  const bool now_open = free && !now_tagged;
  const bool was_open = test_bit(open_bits_, bit);
  const bool was_tagged = test_bit(tagged_bits_, bit);
  if (now_open == was_open && now_tagged == was_tagged &&
      (!now_tagged || tag_for_[static_cast<std::size_t>(dev)] == s.resv_for[dev]))
    return;
  if ((now_open && !was_open) || now_tagged)  // open, or tagged for a job it was not tagged for
    for (int level : group_levels_[static_cast<std::size_t>(g)]) ++levels_[static_cast<std::size_t>(level)].supply;
  if (now_open != was_open) {  // the node joins or leaves the host-memory tree with its first or last
    auto& open = node_open_[static_cast<std::size_t>(node)];
    const bool had = open > 0;
    open += now_open ? 1 : -1;
    if ((open > 0) != had) host_update(node);
  }
  put_bit(open_bits_, bit, now_open);
  put_bit(tagged_bits_, bit, now_tagged);
  if (was_tagged) tag(dev, -1);
  if (now_tagged) tag(dev, static_cast<int>(s.resv_for[dev]));
  if (now_open != was_open)
    for (int level : group_levels_[static_cast<std::size_t>(g)])
      set_open_count(level, node,
                     levels_[static_cast<std::size_t>(level)].cnt[static_cast<std::size_t>(node)] +
                         (now_open ? 1 : -1));
}

void FreeDeviceIndex::tag(int dev, int job) {
  auto& t = tag_for_[static_cast<std::size_t>(dev)];
  const int g = core_.cluster().group_of(dev);
  if (t >= 0) {
    auto it = tagged_by_job_.find(t);
    auto& v = it->second.devs;
    *std::find(v.begin(), v.end(), dev) = v.back();
    v.pop_back();
    auto& gs = it->second.groups;
    auto gi = std::find_if(gs.begin(), gs.end(), [&](const auto& x) { return x.first == g; });
    if (--gi->second == 0) {
      *gi = gs.back();
      gs.pop_back();
    }
    if (v.empty()) tagged_by_job_.erase(it);
    --tagged_total_;
  }
  t = job;
  if (job >= 0) {
    auto& tags = tagged_by_job_[job];
    tags.devs.push_back(dev);
    auto gi = std::find_if(tags.groups.begin(), tags.groups.end(), [&](const auto& x) { return x.first == g; });
    if (gi == tags.groups.end()) tags.groups.emplace_back(g, 1);
    else ++gi->second;
    ++tagged_total_;
  }
}

void FreeDeviceIndex::read_job(int job) {
  auto it = tagged_by_job_.find(job);
  if (it == tagged_by_job_.end()) return;
  const std::vector<int> devs = it->second.devs;  // read_device() edits the group
  for (int dev : devs) read_device(dev);
}

void FreeDeviceIndex::read_node(int node) {
  const bool now_up = core_.cluster().node_state[node] ==
                      static_cast<std::int64_t>(spec::NodeState::kUp);
  if (now_up == up(node)) return;
  for (int level : node_levels_[static_cast<std::size_t>(node)]) {
    auto& L = levels_[static_cast<std::size_t>(level)];
    if (now_up) L.supply += static_cast<std::uint64_t>(L.cap[static_cast<std::size_t>(node)]);
    const int k = L.cnt[static_cast<std::size_t>(node)];
    if (k == 0) continue;
    const int sign = now_up ? 1 : -1;
    const int scopes3[3] = {0, region_scope(region_of(node)), cluster_scope(cluster_of(node))};
    const int locals[3] = {node, local_in_region_[static_cast<std::size_t>(node)],
                           local_in_cluster_[static_cast<std::size_t>(node)]};
    for (int i = 0; i < 3; ++i) {
      L.scope[static_cast<std::size_t>(scopes3[i])].total += sign * k;
      if (now_up)
        bucket_insert(L, scopes3[i], locals[i], k);
      else
        bucket_erase(L, scopes3[i], locals[i], k);
    }
  }
  up_[static_cast<std::size_t>(node)] = now_up;
}

void FreeDeviceIndex::set_open_count(int level, int node, int count) {
  auto& L = levels_[static_cast<std::size_t>(level)];
  auto& c = L.cnt[static_cast<std::size_t>(node)];
  if (up(node)) {
    const int scopes3[3] = {0, region_scope(region_of(node)), cluster_scope(cluster_of(node))};
    const int locals[3] = {node, local_in_region_[static_cast<std::size_t>(node)],
                           local_in_cluster_[static_cast<std::size_t>(node)]};
    for (int i = 0; i < 3; ++i) {
      if (c > 0) bucket_erase(L, scopes3[i], locals[i], c);
      if (count > 0) bucket_insert(L, scopes3[i], locals[i], count);
      L.scope[static_cast<std::size_t>(scopes3[i])].total += count - c;
    }
  }
  c = count;
}

void FreeDeviceIndex::bucket_insert(Level& L, int scope, int local, int k) {
  auto& S = L.scope[static_cast<std::size_t>(scope)];
  auto& b = S.bucket[static_cast<std::size_t>(k)];
  b.insert(local);
  S.nonempty[static_cast<std::size_t>(k) >> 6] |= std::uint64_t{1} << (k & 63);
}

void FreeDeviceIndex::bucket_erase(Level& L, int scope, int local, int k) {
  auto& S = L.scope[static_cast<std::size_t>(scope)];
  auto& b = S.bucket[static_cast<std::size_t>(k)];
  b.erase(local);
  if (b.empty()) S.nonempty[static_cast<std::size_t>(k) >> 6] &= ~(std::uint64_t{1} << (k & 63));
}

int FreeDeviceIndex::next_nonempty(int level, int scope, int from) const {
  const auto& L = lv(level);
  const auto& ne = L.scope[static_cast<std::size_t>(scope)].nonempty;
  if (from < 1) from = 1;
  if (from > L.max_per_node) return 0;
  std::size_t w = static_cast<std::size_t>(from) >> 6;
  std::uint64_t x = ne[w] & (~std::uint64_t{0} << (from & 63));
  while (!x) {
    if (++w >= ne.size()) return 0;
    x = ne[w];
  }
  return static_cast<int>(w * 64) + std::countr_zero(x);
}

int FreeDeviceIndex::prev_nonempty(int level, int scope, int from) const {
  const auto& L = lv(level);
  const auto& ne = L.scope[static_cast<std::size_t>(scope)].nonempty;
  if (from > L.max_per_node) from = L.max_per_node;
  if (from < 1) return 0;
  std::size_t w = static_cast<std::size_t>(from) >> 6;
  const int sh = 63 - (from & 63);
  std::uint64_t x = ne[w] & (~std::uint64_t{0} >> sh);
  while (true) {
    if (w == 0) x &= ~std::uint64_t{1};  // bucket 0 is never used
    if (x) return static_cast<int>(w * 64) + 63 - std::countl_zero(x);
    if (w == 0) return 0;
    x = ne[--w];
  }
}

int FreeDeviceIndex::level_for(std::int64_t dtype, std::int64_t mem) const {
  if (dtype < 0 || dtype >= static_cast<std::int64_t>(type_levels_.size())) return -1;
  int best = -1;
  for (int level : type_levels_[static_cast<std::size_t>(dtype)])
    if (levels_[static_cast<std::size_t>(level)].mem >= mem) best = level;
  return best;
}

void FreeDeviceIndex::host_update(int node) {
  const auto& s = core_.cluster();
  std::size_t i = static_cast<std::size_t>(host_leaves_ + node);
  const std::int64_t free = s.host_mem[node] - s.node_swap[node];
  if (free > host_free_[static_cast<std::size_t>(node)]) ++host_supply_;
  host_free_[static_cast<std::size_t>(node)] = free;
  host_min_[i] = node_open_[static_cast<std::size_t>(node)] > 0 ? free : INT64_MAX;
  for (i /= 2; i >= 1; i /= 2) host_min_[i] = std::min(host_min_[2 * i], host_min_[2 * i + 1]);
}

std::string FreeDeviceIndex::audit() const {
  const auto& s = core_.cluster();
  std::string out;
  auto bad = [&](const std::string& what) {
    if (out.size() < 2000) out += what + "\n";
  };
  if (cursor_ != core_.changes().end()) bad("not synced");
  for (int n = 0; n < nodes_; ++n)
    if (up(n) != (s.node_state[n] == static_cast<std::int64_t>(spec::NodeState::kUp)))
      bad("node " + std::to_string(n) + ": up flag");
  // Each device's class against the state, and the tagged devices' groups.
  std::size_t tagged = 0;
  for (int g = 0; g < s.num_groups(); ++g) {
    const int node = s.group_node[g];
    for (int dev = s.group_first[g]; dev < s.group_first[g + 1]; ++dev) {
      const std::size_t bit = node_word_[static_cast<std::size_t>(node)] * 64 +
                              static_cast<std::size_t>(dev - node_first_[static_cast<std::size_t>(node)]);
      const bool free = s.owner[dev] == -1;
      const bool is_open = test_bit(open_bits_, bit), is_tagged = test_bit(tagged_bits_, bit);
      const bool want_tagged = free && maybe_reserved(dev);
      const bool ok = free ? (is_open != is_tagged) && is_tagged == want_tagged
                           : !is_open && !is_tagged;
      if (!ok) bad("device " + std::to_string(dev) + ": open " + std::to_string(is_open) +
                   " tagged " + std::to_string(is_tagged) + ", owner " + std::to_string(s.owner[dev]));
      const int t = tag_for_[static_cast<std::size_t>(dev)];
      if (is_tagged != (t >= 0) || (is_tagged && t != s.resv_for[dev]))
        bad("device " + std::to_string(dev) + ": tagged for " + std::to_string(t));
      if (t >= 0) {
        ++tagged;
        auto it = tagged_by_job_.find(t);
        if (it == tagged_by_job_.end() ||
            std::count(it->second.devs.begin(), it->second.devs.end(), dev) != 1)
          bad("device " + std::to_string(dev) + ": not in its job's group");
      }
    }
  }
  std::size_t grouped = 0;
  for (const auto& [job, tags] : tagged_by_job_) {
    grouped += tags.devs.size();
    // The per-group counts against the devices.
    std::vector<std::pair<int, int>> counted;
    for (int dev : tags.devs) {
      const int g = s.group_of(dev);
      auto gi = std::find_if(counted.begin(), counted.end(), [&](const auto& x) { return x.first == g; });
      if (gi == counted.end()) counted.emplace_back(g, 1);
      else ++gi->second;
    }
    auto want = tags.groups;
    std::sort(counted.begin(), counted.end());
    std::sort(want.begin(), want.end());
    if (counted != want) bad("job " + std::to_string(job) + ": tagged counts by device group");
  }
  if (tagged != tagged_total_ || grouped != tagged_total_) bad("tagged device count");
  // Counts, buckets and totals against the bits.
  for (int level = 0; level < levels(); ++level) {
    const auto& L = lv(level);
    std::vector<std::int64_t> totals(static_cast<std::size_t>(scopes()), 0);
    for (int n = 0; n < nodes_; ++n) {
      int open = 0;
      for_each_open(level, n, [&](int) { return ++open, true; });
      if (open != L.cnt[static_cast<std::size_t>(n)])
        bad("level " + std::to_string(level) + " node " + std::to_string(n) + ": counts");
      const int scopes3[3] = {0, region_scope(region_of(n)), cluster_scope(cluster_of(n))};
      const int locals[3] = {n, local_in_region_[static_cast<std::size_t>(n)],
                             local_in_cluster_[static_cast<std::size_t>(n)]};
      for (int i = 0; i < 3; ++i) {
        const auto& S = L.scope[static_cast<std::size_t>(scopes3[i])];
        for (int k = 1; k <= L.max_per_node; ++k) {
          const bool want = up(n) && open == k;
          if (S.bucket[static_cast<std::size_t>(k)].contains(locals[i]) != want)
            bad("level " + std::to_string(level) + " node " + std::to_string(n) + ": bucket " +
                std::to_string(k));
        }
        if (up(n)) totals[static_cast<std::size_t>(scopes3[i])] += open;
      }
    }
    for (int sc = 0; sc < scopes(); ++sc) {
      const auto& S = L.scope[static_cast<std::size_t>(sc)];
      if (S.total != totals[static_cast<std::size_t>(sc)])
        bad("level " + std::to_string(level) + " scope " + std::to_string(sc) + ": total");
      for (int k = 1; k <= L.max_per_node; ++k)
        if (!S.bucket[static_cast<std::size_t>(k)].empty() !=
            static_cast<bool>(S.nonempty[static_cast<std::size_t>(k) >> 6] >> (k & 63) & 1))
          bad("level " + std::to_string(level) + " scope " + std::to_string(sc) + ": nonempty " +
              std::to_string(k));
    }
  }
  for (int n = 0; n < nodes_; ++n) {
    int open = 0;
    for (std::size_t w = node_word_[static_cast<std::size_t>(n)]; w < node_word_[static_cast<std::size_t>(n) + 1]; ++w)
      open += std::popcount(open_bits_[w]);
    if (open != node_open_[static_cast<std::size_t>(n)]) bad("node " + std::to_string(n) + ": open devices");
    const std::int64_t free = s.host_mem[n] - s.node_swap[n];
    if (host_free_[static_cast<std::size_t>(n)] != free ||
        host_min_[static_cast<std::size_t>(host_leaves_ + n)] != (open > 0 ? free : INT64_MAX))
      bad("node " + std::to_string(n) + ": host memory");
  }
  return out;
}

}  // namespace orrery::core::policy
