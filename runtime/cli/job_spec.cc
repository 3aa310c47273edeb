#include "runtime/cli/job_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "base/quote.h"
#include "core/service/job_spec_check.h"
#include "runtime/common/toml_type_name.h"
#include "spec/vocabulary.h"

namespace orrery::cli {
namespace {

using runtime::toml_type_name;

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

  Result<service::JobSpec> run(const std::string& base_dir) {
    service::JobSpec s;
    // Unknown keys first: a misspelt key is the likeliest cause of any later "missing" error.
    static const std::set<std::string_view> known = {
        "name",       "tier",     "device_type", "world",      "min_devices",      "max_devices",
        "mem_mib",    "steps",    "workload",    "args",       "checkpoint_every", "tenant",
        "command",    "env",      "workdir",     "preemption", "grace_s",          "min_runtime_s"};
    for (const auto& [k, v] : root_) {
      if (!known.contains(k.str())) {
        return err(k.source(), clip_input(k.str()) + ": unknown key (known: name, tier, "
                   "device_type, world, min_devices, max_devices, mem_mib, command, env, workdir, "
                   "preemption, grace_s, min_runtime_s, steps, checkpoint_every, workload, args, tenant)");
      }
    }
    // Types here; ranges, names and the core's submit guard in the one validation every entry
    // point runs (core/service/job_spec_check.h), whose error is placed at the key at fault.
    if (auto st = str("name", true, s.name); !st.ok()) return st;
    if (auto st = str("tenant", false, s.tenant); !st.ok()) return st;
    std::string tier = "standard";
    if (auto st = str("tier", false, tier); !st.ok()) return st;
    auto t = spec::parse_tier(tier);
    if (!t) return err(at("tier"), "tier: must be premium, standard or basic, got " + quote_input(tier));
    s.tier = *t;
    if (auto st = str("device_type", false, s.device_type); !st.ok()) return st;
    if (auto st = integer("world", true, s.world); !st.ok()) return st;
    s.max_devices = s.world;  // defaults: one worker per device, not elastic
    if (auto st = integer("max_devices", false, s.max_devices); !st.ok()) return st;
    s.min_devices = s.max_devices;
    if (auto st = integer("min_devices", false, s.min_devices); !st.ok()) return st;
    if (auto st = integer("mem_mib", false, s.mem_mib); !st.ok()) return st;
    if (auto st = integer("checkpoint_every", false, s.checkpoint_every); !st.ok()) return st;
    std::string mode = "transparent";
    if (auto st = str("preemption", false, mode); !st.ok()) return st;
    auto m = spec::parse_preemption(mode);
    if (!m) return err(at("preemption"), "preemption: must be transparent, signal or requeue, got " + quote_input(mode));
    s.preemption = *m;
    if (auto st = seconds("grace_s", s.grace_ms); !st.ok()) return st;
    if (auto st = seconds("min_runtime_s", s.min_runtime_ms); !st.ok()) return st;
    // The program: `command`, or a built-in workload (`workload` + `args`), which is the same
    // thing spelt for orrery's own programs: workload "mlp" runs ["orrery-train-mlp", args...,
    // "--steps=N"].
    std::string workload;
    if (auto st = str("workload", false, workload); !st.ok()) return st;
    std::vector<std::string> args;
    if (auto st = strings("args", args); !st.ok()) return st;
    if (auto st = strings("command", s.command); !st.ok()) return st;
    if (root_.contains("command") && (root_.contains("workload") || root_.contains("args")))
      return err(at("command"), "command: give either command or workload/args, not both");
    const bool builtin = !root_.contains("command");
    s.steps = builtin ? 100 : 0;
    if (auto st = integer("steps", false, s.steps); !st.ok()) return st;
    if (builtin) {
      if (workload.empty()) workload = "mlp";
      if (!spec::valid_name(workload, /*allow_dot=*/false))
        return err(at("workload"), "workload: must be " + std::string(spec::kNameRule) +
                                       ", without '.', got " + quote_input(workload));
      if (workload != "mlp") return err(at("workload"), "workload: unknown built-in workload " + quote_input(workload) +
                                                           " (there is \"mlp\"; run your own program with command)");
      // The workload's own limits, named by the keys the user wrote.
      if (s.steps < 1 || s.steps > spec::kMaxSteps)
        return err(at("steps"), "steps: " + std::to_string(s.steps) + " out of range [1, " +
                                    std::to_string(spec::kMaxSteps) + "]");
      if (args.size() > spec::kMaxArgs)
        return err(at("args"), "args: at most " + std::to_string(spec::kMaxArgs) + " arguments, got " +
                                   std::to_string(args.size()));
      for (std::size_t i = 0; i < args.size(); ++i)
        if (!service::exec_safe(args[i]))
          return err(root_.get("args")->as_array()->get(i)->source(),
                     "args[" + std::to_string(i) + "]: must be at most " + std::to_string(spec::kMaxArgLength) +
                         " bytes without line breaks or NUL characters");
      s.command = {"orrery-train-" + workload};
      s.command.insert(s.command.end(), args.begin(), args.end());
      s.command.push_back("--steps=" + std::to_string(s.steps));
    }
    if (const toml::node* e = root_.get("env")) {
      const toml::table* tbl = e->as_table();
      if (!tbl) return err(e->source(), "env: expected a table of strings (env = { NAME = \"value\" }), got " +
                                            std::string(toml_type_name(e->type())));
      for (const auto& [k, v] : *tbl) {
        auto val = v.value_exact<std::string>();
        if (!v.is_string() || !val)
          return err(v.source(), "env." + clip_input(k.str()) + ": expected a string, got " +
                                     std::string(toml_type_name(v.type())));
        s.env.emplace_back(std::string(k.str()), *val);
      }
    }
    // workdir: relative to the job spec's folder, which is also the default.
    std::string workdir = ".";
    if (auto st = str("workdir", false, workdir); !st.ok()) return st;
    if (workdir.empty()) return err(at("workdir"), "workdir: must not be empty");
    s.workdir = workdir[0] == '/' ? workdir : base_dir + (workdir == "." ? "" : "/" + workdir);
    std::string field;
    if (auto st = service::validate_job_spec(s, &field); !st.ok()) {
      // min_devices and max_devices default from world: a bad default is world's fault.
      if (!root_.contains(field) && (field == "min_devices" || field == "max_devices")) field = "world";
      if (field == "command" && builtin) field = root_.contains("args") ? "args" : "workload";
      const toml::node* n = root_.get(field);
      if ((field == "command" || field == "args") && n && n->as_array()) {
        // "command[i]: ...": point at the element.
        const std::string& r = st.reason();
        if (r.rfind("command[", 0) == 0) {
          std::size_t i = std::stoul(r.substr(8));
          if (builtin) --i;  // args[i] is command[i + 1]
          if (i < n->as_array()->size()) n = n->as_array()->get(i);
        }
      }
      return err(n ? n->source() : toml::source_region{}, st.reason());
    }
    return s;
  }

