#include "core/fleet.h"

#include <algorithm>

#include <charconv>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "spec/invariants.h"
#include "spec/limits.h"

namespace orrery::core {

namespace {

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Parses a non-negative integer that spans the whole of `text`.
bool whole_int(std::string_view text, std::int64_t& v) {
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && p == text.data() + text.size() && v >= 0;
}

// Parses the `key=<non-negative integer>` words of words[from..]; every word must be one of
// `allowed`, at most once. Missing keys keep the values `out` already holds.
Status keyed_ints(const std::vector<std::string>& words, std::size_t from,
                  const std::vector<std::pair<std::string, std::int64_t*>>& allowed) {
  std::vector<bool> seen(allowed.size(), false);
  for (std::size_t i = from; i < words.size(); ++i) {
    const auto& w = words[i];
    auto eq = w.find('=');
    std::string key = w.substr(0, eq);
    std::size_t k = 0;
    while (k < allowed.size() && allowed[k].first != key) ++k;
    if (eq == std::string::npos || k == allowed.size()) {
      std::string names;
      for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a.first + "=";
      return Status::Error("unexpected '" + w + "' (expected " + names + ")");
    }
    if (seen[k]) return Status::Error(key + "= given twice");
    seen[k] = true;
    if (!whole_int(std::string_view(w).substr(eq + 1), *allowed[k].second))
      return Status::Error("'" + w + "': " + key + " must be a non-negative integer");
  }
  return Status::Ok();
}

}  // namespace

Result<Fleet> Fleet::parse(const std::string& text) {
  Fleet f;
  std::string region, cluster;
  std::unordered_set<std::string> node_names;
  bool seen_reserve = false;
  std::istringstream in(text);
  int lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    auto where = [&](const std::string& msg) {
      return Status::Error("fleet line " + std::to_string(lineno) + ": " + msg);
    };
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    auto w = split_words(line);
    if (w.empty()) continue;
    const auto& kw = w[0];
    if (kw == "premium_reserve") {
      std::int64_t v = 0;
      if (w.size() != 2 || !whole_int(w[1], v))
        return where("premium_reserve takes one non-negative integer");
      if (seen_reserve) return where("premium_reserve given twice");
      seen_reserve = true;
      f.premium_reserve = v;
    } else if (kw == "region") {
      if (w.size() != 2) return where("region takes one name");
      if (!spec::valid_name(w[1]))
        return where("region name '" + w[1] + "': must be " + std::string(spec::kNameRule));
      region = w[1];
      cluster.clear();
    } else if (kw == "cluster") {
      if (w.size() != 2) return where("cluster takes one name");
      if (region.empty()) return where("cluster before any region");
      if (!spec::valid_name(w[1]))
        return where("cluster name '" + w[1] + "': must be " + std::string(spec::kNameRule));
      cluster = w[1];
    } else if (kw == "node") {
      if (w.size() < 2) return where("node needs a name");
      if (cluster.empty()) return where("node before any cluster");
      std::int64_t mem = -1;
      if (auto st = keyed_ints(w, 2, {{"host_mem_mib", &mem}}); !st) return where(st.reason());
      if (mem < 0) return where("missing host_mem_mib=");
      if (mem > spec::kMaxHostMemMib)
        return where("host_mem_mib must be at most " + std::to_string(spec::kMaxHostMemMib));
      if (!spec::valid_name(w[1]))
        return where("node name '" + w[1] + "': must be " + std::string(spec::kNameRule));
      if (!node_names.insert(w[1]).second) return where("node '" + w[1] + "' defined twice");
      const int next = f.num_devices();
      f.nodes.push_back(Node{w[1], cluster, region, mem, next, next});
    } else if (kw == "devices") {
      if (w.size() < 2) return where("devices needs a type");
      if (f.nodes.empty()) return where("devices before any node");
      std::int64_t count = -1, mem = -1;
      if (auto st = keyed_ints(w, 2, {{"count", &count}, {"mem_mib", &mem}}); !st)
        return where(st.reason());
      if (count < 0) return where("missing count=");
      auto on_node = static_cast<std::int64_t>(f.nodes.back().num_devices());
      if (count < 1 || on_node + count > spec::kMaxNodeDevices)
        return where("count must be >= 1 and a node has at most " +
                     std::to_string(spec::kMaxNodeDevices) + " devices");
      if (static_cast<std::int64_t>(f.num_devices()) + count > spec::kMaxFleetDevices)
        return where("a fleet has at most " + std::to_string(spec::kMaxFleetDevices) + " devices");
      if (mem < 1) return where("missing or zero mem_mib= (device memory, MiB)");
      if (mem > spec::kMaxMemMib)
        return where("mem_mib must be at most " + std::to_string(spec::kMaxMemMib));
      if (!spec::valid_name(w[1]))
        return where("device type '" + w[1] + "': must be " + std::string(spec::kNameRule));
      int type = f.type_id(w[1]);
      if (type < 0) {
        type = static_cast<int>(f.device_types.size());
        f.device_types.push_back(w[1]);
      }
      int node = static_cast<int>(f.nodes.size()) - 1;
      const int first = f.num_devices();
      f.groups.push_back(DeviceGroup{type, mem, node, first, static_cast<int>(count)});
      f.nodes.back().end_device = first + static_cast<int>(count);
    } else {
      return where("unknown keyword '" + kw +
                   "' (expected premium_reserve, region, cluster, node or devices)");
    }
  }
  if (f.num_devices() == 0) return Status::Error("fleet has no devices");
  if (f.premium_reserve > f.num_devices())
    return Status::Error("premium_reserve " + std::to_string(f.premium_reserve) +
                         " exceeds the fleet's " + std::to_string(f.num_devices()) + " devices");
  return f;
}

