// replay_bench: writes a realistic journal through the real core, then times the checker's replay
// of it (checker::replay_journal, what `orrery-check replay` runs) and prints records/s.
//
// The journal: a fleet of nodes of 8 x H100-80G; jobs of 1-64 devices (buddy-allocated blocks of
// whole nodes or parts of one, splice 1 or 2) arrive, are admitted (premium ones within the
// reserve), placed, started, report progress, checkpoint every tenth report, complete; some
// migrate, some crash and are requeued, some queued ones are cancelled; a premium job that finds
// no room preempts a running basic job of its size (Preempt, CheckpointDone, the premium job placed
// on the devices reserved for it, the basic job resumed elsewhere later). Every decision goes
// through SchedulerCore::commit with the journal in kNever (or kGroup) mode, and must commit.
//
// Usage: replay_bench [--records N] [--devices N] [--journal PATH] [--fsync never|group]
//                     [--full-every N[,N...]] [--check-every K] [--keep] [--seed N] [--one-thread]
//        replay_bench --replay PATH [--full-every N[,N...]] [--check-every K] [--one-thread]
//   --replay replays an existing journal only; --one-thread decodes on the replaying thread;
//   --check-every K checks every K-th decision incrementally (ReplayOptions::check_every).
//   defaults: 10,000,000 records, 100,000 devices, /tmp/orrery_replay_bench_<pid>.journal,
//   never, full-every 0,1000000 (one replay per value), the journal deleted afterwards.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "checker/replay.h"
#include "core/clock.h"
#include "core/journal.h"
#include "core/scheduler_core.h"

namespace {

using namespace orrery;
using spec::EventKind;
using spec::JobState;
using spec::Origin;
using spec::Tier;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double peak_rss_mib() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

// Buddy allocator over blocks of 1..64 devices (64 = 8 nodes of 8); a block of 2^k devices starts
// at a multiple of 2^k, so blocks of up to 8 lie within one node.
class Buddy {
 public:
  static constexpr int kOrders = 7;  // 1, 2, 4, ..., 64 devices
  explicit Buddy(int devices) {
    for (int first = 0; first + 64 <= devices; first += 64) free_[kOrders - 1].insert(first);
  }
  // The first device of a free block of 2^order devices, or -1.
  int alloc(int order) {
    int k = order;
    while (k < kOrders && free_[k].empty()) ++k;
    if (k == kOrders) return -1;
    int first = *free_[k].begin();
    free_[k].erase(free_[k].begin());
    while (k > order) {  // split, keeping the lower half
      --k;
      free_[k].insert(first + (1 << k));
    }
    return first;
  }
  void release(int first, int order) {
    while (order < kOrders - 1) {
      const int buddy = first ^ (1 << order);
      auto it = free_[order].find(buddy);
      if (it == free_[order].end()) break;
      free_[order].erase(it);
      first = std::min(first, buddy);
      ++order;
    }
    free_[order].insert(first);
  }

 private:
  std::array<std::set<int>, kOrders> free_;
};

struct Job {
  std::int64_t id = -1;
  Tier tier = Tier::kStandard;
  int order = 0;      // 2^order devices
  int splice = 1;
  int block = -1;     // first device held (or reserved for it by a preemption), -1 when none
  bool reserved = false;  // `block` was freed for this job by a preemption: place it there
  std::int64_t step = 0;
  int reports = 0;    // progress reports so far
  int planned = 0;    // progress reports before it completes
  std::int64_t beneficiary = -1;  // while being preempted: the job it makes room for
  int failures = 0;
};

class Generator {
 public:
  Generator(core::SchedulerCore& core, int devices, std::uint64_t seed)
      : core_(core), buddy_(devices), rng_(seed), devices_(devices) {}

  // Commits decisions until `records` are in the journal (fleet record included).
  void run(std::uint64_t records) {
    const int target_live = devices_ / 7;  // about the fleet's capacity at a mean of 7.4 devices
    while (committed_ + 1 < records) {
      if (live_ < target_live && uniform() < 0.05) {
        submit();
        continue;
      }
      if (active_.empty()) continue;
      const std::size_t pick = rng_() % active_.size();
      act(pick);
    }
  }

