#include "runtime/sim/sim_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "runtime/sim/svg_plot.h"

namespace orrery::sim {

namespace {

const char* kTiers[3] = {"premium", "standard", "basic"};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string num(double v) {  // 1234567 -> "1,234,567"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  std::string s = buf, out;
  int digits = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (std::isdigit(static_cast<unsigned char>(*it)) && digits && digits % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    if (std::isdigit(static_cast<unsigned char>(*it))) ++digits;
  }
  return out;
}
std::string duration(double s) {
  if (s < 120) return fmt("%.0f s", s);
  if (s < 7200) return fmt("%.1f min", s / 60);
  if (s < 172800) return fmt("%.1f h", s / 3600);
  return fmt("%.1f d", s / 86400);
}
std::string json_num(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt("%.6g", v);
}

// A JSON string: tenant names come from input files.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += std::string("\\") + static_cast<char>(c);
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    }
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

}  // namespace

std::string results_table(const std::vector<SimResult>& rs) {
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  auto row = [&](const std::string& name, auto f) {
    std::vector<std::string> cells;
    for (const auto& r : rs) cells.push_back(f(r));
    rows.emplace_back(name, std::move(cells));
  };
  row("policy", [](const SimResult& r) { return r.policy; });
  row("jobs completed", [](const SimResult& r) { return num(static_cast<double>(r.completed)) + " of " + num(static_cast<double>(r.jobs)); });
  row("failed / unfinished / unschedulable", [](const SimResult& r) {
    return num(static_cast<double>(r.failed)) + " / " + num(static_cast<double>(r.unfinished)) + " / " +
           num(static_cast<double>(r.unschedulable));
  });
  row("JCT avg", [](const SimResult& r) { return duration(r.avg_jct_s); });
  row("JCT p50", [](const SimResult& r) { return duration(r.p50_jct_s); });
  row("JCT p95", [](const SimResult& r) { return duration(r.p95_jct_s); });
  row("JCT p99", [](const SimResult& r) { return duration(r.p99_jct_s); });
  for (int t = 0; t < 3; ++t) {
    row(std::string(kTiers[t]) + " jobs", [t](const SimResult& r) { return num(static_cast<double>(r.tiers[t].jobs)); });
    row(std::string(kTiers[t]) + " queue avg", [t](const SimResult& r) { return duration(r.tiers[t].avg_queue_s); });
    row(std::string(kTiers[t]) + " queue avg 1-device / gangs", [t](const SimResult& r) {
      const auto& x = r.tiers[t];
      return (x.jobs > x.gang_jobs ? duration(x.avg_queue_one_s) : std::string("-")) + " / " +
             (x.gang_jobs ? duration(x.avg_queue_gang_s) : std::string("-"));
    });
    row(std::string(kTiers[t]) + " JCT avg", [t](const SimResult& r) { return duration(r.tiers[t].avg_jct_s); });
    row(std::string(kTiers[t]) + " JCT p99", [t](const SimResult& r) { return duration(r.tiers[t].p99_jct_s); });
    row(std::string(kTiers[t]) + " queue p99", [t](const SimResult& r) { return duration(r.tiers[t].p99_queue_s); });
    row(std::string(kTiers[t]) + " queue max", [t](const SimResult& r) { return duration(r.tiers[t].max_queue_s); });
    row(std::string(kTiers[t]) + " SLA met", [t](const SimResult& r) { return fmt("%.1f%%", 100 * r.tiers[t].sla_attainment); });
  }
  if (std::any_of(rs.begin(), rs.end(), [](const SimResult& r) { return !r.tenants.empty(); }))
    row("queue avg per tenant", [](const SimResult& r) { return duration(r.tenant_mean_queue_s); });
  row("offered load (steady state)", [](const SimResult& r) { return fmt("%.1f%%", 100 * r.offered_load); });
  row("utilization (steady state)", [](const SimResult& r) { return fmt("%.1f%%", 100 * r.utilization); });
  row("utilization (arrivals)", [](const SimResult& r) { return fmt("%.1f%%", 100 * r.utilization_arrivals); });
  row("utilization (makespan)", [](const SimResult& r) { return fmt("%.1f%%", 100 * r.utilization_makespan); });
  // Each action with the device time it held idle and the work it threw away (GPU-hours).
  for (int a = 0; a < kNumActions; ++a) {
    row(std::string(kActionNames[a]) + "s (GPU-h idle / redone)", [a](const SimResult& r) {
      const auto& c = r.actions[static_cast<std::size_t>(a)];
      return num(static_cast<double>(c.count)) + " (" + fmt("%.1f", c.stalled_gpu_s / 3600) + " / " +
             fmt("%.1f", c.redone_gpu_s / 3600) + ")";
    });
  }
  row("node failures", [](const SimResult& r) { return num(static_cast<double>(r.node_failures)); });
  row("lost GPU-hours", [](const SimResult& r) { return fmt("%.1f", r.lost_gpu_s / 3600); });
  // Only for runs with signal or requeue jobs (--modes): the default table stays as it was.
  if (std::any_of(rs.begin(), rs.end(), [](const SimResult& r) {
        return r.submitted_by_mode[1] + r.submitted_by_mode[2] > 0;
      })) {
    row("jobs transparent/signal/requeue", [](const SimResult& r) {
      return num(static_cast<double>(r.submitted_by_mode[0])) + "/" + num(static_cast<double>(r.submitted_by_mode[1])) +
             "/" + num(static_cast<double>(r.submitted_by_mode[2]));
    });
    row("lost GPU-hours (requeue cuts)", [](const SimResult& r) { return fmt("%.1f", r.lost_cut_gpu_s / 3600); });
  }
  row("decisions", [](const SimResult& r) { return num(static_cast<double>(r.decisions)); });
  row("rejected proposals", [](const SimResult& r) { return num(static_cast<double>(r.rejected_proposals)); });
  row("invariant violations", [](const SimResult& r) {
    return r.invariant_violations < 0 ? std::string("not checked") : num(static_cast<double>(r.invariant_violations));
  });
  row("simulated", [](const SimResult& r) { return duration(r.sim_s); });
  row("wall", [](const SimResult& r) { return fmt("%.2f s", r.wall_s); });
  row("decisions/s", [](const SimResult& r) { return num(r.decisions_per_s); });
  row("peak RSS", [](const SimResult& r) { return fmt("%.0f MiB", r.peak_rss_mib); });

  std::size_t w0 = 0;
  std::vector<std::size_t> w(rs.size(), 0);
  for (const auto& [name, cells] : rows) {
    w0 = std::max(w0, name.size());
    for (std::size_t i = 0; i < cells.size(); ++i) w[i] = std::max(w[i], cells[i].size());
  }
  std::string out;
  for (const auto& [name, cells] : rows) {
    out += name + std::string(w0 - name.size() + 2, ' ');
    for (std::size_t i = 0; i < cells.size(); ++i)
      out += std::string(w[i] - cells[i].size() + (i ? 3 : 0), ' ') + cells[i];
    out += "\n";
  }
  return out;
}

