// round_bench: how long one scheduling round of a planner takes at fleet scale, preemption
// planning included (issue 7: p99 <= 10 ms on a 100,000-GPU fleet with 10,000 pending jobs).
//   round_bench [--policy=orrery] [--nodes=12500] [--pending=10000] [--rounds=300] [--churn=50]
// The fleet is the generated planet-scale one (runtime/sim/fleet_generator.h). It is filled to
// about 95 % with running basic and standard jobs of 1-8 devices (through the planner itself),
// then `pending` jobs of every tier and 1-64 devices are submitted; most cannot start. Each
// measured round first completes `churn` running jobs and submits `churn` new ones (so that every
// round has something to do: admissions, placements, preemptions for waiting premium and standard
// jobs), then times planner.plan(). Preemptions are carried out at once (the checkpoint is not
// modelled here: the victim is suspended in the same round). Prints p50, p90, p99 and the
// maximum of the round times, and the decisions a round committed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/node_bootstrap.h"
#include "core/policy/planner.h"
#include "core/scheduler_core.h"
#include "runtime/sim/fleet_generator.h"

using namespace orrery;
using Clock = std::chrono::steady_clock;

namespace {

// Carries out proposals at once, as a runtime with instant checkpoints would.
class Instant final : public core::policy::PlanContext {
 public:
  Instant(core::SchedulerCore& c, core::policy::Planner& p) : core_(c), planner_(p) {}
  bool propose(const core::Decision& d) override {
    if (!commit(d)) return false;
    const int j = static_cast<int>(d.job);
    if (d.event == spec::EventKind::kPlace) return runtime(spec::EventKind::kStart, j);
    if (d.event == spec::EventKind::kResume) return runtime(spec::EventKind::kRestoreDone, j);
    if (d.event == spec::EventKind::kPreempt) {
      core::Decision c;
      c.event = spec::EventKind::kCheckpointDone;
      c.origin = spec::Origin::kRuntime;
      c.job = j;
      c.step = core_.cluster().jobs[j].progress;
      return commit(c);
    }
    return true;
  }
  bool cut_pending(int) const override { return false; }
  bool runtime(spec::EventKind e, int j) {
    core::Decision d;
    d.event = e;
    d.origin = spec::Origin::kRuntime;
    d.job = j;
    return commit(d);
  }
  bool commit(const core::Decision& d) {
    auto c = core_.commit(d);
    if (!c) {
      ++rejected;
      return false;
    }
    ++decisions;
    planner_.job_changed(core_, c->job);
    return true;
  }
  std::uint64_t decisions = 0, rejected = 0;

