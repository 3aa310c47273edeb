#include "core/service/job_spec_check.h"

#include <cstdint>
#include <string>

#include "base/quote.h"
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

bool exec_safe(const std::string& s) { return s.size() <= spec::kMaxArgLength && !has_bad_char(s); }

Status validate_job_spec(const JobSpec& s, std::string* field) {
  Check c(field);
  const std::string rule(spec::kNameRule);
  if (!spec::valid_name(s.name)) return c.fail("name", "name: must be " + rule + ", got " + quote_input(s.name));
  if (!s.tenant.empty() && !spec::valid_name(s.tenant))
    return c.fail("tenant", "tenant: must be " + rule + ", got " + quote_input(s.tenant));
  const auto tier = static_cast<std::int64_t>(s.tier);
  if (tier < 0 || tier >= spec::kNumTiers)
    return c.fail("tier", "tier: must be premium, standard or basic, got " + std::to_string(tier));
  // One type, or several in order of preference separated by '|' (a planner runs the job on any
  // of them: Retype), each a name.
  const auto names = spec::device_type_names(s.device_type);
  bool types_ok = names.size() <= spec::kMaxJobDeviceTypes;
  for (const auto n : names) types_ok = types_ok && spec::valid_name(n);
  if (!types_ok)
    return c.fail("device_type", "device_type: must be a device type name (" + rule + "), or up to " +
                                     std::to_string(spec::kMaxJobDeviceTypes) + " of them separated by '|', got " +
                                     quote_input(s.device_type));
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
  // steps: for the progress shown (0: the program's own business); the checkpoint period.
  if (s.steps < 0 || s.steps > spec::kMaxSteps) return c.in_range("steps", s.steps, 0, spec::kMaxSteps);
  if (s.checkpoint_every < 0 || s.checkpoint_every > spec::kMaxSteps)
    return c.in_range("checkpoint_every", s.checkpoint_every, 0, spec::kMaxSteps);
  // The program: argv entries exec can carry.
  if (s.command.empty() || s.command[0].empty())
    return c.fail("command", "command: must name the program to run, e.g. [\"/usr/bin/python3\", \"train.py\"]");
  if (s.command.size() > spec::kMaxCommand) {
    return c.fail("command", "command: at most " + std::to_string(spec::kMaxCommand) + " entries, got " +
                                 std::to_string(s.command.size()));
  }
  for (std::size_t i = 0; i < s.command.size(); ++i) {
    if (!exec_safe(s.command[i])) {
      return c.fail("command", "command[" + std::to_string(i) + "]: must be at most " +
                                   std::to_string(spec::kMaxArgLength) +
                                   " bytes without line breaks or NUL characters");
    }
  }
  if (s.env.size() > spec::kMaxEnv)
    return c.fail("env", "env: at most " + std::to_string(spec::kMaxEnv) + " variables, got " +
                             std::to_string(s.env.size()));
  for (const auto& [name, value] : s.env) {
    bool ok = !name.empty() && name.size() <= spec::kMaxEnvNameLength &&
              !(name[0] >= '0' && name[0] <= '9');
    for (char ch : name)
      ok = ok && ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_');
    if (!ok)
      return c.fail("env", "env: " + quote_input(name) + " is not a variable name (A-Z a-z 0-9 _, not starting with a digit)");
    if (!exec_safe(value))
      return c.fail("env", "env." + clip_input(name) + ": must be at most " + std::to_string(spec::kMaxArgLength) +
                               " bytes without line breaks or NUL characters");
  }
  if (!s.workdir.empty() && (s.workdir[0] != '/' || s.workdir.size() > spec::kMaxPathLength || has_bad_char(s.workdir)))
    return c.fail("workdir", "workdir: must be an absolute path of at most " + std::to_string(spec::kMaxPathLength) +
                                 " bytes, got " + quote_input(s.workdir));
  // How it is preempted (spec::Preemption; GuardSubmit): only a transparent job is spliced,
  // resized or checkpointed while it runs.
  const auto mode = static_cast<std::int64_t>(s.preemption);
  if (mode < 0 || mode >= spec::kNumPreemptions)
    return c.fail("preemption", "preemption: must be transparent, signal or requeue");
  if (s.preemption != spec::Preemption::kTransparent) {
    const std::string m(spec::preemption_name(s.preemption));
    if (s.min_devices != s.world || s.max_devices != s.world)
      return c.fail("min_devices", "a " + m + " job runs one worker per device: min_devices and max_devices must "
                                   "equal world (" + std::to_string(s.world) + "); only transparent jobs are "
                                   "spliced or resized");
    if (s.checkpoint_every != 0)
      return c.fail("checkpoint_every", "checkpoint_every: a " + m + " job checkpoints itself; orrery cuts only "
                                        "transparent jobs while they run");
  }
  if (s.grace_ms < 0 || s.grace_ms > spec::kMaxGraceMs)
    return c.in_range("grace_s", s.grace_ms / 1000, 0, spec::kMaxGraceMs / 1000);
  if (s.min_runtime_ms < 0 || s.min_runtime_ms > spec::kMaxMinRuntimeMs)
    return c.in_range("min_runtime_s", s.min_runtime_ms / 1000, 0, spec::kMaxMinRuntimeMs / 1000);
  return Status::Ok();
}

}  // namespace orrery::service
