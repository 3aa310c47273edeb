// `orrery up`: a local cluster on loopback, for trying orrery on one machine and for end-to-end
// tests. Checks that the core's ports are free (before anything is written or printed), writes a
// secret and a fleet file (N nodes of M "host" devices) into the data directory, starts
// `orrery-core serve` and N `orrery-node` processes (found beside the orrery binary), prints how to
// reach the cluster, and supervises them in the foreground (runtime/cli/supervisor.h): a node agent
// or the core that dies is started again on the same data and port, with backoff. SIGINT or
// SIGTERM stops it: every child process group gets SIGTERM, then SIGKILL after the grace period,
// and everything is reaped before returning (no orphans; children also get SIGTERM should `orrery
// up` itself die, via PR_SET_PDEATHSIG). Run again with the same --data, it starts the same cluster
// again: the core recovers its jobs from its journal.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace orrery::cli {

struct UpOptions {
  int nodes = 2;
  int devices = 4;                 // "host" devices per node
  std::int64_t device_mem_mib = 1024;
  std::string data;                // empty: a fresh directory under $TMPDIR, removed on a clean stop
  std::string listen = "127.0.0.1:7070";  // port 0: a free port, chosen once
  std::string metrics;             // orrery-core serve --metrics ADDR; empty: not passed
  std::string core_bin;            // orrery-core to run
  std::string node_bin;            // orrery-node to run
  int grace_ms = 5000;             // SIGTERM -> SIGKILL
};

// Runs until SIGINT or SIGTERM; returns 0 after that clean stop. Returns before anything is
// started: 1 for a malformed address, 2 when a port is in use (or cannot be listened on) or the
// data directory holds another cluster; and 2, after stopping what it started, when a binary is
// missing or the core does not come up (the data directory and its logs are kept then, even a
// temporary one, and the core log's last lines are printed).
int run_up(const UpOptions& options, std::ostream& out, std::ostream& err);

}  // namespace orrery::cli