  std::array<std::uint64_t, spec::kNumEventKinds> counts{};
  std::uint64_t jobs() const { return jobs_.size(); }

 private:
  double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }

  void commit(const core::Decision& d) {
    bench::must(core_, d);
    ++counts[static_cast<std::size_t>(d.event)];
    ++committed_;
  }
  core::Decision decide(EventKind e, const Job& job, Origin origin) {
    core::Decision d = bench::job_decision(e, job.id, job.step);
    d.origin = origin;
    return d;
  }
  core::Decision place(EventKind e, const Job& job, int first) {
    core::Decision d = bench::placement(e, job.id, first, 1 << job.order, job.splice);
    d.origin = Origin::kPlanner;
    if (e == EventKind::kMigrate) d.step = job.step;
    return d;
  }
  JobState state(const Job& job) const { return core_.state(static_cast<int>(job.id)); }

  void submit() {
    static constexpr std::array<int, 7> kOrderWeights = {30, 15, 15, 25, 8, 5, 2};  // 1 .. 64
    int w = static_cast<int>(rng_() % 100), order = 0;
    while (w >= kOrderWeights[order]) w -= kOrderWeights[order++];
    const double t = uniform();
    Job job;
    job.id = core_.num_jobs();
    job.tier = t < 0.1 ? Tier::kPremium : t < 0.6 ? Tier::kStandard : Tier::kBasic;
    job.order = order;
    job.splice = uniform() < 0.3 ? 2 : 1;
    job.planned = 10 + static_cast<int>(rng_() % 60);
    const std::int64_t devs = 1 << order;
    auto d = bench::submit_decision(devs * job.splice, devs, devs,
                                    "job-" + std::to_string(job.id) + "-" +
                                        std::string(spec::tier_name(job.tier)),
                                    job.tier);
    d.origin = Origin::kOperator;
    commit(d);
    jobs_.push_back(job);
    active_.push_back(static_cast<std::size_t>(jobs_.size() - 1));
    ++live_;
  }

  void finish(std::size_t pick) {  // the job is terminal: out of the active set
    active_[pick] = active_.back();
    active_.pop_back();
    --live_;
  }

  void free_block(Job& job) {
    if (job.block >= 0) buddy_.release(job.block, job.order);
    job.block = -1;
  }

