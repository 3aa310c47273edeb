// Placement at fleet scale: gang placement decisions through the real core (propose, then
// SchedulerCore::commit: row lookup, spec guard, MSM; no journal) on one thread, on the issue's
// 100,000-GPU fleet (runtime/sim's generate_fleet defaults: 12,500 nodes x 8 in 4 regions x 5
// clusters, H100-80G : A100-80G : A100-40G = 5 : 3 : 2, 2 TiB host memory per node) with
// 10,000 pending jobs. The topology-aware GangPlacer (core/policy/gang_placer.h) and the old
// full scan (propose_gang_scan) side by side, on the same world. docs/performance.md,
// "Placement at fleet scale".
//
// The world: a fragmented background (jobs placed by the placer until B % of the devices are
// held, B = 30 or 60, then every third of them completed: about 20 or 40 % held, in holes), then
// 10,000 submitted and admitted jobs (about 58,000 GPUs of demand): gang sizes
// 1 (35 %), 2 (15 %), 4 (15 %), 8 (25 %), 16 (6 %), 32 (3 %), 64 (1 %), half of them elastic
// ([size / 2, size]), device types in the fleet's mix, 16 GiB per worker. Seeded: the same world
// on every run.
//
// BM_PlaceAtFleetScale/placer/10000/B: one iteration proposes a placement for every one of the
// 10,000 pending jobs in turn and commits it (a job no region has room for now gets a proposal
// without a commit, counted in `retry_later`; with B = 60 the demand exceeds the free devices),
// then, untimed, completes the placed jobs, cancels the rest and submits 10,000 fresh ones (and
// lets the placer catch up with those commits, so the timed part never pays for the reset).
// BM_PlaceAtFleetScale/scan/200/B: the same with propose_gang_scan, on the first 200 pending jobs
// per iteration (the scan costs a millisecond per call). BM_ProposeOnly/*: one proposal for a pending
// job, nothing committed. BM_ProposeGangPerCall: the propose_gang wrapper, which builds the
// placer's index from the state on every call. BM_PackingAfter2000/*: fragmentation left by each
// policy (see there).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/node_bootstrap.h"
#include "core/policy/gang_placement.h"
#include "core/policy/gang_placer.h"
#include "core/scheduler_core.h"
#include "runtime/sim/fleet_generator.h"

namespace {

using namespace orrery;
using namespace orrery::core;
using spec::EventKind;

constexpr int kPending = 10000;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "placement_bench: %s\n", what.c_str());
  std::abort();
}

Committed must(SchedulerCore& core, const Decision& d) {
  auto c = core.commit(d);
  if (!c) die(d.describe() + " rejected: " + c.reason());
  return *c;
}

struct World {
  ManualClock clock;
  std::unique_ptr<SchedulerCore> core;
  std::unique_ptr<policy::GangPlacer> placer;
  std::mt19937_64 rng{20261123};
  std::vector<int> pending;
  std::vector<std::string> types;
  std::vector<double> type_weights;

  explicit World(int background_pct) {
    auto fleet = sim::generate_fleet(sim::FleetGenOptions{});
    if (!fleet) die(fleet.reason());
    for (const auto& m : sim::default_device_mix()) {
      types.push_back(m.type);
      type_weights.push_back(m.weight);
    }
    auto made = SchedulerCore::create(std::move(*fleet), clock, nullptr);
    if (!made) die(made.reason());
    core = std::move(*made);
    if (auto st = bring_up_all_nodes(*core); !st) die(st.reason());
    placer = std::make_unique<policy::GangPlacer>(*core);

    // A fragmented background: B % of the devices held, then every third job completed.
    const std::int64_t devices = core->cluster().num_devices();
    std::int64_t held = 0;
    std::vector<int> background;
    while (held < devices * background_pct / 100) {
      const int j = submit();
      auto p = placer->propose(j, EventKind::kPlace);
      if (p.kind != policy::Proposal::Kind::kOk) die("background: " + p.why);
      must(*core, p.decision);
      must(*core, job(EventKind::kStart, j));
      held += static_cast<std::int64_t>(p.decision.devices.size());
      background.push_back(j);
    }
    for (std::size_t i = 0; i < background.size(); i += 3)
      must(*core, job(EventKind::kComplete, background[i]));
    refill();
  }

