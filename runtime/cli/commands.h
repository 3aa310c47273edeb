// The `orrery` command line: parses arguments (CLI11), runs one command against a
// service::ClientApi, prints what docs/runtime.md ("The orrery CLI") says, and returns the exit
// code. main() supplies how to connect (rpc::connect_client) so the commands know nothing of Cap'n
// Proto.
//
// Exit codes (docs/runtime.md, "The orrery CLI") come from the failure's status code
// (base/result.h), through exit_code() alone; --help is 0.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "base/result.h"
#include "core/service/client_api.h"

namespace orrery::cli {

inline constexpr int kExitOk = 0;
// Invalid argument: an unknown command or flag, a bad argument, an invalid job spec (found here or
// by the core).
inline constexpr int kExitUsage = 1;
// Unavailable, permission denied, deadline exceeded: the core cannot be reached or logged in to
// (no secret, a wrong one), or the connection was lost.
inline constexpr int kExitUnreachable = 2;
// Failed precondition, already exists, resource exhausted, aborted, unknown: the core refused the
// request as things stand (a job in the wrong state, a spec guard's clause).
inline constexpr int kExitRefused = 3;
// Not found: an unknown job (id or name) or node.
inline constexpr int kExitNotFound = 4;
// Internal: a bug or an I/O failure, in the core or here.
inline constexpr int kExitInternal = 5;

// The exit code for a command that ended with `code` (kOk: kExitOk).
int exit_code(StatusCode code);

inline constexpr const char* kDefaultCore = "127.0.0.1:7070";

// How long each call to the core may take, connecting included (--timeout, env ORRERY_TIMEOUT).
inline constexpr std::int64_t kDefaultTimeoutS = 10;
inline constexpr std::int64_t kMaxTimeoutS = 86400;

// Connects to the core at `address` and logs in with the secret read from `secret_file`. Connecting
// and logging in, and then each call, must be done within `timeout_ms` or fail with
// kDeadlineExceeded; watch() has no overall deadline but ends (kDeadlineExceeded or kUnavailable)
// when the core stops answering (rpc/client_connection.h).
using Connector = std::function<Result<std::unique_ptr<service::ClientApi>>(
    const std::string& address, const std::string& secret_file, std::int64_t timeout_ms)>;

struct CliContext {
  Connector connect;
  std::string self_path;  // the orrery binary (`orrery up` finds orrery-core and orrery-node beside it)
  std::string build_core_bin;  // fallbacks for `orrery up`: the build tree's binaries ("" if none)
  std::string build_node_bin;
  std::ostream* out;
  std::ostream* err;
  bool out_is_tty = false;  // progress bars only on a terminal
};

int run_cli(int argc, const char* const* argv, const CliContext& ctx);

}  // namespace orrery::cli
