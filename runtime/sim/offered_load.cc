#include "runtime/sim/offered_load.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace orrery::sim {

namespace {

bool counts(const CountedJobs& c, std::size_t i) { return c.empty() || c[i] != 0; }

// The window relative to the first arrival, [lo, hi]; hi <= lo when it has no length.
std::pair<double, double> window_rel(const Workload& w) {
  if (w.jobs.size() < 2) return {0, 0};
  const auto win = steady_window(w.jobs.size());
  const double t0 = w.jobs.front().arrival_s;
  return {w.jobs[win.first].arrival_s - t0, w.jobs[win.last].arrival_s - t0};
}

// The offered load with the arrivals (relative to the first) scaled by a factor, computed in the
// unscaled time: a job's run [x, x + d x inv) against the unscaled window, inv = 1 / factor (the
// ratio is the same in either time). inv == +inf is the limit: every run lasts past the window.
double load_at(const Workload& w, std::int64_t devices, const CountedJobs& c, double inv) {
  const auto [lo, hi] = window_rel(w);
  if (!(hi > lo) || devices <= 0) return 0;
  const double t0 = w.jobs.front().arrival_s;
  double held = 0;
  for (std::size_t i = 0; i < w.jobs.size(); ++i) {
    const auto& j = w.jobs[i];
    const double x = j.arrival_s - t0;
    if (x >= hi) break;  // in arrival order: none later reaches into the window
    if (!counts(c, i) || j.duration_s <= 0) continue;
    const double end = std::isinf(inv) ? hi : std::min(hi, x + j.duration_s * inv);
    const double from = std::max(x, lo);
    if (end > from) held += static_cast<double>(j.world) * (end - from);
  }
  return held / (static_cast<double>(devices) * (hi - lo));
}

}  // namespace

SteadyWindow steady_window(std::size_t jobs) {
  if (jobs < 2) return {};
  const auto trim = static_cast<std::size_t>(std::floor(kSteadyTrim * static_cast<double>(jobs)));
  return {trim, jobs - 1 - trim};
}

double offered_load(const Workload& w, std::int64_t devices, const CountedJobs& counted) {
  return load_at(w, devices, counted, 1.0);
}

std::map<int, double> offered_load_by_group(const Workload& w, const std::vector<int>& group,
                                            const std::function<std::int64_t(int)>& devices) {
  std::map<int, double> out;
  for (int g : group)
    if (g >= 0) out.emplace(g, 0.0);
  for (auto& [g, load] : out) {
    CountedJobs counted(group.size(), 0);
    for (std::size_t i = 0; i < group.size(); ++i) counted[i] = group[i] == g;
    load = offered_load(w, devices(g), counted);
  }
  return out;
}

double offered_load_limit(const Workload& w, std::int64_t devices, const CountedJobs& counted) {
  return load_at(w, devices, counted, std::numeric_limits<double>::infinity());
}

Workload repeat_workload(const Workload& w, int copies) {
  Workload r;
  r.device_types = w.device_types;
  r.tenants = w.tenants;
  if (w.jobs.empty() || copies < 1) return r;
  const double t0 = w.jobs.front().arrival_s, span = w.jobs.back().arrival_s - t0;
  const double period = span + (w.jobs.size() > 1 ? span / static_cast<double>(w.jobs.size() - 1) : 1.0);
  r.jobs.reserve(w.jobs.size() * static_cast<std::size_t>(copies));
  for (int k = 0; k < copies; ++k)
    for (auto j : w.jobs) {
      j.arrival_s += static_cast<double>(k) * period;
      r.jobs.push_back(j);
    }
  // Each copy's jobs keep their names (the job's index in the workload tells the copies apart).
  if (w.names.size() == w.jobs.size())
    for (int k = 0; k < copies; ++k) r.names.insert(r.names.end(), w.names.begin(), w.names.end());
  return r;
}

void scale_arrivals(Workload& w, double factor) {
  if (w.jobs.empty()) return;
  const double t0 = w.jobs.front().arrival_s;
  for (auto& j : w.jobs) j.arrival_s = t0 + (j.arrival_s - t0) * factor;
}

Result<LoadScaling> scale_to_load(Workload& w, std::int64_t devices, double load, int copies,
                                  const std::function<CountedJobs(const Workload&)>& counted) {
  if (devices <= 0) return Status::Error("the fleet has no devices");
  if (!(load > 0)) return Status::Error("the load must be above 0");
  const auto [lo, hi] = window_rel(w);
  if (!(hi > lo)) return Status::Error("the workload needs arrivals at two different times at least to scale them to a load");
  auto count = [&](const Workload& x) { return counted ? counted(x) : CountedJobs{}; };
  LoadScaling s;
  Workload r;
  CountedJobs c;
  for (int n = copies > 0 ? copies : 1; n <= (copies > 0 ? copies : kMaxCopies); ++n) {
    r = n == 1 ? w : repeat_workload(w, n);
    c = count(r);
    s.copies = n;
    s.limit = offered_load_limit(r, devices, c);
    if (s.limit >= 2 * load) break;
  }
  if (s.limit <= load)
    return Status::Error("the workload cannot offer a load of " + std::to_string(load) + " on " +
                         std::to_string(devices) + " devices (" + std::to_string(s.copies) +
                         " copies offer at most " + std::to_string(s.limit) + " with every job arriving at once)");
  // load_at is non-increasing in the factor (each run shrinks in the unscaled time as it grows):
  // bracket, then bisect in log space.
  auto at = [&](double f) { return load_at(r, devices, c, 1.0 / f); };
  double f_lo = 1, f_hi = 1;  // at(f_lo) >= load >= at(f_hi)
  while (at(f_lo) < load) f_lo /= 2;
  while (at(f_hi) > load) f_hi *= 2;
  for (int i = 0; i < 200 && f_hi / f_lo > 1 + 1e-12; ++i) {
    const double m = std::sqrt(f_lo * f_hi), l = at(m);
    (l >= load ? f_lo : f_hi) = m;
    if (std::abs(l - load) < 1e-7 * load) {
      f_lo = f_hi = m;
      break;
    }
  }
  s.factor = std::sqrt(f_lo * f_hi);
  scale_arrivals(r, s.factor);
  w = std::move(r);
  return s;
}

}  // namespace orrery::sim
