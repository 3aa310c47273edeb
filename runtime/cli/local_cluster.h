// `orrery up`: a local cluster on loopback, for trying orrery on one machine and for end-to-end
// tests. Writes a secret and a fleet file (N nodes of M "host" devices) into the data directory,
// starts `orrery-core serve` and N `orrery-node` processes (found beside the orrery binary), prints
// how to reach the cluster, and waits. SIGINT or SIGTERM stops it: every child process group gets
// SIGTERM, then SIGKILL after the grace period, and every child is reaped before returning (no
// orphans; children also get SIGTERM should `orrery up` itself die, via PR_SET_PDEATHSIG).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace orrery::cli {

struct UpOptions {
  int nodes = 2;
  int devices = 4;                 // "host" devices per node
  std::int64_t device_mem_mib = 1024;
  std::string data;                // empty: a fresh directory under $TMPDIR, removed on exit
  std::string listen = "127.0.0.1:7070";
  std::string metrics;             // orrery-core serve --metrics ADDR; empty: not passed
  std::string core_bin;            // orrery-core to run
  std::string node_bin;            // orrery-node to run
  int grace_ms = 5000;             // SIGTERM -> SIGKILL
};

// Runs until interrupted or the core exits. Returns 0 after a clean stop on a signal, 2 when a
// process could not be started or the core exited by itself.
int run_up(const UpOptions& options, std::ostream& out, std::ostream& err);

}  // namespace orrery::cli
