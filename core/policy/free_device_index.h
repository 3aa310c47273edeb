// The free-device index behind gang placement (core/policy/gang_placer.h): which devices are free,
// by device class, node, cluster and region, kept in sync with a SchedulerCore through its change
// feed (core/change_feed.h), so that finding the best-fitting node or cluster costs
// microseconds on 100,000 devices instead of a scan.
//
// Levels. A job needs devices of its type with at least its per-worker memory. For each device
// type the distinct memory sizes m1 > m2 > ... define levels: level i of the type holds its devices
// with memory >= mi. A job uses the level of the smallest size that still fits it, which holds
// exactly the devices it may take. Almost every fleet has one memory size per type, so one level.
//
// Device classes kept per device (bits, one word per 64 devices of a node):
//   open   - not held, and no reservation that could be live: resv_for is -1, or its reservation
//            generation is older than its job's (void for good: a job's reservation generation
//            never goes back, INV-RESERVE). Free to every job of the right type.
//   tagged - not held, reserved for a job r under r's current generation: live while r waits.
//            Whether it is free to a given job (its own reservation, or one it outranks,
//            spec::outranks) is decided by the placer per query, on the core's state. Tagged
//            devices are kept by the job they are reserved for; when r's generation moves on (r
//            placed, cancelled or released: the feed records r), they are re-read and become open.
//            Every way out of waiting starts a new generation, so a tagged device's reservation
//            is live; were it not, the device would merely be passed over, never proposed wrongly.
// Counts and buckets include only open devices on nodes that are Up. For each level and each
// scope (the fleet, each region, each cluster) the index keeps the total, and the nodes with
// exactly k open devices for every k as a NodeSet, so "the node with the fewest free devices that
// still fits" is the first member of the first non-empty bucket from k upward.
//
// Sync: the index remembers the core's changes().end() when it last read the state; sync()
// re-reads only the devices and nodes the feed lists since (O(entries), each O(levels of its
// device) plus bucket moves), or rebuilds from the state (O(devices + nodes)) when the feed has
// dropped some. Nothing else can change a device's owner, reservation or node state, nor a
// reservation's generation, so after sync() the index matches the state (audit() checks it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/policy/node_set.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {

class FreeDeviceIndex {
 public:
  explicit FreeDeviceIndex(const SchedulerCore& core);

  const SchedulerCore& core() const { return core_; }
  // Catches up with the core's commits since the last sync (or rebuild).
  void sync();
  // Reads everything from the state again.
  void rebuild();
  // Compares the index with one built from the state now: "" when equal, else what differs.
  // For tests (O(devices)); call after sync().
  std::string audit() const;
  std::uint64_t rebuilds() const { return rebuilds_; }
  std::uint64_t synced_entries() const { return synced_entries_; }

  // ---- Topology (fixed) ----
  int nodes() const { return nodes_; }
  int clusters() const { return static_cast<int>(cluster_nodes_.size()); }
  int regions() const { return static_cast<int>(region_clusters_.size()); }
  int cluster_of(int node) const { return node_cluster_[static_cast<std::size_t>(node)]; }
  int region_of_cluster(int c) const { return cluster_region_[static_cast<std::size_t>(c)]; }
  int region_of(int node) const { return region_of_cluster(cluster_of(node)); }
  const std::vector<int>& clusters_of_region(int r) const {
    return region_clusters_[static_cast<std::size_t>(r)];
  }
  // Scopes: 0 is the fleet, then one per region, then one per cluster.
  int fleet_scope() const { return 0; }
  int region_scope(int r) const { return 1 + r; }
  int cluster_scope(int c) const { return 1 + regions() + c; }
  int scopes() const { return 1 + regions() + clusters(); }
  bool in_scope(int scope, int node) const {
    return scope == 0 || scope == region_scope(region_of(node)) ||
           scope == cluster_scope(cluster_of(node));
  }
  // A scope's nodes in increasing id; a node's position there is its index in the scope's buckets.
  const std::vector<int>& scope_nodes(int scope) const {
    return scope_nodes_[static_cast<std::size_t>(scope)];
  }

