// orrery-core demo and check-fleet (core_commands.h).
#include "core/core_commands.h"

#include <filesystem>
#include <fstream>
#include <string_view>

#include "core/demo_scenario.h"
#include "core/fleet.h"
#include "core/journal.h"
#include "core/scheduler_core.h"

namespace orrery::core {
namespace {

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

}  // namespace

int run_demo_command(const DemoCommandOptions& options, std::ostream& out, std::ostream& err) {
  const std::string& journal_path = options.journal;
  const std::string& fsync = options.fsync;
  const bool fresh = options.fresh;
  JournalOptions opts;
  opts.fsync = fsync == "always" ? FsyncPolicy::kAlways
               : fsync == "never" ? FsyncPolicy::kNever
                                  : FsyncPolicy::kGroup;
  if (fresh) {
    if (auto st = remove_old_journal(journal_path); !st) {
      err << "orrery-core: " << st.reason() << "\n";
      return 1;
    }
  }
  auto journal = JournalWriter::open(journal_path, opts);
  if (!journal) {
    err << "orrery-core: " << journal.reason() << "\n";
    return 1;
  }
  ManualClock clock;  // the demo runs on simulated time: the same run prints the same times
  auto core = SchedulerCore::create(default_fleet(), clock, journal->get());
  if (!core) {
    err << "orrery-core: " << core.reason() << "\n";
    return 1;
  }
  const auto& fleet = (*core)->fleet();
  out << "orrery-core demo: fleet of " << fleet.nodes.size() << " nodes, " << fleet.num_devices()
      << " devices, premium reserve " << fleet.premium_reserve << "; journal " << journal_path
      << "\n";
  auto summary = run_demo_scenario(**core, clock, out);
  if (auto st = (*core)->sync(); !st) {
    err << "orrery-core: " << st.reason() << "\n";
    return 1;
  }
  if (!summary) {
    err << "orrery-core: demo failed: " << summary.reason() << "\n";
    return 1;
  }
  out << "\ncommitted " << summary->committed << " decisions, rejected " << summary->rejected
      << " (policy bugs); " << (*journal)->records() << " journal records in " << journal_path
      << ", durable through decision " << (*core)->durable_seq() << "\n";
  return 0;
}

int check_fleet_command(const std::string& path, std::ostream& out, std::ostream& err) {
  auto f = Fleet::load(path);
  if (!f) {
    err << "orrery-core: " << f.reason() << "\n";
    return 1;
  }
  out << path << ": " << f->nodes.size() << " nodes, " << f->num_devices() << " devices of "
      << f->device_types.size() << " types, premium reserve " << f->premium_reserve << "\n"
      << f->to_text();
  return 0;
}

}  // namespace orrery::core
