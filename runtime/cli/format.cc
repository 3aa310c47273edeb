#include "runtime/cli/format.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "spec/vocabulary.h"

namespace orrery::cli {
namespace {

std::string table(const std::vector<std::vector<std::string>>& rows) {
  // Every column but the last is padded to its widest cell; the last (NOTE) is free text.
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string bytes_text(std::int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

bool parse_int(std::string_view s, std::int64_t& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

std::string format_age(std::int64_t ms) {
  if (ms < 0) return "-";
  char buf[32];
  const std::int64_t s = ms / 1000;
  if (ms < 1000)
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
  else if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else if (s < 86400)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  else
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  std::string r = buf;
  if (s >= 60 && s < 3600) r += "s";
  return r;
}

std::string format_jobs(const std::vector<service::JobStatus>& jobs) {
  std::vector<std::vector<std::string>> rows = {{"JOB", "NAME", "TIER", "STATE", "EPOCH", "DEV",
                                                 "SPLICE", "STEP/STEPS", "CKPT", "NODES", "AGE",
                                                 "TENANT", "TYPE", "NOTE"}};
  for (const auto& j : jobs) {
    std::string nodes;
    for (const auto& n : j.nodes) nodes += (nodes.empty() ? "" : ",") + n;
    rows.push_back({std::to_string(j.job), j.name, std::string(spec::tier_name(j.tier)),
                    std::string(spec::state_name(j.state)), std::to_string(j.epoch),
                    std::to_string(j.devices), j.splice > 0 ? std::to_string(j.splice) : "-",
                    // steps 0: the program does not report steps (signal, requeue) or did not say.
                    j.steps > 0 ? std::to_string(j.progress) + "/" + std::to_string(j.steps)
                                : (j.progress > 0 ? std::to_string(j.progress) : "-"),
                    j.checkpoint >= 0 ? std::to_string(j.checkpoint) : "-",
                    nodes.empty() ? "-" : nodes, format_age(j.age_ms),
                    j.tenant.empty() ? "-" : j.tenant, j.device_type.empty() ? "-" : j.device_type, j.note});
  }
  return table(rows);
}

std::string format_nodes(const std::vector<service::NodeStatus>& nodes) {
  std::vector<std::vector<std::string>> rows = {{"NODE", "STATE", "DEVICES", "HELD", "HEARTBEAT"}};
  for (const auto& n : nodes) {
    rows.push_back({n.name, std::string(spec::node_state_name(n.state)), std::to_string(n.devices),
                    std::to_string(n.held),
                    n.heartbeat_age_ms >= 0 ? format_age(n.heartbeat_age_ms) + " ago" : "-"});
  }
  return table(rows);
}

std::optional<Progress> find_progress(std::string_view text) {
  // Scan for "A/B" with digits on both sides, then look at the word before or after it.
  for (std::size_t slash = text.find('/'); slash != std::string_view::npos;
       slash = text.find('/', slash + 1)) {
    std::size_t a = slash;
    while (a > 0 && text[a - 1] >= '0' && text[a - 1] <= '9') --a;
    std::size_t b = slash + 1;
    while (b < text.size() && text[b] >= '0' && text[b] <= '9') ++b;
    Progress p;
    if (a == slash || b == slash + 1 || !parse_int(text.substr(a, slash - a), p.done) ||
        !parse_int(text.substr(slash + 1, b - slash - 1), p.total) || p.total <= 0 ||
        p.done < 0 || p.done > p.total)
      continue;
    std::string_view after = text.substr(b);
    if (after.starts_with(" bytes")) p.unit = "bytes";
    else if (after.starts_with(" shards")) p.unit = "shards";
    else if (a >= 5 && text.substr(a - 5, 5) == "step ") p.unit = "steps";
    else continue;
    return p;
  }
  return std::nullopt;
}

std::string progress_bar(const Progress& p, int width) {
  const double f = p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(p.total) : 0;
  const int filled = static_cast<int>(f * width + 0.5);
  std::string out = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
  char pct[8];
  std::snprintf(pct, sizeof pct, "%3d%%", static_cast<int>(f * 100));
  out += pct;
  out += "  ";
  if (p.unit == "bytes")
    out += bytes_text(p.done) + "/" + bytes_text(p.total);
  else
    out += std::to_string(p.done) + "/" + std::to_string(p.total) + " " + p.unit;
  return out;
}

std::string format_event(const service::ClusterEvent& e) {
  std::ostringstream o;
  if (e.time_ms >= service::kWallClockFloorMs) {
    const std::time_t t = static_cast<std::time_t>(e.time_ms / 1000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    char ms[8];
    std::snprintf(ms, sizeof ms, "%03d", static_cast<int>(e.time_ms % 1000));
    o << buf << '.' << ms << 'Z';
  } else {
    o << '-';  // an older core's boot-relative stamp: no wall-clock time to show
  }
  if (e.seq > 0) o << " #" << e.seq;
  o << ' ' << e.text;
  return o.str();
}

}  // namespace orrery::cli
