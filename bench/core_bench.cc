// Benchmarks of the core's hot paths: Boost.MSM event dispatch (guard + effect of one row), the
// full commit path (row lookup, spec guard on the concrete state, journal append, MSM fire), and
// commit with a real journal under group commit.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include "core/clock.h"
#include "core/fleet.h"
#include "core/job_machine.h"
#include "core/journal.h"
#include "core/scheduler_core.h"
#include "bench/bench_util.h"
#include "spec/invariants.h"

namespace {

using namespace orrery;
using namespace orrery::core;
using spec::EventKind;

// A fleet of `nodes` nodes with 8 devices each.
Fleet fleet_of(int nodes) {
  std::string text = "premium_reserve 0\nregion r\ncluster c\n";
  for (int n = 0; n < nodes; ++n)
    text += "node n" + std::to_string(n) + " host_mem_mib=1048576\ndevices H100-80G count=8 mem_mib=81920\n";
  return std::move(Fleet::parse(text).value());
}

// Brings `jobs` jobs to Running, each on 8 devices of its own node.
void start_jobs(SchedulerCore& core, int jobs) {
  for (int j = 0; j < jobs; ++j) {
    core.commit(bench::submit_decision(8, 8, 8));
    core.commit(bench::job_decision(EventKind::kAdmit, j));
    Decision place = bench::job_decision(EventKind::kPlace, j);
    place.splice = 1;
    for (int k = 0; k < 8; ++k) place.devices.push_back(8 * j + k);
    core.commit(place);
    core.commit(bench::job_decision(EventKind::kStart, j));
  }
}

// MSM dispatch alone: one Progress row (guard + effect) on a JobMachine.
void BM_MsmDispatchProgress(benchmark::State& state) {
  const spec::Concrete dom;
  auto cluster = fleet_of(1).empty_cluster();  // the bare machine below acts on this
  for (auto& st : cluster.node_state) st = static_cast<std::int64_t>(spec::NodeState::kUp);
  spec::add_job_slot(dom, cluster);
  JobMachine m;
  spec::Params<spec::Concrete> p{};
  p.tier = static_cast<std::int64_t>(spec::Tier::kStandard);
  p.world = 8;
  p.min_dev = 8;
  p.max_dev = 8;
  p.mem = 1024;
  FireContext ctx{&cluster, 0, &p};
  // Drive the bare machine to Running along the same rows (mirroring the state as the core does).
  auto fire = [&](EventKind e) {
    m.fire(e, ctx);
    cluster.jobs[0].state = static_cast<std::int64_t>(m.state());
  };
  fire(EventKind::kSubmit);
  fire(EventKind::kAdmit);
  p.splice = 1;
  p.sel = {0, 1, 2, 3, 4, 5, 6, 7};
  fire(EventKind::kPlace);
  fire(EventKind::kStart);
  if (m.state() != spec::JobState::kRunning) state.SkipWithError("machine not running");
  std::int64_t step = 0;
  for (auto _ : state) {
    p.step = ++step;
    auto st = m.fire(EventKind::kProgress, ctx);
    benchmark::DoNotOptimize(st);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MsmDispatchProgress);

// An event with no row in the current state: the error path.
void BM_MsmDispatchIllegal(benchmark::State& state) {
  spec::ClusterVars<spec::Concrete> cluster = fleet_of(1).empty_cluster();
  spec::add_job_slot(spec::Concrete{}, cluster);
  spec::Params<spec::Concrete> p{};
  FireContext ctx{&cluster, 0, &p};
  JobMachine m;
  for (auto _ : state) {
    auto st = m.fire(EventKind::kComplete, ctx);
    benchmark::DoNotOptimize(st);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MsmDispatchIllegal);

// The whole commit path for a Progress decision, `range(0)` running jobs on range(0) nodes.
void BM_CommitProgress(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  ManualClock clock;
  auto core = bench::up_core(fleet_of(jobs), clock, nullptr);
  start_jobs(*core, jobs);
  std::int64_t step = 0;
  for (auto _ : state) {
    ++step;
    auto c =
        core->commit(bench::job_decision(EventKind::kProgress, static_cast<int>(step % jobs), step));
    if (!c) state.SkipWithError(c.reason().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CommitProgress)->Arg(1)->Arg(16)->Arg(64);

// A placement decision (the heaviest guard: device freedom and host memory over the fleet),
// followed by its cancellation so the devices come back.
void BM_CommitPlaceCancel(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  ManualClock clock;
  auto core = bench::up_core(fleet_of(nodes), clock, nullptr);
  for (auto _ : state) {
    int j = core->num_jobs();
    core->commit(bench::submit_decision(16, 8, 8));
    core->commit(bench::job_decision(EventKind::kAdmit, j));
    Decision place = bench::job_decision(EventKind::kPlace, j);
    place.splice = 2;
    for (int k = 0; k < 8; ++k) place.devices.push_back(k);
    auto c = core->commit(place);
    if (!c) state.SkipWithError(c.reason().c_str());
    core->commit(bench::job_decision(EventKind::kCancel, j));
  }
  state.SetItemsProcessed(state.iterations() * 4);
}
BENCHMARK(BM_CommitPlaceCancel)->Arg(1)->Arg(8)->Iterations(2000);

// Fleet-scale placement: a Place of one job on the 8 devices of a node, then its Cancel, which
// frees them again, on a fleet of range(0) devices (nodes of 8 x H100-80G) whose registry already
// holds range(1) finished jobs (filled through the real commit path, untimed). The jobs to place
// are submitted and admitted before the timed loop (kScalePlaces of them, so the registry grows by
// that many); iteration k places job k on node k mod nodes. Reported per Place (one Place + one
// Cancel per iteration).
constexpr int kScalePlaces = 10000;
void BM_CommitPlaceAtScale(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  const int finished = static_cast<int>(state.range(1));
  ManualClock clock;
  auto core = bench::up_core(bench::fleet_of_devices(devices), clock, nullptr);
  bench::fill_finished(*core, finished);
  const int nodes = devices / 8;
  std::vector<Decision> places, cancels;
  places.reserve(kScalePlaces);
  cancels.reserve(kScalePlaces);
  for (int k = 0; k < kScalePlaces; ++k) {
    const auto j = static_cast<std::int64_t>(core->num_jobs());
    bench::must(*core, bench::submit_decision(16, 8, 8));
    bench::must(*core, bench::job_decision(EventKind::kAdmit, j));
    places.push_back(bench::placement(EventKind::kPlace, j, 8 * (k % nodes), 8, 2));
    cancels.push_back(bench::job_decision(EventKind::kCancel, j));
  }
  std::size_t k = 0;
  for (auto _ : state) {
    auto c = core->commit(places[k]);
    if (!c) state.SkipWithError(c.reason().c_str());
    auto x = core->commit(cancels[k]);
    if (!x) state.SkipWithError(x.reason().c_str());
    ++k;
  }
  state.counters["jobs"] = core->num_jobs();
  state.counters["devices"] = devices;
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CommitPlaceAtScale)
    ->ArgNames({"devices", "jobs"})
    ->Args({64, 10000})
    ->Args({10000, 10000})
    ->Args({100000, 10000})
    ->Args({64, 1000000})
    ->Args({10000, 1000000})
    ->Args({100000, 1000000})
    ->Iterations(kScalePlaces)
    ->Unit(benchmark::kMicrosecond);

// Commit with a real journal (group commit of 256 records, fdatasync per group).
void BM_CommitProgressJournaled(benchmark::State& state) {
  auto path = std::filesystem::temp_directory_path() /
              ("orrery_bench_" + std::to_string(::getpid()) + ".journal");
  std::filesystem::remove(path);
  {
    JournalOptions opts;
    opts.fsync = state.range(0) ? FsyncPolicy::kGroup : FsyncPolicy::kNever;
    opts.group_records = 256;
    auto journal = std::move(JournalWriter::open(path.string(), opts).value());
    ManualClock clock;
    auto core = bench::up_core(fleet_of(1), clock, journal.get());
    start_jobs(*core, 1);
    std::int64_t step = 0;
    for (auto _ : state) {
      auto c = core->commit(bench::job_decision(EventKind::kProgress, 0, ++step));
      if (!c) state.SkipWithError(c.reason().c_str());
    }
    journal->flush();
    state.SetItemsProcessed(state.iterations());
  }
  std::filesystem::remove(path);
}
BENCHMARK(BM_CommitProgressJournaled)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace
