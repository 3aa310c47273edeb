// Job specs: the TOML file `orrery submit JOB.toml` reads, parsed into service::JobSpec.
//
// The file is one table of top-level keys (docs/runtime.md, "Job specs", lists each with its
// default). Parsing is strict, because a typo in a spec would otherwise silently run a job with a
// default the user did not mean: an unknown key, a value of the wrong type, a value out of range
// and a missing required key (name, world) are errors. Every error names the source, the line and
// column, and the key: "train.toml:3:9: world: expected an integer, got a string".
//
// The checks mirror the core's submit guard (spec/guards.h GuardSubmit: 1 <= min_devices <=
// max_devices <= world <= 2^20, memory per worker in [1, 2^40] MiB, world splitting evenly over a
// device count in range with at most kSpliceLimit workers per device), so a spec that parses is one
// the core accepts; the parser says which key is at fault where the guard could only say which
// clause failed.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "core/service/client_api.h"

namespace orrery::cli {

// Parses `text` (TOML). `source` names it in errors (a file path, "<stdin>").
Result<service::JobSpec> parse_job_spec(std::string_view text, std::string_view source);

// Reads and parses the file at `path` (errors name the path).
Result<service::JobSpec> load_job_spec(const std::string& path);

// The spec as TOML, every key written (parse_job_spec(to_toml(s)) == s): what `orrery submit
// --dry-run` prints, with the defaults filled in.
std::string to_toml(const service::JobSpec& spec);

// The largest name a job may have (it appears in every table and log line).
inline constexpr std::size_t kMaxJobNameLength = 64;

}  // namespace orrery::cli