 private:
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
                                  std::string(toml_type_name(n->type())));
    out = *v;
    return Status::Ok();
  }

  // An array of strings.
  Status strings(std::string_view key, std::vector<std::string>& out) const {
    const toml::node* a = root_.get(key);
    if (!a) return Status::Ok();
    const toml::array* arr = a->as_array();
    if (!arr) return err(a->source(), std::string(key) + ": expected an array of strings, got " +
                                          std::string(toml_type_name(a->type())));
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const toml::node& e = *arr->get(i);
      auto v = e.value<std::string>();
      if (!e.is_string() || !v) {
        return err(e.source(), std::string(key) + "[" + std::to_string(i) + "]: expected a string, got " +
                                   std::string(toml_type_name(e.type())));
      }
      out.push_back(*v);
    }
    return Status::Ok();
  }

  // Seconds (an integer or a float) as milliseconds.
  Status seconds(std::string_view key, std::int64_t& out_ms) const {
    const toml::node* n = root_.get(key);
    if (!n) return Status::Ok();
    double v = 0;
    if (n->is_integer()) {
      v = static_cast<double>(n->as_integer()->get());
    } else if (n->is_floating_point()) {
      v = n->as_floating_point()->get();
    } else {
      return err(n->source(), std::string(key) + ": expected a number of seconds, got " +
                                  std::string(toml_type_name(n->type())));
    }
    if (!(v >= 0 && v <= 86400))
      return err(n->source(), std::string(key) + ": must be between 0 and 86400 seconds");
    out_ms = static_cast<std::int64_t>(v * 1000 + 0.5);
    return Status::Ok();
  }

  Status integer(std::string_view key, bool required, std::int64_t& out) const {
    const toml::node* n = root_.get(key);
    if (!n) return required ? missing(key, "an integer") : Status::Ok();
    if (!n->is_integer())
      return err(n->source(), std::string(key) + ": expected an integer, got " +
                                  std::string(toml_type_name(n->type())));
    out = n->as_integer()->get();
    return Status::Ok();
  }

  std::string_view source_;
  const toml::table& root_;
};

