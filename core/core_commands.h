// The orrery-core subcommands that need nothing but the core: `demo` (the scripted scenario of
// demo_scenario.h through a real SchedulerCore and journal) and `check-fleet`. Their main is
// rpc/core_main.cc, beside `serve` (rpc/server.h), the one subcommand that needs the transport.
// Both return the process's exit status: 0, or 1 with the reason printed to `err`.
#pragma once

#include <ostream>
#include <string>

namespace orrery::core {

struct DemoCommandOptions {
  std::string journal = "orrery-demo.journal";
  std::string fsync = "group";  // always, group or never (JournalOptions::fsync)
  bool fresh = true;            // remove an old journal first (never anything else at that path)
};

// Runs the scenario on default_fleet() and a simulated clock, printing every committed
// transition and a summary to `out`.
int run_demo_command(const DemoCommandOptions& options, std::ostream& out, std::ostream& err);

// Parses the fleet config at `path` and prints its summary (nodes, devices, types) to `out`.
int check_fleet_command(const std::string& path, std::ostream& out, std::ostream& err);

}  // namespace orrery::core