  // One step of the job at active_[pick].
  void act(std::size_t pick) {
    Job& job = jobs_[active_[pick]];
    switch (state(job)) {
      case JobState::kSubmitted: {
        const auto& c = core_.cluster();
        if (job.tier == Tier::kPremium &&
            c.premium_admitted.front() + (1 << job.order) > c.reserve()) {
          commit(decide(EventKind::kCancel, job, Origin::kOperator));
          return finish(pick);
        }
        return commit(decide(EventKind::kAdmit, job, Origin::kPlanner));
      }
      case JobState::kQueued: {
        if (job.block >= 0 && job.reserved) {  // freed for it by a preemption
          job.reserved = false;
          return commit(place(EventKind::kPlace, job, job.block));
        }
        if (job.block >= 0) return;  // waiting for its victim's checkpoint
        const int first = buddy_.alloc(job.order);
        if (first >= 0) {
          job.block = first;
          return commit(place(EventKind::kPlace, job, first));
        }
        if (job.tier == Tier::kPremium) return preempt_for(job);
        if (uniform() < 0.01) {  // gave up waiting
          commit(decide(EventKind::kCancel, job, Origin::kOperator));
          return finish(pick);
        }
        return;
      }
      case JobState::kPlaced:
        return commit(decide(EventKind::kStart, job, Origin::kRuntime));
      case JobState::kRunning: {
        if (job.reports >= job.planned) {
          commit(decide(EventKind::kComplete, job, Origin::kRuntime));
          free_block(job);
          return finish(pick);
        }
        const double r = uniform();
        if (r < 0.002) {  // migrate to another block of its size
          const int first = buddy_.alloc(job.order);
          if (first < 0) return;
          commit(place(EventKind::kMigrate, job, first));
          free_block(job);
          job.block = first;
          return;
        }
        if (r < 0.003) {  // a worker crashes: requeued from the checkpoint, or failed for good
          commit(decide(EventKind::kWorkerCrash, job, Origin::kRuntime));
          free_block(job);
          if (++job.failures > spec::kMaxRetries) return finish(pick);
          job.step = core_.cluster().jobs[static_cast<std::size_t>(job.id)].progress;
          return;
        }
        if (job.reports > 0 && job.reports % 10 == 0 && uniform() < 0.5) {
          ++job.reports;
          return commit(decide(EventKind::kCheckpoint, job, Origin::kRuntime));
        }
        ++job.reports;
        job.step += 1 + static_cast<std::int64_t>(rng_() % 100);
        core::Decision d = decide(EventKind::kProgress, job, Origin::kRuntime);
        d.gpu_ms = (1 << job.order) * 60000;
        return commit(d);
      }
      case JobState::kCheckpointing: {  // preempted: checkpoint done, devices to the beneficiary
        commit(decide(EventKind::kCheckpointDone, job, Origin::kRuntime));
        Job& ben = jobs_[static_cast<std::size_t>(job.beneficiary)];
        ben.block = job.block;
        ben.reserved = true;
        job.block = -1;
        job.beneficiary = -1;
        return;
      }
      case JobState::kSuspended: {
        const int first = buddy_.alloc(job.order);
        if (first < 0) return;
        job.block = first;
        return commit(place(EventKind::kResume, job, first));
      }
      case JobState::kMigrating:
      case JobState::kRestoring:
        return commit(decide(EventKind::kRestoreDone, job, Origin::kRuntime));
      default:
        return;
    }
  }

  // A running basic job of the premium job's size is preempted in its favour.
  void preempt_for(Job& ben) {
    for (int tries = 0; tries < 64 && !active_.empty(); ++tries) {
      Job& v = jobs_[active_[rng_() % active_.size()]];
      if (v.tier != Tier::kBasic || v.order != ben.order || state(v) != JobState::kRunning)
        continue;
      core::Decision d = decide(EventKind::kPreempt, v, Origin::kPlanner);
      d.beneficiary = ben.id;
      commit(d);
      v.beneficiary = ben.id;
      ben.block = v.block;  // promised; handed over at CheckpointDone
      ben.reserved = false;
      return;
    }
  }