  // ---- Levels (fixed) ----
  int levels() const { return static_cast<int>(levels_.size()); }
  // The level for a job of device type `dtype` needing `mem` MiB per worker; -1 when no device of
  // that type has that much memory.
  int level_for(std::int64_t dtype, std::int64_t mem) const;
  // The most devices of the level on one node (bucket counts are 1..max_per_node).
  int max_per_node(int level) const { return lv(level).max_per_node; }
  // Devices of the level on the node / in the scope, whatever their state.
  int capacity(int level, int node) const { return lv(level).cap[static_cast<std::size_t>(node)]; }
  std::int64_t scope_capacity(int level, int scope) const {
    return lv(level).scope_cap[static_cast<std::size_t>(scope)];
  }

  // ---- Free devices (as of the last sync) ----
  bool up(int node) const { return up_[static_cast<std::size_t>(node)] != 0; }
  // Open devices of the level on the node (Up or not).
  int open(int level, int node) const { return lv(level).cnt[static_cast<std::size_t>(node)]; }
  // Open devices of the level on the scope's Up nodes.
  std::int64_t total(int level, int scope) const {
    return lv(level).scope[static_cast<std::size_t>(scope)].total;
  }
  // The scope's Up nodes with exactly k open devices of the level (1 <= k <= max_per_node), by
  // their position in scope_nodes(scope).
  const NodeSet& bucket(int level, int scope, int k) const {
    return lv(level).scope[static_cast<std::size_t>(scope)].bucket[static_cast<std::size_t>(k)];
  }
  // The largest k <= from with a non-empty bucket, or 0.
  int prev_nonempty(int level, int scope, int from) const;
  // The smallest k >= from with a non-empty bucket, or 0.
  int next_nonempty(int level, int scope, int from) const;
  // The most open devices of the level on one Up node of the fleet (0: none).
  int most_open_on_a_node(int level) const { return prev_nonempty(level, fleet_scope(), max_per_node(level)); }

  // Supply counters. The level's grows by at least the number of devices of the level that may
  // have become free to some job: one for a device that turned open, or tagged or re-tagged for a
  // job; the node's devices of the level for a node that came Up; 2^40 for a rebuild. The host
  // counter grows whenever a node's free host memory went up. So between two readings no scope
  // gained more devices of the level free to any job than the level's counter grew, and where
  // neither counter moved, nothing any placement of the level could use has grown: a placement
  // that found too few devices would find too few again (GangPlacer remembers such answers).
  std::uint64_t supply(int level) const { return lv(level).supply; }
  std::uint64_t host_supply() const { return host_supply_; }

  // Visits the open devices of the level on the node in increasing id: f(dev) -> false stops.
  template <class F>
  void for_each_open(int level, int node, F&& f) const {
    visit_bits(open_bits_, level, node, f);
  }
  // The same for tagged devices.
  template <class F>
  void for_each_tagged(int level, int node, F&& f) const {
    visit_bits(tagged_bits_, level, node, f);
  }
  // Visits the jobs that tagged devices are reserved for: f(job, counts), counts being (device
  // group, tagged devices of the group) for each of the job's device groups (a node's devices of
  // one type and memory: SchedulerCore's groups) with any (any level, any node). Per group rather
  // than per device: a placement query visits every job with live reservations, and a gang's
  // reservation is up to hundreds of devices on a few nodes.
  template <class F>
  void for_each_tag_group(F&& f) const {
    for (const auto& [job, tags] : tagged_by_job_) f(job, tags.groups);
  }
  // Device group g (a node's devices of one type and memory) is in the level.
  bool group_in_level(int level, int g) const {
    const auto& gl = group_levels_[static_cast<std::size_t>(g)];
    return std::find(gl.begin(), gl.end(), level) != gl.end();
  }
  std::size_t tagged_devices() const { return tagged_total_; }
  // Whether devices are reserved for `job` (live: under its current generation).
  bool has_reservations(int job) const { return tagged_by_job_.count(job) != 0; }
  // Device dev is of the level (type, memory).
  bool in_level(int level, int dev) const {
    const int node = core_.cluster().node_of(dev);
    const std::size_t bit = node_word_[static_cast<std::size_t>(node)] * 64 +
                            static_cast<std::size_t>(dev - node_first_[static_cast<std::size_t>(node)]);
    return lv(level).mask[bit >> 6] >> (bit & 63) & 1;
  }

  // Visits the nodes with open devices (of any level) whose free host memory (host_mem -
  // node_swap) is below `threshold`: f(node). O((1 + visited) log nodes). (Where host memory
  // limits a placement, only a node with devices to offer matters; under load most nodes have
  // none, and spliced workers' memory on them.)
  template <class F>
  void for_each_host_below(std::int64_t threshold, F&& f) const {
    if (nodes_ == 0 || host_min_[1] >= threshold) return;
    host_below(1, 0, host_leaves_, threshold, f);
  }

