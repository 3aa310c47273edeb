#include "runtime/cli/job_spec.h"

#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "spec/vocabulary.h"

namespace orrery::cli {
namespace {

std::string_view type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::none: return "nothing";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
  }
  return "a value";
}

// "SOURCE:LINE:COLUMN: " (or "SOURCE: " where the place is unknown).
std::string place(std::string_view source, const toml::source_region& r) {
  std::ostringstream o;
  o << source;
  if (r.begin.line > 0) o << ':' << r.begin.line << ':' << r.begin.column;
  o << ": ";
  return o.str();
}

class Parser {
 public:
  Parser(std::string_view source, const toml::table& root) : source_(source), root_(root) {}

  Result<service::JobSpec> run() {
    service::JobSpec s;
    // Unknown keys first: a misspelt key is the likeliest cause of any later "missing" error.
    static const std::set<std::string_view> known = {
        "name",    "tier", "device_type", "world",    "min_devices",     "max_devices",
        "mem_mib", "steps", "workload",   "args",     "checkpoint_every"};
    for (const auto& [k, v] : root_) {
      if (!known.contains(k.str())) {
        return err(k.source(), std::string(k.str()) + ": unknown key (known: name, tier, "
                   "device_type, world, min_devices, max_devices, mem_mib, steps, "
                   "checkpoint_every, workload, args)");
      }
    }
    if (auto st = str("name", true, s.name); !st.ok()) return st;
    if (s.name.empty() || s.name.size() > kMaxJobNameLength || !name_chars(s.name)) {
      return err(at("name"), "name: must be 1 to " + std::to_string(kMaxJobNameLength) +
                             " characters of A-Z a-z 0-9 . _ - starting with a letter or digit, "
                             "got \"" + s.name + "\"");
    }
    std::string tier = "standard";
    if (auto st = str("tier", false, tier); !st.ok()) return st;
    auto t = spec::parse_tier(tier);
    if (!t) return err(at("tier"), "tier: must be premium, standard or basic, got \"" + tier + "\"");
    s.tier = *t;
    if (auto st = str("device_type", false, s.device_type); !st.ok()) return st;
    if (s.device_type.empty() || !name_chars(s.device_type)) {
      return err(at("device_type"), "device_type: must be a device type name such as \"host\", got \"" +
                                        s.device_type + "\"");
    }
    if (auto st = integer("world", true, 1, spec::kMaxWorld, s.world); !st.ok()) return st;
    s.max_devices = s.world;
    if (auto st = integer("max_devices", false, 1, s.world, s.max_devices); !st.ok()) return st;
    s.min_devices = s.max_devices;
    if (auto st = integer("min_devices", false, 1, s.max_devices, s.min_devices); !st.ok()) return st;
    // The core's "world splits evenly over a device count in range" clause: some device count c in
    // [min, max] with world == c * splice, splice <= kSpliceLimit.
    bool feasible = false;
    for (int f = 1; f <= spec::kSpliceLimit && !feasible; ++f)
      feasible = s.world % f == 0 && s.min_devices <= s.world / f && s.world / f <= s.max_devices;
    if (!feasible) {
      return err(at(root_.contains("min_devices") ? "min_devices" : "world"),
                 "world " + std::to_string(s.world) + " does not split evenly over any device count in [" +
                     std::to_string(s.min_devices) + ", " + std::to_string(s.max_devices) +
                     "] with at most " + std::to_string(spec::kSpliceLimit) +
                     " workers per device: the job could never be placed");
    }
    if (auto st = integer("mem_mib", false, 1, spec::kMaxMemMib, s.mem_mib); !st.ok()) return st;
    if (auto st = integer("steps", false, 1, std::int64_t{1} << 40, s.steps); !st.ok()) return st;
    if (auto st = integer("checkpoint_every", false, 0, std::int64_t{1} << 40, s.checkpoint_every);
        !st.ok())
      return st;
    if (auto st = str("workload", false, s.workload); !st.ok()) return st;
    if (s.workload.empty() || !name_chars(s.workload))
      return err(at("workload"), "workload: must be a workload name such as \"mlp\", got \"" + s.workload + "\"");
    if (const toml::node* a = root_.get("args")) {
      const toml::array* arr = a->as_array();
      if (!arr) return err(a->source(), "args: expected an array of strings, got " +
                                            std::string(type_name(a->type())));
      for (std::size_t i = 0; i < arr->size(); ++i) {
        const toml::node& e = *arr->get(i);
        auto v = e.value<std::string>();
        if (!e.is_string() || !v) {
          return err(e.source(), "args[" + std::to_string(i) + "]: expected a string, got " +
                                     std::string(type_name(e.type())));
        }
        s.args.push_back(*v);
      }
    }
    return s;
  }

