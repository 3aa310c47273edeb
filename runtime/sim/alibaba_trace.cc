#include "runtime/sim/alibaba_trace.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "runtime/sim/csv_reader.h"
#include "runtime/sim/fleet_builder.h"
#include "spec/limits.h"

namespace orrery::sim {

namespace {

std::optional<spec::Tier> tier_of_qos(std::string_view qos) {
  if (qos == "LS" || qos == "Guaranteed") return spec::Tier::kPremium;
  if (qos == "Burstable") return spec::Tier::kStandard;
  if (qos == "BE") return spec::Tier::kBasic;
  return std::nullopt;
}

// The most workers per device the core allows that divides `world`.
std::int64_t largest_splice(std::int64_t world) {
  for (std::int64_t f = spec::kSpliceLimit; f > 1; --f)
    if (world % f == 0) return f;
  return 1;
}

}  // namespace

Result<AlibabaTrace> load_alibaba_trace(const std::string& path, const AlibabaTraceOptions& o) {
  if (o.worker_mem_mib < 1 || o.worker_mem_mib > spec::kMaxMemMib)
    return Status::Error("worker_mem_mib must be in [1, 2^40]");
  auto reader = CsvReader::open(path);
  if (!reader) return reader.status();
  CsvReader& r = *reader;

  const char* const kRequired[] = {"num_gpu", "gpu_milli", "gpu_spec", "qos",
                                   "creation_time", "scheduled_time", "deletion_time"};
  int col[7];
  std::string absent;
  for (int i = 0; i < 7; ++i) {
    col[i] = r.column(kRequired[i]);
    if (col[i] < 0) absent += (absent.empty() ? "" : ", ") + std::string(kRequired[i]);
  }
  if (!absent.empty())
    return Status::Error(path + ":" + std::to_string(r.line()) + ": header lacks the column(s) " +
                         absent);
  const int c_num = col[0], c_milli = col[1], c_spec = col[2], c_qos = col[3], c_create = col[4],
            c_sched = col[5], c_delete = col[6];
  const int c_tenant = o.tenant_column.empty() ? -1 : r.column(o.tenant_column);
  const int c_name = r.column("name");
  std::vector<std::string> names;

  AlibabaTrace out;
  Workload& w = out.workload;
  AlibabaLoadSummary& s = out.summary;
  s.fractional_loaded = o.fractional == FractionalPolicy::kWholeDevice;
  std::unordered_map<std::string, std::int32_t> tenant_ids;
  if (c_tenant < 0) w.tenants.push_back("all");
  std::unordered_map<std::string, std::uint64_t> spec_masks;  // gpu_spec text -> type mask

  while (true) {
    auto more = r.next();
    if (!more) return more.status();
    if (!*more) break;
    ++s.rows;
    auto bad = [&](int c, const std::string& what) {
      return r.error(r.header()[static_cast<std::size_t>(c)] + ": " + what + ", got \"" +
                     std::string(r.field(c)) + "\"");
    };
    // Validate every field, whatever category the row falls into.
    std::int64_t num_gpu = 0, milli = 0;
    if (!parse_int_field(r.field(c_num), 0, spec::kMaxWorld, num_gpu))
      return bad(c_num, "expected an integer in [0, 2^20]");
    if (!parse_int_field(r.field(c_milli), 0, 1000, milli))
      return bad(c_milli, "expected an integer in [0, 1000] (thousandths of one GPU)");
    if (num_gpu >= 1 && milli == 0)
      return bad(c_milli, "a task with num_gpu >= 1 needs gpu_milli >= 1");
    const auto tier = tier_of_qos(r.field(c_qos));
    if (!tier) return bad(c_qos, "expected LS, Guaranteed, Burstable or BE");
    std::uint64_t mask = 0;
    {
      const std::string text(r.field(c_spec));
      if (auto it = spec_masks.find(text); it != spec_masks.end()) {
        mask = it->second;
      } else {
        std::size_t start = 0;
        while (!text.empty()) {
          const std::size_t bar = text.find('|', start);
          const std::string name =
              text.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
          if (!valid_fleet_name(name))
            return bad(c_spec, "expected device type names (" + std::string(spec::kNameRule) + ") separated by '|'");
          const int id = w.intern_device_type(name);
          if (id < 0)
            return bad(c_spec, "more than " + std::to_string(kMaxWorkloadDeviceTypes) +
                                   " device types in one trace");
          mask |= std::uint64_t{1} << id;
          if (bar == std::string::npos) break;
          start = bar + 1;
        }
        spec_masks.emplace(text, mask);
      }
    }
    double created = 0, scheduled = 0, deleted = 0;
    if (!parse_seconds_field(r.field(c_create), created))
      return bad(c_create, "expected a number of seconds >= 0");
    const bool has_sched = !r.field(c_sched).empty(), has_delete = !r.field(c_delete).empty();
    if (has_sched && !parse_seconds_field(r.field(c_sched), scheduled))
      return bad(c_sched, "expected a number of seconds >= 0, or nothing (never scheduled)");
    if (has_delete && !parse_seconds_field(r.field(c_delete), deleted))
      return bad(c_delete, "expected a number of seconds >= 0, or nothing (still running)");
    if (has_sched && scheduled < created)
      return bad(c_sched, "before creation_time " + std::string(r.field(c_create)));
    if (has_delete && has_sched && deleted < scheduled)
      return bad(c_delete, "before scheduled_time " + std::string(r.field(c_sched)));
    if (has_delete && !has_sched && deleted < created)
      return bad(c_delete, "before creation_time " + std::string(r.field(c_create)));
    std::int32_t tenant = 0;
    if (c_tenant >= 0) {
      std::string name(r.field(c_tenant));
      auto [it, added] = tenant_ids.try_emplace(name, static_cast<std::int32_t>(w.tenants.size()));
      if (added) w.tenants.push_back(std::move(name));
      tenant = it->second;
    }

    // The row's category, in the documented order.
    if (num_gpu == 0) {
      ++s.cpu_only;
      continue;
    }
    if (!has_sched) {
      ++s.never_scheduled;
      continue;
    }
    if (!has_delete) {
      ++s.unfinished;
      continue;
    }
    const bool fractional = milli < 1000;
    if (fractional) {
      ++s.fractional;
      if (o.fractional == FractionalPolicy::kSkip) continue;
    } else {
      ++s.whole;
    }
    SimJob j;
    j.arrival_s = created;
    j.duration_s = deleted - scheduled;
    j.world = static_cast<std::int32_t>(num_gpu);
    j.max_devices = j.world;
    j.min_devices = o.elastic ? static_cast<std::int32_t>(num_gpu / largest_splice(num_gpu)) : j.world;
    j.tier = *tier;
    j.device_types = mask;
    j.tenant = tenant;
    // Integer ceil(worker_mem * milli / 1000); worker_mem <= 2^40 and milli <= 1000: no overflow.
    j.mem_mib = fractional ? std::max<std::int64_t>(1, (o.worker_mem_mib * milli + 999) / 1000)
                           : o.worker_mem_mib;
    if (j.duration_s == 0) ++s.zero_duration;
    const auto t = static_cast<std::size_t>(j.tier);
    ++s.jobs_per_tier[t];
    s.gpu_seconds_per_tier[t] += static_cast<double>(j.world) * j.duration_s;
    w.jobs.push_back(j);
    if (c_name >= 0) names.emplace_back(r.field(c_name));
  }
  // By arrival, the file's order among equals; the names with their jobs.
  std::vector<std::size_t> order(w.jobs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return w.jobs[a].arrival_s < w.jobs[b].arrival_s; });
  std::vector<SimJob> sorted;
  sorted.reserve(order.size());
  for (std::size_t i : order) sorted.push_back(w.jobs[i]);
  w.jobs = std::move(sorted);
  if (!names.empty())
    for (std::size_t i : order) w.names.push_back(std::move(names[i]));
  s.jobs = static_cast<std::int64_t>(w.jobs.size());
  if (!w.jobs.empty()) {
    s.first_arrival_s = w.jobs.front().arrival_s;
    s.last_arrival_s = w.jobs.back().arrival_s;
  }
  return out;
}