 private:
  struct Scope {
    std::int64_t total = 0;
    std::vector<NodeSet> bucket;           // by k (0 unused)
    std::vector<std::uint64_t> nonempty;   // bit k: bucket k has a member
  };
  struct Level {
    std::int64_t type = 0;
    std::int64_t mem = 0;
    int max_per_node = 0;
    std::vector<int> cap;              // per node: devices of the level
    std::vector<std::int64_t> scope_cap;
    std::vector<std::uint64_t> mask;   // per device bit (node word layout): in the level
    std::vector<int> cnt;              // per node: open devices
    std::vector<Scope> scope;
    std::uint64_t supply = 0;          // supply(level)
  };

  const Level& lv(int level) const { return levels_[static_cast<std::size_t>(level)]; }
  void build_topology();
  void read_all();
  void read_device(int dev);
  void read_node(int node);
  void read_job(int job);
  void tag(int dev, int job);  // job -1: untag
  void set_open_count(int level, int node, int count);
  void bucket_insert(Level& L, int scope, int local, int k);
  void bucket_erase(Level& L, int scope, int local, int k);
  // Whether a free device's reservation could still be live (see the header comment).
  bool maybe_reserved(int dev) const;
  void host_update(int node);

  template <class F>
  void visit_bits(const std::vector<std::uint64_t>& bits, int level, int node, F& f) const {
    const auto& L = lv(level);
    const std::size_t w0 = node_word_[static_cast<std::size_t>(node)];
    const std::size_t w1 = node_word_[static_cast<std::size_t>(node) + 1];
    const int first = node_first_[static_cast<std::size_t>(node)];
    for (std::size_t w = w0; w < w1; ++w) {
      std::uint64_t x = bits[w] & L.mask[w];
      while (x) {
        const int b = std::countr_zero(x);
        x &= x - 1;
        if (!f(first + static_cast<int>((w - w0) * 64) + b)) return;
      }
    }
  }
  template <class F>
  void host_below(std::size_t i, int lo, int width, std::int64_t threshold, F& f) const {
    if (host_min_[i] >= threshold || lo >= nodes_) return;
    if (width == 1) {
      f(lo);
      return;
    }
    host_below(2 * i, lo, width / 2, threshold, f);
    host_below(2 * i + 1, lo + width / 2, width / 2, threshold, f);
  }

  const SchedulerCore& core_;
  std::uint64_t cursor_ = 0;  // the core's changes().end() as of the last read
  std::uint64_t rebuilds_ = 0;
  std::uint64_t synced_entries_ = 0;

  int nodes_ = 0;
  std::vector<int> node_cluster_, cluster_region_;
  std::vector<std::vector<int>> cluster_nodes_, region_clusters_;
  std::vector<std::vector<int>> scope_nodes_;
  std::vector<int> local_in_region_, local_in_cluster_;  // per node
  std::vector<int> node_first_;                          // per node: its first device
  std::vector<std::size_t> node_word_;                   // per node + end: first word of its bits
  std::vector<std::vector<int>> group_levels_;           // per device group: the levels it is in
  std::vector<std::vector<int>> node_levels_;            // per node: levels with devices there
  std::vector<std::vector<int>> type_levels_;            // per type id: levels, largest memory first
  std::vector<Level> levels_;

  std::vector<char> up_;
  std::vector<std::uint64_t> open_bits_, tagged_bits_;
  std::vector<int> tag_for_;  // per device: the job it is tagged for, or -1
  struct Tags {
    std::vector<int> devs;                     // the job's tagged devices
    std::vector<std::pair<int, int>> groups;   // (device group, how many of devs are in it)
  };
  std::unordered_map<int, Tags> tagged_by_job_;
  std::size_t tagged_total_ = 0;
  int host_leaves_ = 1;                  // power of two >= nodes
  // Min-tree over nodes of host_mem - node_swap, of the nodes with open devices (INT64_MAX for
  // the others).
  std::vector<std::int64_t> host_min_;
  std::vector<std::int64_t> host_free_;  // per node: host_mem - node_swap as last read
  std::vector<int> node_open_;           // per node: open devices (any level)
  std::uint64_t host_supply_ = 0;        // host_supply()
};

}  // namespace orrery::core::policy