  static Decision job(EventKind e, std::int64_t j) {
    Decision d;
    d.event = e;
    d.origin = e == EventKind::kAdmit ? spec::Origin::kPlanner : spec::Origin::kRuntime;
    d.job = j;
    return d;
  }

  // Submits and admits one job of the workload's mix.
  int submit() {
    static const int sizes[] = {1, 2, 4, 8, 16, 32, 64};
    static const double weights[] = {35, 15, 15, 25, 6, 3, 1};
    std::discrete_distribution<int> size_of(std::begin(weights), std::end(weights));
    std::discrete_distribution<int> type_of(type_weights.begin(), type_weights.end());
    const int size = sizes[size_of(rng)];
    Decision d;
    d.event = EventKind::kSubmit;
    d.origin = spec::Origin::kOperator;
    d.name = "bench";
    d.tier = spec::Tier::kStandard;
    d.device_type = types[static_cast<std::size_t>(type_of(rng))];
    d.world = size;
    d.max_devices = size;
    d.min_devices = (rng() & 1) && size > 1 ? size / 2 : size;
    d.mem_mib = 16384;
    const int j = must(*core, d).job;
    must(*core, job(EventKind::kAdmit, j));
    return j;
  }

  void refill() {
    pending.clear();
    for (int i = 0; i < kPending; ++i) pending.push_back(submit());
    placer->sync();
  }
};

// One world per background load and process: building one (100,000 devices, 10,000+ jobs)
// takes a while.
World& world(int background_pct) {
  static std::map<int, std::unique_ptr<World>> worlds;
  auto& w = worlds[background_pct];
  if (!w) w = std::make_unique<World>(background_pct);
  return *w;
}

// Places `per_iteration` of the pending jobs, with the placer (scan == false) or the old scan.
void place_pending(benchmark::State& state, bool scan) {
  World& w = world(static_cast<int>(state.range(1)));
  const auto per_iteration = static_cast<std::size_t>(state.range(0));
  std::int64_t decisions = 0, retry_later = 0, devices = 0, one_node = 0;
  std::vector<int> placed;
  for (auto _ : state) {
    placed.clear();
    for (std::size_t i = 0; i < per_iteration && i < w.pending.size(); ++i) {
      const int j = w.pending[i];
      auto p = scan ? policy::propose_gang_scan(*w.core, j, EventKind::kPlace)
                    : w.placer->propose(j, EventKind::kPlace);
      if (p.kind != policy::Proposal::Kind::kOk) {
        ++retry_later;
        continue;
      }
      auto c = w.core->commit(p.decision);
      if (!c) {
        state.SkipWithError(("rejected: " + c.reason()).c_str());
        return;
      }
      ++decisions;
      devices += static_cast<std::int64_t>(p.decision.devices.size());
      const auto& s = w.core->cluster();
      one_node += s.node_of(static_cast<int>(p.decision.devices.front())) ==
                  s.node_of(static_cast<int>(p.decision.devices.back()));
      placed.push_back(j);
    }
    state.PauseTiming();
    // Back to the same load: the placed jobs complete, the rest are cancelled, fresh ones arrive.
    for (int j : placed) {
      must(*w.core, World::job(EventKind::kStart, j));
      must(*w.core, World::job(EventKind::kComplete, j));
    }
    for (int j : w.pending)
      if (w.core->state(j) == spec::JobState::kQueued) {
        Decision d = World::job(EventKind::kCancel, j);
        d.origin = spec::Origin::kOperator;
        must(*w.core, d);
      }
    w.refill();
    state.ResumeTiming();
  }
  state.counters["decisions_per_s"] =
      benchmark::Counter(static_cast<double>(decisions), benchmark::Counter::kIsRate);
  state.counters["proposals_per_s"] = benchmark::Counter(
      static_cast<double>(decisions + retry_later), benchmark::Counter::kIsRate);
  state.counters["retry_later"] =  // per iteration
      benchmark::Counter(static_cast<double>(retry_later), benchmark::Counter::kAvgIterations);
  state.counters["gpus_per_decision"] =
      decisions ? static_cast<double>(devices) / static_cast<double>(decisions) : 0;
  state.counters["one_node_pct"] =
      decisions ? 100.0 * static_cast<double>(one_node) / static_cast<double>(decisions) : 0;
  state.SetItemsProcessed(decisions);
  if (w.placer->stats().repairs != 0) state.SkipWithError("the placer repaired its index");
}

