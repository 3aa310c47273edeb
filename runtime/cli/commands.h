// The `orrery` command line: parses arguments (CLI11), runs one command against a
// service::ClientApi, prints what docs/runtime.md ("The orrery CLI") says, and returns the exit
// code. main() supplies how to connect (rpc::connect_client) so the commands know nothing of Cap'n
// Proto.
//
// Exit codes: 0 done; 1 usage error (unknown command or flag, bad argument, invalid job spec;
// --help is 0); 2 the core cannot be reached, logged in to, or the connection was lost; 3 the core
// refused the request (its reason is printed: unknown job, a spec guard's clause, ...).
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "base/result.h"
#include "core/service/client_api.h"

namespace orrery::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;
inline constexpr int kExitUnreachable = 2;
inline constexpr int kExitRefused = 3;

inline constexpr const char* kDefaultCore = "127.0.0.1:7070";

// Connects to the core at `address` and logs in with the secret read from `secret_file`.
using Connector = std::function<Result<std::unique_ptr<service::ClientApi>>(
    const std::string& address, const std::string& secret_file)>;

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
