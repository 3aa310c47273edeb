#include "core/service/job_spec_check.h"

#include <cstdint>
#include <string>

#include "spec/limits.h"

namespace orrery::service {

namespace {

// What exec and the worker's log lines cannot carry.
bool has_bad_char(const std::string& s) {
  return s.find('\n') != std::string::npos || s.find('\r') != std::string::npos ||
         s.find('\0') != std::string::npos;
}

std::string range(std::int64_t lo, std::int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

class Check {
 public:
  explicit Check(std::string* field) : field_(field) {}

  Status fail(const char* field, const std::string& what) {
    if (field_) *field_ = field;
    return Status::Error(what);
  }
  Status in_range(const char* field, std::int64_t v, std::int64_t lo, std::int64_t hi) {
    return fail(field, std::string(field) + ": " + std::to_string(v) + " out of range " + range(lo, hi));
  }

 private:
  std::string* field_;
};

}  // namespace

Status validate_job_spec(const JobSpec& s, std::string* field) {
  Check c(field);
  const std::string rule(spec::kNameRule);
  if (!spec::valid_name(s.name)) return c.fail("name", "name: must be " + rule + ", got \"" + s.name + "\"");
  if (!s.tenant.empty() && !spec::valid_name(s.tenant))
    return c.fail("tenant", "tenant: must be " + rule + ", got \"" + s.tenant + "\"");
  const auto tier = static_cast<std::int64_t>(s.tier);
  if (tier < 0 || tier >= spec::kNumTiers)
    return c.fail("tier", "tier: must be premium, standard or basic, got " + std::to_string(tier));
  if (!spec::valid_name(s.device_type))
    return c.fail("device_type", "device_type: must be " + rule + ", got \"" + s.device_type + "\"");
  // GuardSubmit: 1 <= min_devices <= max_devices <= world <= kMaxWorld; the runtime runs at most
  // kMaxRunWorld workers of a job.
  if (s.world < 1 || s.world > spec::kMaxRunWorld) return c.in_range("world", s.world, 1, spec::kMaxRunWorld);
  if (s.max_devices < 1 || s.max_devices > s.world)
    return c.in_range("max_devices", s.max_devices, 1, s.world);
  if (s.min_devices < 1 || s.min_devices > s.max_devices)
    return c.in_range("min_devices", s.min_devices, 1, s.max_devices);
  // GuardSubmit: world splits evenly over some device count c in [min, max], at most
  // kSpliceLimit workers per device.
  bool feasible = false;
  for (int f = 1; f <= spec::kSpliceLimit && !feasible; ++f)
    feasible = s.world % f == 0 && s.min_devices <= s.world / f && s.world / f <= s.max_devices;
  if (!feasible) {
    return c.fail("min_devices", "world " + std::to_string(s.world) +
                                     " does not split evenly over any device count in " +
                                     range(s.min_devices, s.max_devices) + " with at most " +
                                     std::to_string(spec::kSpliceLimit) +
                                     " workers per device: the job could never be placed");
  }
  if (s.mem_mib < 1 || s.mem_mib > spec::kMaxMemMib) return c.in_range("mem_mib", s.mem_mib, 1, spec::kMaxMemMib);
  // The workload runs at least one step (a job of none would complete without running).
  if (s.steps < 1 || s.steps > spec::kMaxSteps) return c.in_range("steps", s.steps, 1, spec::kMaxSteps);
  if (s.checkpoint_every < 0 || s.checkpoint_every > spec::kMaxSteps)
    return c.in_range("checkpoint_every", s.checkpoint_every, 0, spec::kMaxSteps);
  // A workload name becomes part of a binary's name: no '.'.
  if (!spec::valid_name(s.workload, /*allow_dot=*/false)) {
    return c.fail("workload", "workload: must be " + rule + ", without '.', got \"" + s.workload + "\"");
  }
  if (s.args.size() > spec::kMaxArgs) {
    return c.fail("args", "args: at most " + std::to_string(spec::kMaxArgs) + " arguments, got " +
                              std::to_string(s.args.size()));
  }
  for (std::size_t i = 0; i < s.args.size(); ++i) {
    if (s.args[i].size() > spec::kMaxArgLength || has_bad_char(s.args[i])) {
      return c.fail("args", "args[" + std::to_string(i) + "]: must be at most " +
                                std::to_string(spec::kMaxArgLength) +
                                " bytes without line breaks or NUL characters");
    }
  }
  return Status::Ok();
}

}  // namespace orrery::service
