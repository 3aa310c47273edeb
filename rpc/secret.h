// The cluster's shared secret: the contents of a file given with --secret to every process
// (`orrery-core serve`, `orrery-node`, `orrery`). Trailing whitespace (a final newline) is
// stripped; an unreadable or empty file is an error naming the path, kPermissionDenied (without
// a secret nothing can log in; the CLI reports it as it reports a wrong secret).
#pragma once

#include <string>

#include "base/result.h"

namespace orrery::rpc {

Result<std::string> read_secret_file(const std::string& path);

// Compares in time independent of where the strings differ (no timing oracle for the secret).
bool secret_matches(const std::string& expected, const std::string& given);

}  // namespace orrery::rpc
