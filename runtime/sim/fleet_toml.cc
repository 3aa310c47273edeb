#include "runtime/sim/fleet_toml.h"

#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <toml++/toml.h>

#include "runtime/common/toml_type_name.h"
#include "runtime/sim/fleet_builder.h"
#include "spec/limits.h"
#include "spec/vocabulary.h"

namespace orrery::sim {
namespace {

constexpr std::int64_t kMaxNodeCount = spec::kMaxFleetDevices;  // a node has at least one device

using runtime::toml_type_name;

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Result<core::Fleet> run(const toml::table& root) {
    if (auto st = only_keys(root, "the top level", {"premium_reserve", "device_types", "region"});
        !st.ok())
      return st;
    std::int64_t reserve = 0;
    if (auto st = integer(root, "premium_reserve", false, 0, spec::kMaxFleetDevices, reserve);
        !st.ok())
      return st;
    if (auto st = device_types(root); !st.ok()) return st;
    const toml::array* regions = nullptr;
    if (auto st = array_of_tables(root, "region", "[[region]]", regions); !st.ok()) return st;
    for (const toml::node& r : *regions)
      if (auto st = region(*r.as_table()); !st.ok()) return st;
    if (reserve > builder_.num_devices())
      return err(at(root, "premium_reserve"),
                 "premium_reserve: " + std::to_string(reserve) + " exceeds the fleet's " +
                     std::to_string(builder_.num_devices()) + " devices");
    if (auto st = builder_.set_premium_reserve(reserve); !st.ok())
      return err(at(root, "premium_reserve"), st.reason());
    auto fleet = builder_.finish();
    if (!fleet) return Status::Error(std::string(source_) + ": " + fleet.reason());
    return fleet;
  }

 private:
  struct DeviceType {
    std::int64_t mem_mib = 0;
  };

  Status device_types(const toml::table& root) {
    const toml::node* n = root.get("device_types");
    if (!n) return missing(root, "device_types", "a table of device types, e.g. H100-80G = { mem_mib = 81920 }");
    const toml::table* t = n->as_table();
    if (!t) return err(n->source(), "device_types: expected a table, got " + std::string(toml_type_name(n->type())));
    for (const auto& [k, v] : *t) {
      const std::string name(k.str());
      if (!valid_fleet_name(name))
        return err(k.source(), "device type \"" + name + "\": must be " + std::string(spec::kNameRule));
      const toml::table* d = v.as_table();
      if (!d) return err(v.source(), "device_types." + name + ": expected a table { mem_mib = ... }, got " +
                                         std::string(toml_type_name(v.type())));
      if (auto st = only_keys(*d, "device_types." + name, {"mem_mib"}); !st.ok()) return st;
      DeviceType dt;
      if (auto st = integer(*d, "mem_mib", true, 1, spec::kMaxMemMib, dt.mem_mib, "device_types." + name + "."); !st.ok())
        return st;
      types_[name] = dt;
    }
    if (types_.empty()) return err(n->source(), "device_types: declares no device type");
    return Status::Ok();
  }

  Status region(const toml::table& r) {
    if (auto st = only_keys(r, "[[region]]", {"name", "cluster"}); !st.ok()) return st;
    std::string name;
    if (auto st = str(r, "name", name, "[[region]]"); !st.ok()) return st;
    if (!valid_fleet_name(name)) return err(at(r, "name"), "region name \"" + name + "\": must be " + std::string(spec::kNameRule));
    const toml::array* clusters = nullptr;
    if (auto st = array_of_tables(r, "cluster", "[[region.cluster]]", clusters); !st.ok()) return st;
    for (const toml::node& c : *clusters)
      if (auto st = cluster(name, *c.as_table()); !st.ok()) return st;
    return Status::Ok();
  }