 private:
  static bool name_chars(const std::string& n) {
    auto ok = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    };
    if (n.empty() || n[0] == '.' || n[0] == '_' || n[0] == '-') return false;
    for (char c : n)
      if (!ok(c)) return false;
    return true;
  }

  toml::source_region at(std::string_view key) const {
    const toml::node* n = root_.get(key);
    return n ? n->source() : toml::source_region{};
  }

  Status err(const toml::source_region& r, const std::string& what) const {
    return Status::Error(place(source_, r) + what);
  }

  Status missing(std::string_view key, std::string_view what) const {
    return Status::Error(std::string(source_) + ": " + std::string(key) + ": required key missing (" +
                         std::string(what) + ")");
  }

  Status str(std::string_view key, bool required, std::string& out) const {
    const toml::node* n = root_.get(key);
    if (!n) return required ? missing(key, "a string") : Status::Ok();
    auto v = n->value_exact<std::string>();
    if (!n->is_string() || !v)
      return err(n->source(), std::string(key) + ": expected a string, got " +
                                  std::string(type_name(n->type())));
    out = *v;
    return Status::Ok();
  }

  Status integer(std::string_view key, bool required, std::int64_t lo, std::int64_t hi,
                 std::int64_t& out) const {
    const toml::node* n = root_.get(key);
    if (!n) return required ? missing(key, "an integer") : Status::Ok();
    if (!n->is_integer())
      return err(n->source(), std::string(key) + ": expected an integer, got " +
                                  std::string(type_name(n->type())));
    std::int64_t v = n->as_integer()->get();
    if (v < lo || v > hi) {
      return err(n->source(), std::string(key) + ": " + std::to_string(v) + " out of range [" +
                                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    out = v;
    return Status::Ok();
  }

  std::string_view source_;
  const toml::table& root_;
};

void quoted(std::ostream& o, const std::string& s) {
  o << '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o << '\\' << c;
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789ABCDEF";
      o << "\\u00" << hex[c >> 4] << hex[c & 15];
    } else {
      o << c;
    }
  }
  o << '"';
}

}  // namespace

Result<service::JobSpec> parse_job_spec(std::string_view text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Status::Error(place(source, e.source()) + std::string(e.description()));
  }
  return Parser(source, root).run();
}

Result<service::JobSpec> load_job_spec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open the job spec");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Error(path + ": cannot read the job spec");
  return parse_job_spec(text.str(), path);
}

std::string to_toml(const service::JobSpec& s) {
  std::ostringstream o;
  o << "name = ";
  quoted(o, s.name);
  o << "\ntier = \"" << spec::tier_name(s.tier) << "\"\ndevice_type = ";
  quoted(o, s.device_type);
  o << "\nworld = " << s.world << "\nmin_devices = " << s.min_devices
    << "\nmax_devices = " << s.max_devices << "\nmem_mib = " << s.mem_mib
    << "\nsteps = " << s.steps << "\ncheckpoint_every = " << s.checkpoint_every
    << "\nworkload = ";
  quoted(o, s.workload);
  o << "\nargs = [";
  for (std::size_t i = 0; i < s.args.size(); ++i) {
    if (i) o << ", ";
    quoted(o, s.args[i]);
  }
  o << "]\n";
  return o.str();
}

}  // namespace orrery::cli