std::string AlibabaLoadSummary::to_string() const {
  std::ostringstream o;
  char buf[200];
  auto line = [&](const char* what, std::int64_t n, const char* done) {
    std::snprintf(buf, sizeof buf, "  %-36s %8lld  %s\n", what, static_cast<long long>(n), done);
    o << buf;
  };
  o << rows << " rows, " << jobs << " jobs loaded\n";
  line("whole GPUs", whole, "loaded");
  line("fractional GPU (gpu_milli < 1000)", fractional,
       fractional_loaded ? "loaded as whole devices" : "skipped");
  line("CPU-only (num_gpu == 0)", cpu_only, "skipped");
  line("never scheduled (no scheduled_time)", never_scheduled, "skipped");
  line("unfinished (no deletion_time)", unfinished, "skipped");
  if (zero_duration) line("of the jobs, ran 0 s in production", zero_duration, "loaded");
  for (int t = 0; t < spec::kNumTiers; ++t) {
    std::snprintf(buf, sizeof buf, "  %-8s %8lld jobs, %.0f GPU-seconds\n",
                  std::string(spec::tier_name(static_cast<spec::Tier>(t))).c_str(),
                  static_cast<long long>(jobs_per_tier[t]), gpu_seconds_per_tier[t]);
    o << buf;
  }
  std::snprintf(buf, sizeof buf, "  arrivals from %.0f s to %.0f s\n", first_arrival_s, last_arrival_s);
  o << buf;
  return o.str();
}

}  // namespace orrery::sim