 private:
  core::SchedulerCore& core_;
  core::policy::Planner& planner_;
};

long arg(int argc, char** argv, const char* name, long dflt) {
  const std::string pre = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], pre.c_str(), pre.size()) == 0) return std::atol(argv[i] + pre.size());
  return dflt;
}
std::string sarg(int argc, char** argv, const char* name, const char* dflt) {
  const std::string pre = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], pre.c_str(), pre.size()) == 0) return argv[i] + pre.size();
  return dflt;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help")) {
      std::printf("usage: round_bench [--policy=orrery|fifo|tiresias] [--nodes=12500] [--pending=10000] "
                  "[--rounds=300] [--churn=50]\n");
      return 0;
    }
  const std::string policy = sarg(argc, argv, "policy", "orrery");
  const long nodes = arg(argc, argv, "nodes", 12500), pending = arg(argc, argv, "pending", 10000);
  const long rounds = arg(argc, argv, "rounds", 300), churn = arg(argc, argv, "churn", 50);
  if (nodes < 1 || pending < 0 || rounds < 1 || churn < 0) {
    std::fprintf(stderr, "round_bench: bad arguments (see --help)\n");
    return 2;
  }
  sim::FleetGenOptions fo;
  fo.nodes = static_cast<int>(nodes);
  fo.regions = std::clamp(fo.nodes / 1000, 1, 4);
  fo.clusters_per_region = std::clamp(fo.nodes / fo.regions / 100, 1, 5);
  auto fleet = sim::generate_fleet(fo);
  if (!fleet) {
    std::fprintf(stderr, "round_bench: %s\n", fleet.reason().c_str());
    return 1;
  }
  fleet->premium_reserve = fleet->num_devices() / 2;
  const int devices = fleet->num_devices();
  core::ManualClock clock;
  auto core = core::SchedulerCore::create(std::move(*fleet), clock, nullptr);
  if (!core || !core::bring_up_all_nodes(**core)) return 1;
  auto planner = core::policy::make_planner(policy);
  if (!planner) {
    std::fprintf(stderr, "round_bench: unknown policy \"%s\"\n", policy.c_str());
    return 2;
  }
  Instant ctx(**core, *planner);
  std::mt19937_64 rng(1);
  const auto& types = (*core)->fleet().device_types;
  auto submit = [&](spec::Tier tier, int world) {
    auto c = (*core)->commit(core::Decision::submit("j", tier, types[rng() % types.size()], world, world, world, 16384));
    if (c) planner->job_changed(**core, c->job);
  };
  // Fill to ~95 % with basic and standard jobs of 1-8 devices.
  std::int64_t asked = 0;
  while (asked < devices * 95 / 100) {
    const int w = 1 << (rng() % 4);
    submit(rng() % 2 ? spec::Tier::kBasic : spec::Tier::kStandard, w);
    asked += w;
  }
  for (int i = 0; i < 20; ++i) planner->plan(**core, ctx);
  std::vector<int> running;
  auto refresh_running = [&] {
    running.clear();
    for (int j = 0; j < (*core)->num_jobs(); ++j)
      if ((*core)->state(j) == spec::JobState::kRunning) running.push_back(j);
  };
  refresh_running();
  std::int64_t held = 0;
  for (int j : running) held += (*core)->cluster().jobs[j].devices;
  std::printf("round_bench: %s planner, %d devices (%ld nodes), %zu running jobs on %lld devices; ", policy.c_str(),
              devices, nodes, running.size(), static_cast<long long>(held));
  auto new_job = [&] {
    const auto r = rng() % 10;
    const auto tier = r < 2 ? spec::Tier::kPremium : r < 6 ? spec::Tier::kStandard : spec::Tier::kBasic;
    submit(tier, 1 << (rng() % 7));
  };
  for (long i = 0; i < pending; ++i) new_job();
  std::printf("%ld jobs submitted to wait\n", pending);
  planner->plan(**core, ctx);  // the first round admits them all: not timed
  auto waiting = [&] {
    long n = 0;
    for (int j = 0; j < (*core)->num_jobs(); ++j) {
      auto st = (*core)->state(j);
      n += st == spec::JobState::kSubmitted || st == spec::JobState::kQueued || st == spec::JobState::kSuspended;
    }
    return n;
  };
  const long waiting_before = waiting();
  std::vector<double> ms;
  std::vector<std::uint64_t> per_round;
  for (long r = 0; r < rounds; ++r) {
    refresh_running();
    std::shuffle(running.begin(), running.end(), rng);
    for (long k = 0; k < churn && k < static_cast<long>(running.size()); ++k)
      ctx.runtime(spec::EventKind::kComplete, running[static_cast<std::size_t>(k)]);
    for (long k = 0; k < churn; ++k) new_job();
    const auto before = ctx.decisions;
    const auto t0 = Clock::now();
    planner->plan(**core, ctx);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    per_round.push_back(ctx.decisions - before);
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(q * sorted.size()))]; };
  std::uint64_t total = 0;
  for (auto d : per_round) total += d;
  std::printf("jobs waiting: %ld after the first round, %ld after the last\n", waiting_before, waiting());
  std::printf("%ld rounds (each after %ld completions and %ld arrivals): round time p50 %.2f ms, p90 %.2f ms, "
              "p99 %.2f ms, max %.2f ms; %.1f decisions a round; %llu rejected proposals\n",
              rounds, churn, churn, pct(0.5), pct(0.9), pct(0.99), sorted.back(),
              static_cast<double>(total) / static_cast<double>(rounds), static_cast<unsigned long long>(ctx.rejected));
  return ctx.rejected == 0 ? 0 : 1;
}
