// A RapidCheck property over a real local cluster (orrery-core serve and three orrery-node agents with
// their proxies and workers, as processes on loopback): random sequences of preempt, migrate,
// resize, node-agent kill (SIGKILL of the whole machine, then a restart), core kill (SIGKILL, then a
// restart on the same address), core kill *during* a preemption's cut or a migration's cut (right
// after the decision is durable, while the nodes take the cut: the job is Checkpointing or
// Migrating in the journal), submissions and pauses, applied while the jobs train. After each
// sequence:
//  - the core still serves and knows exactly the jobs it accepted, no more, no fewer;
//  - every job ends Completed exactly once with final weights bit-identical to the workload's
//    uninterrupted reference run, or Failed only after more of its own failures (WorkerCrash)
//    than the spec's kMaxRetries allows, or more platform faults (NodeLoss: node kills and
//    restarts) than kMaxPlatformFaults;
//  - the core's journal replays clean through `orrery-check replay` (every decision re-checked
//    against the spec's guards and invariants).
// Every third sequence (the first included) also runs examples/pytorch/train_orrery.py as one of its
// initial jobs (world 2 on 1..2 devices, a small model): it must end with every rank's printed
// digest, and the completion note's, equal to the same job's uninterrupted run in this process
// (run once, alone, before the first such sequence). Skipped, saying so, when /usr/bin/python3
// cannot import torch or the orrery Python package is not built beside the binaries.
// ORRERY_CHAOS_CASES sets the number of sequences (default 6; each takes 5-40 s). RC_PARAMS is
// passed on to RapidCheck (e.g. RC_PARAMS="seed=42"); shrinking is off unless RC_PARAMS asks for it
// (noshrink=0), since every step of a shrink replays a whole cluster run. A failing case prints
// "FAILED at line N: <check>" and keeps its directory; RapidCheck then runs it once more, as the
// next case number, to print its counterexample (that rerun may pass: timing differs).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdio>
#include <iostream>
#include <set>

#include "spec/vocabulary.h"
#include "tests/service/local_cluster.h"

