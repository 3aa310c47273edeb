#include "core/service/job_spec_check.h"

#include <cctype>
#include <string>

namespace orrery::service {

namespace {

bool has_bad_char(const std::string& s) {
  return s.find('\n') != std::string::npos || s.find('\r') != std::string::npos ||
         s.find('\0') != std::string::npos;
}

}  // namespace

Status validate_job_spec(const JobSpec& s) {
  if (s.name.empty() || s.name.size() > 200 || has_bad_char(s.name))
    return Status::Error("name must be 1..200 characters without line breaks");
  if (s.tier != spec::Tier::kPremium && s.tier != spec::Tier::kStandard &&
      s.tier != spec::Tier::kBasic)
    return Status::Error("tier must be premium, standard or basic");
  if (s.device_type.empty() || s.device_type.size() > 100 || has_bad_char(s.device_type))
    return Status::Error("device_type must be 1..100 characters without line breaks");
  if (s.world < 1 || s.world > spec::kMaxWorld)
    return Status::Error("world must be in [1, 2^20], got " + std::to_string(s.world));
  if (s.min_devices < 1 || s.min_devices > s.max_devices || s.max_devices > s.world)
    return Status::Error("devices must satisfy 1 <= min_devices <= max_devices <= world, got min " +
                         std::to_string(s.min_devices) + ", max " + std::to_string(s.max_devices) +
                         ", world " + std::to_string(s.world));
  if (s.mem_mib < 1 || s.mem_mib > spec::kMaxMemMib)
    return Status::Error("mem_mib must be in [1, 2^40], got " + std::to_string(s.mem_mib));
  if (s.workload.empty() || s.workload.size() > 100)
    return Status::Error("workload must be 1..100 characters");
  for (char c : s.workload)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
      return Status::Error("workload must be letters, digits, '-' or '_', got \"" + s.workload + "\"");
  if (s.tenant.size() > 64) return Status::Error("tenant must be at most 64 characters");
  for (char c : s.tenant)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return Status::Error("tenant must be letters, digits, '.', '-' or '_', got \"" + s.tenant + "\"");
  if (s.args.size() > 256) return Status::Error("at most 256 workload arguments");
  for (const auto& a : s.args)
    if (a.size() > 4096 || has_bad_char(a))
      return Status::Error("each argument must be at most 4096 characters without line breaks");
  if (s.steps < 0 || s.steps > (std::int64_t{1} << 40))
    return Status::Error("steps must be in [0, 2^40], got " + std::to_string(s.steps));
  if (s.checkpoint_every < 0 || s.checkpoint_every > (std::int64_t{1} << 40))
    return Status::Error("checkpoint_every must be in [0, 2^40], got " +
                         std::to_string(s.checkpoint_every));
  return Status::Ok();
}

}  // namespace orrery::service
