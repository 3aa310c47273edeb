#include "runtime/sim/job_records.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "runtime/sim/simulator.h"
#include "runtime/sim/workload.h"

namespace orrery::sim {

namespace {

// A time in seconds to the millisecond, empty where it did not happen (< 0).
std::string seconds(double s) {
  if (s < 0) return "";
  char b[48];
  std::snprintf(b, sizeof b, "%.3f", s);
  return b;
}

// A CSV field: quoted where it holds a separator, a quote or a line break.
std::string field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

JobRecorder::JobRecorder(std::size_t jobs, std::vector<std::string> type_names)
    : records_(jobs), type_(jobs, -1), names_(std::move(type_names)) {}

void JobRecorder::committed(std::size_t w, spec::EventKind event, spec::JobState to, std::int64_t dtype, std::int64_t now_ms) {
  if (w >= records_.size()) return;
  JobRecord& r = records_[w];
  const double now_s = static_cast<double>(now_ms) / 1000.0;
  switch (event) {
    case spec::EventKind::kPreempt: ++r.preemptions; break;
    case spec::EventKind::kMigrate: ++r.migrations; break;
    case spec::EventKind::kResizeUp:
    case spec::EventKind::kResizeDown: ++r.resizes; break;
    default: break;
  }
  if (to == spec::JobState::kRunning && r.start_s < 0) r.start_s = now_s;
  r.state = to == spec::JobState::kCompleted ? "completed" : to == spec::JobState::kFailed ? "failed" : "unfinished";
  r.end_s = to == spec::JobState::kCompleted || to == spec::JobState::kFailed ? now_s : -1;
  type_[w] = dtype;
}

std::vector<JobRecord> JobRecorder::take() {
  for (std::size_t w = 0; w < records_.size(); ++w)
    if (type_[w] >= 0 && static_cast<std::size_t>(type_[w]) < names_.size()) records_[w].device_type = names_[static_cast<std::size_t>(type_[w])];
  return std::move(records_);
}

namespace {

constexpr const char* kHeader =
    "policy,job,name,tier,tenant,world,min_devices,max_devices,state,device_type,arrival_s,run_s,start_s,end_s,"
    "queue_s,jct_s,preemptions,migrations,resizes\n";

// Each row in turn, to `out` (a row at a time: a million jobs' rows are never held at once).
template <typename Out>
void rows(const std::vector<SimResult>& results, const Workload& w, Out&& out) {
  std::string row;
  for (const auto& r : results) {
    for (std::size_t i = 0; i < r.job_records.size() && i < w.jobs.size(); ++i) {
      const SimJob& j = w.jobs[i];
      const JobRecord& rec = r.job_records[i];
      // The sim clock counts whole milliseconds: an event at the arrival may read a hair before it.
      auto since_arrival = [&](double t) { return t < 0 ? std::string() : seconds(std::max(t - j.arrival_s, 0.0)); };
      const std::string tenant = static_cast<std::size_t>(j.tenant) < w.tenants.size() ? w.tenants[static_cast<std::size_t>(j.tenant)] : "";
      const std::string name = i < w.names.size() ? w.names[i] : "";
      row = field(r.policy) + "," + std::to_string(i) + "," + field(name) + "," + std::string(spec::tier_name(j.tier)) + "," +
            field(tenant) + "," + std::to_string(j.world) + "," + std::to_string(j.min_devices) + "," +
            std::to_string(j.max_devices) + "," +
            rec.state + "," + field(rec.device_type) + "," + seconds(j.arrival_s) + "," + seconds(j.duration_s) + "," +
            seconds(rec.start_s) + "," + seconds(rec.end_s) + "," + since_arrival(rec.start_s) + "," +
            since_arrival(rec.end_s) + "," + std::to_string(rec.preemptions) + "," + std::to_string(rec.migrations) +
            "," + std::to_string(rec.resizes) + "\n";
      out(row);
    }
  }
}

}  // namespace

std::string jobs_csv(const std::vector<SimResult>& results, const Workload& w) {
  std::string out = kHeader;
  rows(results, w, [&](const std::string& row) { out += row; });
  return out;
}

Status write_jobs_csv(const std::vector<SimResult>& results, const Workload& w, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return Status::Error("cannot write " + path + ": " + std::strerror(errno));
  bool ok = std::fputs(kHeader, f) >= 0;
  rows(results, w, [&](const std::string& row) { ok = ok && std::fwrite(row.data(), 1, row.size(), f) == row.size(); });
  if (std::fclose(f) != 0 || !ok) return Status::Error("cannot write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace orrery::sim