std::string results_json(const std::vector<SimResult>& rs) {
  std::string out = "[";
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const auto& r = rs[i];
    auto per_tier = [&](auto f) {
      std::string s = "{";
      for (int t = 0; t < 3; ++t) s += std::string(t ? ", " : "") + "\"" + kTiers[t] + "\": " + json_num(f(r.tiers[t]));
      return s + "}";
    };
    out += i ? ",\n " : "\n ";
    out += "{\"policy\": \"" + r.policy + "\"";
    out += ", \"jobs\": " + std::to_string(r.jobs);
    out += ", \"completed\": " + std::to_string(r.completed);
    out += ", \"failed\": " + std::to_string(r.failed);
    out += ", \"unfinished\": " + std::to_string(r.unfinished);
    out += ", \"unschedulable\": " + std::to_string(r.unschedulable);
    out += ", \"unschedulable_why\": {";
    for (auto it = r.unschedulable_why.begin(); it != r.unschedulable_why.end(); ++it)
      out += (it == r.unschedulable_why.begin() ? "\"" : ", \"") + it->first + "\": " + std::to_string(it->second);
    out += "}";
    out += ", \"avg_jct_s\": " + json_num(r.avg_jct_s);
    out += ", \"avg_run_s\": " + json_num(r.avg_run_s);
    out += ", \"p50_jct_s\": " + json_num(r.p50_jct_s);
    out += ", \"p95_jct_s\": " + json_num(r.p95_jct_s);
    out += ", \"p99_jct_s\": " + json_num(r.p99_jct_s);
    out += ", \"avg_jct_s_per_tier\": " + per_tier([](const TierResult& t) { return t.avg_jct_s; });
    out += ", \"p50_jct_s_per_tier\": " + per_tier([](const TierResult& t) { return t.p50_jct_s; });
    out += ", \"p99_jct_s_per_tier\": " + per_tier([](const TierResult& t) { return t.p99_jct_s; });
    out += ", \"max_queue_s\": " + per_tier([](const TierResult& t) { return t.max_queue_s; });
    out += ", \"avg_queue_s\": " + per_tier([](const TierResult& t) { return t.avg_queue_s; });
    out += ", \"p99_queue_s\": " + per_tier([](const TierResult& t) { return t.p99_queue_s; });
    out += ", \"sla_attainment\": " + per_tier([](const TierResult& t) { return t.sla_attainment; });
    out += ", \"jobs_per_tier\": " + per_tier([](const TierResult& t) { return static_cast<double>(t.jobs); });
    out += ", \"gangs_per_tier\": " + per_tier([](const TierResult& t) { return static_cast<double>(t.gang_jobs); });
    out += ", \"avg_queue_s_one_device\": " + per_tier([](const TierResult& t) { return t.avg_queue_one_s; });
    out += ", \"avg_queue_s_gangs\": " + per_tier([](const TierResult& t) { return t.avg_queue_gang_s; });
    out += ", \"tenant_mean_queue_s\": " + json_num(r.tenant_mean_queue_s);
    out += ", \"tenant_avg_queue_s\": {";
    for (std::size_t t = 0; t < r.tenants.size(); ++t)
      out += (t ? ", " : "") + json_string(r.tenants[t].name) + ": " + json_num(r.tenants[t].avg_queue_s);
    out += "}";
    out += ", \"offered_load\": " + json_num(r.offered_load);
    out += ", \"offered_load_per_tier\": " + per_tier([](const TierResult& t) { return t.offered_load; });
    out += ", \"offered_load_pinned_per_tier\": {";
    for (int t = 0; t < 3; ++t) {
      out += std::string(t ? ", " : "") + "\"" + kTiers[t] + "\": {";
      const auto& pl = r.tiers[t].pinned_load;
      for (std::size_t k = 0; k < pl.size(); ++k)
        out += (k ? ", " : "") + json_string(pl[k].first) + ": " + json_num(pl[k].second);
      out += "}";
    }
    out += "}";
    out += ", \"workload_copies\": " + std::to_string(r.workload_copies);
    out += ", \"arrival_factor\": " + json_num(r.arrival_factor);
    out += ", \"utilization\": " + json_num(r.utilization);
    out += ", \"steady_window_s\": [" + json_num(r.steady_from_s) + ", " + json_num(r.steady_to_s) + "]";
    out += ", \"utilization_arrivals\": " + json_num(r.utilization_arrivals);
    out += ", \"utilization_makespan\": " + json_num(r.utilization_makespan);
    out += ", \"preemptions\": " + std::to_string(r.preemptions);
    out += ", \"migrations\": " + std::to_string(r.migrations);
    out += ", \"resizes\": " + std::to_string(r.resizes);
    out += ", \"checkpoints\": " + std::to_string(r.checkpoints);
    out += ", \"node_failures\": " + std::to_string(r.node_failures);
    out += ", \"lost_gpu_s\": " + json_num(r.lost_gpu_s);
    out += ", \"lost_cut_gpu_s\": " + json_num(r.lost_cut_gpu_s);
    out += ", \"actions\": {";
    for (int a = 0; a < kNumActions; ++a) {
      const auto& c = r.actions[static_cast<std::size_t>(a)];
      out += std::string(a ? ", " : "") + "\"" + kActionNames[a] + "\": {\"count\": " + std::to_string(c.count) +
             ", \"stalled_gpu_s\": " + json_num(c.stalled_gpu_s) + ", \"redone_gpu_s\": " + json_num(c.redone_gpu_s) + "}";
    }
    out += "}";
    out += ", \"jobs_per_mode\": {\"transparent\": " + std::to_string(r.submitted_by_mode[0]) +
           ", \"signal\": " + std::to_string(r.submitted_by_mode[1]) +
           ", \"requeue\": " + std::to_string(r.submitted_by_mode[2]) + "}";
    out += ", \"decisions\": " + std::to_string(r.decisions);
    out += ", \"rejected_proposals\": " + std::to_string(r.rejected_proposals);
    out += ", \"invariant_violations\": " +
           (r.invariant_violations < 0 ? std::string("null") : std::to_string(r.invariant_violations));
    out += ", \"sim_s\": " + json_num(r.sim_s);
    out += ", \"wall_s\": " + json_num(r.wall_s);
    out += ", \"decisions_per_s\": " + json_num(r.decisions_per_s);
    out += ", \"peak_rss_mib\": " + json_num(r.peak_rss_mib) + "}";
  }
  return out + "\n]";
}

