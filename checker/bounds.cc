#include "checker/bounds.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace orrery::checker {

namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<Bounds> parse_bounds(const std::string& text) {
  Bounds b;
  struct Key {
    const char* name;
    int lo, hi;
    int* target;
  };
  int timeout = static_cast<int>(b.timeout_ms);
  const Key keys[] = {
      {"proof_jobs", 1, 8, &b.proof.jobs},
      {"proof_nodes", 1, 8, &b.proof.nodes},
      {"proof_devices_per_node", 1, 8, &b.proof.devices_per_node},
      {"bmc_jobs", 1, 4, &b.bmc.jobs},
      {"bmc_nodes", 1, 4, &b.bmc.nodes},
      {"bmc_devices_per_node", 1, 4, &b.bmc.devices_per_node},
      {"bmc_depth", 0, 64, &b.bmc_depth},
      {"bmc_unroll", 0, 64, &b.bmc_unroll},
      {"timeout_ms", 1, 3600000, &timeout},
  };
  std::istringstream in(text);
  int lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    line = trim(line);
    if (line.empty()) continue;
    auto where = "bounds line " + std::to_string(lineno) + ": ";
    auto eq = line.find('=');
    if (eq == std::string::npos) return Status::Error(where + "expected key = value");
    auto key = trim(line.substr(0, eq));
    auto val = trim(line.substr(eq + 1));
    const Key* k = nullptr;
    for (const auto& c : keys)
      if (key == c.name) k = &c;
    if (!k) return Status::Error(where + "unknown key '" + key + "'");
    int v = 0;
    auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
    if (ec != std::errc() || p != val.data() + val.size() || v < k->lo || v > k->hi)
      return Status::Error(where + key + " must be an integer in [" + std::to_string(k->lo) + ", " +
                           std::to_string(k->hi) + "], got '" + val + "'");
    *k->target = v;
  }
  b.timeout_ms = static_cast<unsigned>(timeout);
  return b;
}

Result<Bounds> load_bounds(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read bounds config " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto b = parse_bounds(ss.str());
  if (!b) return Status::Error(path + ": " + b.reason());
  return b;
}

}  // namespace orrery::checker