// toml++ 3.3 (Debian's) has undefined behaviour on some non-ASCII characters: its generated
// is_non_ascii_horizontal_whitespace() reaches TOML_UNREACHABLE (__builtin_unreachable) for code
// points in U+00A1..U+0499 and a few other ranges (found by job_spec_fuzz: "\xEF\xBB\x9F["). It
// asks that question of characters outside strings, of quoted keys, and of the character after a
// line-ending backslash in a multi-line basic string; not of value strings or comments. So before
// handing text to toml++, non-ASCII bytes are allowed only where toml++ never classifies them:
// comments, and strings in value position outside inline tables. Anywhere else a job spec has no
// use for them (every key is ASCII), so they are an error naming the place. A UTF-8 byte order
// mark that begins the text is skipped, as toml++ skips it (columns count from after it).
Status check_non_ascii(std::string_view text, std::string_view source) {
  enum class In { kCode, kComment, kBasic, kLiteral, kMlBasic, kMlLiteral };
  In in = In::kCode;
  bool value = false;     // after '=' on this logical line: strings here are values
  int brackets = 0;       // array depth (arrays may span lines)
  int braces = 0;         // inline-table depth (quoted keys inside)
  bool escaped = false;   // basic strings: the previous byte was a backslash
  bool skipping = false;  // multi-line basic: after a line-ending backslash, before content
  unsigned char last = '\n';  // the last non-blank byte outside strings and comments
  bool bare = false;          // inside a bare token (key, number, boolean, date)
  bool bare_key = false;      // ... that is a key: it ends at the first byte no bare key has
  std::string nest;           // the open arrays ('[') and inline tables ('{'), innermost last
  std::size_t line = 1, col = 1;
  auto fail = [&]() {
    return Status::Error(std::string(source) + ":" + std::to_string(line) + ":" +
                         std::to_string(col) +
                         ": non-ASCII character outside a string value or comment");
  };
  auto end_line = [&]() {
    if (brackets == 0 && braces == 0) value = false;
  };
  const std::size_t begin = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  for (std::size_t i = begin; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const bool ascii = c < 0x80;
    auto starts = [&](std::string_view s) { return text.substr(i, s.size()) == s; };
    std::size_t skip = 0;  // extra bytes of a three-quote delimiter
    // A quote opens a string only where toml++ expects a key or a value to begin.
    const bool opens = last == '\n' || last == '=' || last == '[' || last == ',' ||
                       last == '{' || last == '.';
    switch (in) {
      case In::kCode: {
        if (!ascii) return fail();
        const bool terminator = c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ']' ||
                                c == '}' || c == ',' || c == '#';
        // toml++ scans a bare value (number, boolean, date) up to a value terminator, quotes,
        // brackets and '=' inside it included; a bare key only over A-Z a-z 0-9 _ - (what
        // follows, '=' or a quote, is read as such: "A='x'" is a key, '=' and a string).
        const bool key_byte = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                              (c >= '0' && c <= '9') || c == '_' || c == '-';
        if (bare && (bare_key ? key_byte : !terminator)) break;
        bare = false;
        // A key begins a line outside arrays and inline tables, or follows '{' or ',' in an
        // inline table (and a table header's '[' or a dotted key's '.').
        const bool key_here = (!value && nest.empty()) ||
                              (!nest.empty() && nest.back() == '{' && (last == '{' || last == ',' || last == '.'));
        if (c == '#') {
          in = In::kComment;
        } else if (c == '=') {
          value = true;
        } else if (c == '[') {
          if (value) {
            ++brackets;
            nest.push_back('[');
          }
        } else if (c == ']') {
          if (brackets > 0) --brackets;
          if (!nest.empty() && nest.back() == '[') nest.pop_back();
        } else if (c == '{') {
          ++braces;
          nest.push_back('{');
        } else if (c == '}') {
          if (braces > 0) --braces;
          if (!nest.empty() && nest.back() == '{') nest.pop_back();
        } else if (c == '\n') {
          end_line();
        } else if (c == ' ' || c == '\t' || c == '\r' || c == ',' || c == '.') {
          // ('.' outside a bare value: between the parts of a dotted key)
        } else if (!opens) {
          bare = true;  // a quote right after a closed string: toml++ stops there
          bare_key = false;
        } else if (starts("\"\"\"")) {
          in = In::kMlBasic;
          skip = 2;
        } else if (starts("\'\'\'")) {
          in = In::kMlLiteral;
          skip = 2;
        } else if (c == '"') {
          in = In::kBasic;
        } else if (c == '\'') {
          in = In::kLiteral;
        } else {
          bare = true;
          bare_key = key_here;
        }
        if (c != ' ' && c != '\t' && c != '\r') last = c;
        break;
      }
      case In::kComment:
        if (c == '\n') {
          in = In::kCode;
          last = c;
          end_line();
        }
        break;
      case In::kBasic:
      case In::kLiteral:
        if (!ascii && (!value || braces > 0)) return fail();
        if (c == '\n') {  // toml++ reports the unterminated string
          in = In::kCode;
          last = c;
          end_line();
        } else if (in == In::kBasic && escaped) {
          escaped = false;
        } else if (in == In::kBasic && c == '\\') {
          escaped = true;
        } else if ((in == In::kBasic && c == '"') || (in == In::kLiteral && c == '\'')) {
          in = In::kCode;
          last = c;
        }
        break;
      case In::kMlBasic: {
        if (!ascii && (!value || braces > 0 || escaped || skipping)) return fail();
        const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
        if (escaped) {
          escaped = false;
          skipping = space;
        } else if (skipping && space) {
          // still skipping the whitespace after a line-ending backslash
        } else if (c == '\\') {
          skipping = false;
          escaped = true;
        } else {
          skipping = false;
          if (starts("\"\"\"")) {
            in = In::kCode;
            last = c;
            skip = 2;
          }
        }
        break;
      }
      case In::kMlLiteral:
        if (!ascii && (!value || braces > 0)) return fail();
        if (starts("'''")) {
          in = In::kCode;
          last = c;
          skip = 2;
        }
        break;
    }
    if (c == '\n') {
      ++line;
      col = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++col;  // columns count characters, as toml++'s do
    }
    i += skip;
    col += skip;
  }
  return Status::Ok();
}

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

