// Helpers shared by the core benchmarks (core_bench, core_memory, replay_bench): generated fleets
// and a registry filled with finished jobs through the real commit path.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/decision.h"
#include "core/fleet.h"
#include "core/node_bootstrap.h"
#include "core/scheduler_core.h"

namespace orrery::bench {

// Fleet config text: `devices` devices in nodes of 8 x H100-80G (the last node may be smaller),
// 512 nodes per cluster, one region; parsed by core::Fleet::parse like any config.
// `premium_reserve` devices are reserved for admitted premium demand.
inline std::string fleet_text(int devices, std::int64_t premium_reserve = 0) {
  std::string text = "premium_reserve " + std::to_string(premium_reserve) + "\nregion r0\n";
  int node = 0;
  for (int first = 0; first < devices; first += 8, ++node) {
    if (node % 512 == 0) text += "cluster c" + std::to_string(node / 512) + "\n";
    const int count = devices - first < 8 ? devices - first : 8;
    text += "node n" + std::to_string(node) + " host_mem_mib=2097152\ndevices H100-80G count=" +
            std::to_string(count) + " mem_mib=81920\n";
  }
  return text;
}

inline core::Fleet fleet_of_devices(int devices, std::int64_t premium_reserve = 0) {
  auto f = core::Fleet::parse(fleet_text(devices, premium_reserve));
  if (!f) {
    std::fprintf(stderr, "bench fleet: %s\n", f.reason().c_str());
    std::abort();
  }
  return std::move(*f);
}

inline core::Decision submit_decision(std::int64_t world, std::int64_t lo, std::int64_t hi,
                                      std::string name = "bench",
                                      spec::Tier tier = spec::Tier::kStandard) {
  core::Decision d;
  d.event = spec::EventKind::kSubmit;
  d.name = std::move(name);
  d.tier = tier;
  d.device_type = "H100-80G";
  d.world = world;
  d.min_devices = lo;
  d.max_devices = hi;
  d.mem_mib = 1024;
  return d;
}

inline core::Decision job_decision(spec::EventKind e, std::int64_t job, std::int64_t step = 0) {
  core::Decision d;
  d.event = e;
  d.job = job;
  d.step = step;
  d.gpu_ms = 1;
  return d;
}

// A Place (or Resume, Migrate, resize) of `job` on devices [first, first + count), `splice`
// workers each.
inline core::Decision placement(spec::EventKind e, std::int64_t job, int first, int count,
                                std::int64_t splice) {
  core::Decision d = job_decision(e, job);
  d.splice = splice;
  d.devices.reserve(static_cast<std::size_t>(count));
  for (int k = 0; k < count; ++k) d.devices.push_back(first + k);
  return d;
}

// Commits or dies: the benchmarks' own decisions are valid by construction.
// A core over `fleet` with every node Up (its node decisions committed, and journaled if there is
// a journal), as the benchmarks' placements need; aborts on an error, which would be a bug.
inline std::unique_ptr<core::SchedulerCore> up_core(core::Fleet fleet, const core::Clock& clock,
                                                    core::JournalWriter* journal) {
  auto made = core::SchedulerCore::create(std::move(fleet), clock, journal);
  if (!made) {
    std::fprintf(stderr, "bench: %s\n", made.reason().c_str());
    std::abort();
  }
  auto core = std::move(*made);
  if (auto st = core::bring_up_all_nodes(*core); !st) {
    std::fprintf(stderr, "bench: %s\n", st.reason().c_str());
    std::abort();
  }
  return core;
}

inline core::Committed must(core::SchedulerCore& core, const core::Decision& d) {
  auto c = core.commit(d);
  if (!c) {
    std::fprintf(stderr, "bench: %s rejected: %s\n", d.describe().c_str(), c.reason().c_str());
    std::abort();
  }
  return *c;
}

// Adds `jobs` finished jobs to the registry through the real commit path: each is submitted,
// admitted, placed on the 8 devices of a node (rotating over the fleet), started, reports progress
// once and completes. `name_of(i)` names job i.
template <class NameOf>
void fill_finished(core::SchedulerCore& core, int jobs, NameOf&& name_of) {
  using spec::EventKind;
  const int full_nodes = core.cluster().num_devices() / 8;
  for (int i = 0; i < jobs; ++i) {
    const auto j = static_cast<std::int64_t>(core.num_jobs());
    must(core, submit_decision(8, 8, 8, name_of(i)));
    must(core, job_decision(EventKind::kAdmit, j));
    must(core, placement(EventKind::kPlace, j, 8 * (i % full_nodes), 8, 1));
    must(core, job_decision(EventKind::kStart, j));
    must(core, job_decision(EventKind::kProgress, j, 100));
    must(core, job_decision(EventKind::kComplete, j));
  }
}

inline void fill_finished(core::SchedulerCore& core, int jobs) {
  fill_finished(core, jobs, [](int) { return std::string("done"); });
}

}  // namespace orrery::bench