void BM_PlaceAtFleetScale_Placer(benchmark::State& state) { place_pending(state, false); }
void BM_PlaceAtFleetScale_Scan(benchmark::State& state) { place_pending(state, true); }
BENCHMARK(BM_PlaceAtFleetScale_Scan)->Name("BM_PlaceAtFleetScale/scan")
    ->Args({200, 30})->Args({200, 60})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PlaceAtFleetScale_Placer)->Name("BM_PlaceAtFleetScale/placer")
    ->Args({kPending, 30})->Args({kPending, 60})->Unit(benchmark::kMillisecond)->UseRealTime();

// Packing: on two identical fresh worlds (B = 30), the same first 2,000 pending jobs placed by
// each policy; then how many nodes are left wholly free (room for an 8-GPU gang on one node) and
// how many partly free (free devices stranded beside other jobs'). One iteration, untimed figures.
void packing(benchmark::State& state, bool scan) {
  for (auto _ : state) {
    state.PauseTiming();
    World w(30);
    for (int i = 0; i < 2000; ++i) {
      const int j = w.pending[static_cast<std::size_t>(i)];
      auto p = scan ? policy::propose_gang_scan(*w.core, j, EventKind::kPlace)
                    : w.placer->propose(j, EventKind::kPlace);
      if (p.kind == policy::Proposal::Kind::kOk) must(*w.core, p.decision);
    }
    const auto& s = w.core->cluster();
    int whole = 0, partial = 0;
    for (const auto& node : w.core->fleet().nodes) {
      int free = 0;
      for (int dev = node.first_device; dev < node.end_device; ++dev) free += s.owner[dev] == -1;
      whole += free == node.num_devices();
      partial += free > 0 && free < node.num_devices();
    }
    state.counters["whole_free_nodes"] = whole;
    state.counters["partly_free_nodes"] = partial;
    state.ResumeTiming();
  }
}
void BM_Packing_Placer(benchmark::State& state) { packing(state, false); }
void BM_Packing_Scan(benchmark::State& state) { packing(state, true); }
BENCHMARK(BM_Packing_Placer)->Name("BM_PackingAfter2000/placer")->Iterations(1);
BENCHMARK(BM_Packing_Scan)->Name("BM_PackingAfter2000/scan")->Iterations(1);

// One proposal, nothing committed: the lookup alone.
void propose_only(benchmark::State& state, bool scan) {
  World& w = world(30);
  std::size_t i = 0;
  for (auto _ : state) {
    const int j = w.pending[i++ % w.pending.size()];
    auto p = scan ? policy::propose_gang_scan(*w.core, j, EventKind::kPlace)
                  : w.placer->propose(j, EventKind::kPlace);
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_ProposeOnly_Placer(benchmark::State& state) { propose_only(state, false); }
void BM_ProposeOnly_Scan(benchmark::State& state) { propose_only(state, true); }
BENCHMARK(BM_ProposeOnly_Placer)->Name("BM_ProposeOnly/placer");
BENCHMARK(BM_ProposeOnly_Scan)->Name("BM_ProposeOnly/scan")->Unit(benchmark::kMicrosecond);

// propose_gang(): the placer built from the state for one call.
void BM_ProposeGangPerCall(benchmark::State& state) {
  World& w = world(30);
  std::size_t i = 0;
  for (auto _ : state) {
    auto p = policy::propose_gang(*w.core, w.pending[i++ % w.pending.size()], EventKind::kPlace);
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ProposeGangPerCall)->Unit(benchmark::kMicrosecond);

}  // namespace
