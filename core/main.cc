// orrery-core: the scheduler core's command line: the scripted demo scenario, a fleet config check,
// and `serve`, the daemon driving node agents (rpc/server.h, docs/runtime.md).
#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "core/demo_scenario.h"
#include "core/fleet.h"
#include "core/journal.h"
#include "core/scheduler_core.h"
#include "rpc/server.h"

namespace {

using namespace orrery;
using namespace orrery::core;

// Starting afresh removes an old journal, but never anything else the path may name.
Status remove_old_journal(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::symlink_status(path, ec);
  if (ec || st.type() == std::filesystem::file_type::not_found) return Status::Ok();
  if (st.type() != std::filesystem::file_type::regular)
    return Status::Error("refusing to replace " + path + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, sizeof magic);
  const auto got = static_cast<std::size_t>(in.gcount());
  if (got != 0 && std::string_view(magic, got) != kJournalMagic.substr(0, got))
    return Status::Error("refusing to replace " + path + ": not an orrery journal");
  if (!std::filesystem::remove(path, ec) && ec)
    return Status::Error("cannot remove " + path + ": " + ec.message());
  return Status::Ok();
}

int run_demo(const std::string& journal_path, const std::string& fsync, bool fresh) {
  JournalOptions opts;
  opts.fsync = fsync == "always" ? FsyncPolicy::kAlways
               : fsync == "never" ? FsyncPolicy::kNever
                                  : FsyncPolicy::kGroup;
  if (fresh) {
    if (auto st = remove_old_journal(journal_path); !st) {
      std::cerr << "orrery-core: " << st.reason() << "\n";
      return 1;
    }
  }
  auto journal = JournalWriter::open(journal_path, opts);
  if (!journal) {
    std::cerr << "orrery-core: " << journal.reason() << "\n";
    return 1;
  }
  ManualClock clock;  // the demo runs on simulated time: the same run prints the same times
  auto core = SchedulerCore::create(default_fleet(), clock, journal->get());
  if (!core) {
    std::cerr << "orrery-core: " << core.reason() << "\n";
    return 1;
  }
  const auto& fleet = (*core)->fleet();
  std::cout << "orrery-core demo: fleet of " << fleet.nodes.size() << " nodes, "
            << fleet.num_devices() << " devices, premium reserve " << fleet.premium_reserve
            << "; journal " << journal_path << "\n";
  auto summary = run_demo_scenario(**core, clock, std::cout);
  if (auto st = (*core)->sync(); !st) {
    std::cerr << "orrery-core: " << st.reason() << "\n";
    return 1;
  }
  if (!summary) {
    std::cerr << "orrery-core: demo failed: " << summary.reason() << "\n";
    return 1;
  }
  std::cout << "\ncommitted " << summary->committed << " decisions, rejected "
            << summary->rejected << " (policy bugs); " << (*journal)->records()
            << " journal records in " << journal_path << ", durable through decision "
            << (*core)->durable_seq() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"orrery-core: the verified scheduler core"};
  app.require_subcommand(1);

  auto* demo = app.add_subcommand(
      "demo", "run the scripted scenario through the core, printing every committed transition");
  std::string journal = "orrery-demo.journal";
  std::string fsync = "group";
  bool append = false;
  demo->add_option("--journal", journal, "journal file to write")->capture_default_str();
  demo->add_option("--fsync", fsync, "journal fsync policy")
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
  serve_cmd->add_option("--policy", serve.policy,
                        "the planner: orrery, fifo or tiresias (docs/policies.md; the same code orrery-sim runs)")
      ->check(CLI::IsMember({"orrery", "fifo", "tiresias"}))
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);

  if (serve_cmd->parsed()) return orrery::rpc::serve(serve, std::cout, std::cerr);

  if (demo->parsed()) return run_demo(journal, fsync, !append);
  if (fleet_cmd->parsed()) {
    auto f = Fleet::load(fleet_path);
    if (!f) {
      std::cerr << "orrery-core: " << f.reason() << "\n";
      return 1;
    }
    std::cout << fleet_path << ": " << f->nodes.size() << " nodes, " << f->num_devices()
              << " devices of " << f->device_types.size() << " types, premium reserve "
              << f->premium_reserve << "\n"
              << f->to_text();
    return 0;
  }
  return 0;
}
