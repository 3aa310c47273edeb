// orrery-core: the scheduler core's command line: `serve`, the daemon driving node agents and
// serving clients (rpc/server.h, docs/runtime.md), and two commands that need only the core, the
// scripted `demo` and `check-fleet` (core/core_commands.h).
//
// It lives in rpc/, beside the serve() it runs, because the daemon is the core behind the Cap'n
// Proto transport: core/ sits below rpc/ and includes nothing from it (design.md, "Layers").
#include <cstdint>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "core/core_commands.h"
#include "rpc/server.h"

int main(int argc, char** argv) {
  CLI::App app{"orrery-core: the verified scheduler core"};
  app.require_subcommand(1);

  auto* demo = app.add_subcommand(
      "demo", "run the scripted scenario through the core, printing every committed transition");
  orrery::core::DemoCommandOptions demo_opts;
  bool append = false;
  demo->add_option("--journal", demo_opts.journal, "journal file to write")->capture_default_str();
  demo->add_option("--fsync", demo_opts.fsync, "journal fsync policy")
      ->check(CLI::IsMember({"always", "group", "never"}))
      ->capture_default_str();
  demo->add_flag("--append", append,
                 "fail if the journal already has records instead of starting it afresh");

  auto* fleet_cmd = app.add_subcommand("check-fleet", "parse a fleet config and summarise it");
  std::string fleet_path;
  fleet_cmd->add_option("FILE", fleet_path, "fleet config")->required();

  // The daemon (rpc/server.h): both Cap'n Proto APIs, the planner loop, /metrics.
  auto* serve_cmd = app.add_subcommand("serve", "run the core as a service for node agents and clients");
  orrery::rpc::ServeOptions serve;
  serve_cmd->add_option("--listen", serve.listen, "address for the client and node APIs (host:port)")
      ->capture_default_str();
  serve_cmd->add_option("--data", serve.data_dir, "data directory (journal, job specs, checkpoints)")
      ->required();
  serve_cmd->add_option("--secret", serve.secret_file, "file holding the cluster's shared secret")
      ->required();
  serve_cmd->add_option("--fleet", serve.fleet_file, "fleet config (required on the first start)");
  serve_cmd->add_option("--metrics", serve.metrics, "address for Prometheus /metrics over HTTP");
  serve_cmd->add_option("--heartbeat-timeout-ms", serve.heartbeat_timeout_ms,
                        "a node silent this long is lost and its jobs fail over")
      ->check(CLI::Range(std::int64_t{50}, std::int64_t{3600000}))
      ->capture_default_str();
  serve_cmd->add_option("--cut-timeout-ms", serve.cut_timeout_ms,
                        "a preemption's, migration's or resize's cut not stored this long after it was "
                        "decided is aborted: the job restarts in place from its last checkpoint")
      ->check(CLI::Range(std::int64_t{100}, std::int64_t{86400000}))
      ->capture_default_str();
  serve_cmd->add_option("--launch-timeout-ms", serve.launch_timeout_ms,
                        "a launch or restore not started on every node this long after it was "
                        "decided is aborted: the job gives its devices back and waits again")
      ->check(CLI::Range(std::int64_t{100}, std::int64_t{86400000}))
      ->capture_default_str();
  serve_cmd->add_option("--user-checkpoint-root", serve.user_checkpoint_root,
                        "where signal jobs save themselves (ORRERY_CHECKPOINT_DIR = ROOT/job-J): a path "
                        "every node sees alike; default DATA/user-checkpoints");
  serve_cmd->add_option("--policy", serve.policy,
                        "the planner: orrery, fifo, tiresias or afs (docs/policies.md; the same code orrery-sim runs)")
      ->check(CLI::IsMember({"orrery", "fifo", "tiresias", "afs"}))
      ->capture_default_str();
  serve_cmd->add_option("--type-speed", serve.type_speed,
                        "relative speed of device types, e.g. H100-80G=2,A100-80G=1 (others 1): a job whose "
                        "spec names several types is placed on the fastest with room");
  serve_cmd->add_flag("--one-node", serve.one_node_gangs,
                      "a gang that one node of its type can hold is placed on one node, as a Kubernetes pod is "
                      "(default: gangs span a cluster's nodes, then a region's)");

  CLI11_PARSE(app, argc, argv);

  if (serve_cmd->parsed()) return orrery::rpc::serve(serve, std::cout, std::cerr);

  if (demo->parsed()) {
    demo_opts.fresh = !append;
    return orrery::core::run_demo_command(demo_opts, std::cout, std::cerr);
  }
  if (fleet_cmd->parsed()) return orrery::core::check_fleet_command(fleet_path, std::cout, std::cerr);
  return 0;
}