  Status cluster(const std::string& region, const toml::table& c) {
    if (auto st = only_keys(c, "[[region.cluster]]", {"name", "node"}); !st.ok()) return st;
    std::string name;
    if (auto st = str(c, "name", name, "[[region.cluster]]"); !st.ok()) return st;
    if (!valid_fleet_name(name)) return err(at(c, "name"), "cluster name \"" + name + "\": must be " + std::string(spec::kNameRule));
    const toml::array* nodes = nullptr;
    if (auto st = array_of_tables(c, "node", "[[region.cluster.node]]", nodes); !st.ok()) return st;
    for (const toml::node& n : *nodes)
      if (auto st = node(region, name, *n.as_table()); !st.ok()) return st;
    return Status::Ok();
  }

  Status node(const std::string& region, const std::string& cluster, const toml::table& n) {
    const std::string what = "[[region.cluster.node]]";
    if (auto st = only_keys(n, what, {"name", "count", "host_mem_mib", "devices"}); !st.ok()) return st;
    std::string name;
    if (auto st = str(n, "name", name, what); !st.ok()) return st;
    std::int64_t count = 1, host_mem = 0;
    if (auto st = integer(n, "count", false, 1, kMaxNodeCount, count); !st.ok()) return st;
    if (auto st = integer(n, "host_mem_mib", true, 0, spec::kMaxHostMemMib, host_mem); !st.ok()) return st;
    // The devices: a non-empty array of { type, count } tables, each type declared.
    const toml::node* dn = n.get("devices");
    if (!dn) return missing(n, "devices", "an array like [{ type = \"H100-80G\", count = 8 }]");
    const toml::array* arr = dn->as_array();
    if (!arr) return err(dn->source(), "devices: expected an array of { type, count } tables, got " +
                                           std::string(toml_type_name(dn->type())));
    if (arr->empty()) return err(dn->source(), "devices: a node needs at least one device");
    struct Run {
      std::string type;
      std::int64_t count;
      std::int64_t mem_mib;
      toml::source_region where;
    };
    std::vector<Run> runs;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const toml::node& e = *arr->get(i);
      const std::string ew = "devices[" + std::to_string(i) + "]";
      const toml::table* d = e.as_table();
      if (!d) return err(e.source(), ew + ": expected a table { type = ..., count = ... }, got " +
                                         std::string(toml_type_name(e.type())));
      if (auto st = only_keys(*d, ew, {"type", "count"}); !st.ok()) return st;
      Run run{"", 0, 0, d->source()};
      if (auto st = str(*d, "type", run.type, ew); !st.ok()) return st;
      auto t = types_.find(run.type);
      if (t == types_.end())
        return err(at(*d, "type"), ew + ".type: device type \"" + run.type +
                                       "\" is not declared in [device_types]");
      run.mem_mib = t->second.mem_mib;
      if (auto st = integer(*d, "count", true, 1, spec::kMaxNodeDevices, run.count, ew + "."); !st.ok())
        return st;
      runs.push_back(std::move(run));
    }
    // count > 1: name-00 .. name-NN, zero-padded to the width of the last index.
    const int width = static_cast<int>(std::to_string(count - 1).size());
    for (std::int64_t i = 0; i < count; ++i) {
      std::string node_name = name;
      if (count > 1) {
        std::string idx = std::to_string(i);
        node_name += "-" + std::string(width - idx.size(), '0') + idx;
      }
      if (auto st = builder_.add_node(region, cluster, node_name, host_mem); !st.ok())
        return err(at(n, "name"), st.reason());
      for (const auto& r : runs)
        if (auto st = builder_.add_devices(r.type, r.count, r.mem_mib); !st.ok())
          return err(r.where, st.reason());
    }
    return Status::Ok();
  }

  // ---- helpers: every error names SOURCE:LINE:COLUMN.

  Status err(const toml::source_region& r, const std::string& what) const {
    std::ostringstream o;
    o << source_;
    if (r.begin.line > 0) o << ':' << r.begin.line << ':' << r.begin.column;
    o << ": " << what;
    return Status::Error(o.str());
  }