// A job spec's largest legitimate size is a few MiB (kMaxCommand arguments and kMaxEnv values of
// kMaxArgLength bytes, escaped); more is not a job spec, and is not read whole into memory.
constexpr std::size_t kMaxSpecBytes = std::size_t{16} << 20;

// What a path that is not a regular file is ("a directory", "a FIFO", ...); nullptr for a file.
const char* not_a_file(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return nullptr;
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  return "something other than a file";
}

// toml++'s description with every '...'-quoted piece of the input in it (a key it cannot redefine,
// say) clipped to kMaxQuoted bytes. toml++ cuts long descriptions itself, closing quote included:
// an unclosed quote runs to the end.
std::string clip_quoted(std::string_view d) {
  std::string out;
  for (auto open = d.find('\''); open != std::string_view::npos; open = d.find('\'')) {
    auto close = d.find('\'', open + 1);
    out += d.substr(0, open + 1);
    out += clip_input(d.substr(open + 1, close == std::string_view::npos ? close : close - open - 1));
    if (close == std::string_view::npos) return out;
    out += '\'';
    d.remove_prefix(close + 1);
  }
  out += d;
  return out;
}

}  // namespace

Result<service::JobSpec> parse_job_spec(std::string_view text, std::string_view source,
                                        const std::string& base_dir) {
  // Errors name the source; a file name is input too, shown at most kMaxQuoted bytes of it.
  const std::string src = clip_input(source);
  if (auto st = check_non_ascii(text, src); !st.ok()) return st;
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Status::Error(place(src, e.source()) + clip_quoted(e.description()));
  }
  std::string base = base_dir;
  if (base.empty()) {
    std::error_code ec;
    base = std::filesystem::current_path(ec).string();
  }
  return Parser(src, root).run(base);
}