Result<Fleet> Fleet::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read fleet config " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto f = parse(ss.str());
  if (!f) return Status::Error(path + ": " + f.reason());
  return f;
}

std::string Fleet::to_text() const {
  std::ostringstream out;
  out << "premium_reserve " << premium_reserve << "\n";
  std::string region, cluster;
  std::size_t g = 0;
  for (const auto& n : nodes) {
    if (n.region != region) {
      region = n.region;
      cluster.clear();
      out << "region " << region << "\n";
    }
    if (n.cluster != cluster) {
      cluster = n.cluster;
      out << "cluster " << cluster << "\n";
    }
    out << "node " << n.name << " host_mem_mib=" << n.host_mem_mib << "\n";
    // The node's groups are consecutive (a `devices` line belongs to the last node); consecutive
    // groups of the same type and memory form one line.
    const int node = static_cast<int>(&n - nodes.data());
    while (g < groups.size() && groups[g].node == node) {
      const auto& first = groups[g];
      int count = 0;
      while (g < groups.size() && groups[g].node == node && groups[g].type == first.type &&
             groups[g].mem_mib == first.mem_mib)
        count += groups[g++].count;
      out << "devices " << device_types[first.type] << " count=" << count
          << " mem_mib=" << first.mem_mib << "\n";
    }
  }
  return out.str();
}

int Fleet::type_id(const std::string& type) const {
  for (std::size_t i = 0; i < device_types.size(); ++i)
    if (device_types[i] == type) return static_cast<int>(i);
  return -1;
}

Result<std::vector<int>> Fleet::type_ids(std::string_view types) const {
  std::vector<int> ids;
  for (const std::string_view n : spec::device_type_names(types)) {
    const std::string name(n);
    if (name.empty()) return Status::Error("device type list \"" + std::string(types) + "\" has an empty name");
    const int id = type_id(name);
    if (id < 0) return Status::Error("the fleet has no device of type '" + name + "'");
    if (std::find(ids.begin(), ids.end(), id) != ids.end())
      return Status::Error("device type '" + name + "' is named twice in \"" + std::string(types) + "\"");
    ids.push_back(id);
  }
  return ids;
}

const DeviceGroup& Fleet::group_of(int dev) const {
  auto it = std::upper_bound(groups.begin(), groups.end(), dev,
                             [](int v, const DeviceGroup& g) { return v < g.first; });
  return *(it - 1);
}

spec::ClusterVars<spec::Concrete> Fleet::empty_cluster() const {
  const spec::Concrete d;
  spec::ClusterVars<spec::Concrete> s;
  for (const auto& g : groups) {
    s.group_first.push_back(g.first);
    s.group_node.push_back(g.node);
    s.group_type.push_back(g.type);
    s.group_mem.push_back(g.mem_mib);
  }
  s.group_first.push_back(num_devices());
  for (const auto& n : nodes) {
    s.node_devs.push_back(n.num_devices());
    s.host_mem.push_back(n.host_mem_mib);
  }
  s.nodes = static_cast<int>(nodes.size());
  s.premium_reserve = {premium_reserve};
  spec::clear_state(d, s);
  return s;
}

Fleet default_fleet() {
  auto f = Fleet::parse(
      "premium_reserve 4\n"
      "region local\n"
      "cluster c0\n"
      "node node0 host_mem_mib=262144\n"
      "devices H100-80G count=4 mem_mib=81920\n"
      "node node1 host_mem_mib=262144\n"
      "devices H100-80G count=4 mem_mib=81920\n");
  return std::move(f.value());
}

}  // namespace orrery::core
