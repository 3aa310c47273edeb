// Job specs: the TOML file `orrery submit JOB.toml` reads, parsed into service::JobSpec.
//
// The file is one table of top-level keys (docs/runtime.md, "Job specs", lists each with its
// default). Parsing is strict, because a typo in a spec would otherwise silently run a job with a
// default the user did not mean: an unknown key, a value of the wrong type, a value out of range
// and a missing required key (name, world) are errors. Every error names the source, the line and
// column, and the key: "train.toml:3:9: world: expected an integer, got a string".
//
// The parser checks syntax and types; ranges, names and the core's submit guard are the one
// job-spec validation every entry point runs (core/service/job_spec_check.h, limits from
// spec/limits.h), so a spec that parses is one the service accepts and the runtime can run. Its
// error is placed at the key at fault, where the guard could only say which clause failed.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "core/service/client_api.h"

namespace orrery::cli {

// Parses `text` (TOML). `source` names it in errors (a file path, "<stdin>"). Errors quote at most
// kMaxQuoted bytes (base/quote.h) of any input they show: a key, a value, the source. A relative
// `workdir` (and the default, ".") is relative to `base_dir` (the spec's folder; empty: the
// current directory), so the spec's `workdir` is always absolute.
Result<service::JobSpec> parse_job_spec(std::string_view text, std::string_view source,
                                        const std::string& base_dir = "");

// Reads and parses the file at `path` (errors name the path, at most kMaxQuoted bytes of it). A
// directory, a FIFO, a device or a socket is refused before it is opened ("PATH is a directory, not
// a job file"), as is a file of more than 16 MiB.
Result<service::JobSpec> load_job_spec(const std::string& path);

// The spec as TOML, every key written (parse_job_spec(to_toml(s)) == s): what `orrery submit
// --dry-run` prints, with the defaults filled in.
std::string to_toml(const service::JobSpec& spec);

}  // namespace orrery::cli
