// The one validation of a job spec. Every entry point runs it: the CLI after parsing a TOML spec
// (runtime/cli/job_spec.cc), the RPC server decoding a submit (rpc/convert.cc) and the Service's
// submit, so a spec is judged the same wherever it comes from.
//
// It accepts exactly what the spec's submit guard (spec/guards.h GuardSubmit, which the core
// checks again at commit) accepts, narrowed by the runtime's own requirements (spec/limits.h), so
// that a spec accepted at submit can run: a world of at most kMaxRunWorld workers (the spec allows
// kMaxWorld), at least one step, names the logs, tables and file names can carry, arguments a
// process can be given. It does not check the device type against the fleet (the Service does:
// only it knows the fleet). Kept apart from the Service so rpc/'s fuzz target and the CLI can run
// it without the core.
//
// Errors name the field first: "world: 5000 out of range [1, 4096]", "args[2]: ...".
#pragma once

#include <string>

#include "base/result.h"
#include "core/service/client_api.h"

namespace orrery::service {

// Ok, or an error whose reason names the field; `field`, when given, is set to the field at fault
// ("name", "world", "args", ...: a key of the TOML job spec) for callers that point at its place.
Status validate_job_spec(const JobSpec& spec, std::string* field = nullptr);

// An argument, environment value or path exec and the worker's log lines can carry: at most
// kMaxArgLength bytes, no line break, no NUL (the rule validate_job_spec applies to each).
bool exec_safe(const std::string& s);


}  // namespace orrery::service