Result<service::JobSpec> load_job_spec(const std::string& path) {
  const std::string shown = clip_input(path);
  // Looked at before it is opened: a directory would read as an empty spec ("name: required key
  // missing"), and opening a FIFO to read it waits for a writer, forever.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    const std::string why = shown + ": cannot open the job spec: " + std::strerror(e);
    return e == ENOENT ? Status::NotFound(why) : Status::InvalidArgument(why);
  }
  if (auto kind = not_a_file(st)) return Status::InvalidArgument(shown + " is " + kind + ", not a job file");
  // O_NONBLOCK: should it have become a FIFO since, opening it does not wait (fstat refuses it).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::InvalidArgument(shown + ": cannot open the job spec: " + std::strerror(errno));
  std::string text;
  Status failed;
  if (::fstat(fd, &st) != 0) {
    failed = Status::Internal(shown + ": cannot read the job spec: " + std::strerror(errno));
  } else if (auto kind = not_a_file(st)) {
    failed = Status::InvalidArgument(shown + " is " + kind + ", not a job file");
  } else {
    char buf[64 << 10];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        failed = Status::Internal(shown + ": cannot read the job spec: " + std::strerror(errno));
        break;
      }
      if (n == 0) break;
      text.append(buf, static_cast<std::size_t>(n));
      if (text.size() > kMaxSpecBytes) {
        failed = Status::InvalidArgument(shown + ": more than " + std::to_string(kMaxSpecBytes >> 20) +
                                         " MiB, too large for a job spec");
        break;
      }
    }
  }
  ::close(fd);
  if (!failed.ok()) return failed;
  std::error_code ec;
  auto dir = std::filesystem::absolute(std::filesystem::path(path), ec).parent_path().lexically_normal();
  return parse_job_spec(text, path, dir.string());
}

std::string to_toml(const service::JobSpec& s) {
  std::ostringstream o;
  auto list = [&](const std::vector<std::string>& v) {
    o << "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) o << ", ";
      quoted(o, v[i]);
    }
    o << "]";
  };
  auto secs = [&](std::int64_t ms) {
    if (ms % 1000 == 0) {
      o << ms / 1000;
    } else {
      o << ms / 1000 << "." << std::setw(3) << std::setfill('0') << ms % 1000 << std::setfill(' ');
    }
  };
  o << "name = ";
  quoted(o, s.name);
  o << "\ntier = \"" << spec::tier_name(s.tier) << "\"\ndevice_type = ";
  quoted(o, s.device_type);
  o << "\nworld = " << s.world << "\nmin_devices = " << s.min_devices
    << "\nmax_devices = " << s.max_devices << "\nmem_mib = " << s.mem_mib << "\ncommand = ";
  list(s.command);
  o << "\nworkdir = ";
  quoted(o, s.workdir);
  o << "\npreemption = \"" << spec::preemption_name(s.preemption) << "\"\ngrace_s = ";
  secs(s.grace_ms);
  o << "\nmin_runtime_s = ";
  secs(s.min_runtime_ms);
  o << "\nsteps = " << s.steps << "\ncheckpoint_every = " << s.checkpoint_every << "\n";
  if (!s.tenant.empty()) {
    o << "tenant = ";
    quoted(o, s.tenant);
    o << "\n";
  }
  if (!s.env.empty()) {
    o << "\n[env]\n";
    for (const auto& [k, v] : s.env) {
      o << k << " = ";
      quoted(o, v);
      o << "\n";
    }
  }
  return o.str();
}

}  // namespace orrery::cli