std::function<void(double, std::int64_t, std::int64_t)> progress_bar(const std::string& policy,
                                                                     const Workload& workload) {
  const double span = workload.jobs.empty() ? 0 : workload.jobs.back().arrival_s - workload.jobs.front().arrival_s;
  return [policy, span](double sim_s, std::int64_t done, std::int64_t jobs) {
    const double frac = jobs > 0 ? static_cast<double>(done) / static_cast<double>(jobs) : 1;
    const int width = 30, fill = static_cast<int>(frac * width);
    std::string bar(static_cast<std::size_t>(fill), '=');
    if (fill < width) bar += '>' + std::string(static_cast<std::size_t>(width - fill - 1), ' ');
    std::fprintf(stderr, "\r%-8s [%s] %3.0f%%  day %.0f of %.0f+  %s of %s jobs done ", policy.c_str(), bar.c_str(),
                 100 * frac, sim_s / 86400, span / 86400, num(static_cast<double>(done)).c_str(),
                 num(static_cast<double>(jobs)).c_str());
    std::fflush(stderr);
  };
}

Status write_plots(const std::vector<SimResult>& rs, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Error("cannot create " + dir + ": " + ec.message());
  plot::Chart util{"GPU utilization over time", "time (h)", "devices held / devices"};
  util.y_min = 0;
  util.y_max = 1;
  util.step = true;  // sampled at scheduling rounds: the value holds until the next sample
  plot::Chart queue{"Jobs waiting over time", "time (h)", "jobs waiting (submitted, queued, suspended)"};
  queue.y_min = 0;
  queue.step = true;
  plot::Chart jct{"Job completion time (CDF)", "JCT (s)", "share of completed jobs"};
  jct.log_x = true;
  jct.step = true;
  jct.y_min = 0;
  jct.y_max = 1;
  for (const auto& r : rs) {
    util.series.push_back(plot::downsample(plot::Series{r.policy, r.t_h, r.utilization_series}, 2000));
    queue.series.push_back(plot::downsample(plot::Series{r.policy, r.t_h, r.queue_series}, 2000));
    jct.series.push_back(plot::cdf(r.policy, r.jct_s, 1000));
  }
  for (auto& [chart, name] : {std::pair{&util, "utilization.svg"}, std::pair{&queue, "queue.svg"}, std::pair{&jct, "jct_cdf.svg"}})
    if (auto st = plot::write_svg(*chart, dir + "/" + name); !st) return st;
  return Status::Ok();
}

}  // namespace orrery::sim
