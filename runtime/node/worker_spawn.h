// Starting processes for the node runtime: orrery-proxy children and the ranks of a user's
// program, with the environment a worker sees (docs/pytorch.md, "The environment a worker sees").
// No state: the caller keeps the pids and reaps them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace orrery::runtime {

struct SpawnSpec {
  std::vector<std::string> argv;   // argv[0]: the program, already resolved (resolve_program)
  std::vector<std::string> env;    // "NAME=VALUE" set after the node's own (later ones win)
  std::string workdir;             // empty: the node's working directory
  std::string log;                 // stdout and stderr are appended here
};

// posix_spawn with stdout and stderr appended to `log`. The environment is the node's, minus its
// own ORRERY_* variables (a worker must never see a stale per-job one), plus `env`.
Result<pid_t> spawn_process(const SpawnSpec& s);

// The program a command names: a name without '/' is looked up in `bin_dir` first, then in each
// folder of `path` (PATH); a relative path is relative to `workdir`. Errors say what was searched.
Result<std::string> resolve_program(const std::string& program, const std::string& workdir,
                                    const std::string& bin_dir, const std::string& path);

// A directory that exists and can be entered, or a clear error naming `what`.
Status check_directory(const std::string& dir, const char* what);

// "exited with status 2", "killed by signal 9 (Killed)".
std::string exit_text(int wait_status);

// The last `max_lines` non-empty lines of a file (at most `max_bytes` from its end), joined with
// " | ", for failure reasons.
std::string last_lines(const std::string& path, int max_lines, std::size_t max_bytes = 2048);

}  // namespace orrery::runtime
