// libFuzzer target: the job-spec parser on arbitrary bytes. Any input must give a JobSpec or an
// error naming the source (never a crash, a hang, or a sanitizer report); an accepted spec must
// satisfy the submit guard's ranges and survive a round trip through to_toml().
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtime/cli/job_spec.h"
#include "spec/vocabulary.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = orrery::cli::parse_job_spec(text, "fuzz.toml");
  if (!r.ok()) {
    if (r.reason().rfind("fuzz.toml", 0) != 0) std::abort();  // errors name the source
    return 0;
  }
  const auto& s = *r;
  if (!(1 <= s.min_devices && s.min_devices <= s.max_devices && s.max_devices <= s.world &&
        s.world <= orrery::spec::kMaxWorld && s.mem_mib >= 1 && s.steps >= 0 && !s.name.empty() &&
        !s.command.empty() && !s.workdir.empty() && s.workdir[0] == '/'))
    std::abort();
  auto again = orrery::cli::parse_job_spec(orrery::cli::to_toml(s), "roundtrip.toml");
  if (!again.ok() || again->name != s.name || again->world != s.world ||
      again->min_devices != s.min_devices || again->max_devices != s.max_devices ||
      again->command != s.command || again->tier != s.tier || again->mem_mib != s.mem_mib ||
      again->steps != s.steps || again->checkpoint_every != s.checkpoint_every ||
      again->env != s.env || again->workdir != s.workdir || again->preemption != s.preemption ||
      again->grace_ms != s.grace_ms || again->min_runtime_ms != s.min_runtime_ms ||
      again->device_type != s.device_type)
    std::abort();
  return 0;
}