  Status missing(const toml::table& t, std::string_view key, std::string_view what) const {
    return err(t.source(), std::string(key) + ": required key missing (" + std::string(what) + ")");
  }

  static toml::source_region at(const toml::table& t, std::string_view key) {
    const toml::node* n = t.get(key);
    return n ? n->source() : t.source();
  }

  Status only_keys(const toml::table& t, const std::string& where,
                   std::initializer_list<std::string_view> known) const {
    for (const auto& [k, v] : t) {
      bool ok = false;
      for (auto kn : known) ok = ok || kn == k.str();
      if (!ok) {
        std::string names;
        for (auto kn : known) names += (names.empty() ? "" : ", ") + std::string(kn);
        return err(k.source(), std::string(k.str()) + ": unknown key in " + where + " (known: " + names + ")");
      }
    }
    return Status::Ok();
  }

  Status str(const toml::table& t, std::string_view key, std::string& out, const std::string& where) const {
    const toml::node* n = t.get(key);
    if (!n) return missing(t, key, "a string, in " + where);
    auto v = n->value_exact<std::string>();
    if (!v) return err(n->source(), std::string(key) + ": expected a string, got " + std::string(toml_type_name(n->type())));
    out = *v;
    return Status::Ok();
  }

  Status integer(const toml::table& t, std::string_view key, bool required, std::int64_t lo,
                 std::int64_t hi, std::int64_t& out, const std::string& prefix = "") const {
    const toml::node* n = t.get(key);
    if (!n) return required ? missing(t, prefix + std::string(key), "an integer") : Status::Ok();
    if (!n->is_integer())
      return err(n->source(), prefix + std::string(key) + ": expected an integer, got " +
                                  std::string(toml_type_name(n->type())));
    const std::int64_t v = n->as_integer()->get();
    if (v < lo || v > hi)
      return err(n->source(), prefix + std::string(key) + ": " + std::to_string(v) + " out of range [" +
                                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = v;
    return Status::Ok();
  }

  // `key` must be an array of tables ([[...]] sections), at least one.
  Status array_of_tables(const toml::table& t, std::string_view key, std::string_view header,
                         const toml::array*& out) const {
    const toml::node* n = t.get(key);
    if (!n) return missing(t, key, "at least one " + std::string(header) + " section");
    const toml::array* a = n->as_array();
    if (!a || !a->is_array_of_tables())
      return err(n->source(), std::string(key) + ": expected " + std::string(header) +
                                  " sections (an array of tables), got " + std::string(toml_type_name(n->type())));
    if (a->empty()) return err(n->source(), std::string(key) + ": needs at least one " + std::string(header));
    out = a;
    return Status::Ok();
  }

  std::string_view source_;
  std::map<std::string, DeviceType> types_;
  FleetBuilder builder_;
};

// Debian's toml++ 3.3 reaches __builtin_unreachable on some non-ASCII characters outside string
// values (see runtime/cli/job_spec.cc). Every key and name of a fleet file is ASCII, so any
// non-ASCII byte is refused before toml++ sees the text.
Status check_ascii(std::string_view text, std::string_view source) {
  std::size_t line = 1, col = 1;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80)
      return Status::Error(std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(col) +
                           ": non-ASCII character (a fleet file is ASCII)");
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<core::Fleet> parse_fleet_toml(std::string_view text, std::string_view source) {
  if (auto st = check_ascii(text, source); !st.ok()) return st;
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream o;
    o << source;
    if (e.source().begin.line > 0) o << ':' << e.source().begin.line << ':' << e.source().begin.column;
    o << ": " << e.description();
    return Status::Error(o.str());
  }
  return Parser(source).run(root);
}

Result<core::Fleet> load_fleet_toml(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open the fleet file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Error(path + ": cannot read the fleet file");
  return parse_fleet_toml(text.str(), path);
}

}  // namespace orrery::sim
