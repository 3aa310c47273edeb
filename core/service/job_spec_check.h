// The checks a submitted job spec gets before it reaches the core (which checks the spec's
// GuardSubmit at commit): lengths, ranges and characters, with a reason naming the field. Kept
// apart from the Service so rpc/'s fuzz target can run it without the core.
#pragma once

#include "base/result.h"
#include "core/service/client_api.h"

namespace orrery::service {

Status validate_job_spec(const JobSpec& spec);

}  // namespace orrery::service