namespace orrery::testing {
namespace {

namespace fs = std::filesystem;

const std::string kBin = ORRERY_BIN_DIR;      // orrery-node, orrery-proxy, orrery-train-mlp
const std::string kCore = ORRERY_CORE_BIN;    // orrery-core
const std::string kCheck = ORRERY_CHECK_BIN;  // orrery-check
constexpr int kHeartbeatTimeoutMs = 1000;
constexpr int kSteps = 2000;  // per initial job: several seconds of training
constexpr int kNodes = 3;     // of 2 devices each
constexpr int kTorchSteps = 1500;  // the PyTorch job's: 10-30 s on the host backend
constexpr int kTorchEvery = 150;
// The repository (examples/pytorch), from this file's path.
const std::string kSource = fs::path(__FILE__).parent_path().parent_path().parent_path().string();

enum class Act { kPreempt, kMigrate, kResize, kKillAgent, kKillCore, kSubmit, kPause, kKillCoreInCut, kKillCoreInMigration };

struct Action {
  Act act = Act::kPause;
  int job = 0;      // index among the jobs submitted so far (modulo their number)
  int node = 0;     // 1 or 2; 0: let the core choose (migrate)
  int devices = 1;  // resize target
  int ms = 0;       // pause, or how long a killed process stays down
  int tier = 1;     // of a submitted job
  bool for_new = false;  // preempt/resize: for a job of `tier` submitted just before (it waits)
  bool wide = false;     // ... a gang as large as the fleet (it keeps waiting)
};

// `job` and `node` as resolved against the cluster (a job id, a node number or 0).
std::string describe(const Action& a, int job, int node) {
  std::string j = "job " + std::to_string(job), n = "n" + std::to_string(node);
  std::string for_new = a.for_new ? " for a new job of tier " + std::to_string(a.tier % 3) : "";
  switch (a.act) {
    case Act::kPreempt: return "preempt " + j + for_new;
    case Act::kMigrate: return "migrate " + j + (node ? " to " + n : "");
    case Act::kResize: return "resize " + j + " to " + std::to_string(a.devices) + for_new;
    case Act::kKillAgent: return "kill -9 " + n + ", restart after " + std::to_string(a.ms) + " ms";
    case Act::kKillCore: return "kill -9 core, restart after " + std::to_string(a.ms) + " ms";
    case Act::kSubmit: return "submit (tier " + std::to_string(a.tier % 3) + ")";
    case Act::kPause: return "pause " + std::to_string(a.ms) + " ms";
    case Act::kKillCoreInCut:
      return "preempt " + j + for_new + ", kill -9 core during the cut, restart after " + std::to_string(a.ms) + " ms";
    case Act::kKillCoreInMigration:
      return "migrate " + j + (node ? " to " + n : "") + ", kill -9 core during the cut, restart after " +
             std::to_string(a.ms) + " ms";
  }
  return "?";
}

rc::Gen<Action> gen_action() {
  using rc::gen::inRange;
  auto kind = rc::gen::weightedElement<Act>({{4, Act::kPreempt},
                                             {4, Act::kMigrate},
                                             {4, Act::kResize},
                                             {2, Act::kKillAgent},
                                             {2, Act::kKillCore},
                                             {3, Act::kSubmit},
                                             {4, Act::kPause},
                                             {2, Act::kKillCoreInCut},
                                             {2, Act::kKillCoreInMigration}});
  return rc::gen::apply(
      [](Act act, int job, int node, int devices, int ms, int tier, bool for_new) {
        return Action{act, job, node, devices, ms, tier, for_new};
      },
      kind, inRange(0, 8), inRange(0, kNodes + 1), inRange(1, 3), inRange(0, 2500), inRange(0, 3),
      rc::gen::arbitrary<bool>());
}

// The digests of the reference runs, computed once per (world, steps).
std::string reference(LocalCluster& c, int world, int steps) {
  static std::map<std::pair<int, int>, std::string> memo;
  auto key = std::make_pair(world, steps);
  if (!memo.count(key)) memo[key] = c.reference_digest(world, steps);
  return memo[key];
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

int case_number = 0;
int kills_in_flight = 0;  // core kills that found the job's cut in flight (Checkpointing, Migrating)

// "" when PyTorch jobs can run here, else why not (said once).
const std::string& torch_missing() {
  static const std::string why = [] {
    if (!fs::exists(kBin + "/../python/orrery/torch.py"))
      return std::string("the orrery Python package is not built in ") + kBin + "/../python";
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
      return std::string("/usr/bin/python3 cannot import torch");
    if (!fs::exists(kSource + "/examples/pytorch/train_orrery.py"))
      return "no " + kSource + "/examples/pytorch/train_orrery.py";
    return std::string();
  }();
  return why;
}

// The PyTorch job's uninterrupted digest, run once alone (every rank printing the same) on a
// cluster of its own (one node of 2 devices) in `dir`; "" when it did not complete.
std::string torch_reference(const fs::path& dir) {
  static std::string memo;
  if (!memo.empty()) return memo;
  LocalCluster c(kBin, kCore, dir, 1, kHeartbeatTimeoutMs);
  c.remove_dir_when_done();
  if (c.start_core() != "") return "";
  c.start_node("n1");
  if (!eventually(10000, [&] { return c.node_up("n1"); })) return "";
  auto id = c.submit(LocalCluster::pytorch_job("torch-reference", kSource, kTorchSteps, kTorchEvery));
  if (!id.ok()) return "";
  if (!eventually(240000, [&] {
        auto j = c.job(*id);
        return j && (j->state == spec::JobState::kCompleted || j->state == spec::JobState::kFailed);
      }))
    return "";
  auto j = c.job(*id);
  if (!j || j->state != spec::JobState::kCompleted || j->epoch != 1) return "";
  std::string d = LocalCluster::digest_of(j->note);
  for (int r = 0; r < 2; ++r)
    if (LocalCluster::printed_digest(c.rank_output(*id, r)) != d) return "";
  std::printf("  PyTorch reference (job %d, uninterrupted): digest %s\n", *id, d.c_str());
  memo = d;
  return memo;
}

// RC_ASSERT that prints what failed at once, in the case's own output, and where the case's logs
// and journal are kept (`dir`, the case's directory, is not removed after a failure). RapidCheck
// runs a failing case once more to print its counterexample and reports that rerun's result, so a
// fault that the rerun does not meet would otherwise leave only "no exceptions thrown".
#define CHAOS_REQUIRE(cond)                                                                   \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::printf("  FAILED at line %d: %s (logs and journal kept in %s)\n", __LINE__, #cond, \
                  dir.c_str());                                                               \
      std::fflush(stdout);                                                                    \
      RC_FAIL(#cond);                                                                         \
    }                                                                                         \
  } while (0)

RC_GTEST_PROP(Chaos, RandomDisruptionsKeepEveryJobAndItsBitIdenticalResult, ()) {
  // At full size from the first case: RapidCheck scales inRange by the size, which grows with the
  // case number, and a chaos run is too costly to spend its first cases on tiny values.
  const auto base_actions = *rc::gen::resize(rc::kNominalSize, rc::gen::mapcat(rc::gen::inRange(3, 10), [](int n) {
    return rc::gen::container<std::vector<Action>>(static_cast<std::size_t>(n), gen_action());
  }));
  // Every sequence kills the core once during a preemption's cut and once during a migration's.
  auto actions = base_actions;
  for (Act must : {Act::kKillCoreInCut, Act::kKillCoreInMigration}) {
    bool has = false;
    for (const auto& a : actions) has = has || a.act == must;
    if (has) continue;
    auto extra = *gen_action();
    extra.act = must;
    if (must == Act::kKillCoreInCut) {
      // The basic job (the second one), preempted for a standard gang as large as the fleet: it
      // waits whatever else runs, so the preemption is allowed whenever the basic job runs.
      extra.job = 1;
      extra.for_new = true;
      extra.tier = 1;
      extra.wide = true;
    } else {
      extra.node = 0;  // the core chooses where: a migration whenever there is room
    }
    const auto at = *rc::gen::inRange<std::size_t>(0, actions.size() + 1);
    actions.insert(actions.begin() + static_cast<long>(at), extra);
  }
  const int initial = *rc::gen::resize(rc::kNominalSize, rc::gen::inRange(2, 4));  // jobs before the actions
  const char* tmp = std::getenv("TMPDIR");
  fs::path dir = fs::path(tmp ? tmp : "/tmp") /
                 ("orrery-chaos-" + std::to_string(::getpid()) + "-" + std::to_string(case_number++));
  std::printf("case %d (%s): %d jobs, then %zu actions\n", case_number - 1, dir.c_str(), initial,
              actions.size());

  LocalCluster c(kBin, kCore, dir, kNodes, kHeartbeatTimeoutMs);
  auto up = c.start_core();
  CHAOS_REQUIRE(up == "");
  for (int n = 1; n <= kNodes; ++n) c.start_node("n" + std::to_string(n));
  CHAOS_REQUIRE(eventually(10000, [&] {
    for (int n = 1; n <= kNodes; ++n)
      if (!c.node_up("n" + std::to_string(n))) return false;
    return true;
  }));

  // The PyTorch job's uninterrupted digest, before any chaos (every third case).
  const bool with_torch = (case_number - 1) % 3 == 0 && torch_missing().empty();
  if ((case_number - 1) % 3 == 0 && !torch_missing().empty())
    std::printf("  no PyTorch job in this case: %s\n", torch_missing().c_str());
  std::string torch_digest;
  if (with_torch) {
    torch_digest = torch_reference(fs::path(dir.string() + "-torch-reference"));
    CHAOS_REQUIRE(!torch_digest.empty());
  }

  // What was accepted: id -> (world, steps).
  std::map<int, std::pair<int, int>> accepted;
  std::set<int> torch_jobs;
  auto submit = [&](service::JobSpec s) {
    auto id = c.submit(s);
    if (!id.ok()) std::printf("    submit refused: %s\n", id.reason().c_str());
    CHAOS_REQUIRE(id.ok());
    CHAOS_REQUIRE(accepted.count(*id) == 0u);  // a fresh id for every accepted submission
    accepted[*id] = {static_cast<int>(s.world), static_cast<int>(s.steps)};
    return *id;
  };
  // Two or three jobs of world 2 to start with: one node left free (room to migrate to), or the
  // fleet full (any submission waits, so preemptions and shrinks find a beneficiary).
  for (int i = 0; i < initial; ++i) {
    // Slower steps, same result: time to disrupt them.
    auto s = LocalCluster::mlp_job(std::string(1, static_cast<char>('a' + i)), kSteps, 200,
                                   {"--step-delay-us=1500"});
    s.tier = i == 1 ? spec::Tier::kBasic : spec::Tier::kStandard;
    submit(s);
  }
  if (with_torch) {
    auto s = LocalCluster::pytorch_job("torch", kSource, kTorchSteps, kTorchEvery);
    s.tier = spec::Tier::kStandard;
    torch_jobs.insert(submit(s));
  }
  const int first = accepted.begin()->first;
  CHAOS_REQUIRE(eventually(10000, [&] { return c.job_in(first, spec::JobState::kRunning); }));

  int submitted = 0;
  for (const auto& act : actions) {
    std::vector<int> ids;
    for (auto& [id, _] : accepted) ids.push_back(id);
    int job = ids[static_cast<std::size_t>(act.job) % ids.size()];
    // Kills pick one of the nodes; a migration may also leave the target to the core (0).
    int node_no = act.act == Act::kKillAgent ? 1 + act.node % kNodes : act.node;
    std::string node = "n" + std::to_string(node_no);
    std::printf("  %s\n", describe(act, job, node_no).c_str());
    Status st;
    // A request refused while the job's checkpoint is being taken is retried, as a client would.
    auto request = [&](auto call) {
      for (int tries = 0; tries < 40; ++tries) {
        st = c.with_client(call);
        if (st.ok() || st.reason().find("retry shortly") == std::string::npos) return;
        sleep_ms(50);
      }
    };
    int beneficiary = -1;
    if (act.for_new && (act.act == Act::kPreempt || act.act == Act::kResize || act.act == Act::kKillCoreInCut)) {
      auto s = LocalCluster::mlp_job("waiting" + std::to_string(submitted++), 300, 100);
      s.tier = static_cast<spec::Tier>(act.tier % 3);
      s.min_devices = 2;  // a gang of 2: on a busy fleet it waits
      if (act.wide) s.world = s.min_devices = s.max_devices = 2 * kNodes;
      beneficiary = submit(s);
      // Admitted first (a Submitted job is not yet waiting for devices).
      eventually(3000, [&] {
        auto j = c.job(beneficiary);
        return j && j->state != spec::JobState::kSubmitted;
      });
    }
    switch (act.act) {
      case Act::kPreempt:
        request([job, beneficiary](service::ClientApi& api) { return api.preempt(job, beneficiary); });
        break;
      case Act::kMigrate: {
        std::optional<std::string> to;
        if (node_no) to = node;
        request([job, to](service::ClientApi& api) { return api.migrate(job, to); });
        break;
      }
      case Act::kResize:
        request([job, d = act.devices, beneficiary](service::ClientApi& api) {
          return api.resize(job, d, beneficiary);
        });
        break;
      case Act::kKillAgent:
        c.kill_node(node);
        sleep_ms(act.ms);
        c.start_node(node);
        break;
      case Act::kKillCore:
        c.kill_core();
        sleep_ms(act.ms);
        CHAOS_REQUIRE(c.start_core(c.port()) == "");
        break;
      case Act::kSubmit: {
        auto s = LocalCluster::mlp_job("extra" + std::to_string(submitted++), 300, 100);
        s.tier = static_cast<spec::Tier>(act.tier % 3);
        s.world = 1 + act.devices % 2;
        s.min_devices = s.max_devices = s.world;
        submit(s);
        break;
      }
      case Act::kPause: sleep_ms(act.ms); break;
      case Act::kKillCoreInCut:
      case Act::kKillCoreInMigration: {
        // The request returns once its decision is durable; the nodes take the cut after that
        // (shards of every rank to the core's store): kill the core at once, in the middle of it.
        if (act.act == Act::kKillCoreInCut) {
          request([job, beneficiary](service::ClientApi& api) { return api.preempt(job, beneficiary); });
        } else {
          std::optional<std::string> to;
          if (node_no) to = node;
          request([job, to](service::ClientApi& api) { return api.migrate(job, to); });
        }
        if (st.ok()) {
          auto j = c.job(job);
          const bool in_flight = j && (j->state == spec::JobState::kCheckpointing ||
                                       j->state == spec::JobState::kMigrating);
          c.kill_core();
          if (in_flight) ++kills_in_flight;
          std::printf("    core killed %s\n", in_flight ? "with the cut in flight" : "after the cut");
          sleep_ms(act.ms);
          CHAOS_REQUIRE(c.start_core(c.port()) == "");
        }
        break;
      }
    }
    // A refused request says why; either way the core keeps serving.
    if (!st.ok()) {
      CHAOS_REQUIRE(!st.reason().empty());
      std::printf("    refused: %s\n", st.reason().c_str());
    }
    if (!c.core().running())
      std::printf("    the core exited; its log:\n%s\n", c.core().output().c_str());
    CHAOS_REQUIRE(c.core().running());
    sleep_ms(100);
  }

  // Every machine is back; all accepted work must finish.
  auto finished = [&] {
    auto js = c.jobs();
    if (!js) return false;
    for (const auto& j : *js)
      if (j.state != spec::JobState::kCompleted && j.state != spec::JobState::kFailed) return false;
    return true;
  };
  bool done = eventually(150000, finished);
  auto js = c.jobs();
  CHAOS_REQUIRE(js.has_value());
  if (!done) {
    for (const auto& j : *js)
      std::printf("  job %d %s: %s\n", j.job, std::string(spec::state_name(j.state)).c_str(), j.note.c_str());
    std::printf("core log: %s\n", c.core().output().substr(0, 4000).c_str());
  }
  CHAOS_REQUIRE(done);

  // Exactly the accepted jobs, each ending once, with the reference result.
  std::set<int> known;
  for (const auto& j : *js) known.insert(j.job);
  std::set<int> want;
  for (auto& [id, _] : accepted) want.insert(id);
  if (known != want) {
    std::string k, w;
    for (int id : known) k += " " + std::to_string(id);
    for (int id : want) w += " " + std::to_string(id);
    std::printf("  the core knows jobs%s; accepted were%s\n", k.c_str(), w.c_str());
  }
  CHAOS_REQUIRE(known == want);
  std::string all;  // every job's timeline
  for (const auto& j : *js) {
    auto tl = c.timeline(j.job);
    all += tl;
    auto [world, steps] = accepted[j.job];
    if (j.state == spec::JobState::kCompleted && torch_jobs.count(j.job)) {
      // Every rank's printed digest and the note's: the uninterrupted run's.
      if (count_of(tl, "-> Completed") != 1 || LocalCluster::digest_of(j.note) != torch_digest)
        std::printf("  PyTorch job %d: note '%s', uninterrupted digest %s; its timeline:\n%s", j.job,
                    j.note.c_str(), torch_digest.c_str(), tl.c_str());
      CHAOS_REQUIRE(count_of(tl, "-> Completed") == 1);
      CHAOS_REQUIRE(LocalCluster::digest_of(j.note) == torch_digest);
      for (int r = 0; r < world; ++r) {
        const auto printed = LocalCluster::printed_digest(c.rank_output(j.job, r));
        if (printed != torch_digest)
          std::printf("  PyTorch job %d rank %d: digest %s, uninterrupted %s\n", j.job, r,
                      printed.c_str(), torch_digest.c_str());
        CHAOS_REQUIRE(printed == torch_digest);
      }
      std::printf("  PyTorch job %d: epoch %lld, digest %s on every rank\n", j.job,
                  static_cast<long long>(j.epoch), torch_digest.c_str());
    } else if (j.state == spec::JobState::kCompleted) {
      const auto got = LocalCluster::digest_of(j.note), uninterrupted = reference(c, world, steps);
      if (count_of(tl, "-> Completed") != 1 || got != uninterrupted)
        std::printf("  job %d: digest %s, uninterrupted %s; its timeline:\n%s", j.job, got.c_str(),
                    uninterrupted.c_str(), tl.c_str());
      CHAOS_REQUIRE(count_of(tl, "-> Completed") == 1);
      CHAOS_REQUIRE(got == uninterrupted);
    } else {
      // Failed for good only after a budget was used up: the job's own failures past its
      // retries, or platform faults (node kills, restarts) past the platform cap.
      const int own = count_of(tl, "WorkerCrash");
      const int platform = count_of(tl, "NodeLoss");
      std::printf("  job %d failed after %d own failures, %d platform faults: %s\n", j.job, own,
                  platform, j.note.c_str());
      CHAOS_REQUIRE(own > spec::kMaxRetries || platform > spec::kMaxPlatformFaults);
    }
  }

  // The journal passes the checker.
  c.kill_core(SIGTERM);
  std::string cmd = kCheck + " replay " + (dir / "data" / "journal").string() + " > " +
                    (dir / "replay.txt").string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  if (rc != 0) std::printf("%s\n", read_file((dir / "replay.txt").string()).c_str());
  CHAOS_REQUIRE(rc == 0);
  std::printf("  %zu jobs, all accounted for (%d preemptions, %d migrations, %d resizes, %d aborts, "
              "%d crashes, %d node losses; %d core kills so far with a cut in flight); journal "
              "replayed clean\n",
              accepted.size(), count_of(all, "-> Suspended"), count_of(all, "-> Migrating"),
              count_of(all, ": Resize"), count_of(all, ": Abort"), count_of(all, "WorkerCrash"),
              count_of(all, "NodeLoss"), kills_in_flight);
  std::fflush(stdout);
  c.remove_dir_when_done();
}

}  // namespace
}  // namespace orrery::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  long cases = 6;
  if (const char* e = std::getenv("ORRERY_CHAOS_CASES")) {
    char* end = nullptr;
    cases = std::strtol(e, &end, 10);
    if (end == e || *end != '\0' || cases < 1) {
      std::fprintf(stderr, "ORRERY_CHAOS_CASES must be a positive integer, got '%s'\n", e);
      return 2;
    }
  }
  // RapidCheck reads RC_PARAMS once, on first use: complete it before any property runs.
  std::string params = std::getenv("RC_PARAMS") ? std::getenv("RC_PARAMS") : "";
  if (params.find("max_success") == std::string::npos) params += " max_success=" + std::to_string(cases);
  if (params.find("noshrink") == std::string::npos) params += " noshrink=1";
  setenv("RC_PARAMS", params.c_str(), 1);
  return RUN_ALL_TESTS();
}