  core::SchedulerCore& core_;
  Buddy buddy_;
  std::mt19937_64 rng_;
  int devices_;
  std::vector<Job> jobs_;
  std::vector<std::size_t> active_;  // indices into jobs_ of the jobs not finished
  int live_ = 0;
  std::uint64_t committed_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t records = 10000000;
  int devices = 100000;
  std::string path = "/tmp/orrery_replay_bench_" + std::to_string(::getpid()) + ".journal";
  std::string fsync = "never";
  std::vector<std::uint64_t> full_every = {0, checker::kDefaultFullEvery};
  bool keep = false;
  bool write = true;
  bool pipelined = true;
  std::uint64_t check_every = 1;
  std::uint64_t seed = 42;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "replay_bench: %s needs a value\n", a.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--records") records = std::stoull(next());
    else if (a == "--devices") devices = std::stoi(next());
    else if (a == "--journal") path = next();
    else if (a == "--fsync") fsync = next();
    else if (a == "--seed") seed = std::stoull(next());
    else if (a == "--keep") keep = true;
    else if (a == "--one-thread") pipelined = false;
    else if (a == "--check-every") check_every = std::stoull(next());
    else if (a == "--replay") {
      path = next();
      write = false;
      keep = true;
    }
    else if (a == "--full-every") {
      full_every.clear();
      std::string list = next();
      for (std::size_t p = 0; p <= list.size();) {
        auto q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        full_every.push_back(std::stoull(list.substr(p, q - p)));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: replay_bench [--records N] [--devices N] [--journal PATH] "
                   "[--fsync never|group] [--full-every N[,N...]] [--keep] [--seed N] "
                "[--check-every K] [--one-thread]\n"
                "       replay_bench --replay PATH [--full-every N[,N...]] [--check-every K] "
                "[--one-thread]\n");
      return 1;
    }
  }
  if (devices < 64 || (fsync != "never" && fsync != "group")) {
    std::fprintf(stderr, "replay_bench: need --devices >= 64 and --fsync never|group\n");
    return 1;
  }
  if (write && std::filesystem::exists(path)) {
    std::fprintf(stderr, "replay_bench: %s exists; not overwriting it\n", path.c_str());
    return 1;
  }

  // 1. Write the journal through the real core.
  std::uint64_t jobs = 0;
  if (write) {
    core::JournalOptions opts;
    opts.fsync = fsync == "group" ? core::FsyncPolicy::kGroup : core::FsyncPolicy::kNever;
    opts.group_records = 1024;
    auto journal = core::JournalWriter::open(path, opts);
    if (!journal) {
      std::fprintf(stderr, "replay_bench: %s\n", journal.reason().c_str());
      return 1;
    }
    core::ManualClock clock(1);
    auto core = bench::up_core(
                              bench::fleet_of_devices(devices, devices * 3 / 10), clock,
                              journal->get());
    const auto t0 = Clock::now();
    Generator gen(*core, devices, seed);
    gen.run(records);
    if (auto st = (*journal)->flush(); !st) {
      std::fprintf(stderr, "replay_bench: %s\n", st.reason().c_str());
      return 1;
    }
    const double secs = since(t0);
    jobs = gen.jobs();
    std::printf("wrote %s: %llu records, %.1f MiB, %llu jobs on %d devices, in %.1f s (%.0f "
                "records/s, fsync %s)\n",
                path.c_str(), static_cast<unsigned long long>((*journal)->records()),
                std::filesystem::file_size(path) / 1048576.0,
                static_cast<unsigned long long>(jobs), devices, secs,
                static_cast<double>((*journal)->records()) / secs, fsync.c_str());
    std::printf("  decisions:");
    for (int e = 0; e < spec::kNumEventKinds; ++e)
      if (gen.counts[static_cast<std::size_t>(e)])
        std::printf(" %s %llu", std::string(spec::event_name(static_cast<EventKind>(e))).c_str(),
                    static_cast<unsigned long long>(gen.counts[static_cast<std::size_t>(e)]));
    std::printf("\n");
    std::printf("  peak RSS after writing: %.0f MiB\n\n", peak_rss_mib());
  }

  // 2. Replay it, once per --full-every value.
  int rc = 0;
  for (auto n : full_every) {
    checker::ReplayOptions opts;
    opts.full_every = n;
    opts.pipelined = pipelined;
    opts.check_every = check_every;
    auto r = checker::replay_journal(path, opts);
    const double rate = static_cast<double>(r.records) / r.seconds;
    std::printf("replay --full-every %llu --check-every %llu%s: %s, %llu records in %.2f s = %.0f "
                "records/s; %llu decisions checked incrementally, %llu invariant checks; %llu full "
                "checks, %.3f s in them (%.1f ms each); peak RSS %.0f MiB\n",
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(check_every),
                pipelined ? "" : " (one thread)",
                r.ok ? "OK" : "FAILED", static_cast<unsigned long long>(r.records), r.seconds,
                rate, static_cast<unsigned long long>(r.checked_decisions),
                static_cast<unsigned long long>(r.checks),
                static_cast<unsigned long long>(r.full_checks), r.full_check_seconds,
                r.full_checks ? 1000.0 * r.full_check_seconds / r.full_checks : 0.0,
                peak_rss_mib());
    if (!r.ok) {
      rc = 2;
      if (!r.error.empty()) std::printf("  error: %s\n", r.error.c_str());
      for (std::size_t i = 0; i < r.violations.size() && i < 10; ++i)
        std::printf("  violation: %s\n", r.violations[i].c_str());
    }
  }
  if (!keep) {
    std::filesystem::remove(path);
    std::printf("\nremoved %s\n", path.c_str());
  }
  return rc;
}
