// Stateful property test of the scheduler core: random command sequences (submit, admit, place,
// run, preempt, migrate, resize, fail, cancel, ...) are driven through the real SchedulerCore and
// an independent reference model (proptests/reference_model.h). Each decision claims an origin:
// mostly the one that decides its event in practice, sometimes an operator, and about one in twenty
// an origin that may not decide it. After every decision:
//   - the core accepts exactly what the model accepts, and reports the same row source/target,
//     sequence number and time; it rejects for the origin exactly when the model does (the origin
//     is checked before the job and the parameters);
//   - every job's state, devices, splice, epoch, progress, checkpoint, failures and attained
//     service agree with the model; a rejected decision leaves the cluster untouched;
//   - every state invariant holds on core.cluster(), and every step invariant on
//     (state before, job, params_for(decision), state after).
//
// ORRERY_PROPTEST_SEQUENCES sets the number of sequences (default 10000); RC_PARAMS is passed on
// to RapidCheck (e.g. RC_PARAMS="seed=42" or a "reproduce=..." string from a failure).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "core/clock.h"
#include "core/decision.h"
#include "core/fleet.h"
#include "core/row_desc.h"
#include "core/scheduler_core.h"
#include "proptests/reference_model.h"
#include "spec/invariants.h"

namespace orrery::proptest {
namespace {

using spec::EventKind;
using spec::JobState;
using Cluster = spec::ClusterVars<spec::Concrete>;

constexpr std::int64_t kStartMs = 1'000;

// ---- Statistics over the whole run ------------------------------------------------------------

struct Stats {
  std::uint64_t sequences = 0;
  std::uint64_t decisions = 0;
  std::array<std::uint64_t, spec::kNumEventKinds> committed{};
  std::array<std::uint64_t, spec::kNumEventKinds> rejected{};
  std::array<std::uint64_t, spec::kNumEventKinds> sequences_with{};  // >= 1 committed
  std::map<int, std::uint64_t> rows;                                 // lifecycle row -> commits
  std::map<std::string, std::uint64_t> reject_reasons;               // "event: model's reason"
  std::array<std::uint64_t, spec::kNumOrigins> origin_committed{};
  std::array<std::uint64_t, spec::kNumOrigins> origin_rejected{};
  std::array<std::uint64_t, spec::kNumOrigins> origin_wrong{};  // rejected for the origin
  std::uint64_t unknown_job_rejected = 0;  // right origin, nonexistent job
  std::uint64_t clock_advances = 0;
};
Stats g_stats;

// ---- The system under test ----------------------------------------------------------------------

struct Sut {
  core::ManualClock clock{kStartMs};
  std::unique_ptr<core::SchedulerCore> core;
  std::array<std::uint64_t, spec::kNumEventKinds> committed{};  // this sequence

  explicit Sut(int fleet_index) {
    auto fleet = core::Fleet::parse(test_fleets().at(fleet_index).to_text());
    if (!fleet) throw std::runtime_error("test fleet does not parse: " + fleet.reason());
    auto c = core::SchedulerCore::create(std::move(*fleet), clock, nullptr);
    if (!c) throw std::runtime_error("cannot create core: " + c.reason());
    core = std::move(*c);
  }
};

// ---- Checks ---------------------------------------------------------------------------------

std::string show_cluster(const Cluster& c) {
  std::ostringstream o;
  for (int j = 0; j < c.num_jobs(); ++j) {
    const auto& job = c.jobs[j];
    o << "    core job " << j << ": " << spec::state_name(static_cast<JobState>(job.state))
      << " devices=" << job.devices << " {";
    bool first = true;
    for (int d = 0; d < c.num_devices(); ++d)
      if (c.hold[j][d] != 0) {
        o << (first ? "" : ",") << d << "@" << c.hold[j][d];
        first = false;
      }
    o << "} x" << job.splice << " epoch=" << job.epoch << " progress=" << job.progress
      << " ckpt=" << job.ckpt << " failures=" << job.failures << " attained=" << job.attained
      << "\n";
  }
  return o.str();
}

std::string show_model(const RefModel& m) {
  std::ostringstream o;
  for (int j = 0; j < m.num_jobs(); ++j)
    o << "    model job " << j << ": " << describe_job(m.jobs[j]) << "\n";
  return o.str();
}

bool same_cluster(const Cluster& a, const Cluster& b) {
  if (a.num_jobs() != b.num_jobs() || a.hold != b.hold) return false;
  constexpr auto fields = spec::job_fields<spec::Concrete>();
  for (int j = 0; j < a.num_jobs(); ++j)
    for (const auto& [name, member] : fields)
      if (a.jobs[j].*member != b.jobs[j].*member) return false;
  return true;
}

// The fleet the core parsed has the layout the model describes.
void check_fleet(const RefModel& m, const core::SchedulerCore& core) {
  const auto& f = core.fleet();
  RC_ASSERT(static_cast<int>(f.devices.size()) == m.num_devices());
  RC_ASSERT(static_cast<int>(f.nodes.size()) == m.num_nodes());
  RC_ASSERT(f.premium_reserve == m.reserve);
  for (int d = 0; d < m.num_devices(); ++d) {
    RC_ASSERT(f.devices[d].node == m.dev_node[d]);
    RC_ASSERT(f.device_types[f.devices[d].type] == m.type_names[m.dev_type[d]]);
  }
  for (int n = 0; n < m.num_nodes(); ++n) RC_ASSERT(f.nodes[n].host_mem_mib == m.host_mem[n]);
}

void check_matches_model(const RefModel& m, const core::SchedulerCore& core,
                         const std::string& after) {
  const Cluster& c = core.cluster();
  std::ostringstream bad;
  if (c.num_jobs() != m.num_jobs() || core.num_jobs() != m.num_jobs())
    bad << "job count: core " << c.num_jobs() << ", model " << m.num_jobs() << "\n";
  if (core.committed() != m.committed || core.rejected() != m.rejected)
    bad << "counters: core committed/rejected " << core.committed() << "/" << core.rejected()
        << ", model " << m.committed << "/" << m.rejected << "\n";
  for (int j = 0; j < std::min(c.num_jobs(), m.num_jobs()); ++j) {
    const RefJob& r = m.jobs[j];
    const auto& k = c.jobs[j];
    auto field = [&](const char* name, std::int64_t core_v, std::int64_t model_v) {
      if (core_v != model_v)
        bad << "job " << j << " " << name << ": core " << core_v << ", model " << model_v << "\n";
    };
    field("machine state", static_cast<std::int64_t>(core.state(j)),
          static_cast<std::int64_t>(r.state));
    field("cluster state", k.state, static_cast<std::int64_t>(r.state));
    field("tier", k.tier, r.tier);
    field("dtype", k.dtype, r.dtype);
    field("world", k.world, r.world);
    field("min_dev", k.min_dev, r.min_dev);
    field("max_dev", k.max_dev, r.max_dev);
    field("mem", k.mem, r.mem);
    field("devices", k.devices, static_cast<std::int64_t>(r.devices.size()));
    field("splice", k.splice, r.splice);
    field("epoch", k.epoch, r.epoch);
    field("progress", k.progress, r.progress);
    field("ckpt", k.ckpt, r.ckpt);
    field("failures", k.failures, r.failures);
    field("attained", k.attained, r.attained);
    for (int d = 0; d < m.num_devices(); ++d)
      if ((c.hold[j][d] != 0) != (r.devices.count(d) != 0))
        bad << "job " << j << " device " << d << ": core hold " << c.hold[j][d] << ", model "
            << (r.devices.count(d) ? "holds" : "free") << "\n";
  }
  if (!bad.str().empty())
    RC_FAIL("core and reference model disagree after " + after + ":\n" + bad.str() +
            show_cluster(c) + show_model(m));
}

void check_state_invariants(const Cluster& c, const std::string& after) {
  spec::Concrete d;
  for (auto inv : spec::kAllInvariants)
    if (!spec::state_invariant(d, inv, c))
      RC_FAIL(std::string(spec::inv_id(inv)) + " (" + std::string(spec::inv_summary(inv)) +
              ") violated after " + after + "\n" + show_cluster(c));
}

void check_step_invariants(const Cluster& pre, int j, const spec::Params<spec::Concrete>& p,
                           const Cluster& post, const std::string& what) {
  spec::Concrete d;
  for (auto inv : spec::kAllInvariants) {
    if (!spec::has_step_part(inv)) continue;
    if (!spec::step_invariant(d, inv, pre, j, p, post))
      RC_FAIL(std::string(spec::inv_id(inv)) + " step part (" +
              std::string(spec::inv_summary(inv)) + ") violated by " + what + "\n  before:\n" +
              show_cluster(pre) + "  after:\n" + show_cluster(post));
  }
}

// "Preempt job 1 for job 2 [planner]": describe() leaves the origin out.
std::string show_decision(const core::Decision& d) {
  return d.describe() + " [" + std::string(spec::origin_name(d.origin)) + "]";
}

// Commits one decision to both the core and the model and checks everything.
void drive(RefModel& m, Sut& sut, const core::Decision& d) {
  auto& core = *sut.core;
  const Cluster pre = core.cluster();
  const int acting = d.event == EventKind::kSubmit ? pre.num_jobs() : static_cast<int>(d.job);
  auto params = core.params_for(d);  // before the commit: a Submit's job is the next free id
  const auto want = predict(m, d);
  const auto got = core.commit(d);
  const std::string what = show_decision(d);
  const auto ev = static_cast<std::size_t>(d.event);
  const auto origin = static_cast<std::size_t>(d.origin);
  ++g_stats.decisions;

  if (got.ok() != want.accepted) {
    RC_FAIL("core " + std::string(got.ok() ? "accepted" : "rejected") + " '" + what +
            "' but the model " + (want.accepted ? "accepts it" : "rejects it (" + want.why + ")") +
            (got.ok() ? std::string() : "\n  core says: " + got.reason()) + "\n" +
            show_cluster(pre) + show_model(m));
  }
  if (!got.ok()) {
    // The core names the origin rule ("a runtime may not decide Place ...") exactly when the model
    // rejects for the origin: the origin is checked first, before the job id and the parameters.
    const std::string origin_rule = "a " + std::string(spec::origin_name(d.origin)) +
                                    " may not decide " + std::string(spec::event_name(d.event));
    const bool core_origin = got.reason().find("may not decide") != std::string::npos;
    if (want.wrong_origin && got.reason().rfind(origin_rule, 0) != 0)
      RC_FAIL("the model rejects '" + what + "' for its origin, but the core rejects it for " +
              "another reason (the origin must be checked first)\n  core says: " + got.reason() +
              "\n" + show_cluster(pre));
    if (!want.wrong_origin && core_origin)
      RC_FAIL("the core rejects '" + what + "' for its origin, but the model allows that origin " +
              "and rejects it for: " + want.why + "\n  core says: " + got.reason() + "\n" +
              show_cluster(pre));
  }
  if (got.ok()) {
    ++g_stats.committed[ev];
    ++g_stats.origin_committed[origin];
    ++sut.committed[ev];
    ++g_stats.rows[got->row];
    RC_ASSERT(got->seq == m.committed);
    RC_ASSERT(got->time_ms == m.now_ms);
    RC_ASSERT(got->job == want.job);
    RC_ASSERT(got->from == want.from);
    RC_ASSERT(got->to == want.to);
  } else {
    ++g_stats.rejected[ev];
    ++g_stats.origin_rejected[origin];
    if (want.wrong_origin) ++g_stats.origin_wrong[origin];
    ++g_stats.reject_reasons[std::string(spec::event_name(d.event)) + ": " + want.why];
    if (!want.wrong_origin && d.event != EventKind::kSubmit &&
        (d.job < 0 || d.job >= pre.num_jobs()))
      ++g_stats.unknown_job_rejected;
    if (!same_cluster(pre, core.cluster()))
      RC_FAIL("rejected '" + what + "' changed the cluster (" + got.reason() + ")\n  before:\n" +
              show_cluster(pre) + "  after:\n" + show_cluster(core.cluster()));
  }

  check_matches_model(m, core, "'" + what + "'");
  check_state_invariants(core.cluster(), "'" + what + "'");

  if (got.ok()) {
    if (!params) RC_FAIL("committed '" + what + "' but params_for fails: " + params.reason());
    Cluster before = pre;
    if (d.event == EventKind::kSubmit) {  // the slot existed, in state New, before the Submit
      spec::add_job_slot(spec::Concrete{}, before);
    }
    check_step_invariants(before, acting, *params, core.cluster(), "'" + what + "'");
  }
}

// ---- Commands -------------------------------------------------------------------------------

using CmdBase = rc::state::Command<RefModel, Sut>;
using CmdPtr = std::shared_ptr<const CmdBase>;

// A command that is a sequence of decisions computed from the model state.
class DecisionsCmd : public CmdBase {
 public:
  virtual std::vector<core::Decision> decisions(const RefModel& m) const = 0;
  void apply(RefModel& m) const override {
    for (const auto& d : decisions(m)) predict(m, d);
  }
  void run(const RefModel& m0, Sut& sut) const override {
    RefModel m = m0;
    for (const auto& d : decisions(m0)) drive(m, sut, d);
  }
};

// A command that is one fixed decision. make<>() draws its origin once the event is known.
class OneDecision : public DecisionsCmd {
 public:
  std::vector<core::Decision> decisions(const RefModel&) const override { return {d_}; }
  void show(std::ostream& os) const override { os << show_decision(d_); }
  void draw_origin();

 protected:
  core::Decision d_;
};

// ---- Generation helpers (called inside RapidCheck's generation context) ----

// rc::gen::inRange scales its range with the generation size (small early in a run, and never
// the full range with max_size < 100): these draw from the whole range at every size, and still
// shrink towards `lo`.
template <class T>
rc::Gen<T> uniform_gen(T lo, T hi) {
  return rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
}
template <class T>
T uniform(T lo, T hi) {
  return *uniform_gen<T>(lo, hi);
}

bool in(JobState s, std::initializer_list<JobState> states) {
  return std::find(states.begin(), states.end(), s) != states.end();
}

// The origin that decides event `e` in practice (the generator's own table, for steering only):
// a planner for admission, placement, resizing and preemption, the runtime for its reports, an
// operator for Submit and Cancel (users go through one).
spec::Origin natural_origin(EventKind e) {
  switch (e) {
    case EventKind::kAdmit:
    case EventKind::kPlace:
    case EventKind::kResume:
    case EventKind::kMigrate:
    case EventKind::kResizeUp:
    case EventKind::kResizeDown:
    case EventKind::kPreempt:
      return spec::Origin::kPlanner;
    case EventKind::kSubmit:
    case EventKind::kCancel:
      return spec::Origin::kOperator;
    default:
      return spec::Origin::kRuntime;
  }
}

// The origin a decision claims: mostly its natural one, sometimes an operator (trusted with every
// event), and one time in twenty a wrong one (a runtime Place or Cancel, a planner NodeLoss or
// Complete, ...), which the core must reject before it looks at anything else. Shrinks towards
// the natural origin.
spec::Origin pick_origin(EventKind e) {
  const spec::Origin natural = natural_origin(e);
  const int roll = uniform(0, 100);
  if (roll < 80) return natural;
  if (roll < 95) return spec::Origin::kOperator;
  switch (natural) {
    case spec::Origin::kPlanner:
      return spec::Origin::kRuntime;
    case spec::Origin::kRuntime:
      return spec::Origin::kPlanner;
    case spec::Origin::kOperator:
      break;
  }
  return *rc::gen::element(spec::Origin::kPlanner, spec::Origin::kRuntime);
}

void OneDecision::draw_origin() { d_.origin = pick_origin(d_.event); }

// A target job: mostly one of `preferred` (where the event is legal or interesting), sometimes any,
// rarely one that does not exist.
std::int64_t pick_job(const RefModel& m, const std::vector<int>& preferred) {
  const int n = m.num_jobs();
  const int roll = uniform(0, 100);
  if (roll < 82 && !preferred.empty()) return *rc::gen::elementOf(preferred);
  if (roll < 97 && n > 0) return uniform(0, n);
  return *rc::gen::element<std::int64_t>(-1, n, n + 5, -1000);  // nonexistent
}

std::vector<int> jobs_where(const RefModel& m, const std::function<bool(int)>& pred) {
  std::vector<int> out;
  for (int j = 0; j < m.num_jobs(); ++j)
    if (pred(j)) out.push_back(j);
  return out;
}

std::vector<int> jobs_in(const RefModel& m, std::initializer_list<JobState> states) {
  return jobs_where(m, [&](int j) { return in(m.jobs[j].state, states); });
}

std::int64_t pick_job(const RefModel& m, std::initializer_list<JobState> preferred) {
  return pick_job(m, jobs_in(m, preferred));
}

// Steering predicates: only used to make interesting decisions likely.
int free_of_type(const RefModel& m, std::int64_t dtype) {
  int n = 0;
  for (int dev = 0; dev < m.num_devices(); ++dev)
    n += m.dev_type[dev] == dtype && m.holder_of(dev) < 0 ? 1 : 0;
  return n;
}
bool running(const RefModel& m, int j) { return m.jobs[j].state == JobState::kRunning; }
bool can_grow(const RefModel& m, int j) {
  if (!running(m, j)) return false;
  const auto held = static_cast<std::int64_t>(m.jobs[j].devices.size());
  for (auto c : ref_feasible_counts(m.jobs[j]))
    if (c > held && c - held <= free_of_type(m, m.jobs[j].dtype)) return true;
  return false;
}
bool can_shrink(const RefModel& m, int j) {
  if (!running(m, j)) return false;
  for (auto c : ref_feasible_counts(m.jobs[j]))
    if (c < static_cast<std::int64_t>(m.jobs[j].devices.size())) return true;
  return false;
}
// A waiting job (Queued for Place, Suspended for Resume) with a device count that the free
// devices of its type could take (host memory aside).
bool can_take(const RefModel& m, int j, JobState waiting_in) {
  if (m.jobs[j].state != waiting_in) return false;
  for (auto c : ref_feasible_counts(m.jobs[j]))
    if (c <= free_of_type(m, m.jobs[j].dtype)) return true;
  return false;
}
bool has_favoured(const RefModel& m, int v) {
  for (int b = 0; b < m.num_jobs(); ++b)
    if (ref_favoured(m, b, v)) return true;
  return false;
}

// A beneficiary: mostly one the tier rules favour over `j`, else a waiting job, else anything.
std::int64_t pick_beneficiary(const RefModel& m, std::int64_t j) {
  const int n = m.num_jobs();
  std::vector<int> favoured, waiting;
  for (int k = 0; k < n; ++k) {
    if (j >= 0 && j < n && ref_favoured(m, k, static_cast<int>(j))) favoured.push_back(k);
    if (k != j && ref_waiting(m.jobs[k].state)) waiting.push_back(k);
  }
  const int roll = uniform(0, 100);
  if (roll < 60 && !favoured.empty()) return *rc::gen::elementOf(favoured);
  if (roll < 85 && !waiting.empty()) return *rc::gen::elementOf(waiting);
  return uniform<std::int64_t>(-1, n + 1);
}

// `k` distinct elements of `from`, in random order, returned sorted.
std::vector<int> choose(const std::vector<int>& from, std::size_t k) {
  auto keys = *rc::gen::container<std::vector<int>>(from.size(), uniform_gen(0, 1 << 16));
  std::vector<std::size_t> idx(from.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](auto a, auto b) { return keys[a] < keys[b]; });
  std::vector<int> out;
  for (std::size_t i = 0; i < std::min(k, idx.size()); ++i) out.push_back(from[idx[i]]);
  std::sort(out.begin(), out.end());
  return out;
}

enum class SelKind { kFresh, kMigrate, kGrow, kShrink };

// A device set and splice for job j: mostly one that satisfies the count/type/exclusivity rules
// given the model's free devices (host memory is left to chance), sometimes arbitrary.
void pick_selection(const RefModel& m, std::int64_t j, SelKind kind, core::Decision& d) {
  const int roll = uniform(0, 100);
  if (roll < 78 && j >= 0 && j < m.num_jobs()) {
    const RefJob& job = m.jobs[j];
    std::vector<int> free, own(job.devices.begin(), job.devices.end());
    for (int dev = 0; dev < m.num_devices(); ++dev)
      if (m.dev_type[dev] == job.dtype && m.holder_of(dev) < 0) free.push_back(dev);
    const auto held = static_cast<std::int64_t>(own.size());
    const auto nfree = static_cast<std::int64_t>(free.size());
    std::vector<std::int64_t> counts;
    for (auto c : ref_feasible_counts(job)) {
      bool ok = false;
      switch (kind) {
        case SelKind::kFresh:
          ok = c <= nfree;
          break;
        case SelKind::kMigrate:
          ok = held <= c && c <= nfree + held;
          break;
        case SelKind::kGrow:
          ok = held < c && c <= nfree + held;
          break;
        case SelKind::kShrink:
          ok = 0 < c && c < held;
          break;
      }
      if (ok) counts.push_back(c);
    }
    if (!counts.empty()) {
      // Host memory is left to chance one time in three; otherwise a few draws look for a set
      // that fits it too, so that jobs do get to run on the tight test fleets.
      const int tries = uniform(0, 3) == 2 ? 1 : 4;
      for (int attempt = 0; attempt < tries; ++attempt) {
        const auto c = static_cast<std::size_t>(*rc::gen::elementOf(counts));
        std::vector<int> sel;
        switch (kind) {
          case SelKind::kFresh:
            sel = choose(free, c);
            break;
          case SelKind::kShrink:
            sel = choose(own, c);
            break;
          case SelKind::kGrow:
            sel = choose(free, c - own.size());
            sel.insert(sel.end(), own.begin(), own.end());
            break;
          case SelKind::kMigrate: {
            // Mostly onto other devices; sometimes overlapping the current ones.
            std::vector<int> pool = free;
            if (uniform(0, 3) == 0 || free.size() < c)
              pool.insert(pool.end(), own.begin(), own.end());
            sel = choose(pool, c);
            break;
          }
        }
        std::sort(sel.begin(), sel.end());
        d.devices.assign(sel.begin(), sel.end());
        d.splice = job.world / static_cast<std::int64_t>(c);
        if (ref_gang_fits(m, static_cast<int>(j), std::set<int>(sel.begin(), sel.end()), d.splice))
          break;
      }
      return;
    }
  }
  // Arbitrary: any devices, any splice; rarely a device outside the fleet or listed twice.
  std::vector<int> all(static_cast<std::size_t>(m.num_devices()));
  for (int i = 0; i < m.num_devices(); ++i) all[i] = i;
  auto sel = choose(all, static_cast<std::size_t>(uniform(0, m.num_devices() + 1)));
  d.devices.assign(sel.begin(), sel.end());
  d.splice = uniform(0, 6);
  const int bad = uniform(0, 20);
  if (bad == 19) d.devices.push_back(m.num_devices());
  if (bad == 18) d.devices.push_back(-1);
  if (bad == 17 && !d.devices.empty()) d.devices.push_back(d.devices.front());
}

// ---- The commands ----

class Submit : public OneDecision {
 public:
  explicit Submit(const RefModel& m) {
    d_.event = EventKind::kSubmit;
    d_.name = "job" + std::to_string(m.num_jobs());
    const auto& types = m.type_names;
    if (uniform(0, 20) == 19) {
      edge();
    } else if (uniform(0, 100) < 85) {
      // A well-formed spec: W = count * splice with a range around count.
      d_.tier = static_cast<spec::Tier>(uniform(0, 3));
      d_.device_type = *rc::gen::elementOf(types);
      const std::int64_t count = uniform(1, 5);
      const std::int64_t splice =
          *rc::gen::weightedElement<std::int64_t>({{6, 1}, {6, 2}, {2, 3}, {2, 4}});
      d_.world = count * splice;
      d_.min_devices = uniform<std::int64_t>(1, count + 1);
      d_.max_devices = uniform<std::int64_t>(count, d_.world + 1);
      d_.mem_mib = uniform(1, 4);
    } else {
      // Anything, most of it invalid.
      d_.tier = static_cast<spec::Tier>(uniform(-1, 4));
      d_.device_type = *rc::gen::element<std::string>("A", "B", "C", "");
      d_.world = uniform(-1, 20);
      d_.min_devices = uniform(-1, 6);
      d_.max_devices = uniform(-1, 10);
      d_.mem_mib = uniform(-1, 3);
    }
  }
  // Specs at and beyond the input bounds, and specs whose guard arithmetic would leave int64 if
  // done naively (before the bounds, each of these was accepted by wrapping around).
  void edge() {
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    d_.device_type = "A";
    d_.tier = static_cast<spec::Tier>(uniform(0, 3));
    d_.mem_mib = 1;
    const std::int64_t off = uniform(0, 2);  // 0: at the bound, 1: just past it
    switch (uniform(0, 5)) {
      case 0:  // premium demand + min_devices overflowed at admission
        d_.tier = spec::Tier::kPremium;
        d_.world = d_.min_devices = d_.max_devices = kMax - uniform(0, 3);
        break;
      case 1:  // (splice - 1) * mem overflowed in the host memory check
        d_.world = 3;
        d_.min_devices = d_.max_devices = 1;
        d_.mem_mib = (std::int64_t{1} << 62) + uniform(0, 3);
        break;
      case 2:  // min_devices * splice overflowed in the spec check: no count in range divides W
        d_.world = std::int64_t{5} << 60;
        d_.min_devices = (std::int64_t{1} << 60) + 3689348814741910323;  // 2^60 + floor(2^64 / 5)
        d_.max_devices = d_.min_devices + 1;
        break;
      case 3:  // the world bound; premium so that admission sums it
        d_.tier = spec::Tier::kPremium;
        d_.world = kRefMaxWorld + off;
        d_.min_devices = 1;
        d_.max_devices = d_.world;
        break;
      default:  // the memory bound, on a placeable job (W = 2, one or two devices)
        d_.world = 2;
        d_.min_devices = 1;
        d_.max_devices = 2;
        d_.mem_mib = kRefMaxMemMib + off;
        break;
    }
  }
  void show(std::ostream& os) const override {
    os << d_.describe() << " mem=" << d_.mem_mib << " (tier " << static_cast<int>(d_.tier) << ") ["
       << spec::origin_name(d_.origin) << "]";
  }
};

class Admit : public OneDecision {
 public:
  explicit Admit(const RefModel& m) {
    d_.event = EventKind::kAdmit;
    d_.job = pick_job(m, {JobState::kSubmitted});
  }
};

class Place : public OneDecision {
 public:
  explicit Place(const RefModel& m) {
    d_.event = EventKind::kPlace;
    auto fits = jobs_where(m, [&](int j) { return can_take(m, j, JobState::kQueued); });
    d_.job =
        pick_job(m, !fits.empty() && uniform(0, 4) != 3 ? fits : jobs_in(m, {JobState::kQueued}));
    pick_selection(m, d_.job, SelKind::kFresh, d_);
  }
};

class Start : public OneDecision {
 public:
  explicit Start(const RefModel& m) {
    d_.event = EventKind::kStart;
    d_.job = pick_job(m, {JobState::kPlaced});
  }
};

bool j_ok(const RefModel& m, std::int64_t j) { return j >= 0 && j < m.num_jobs(); }

// The current progress/checkpoint of a job, or 0/-1 when it does not exist.
std::int64_t progress_of(const RefModel& m, std::int64_t j) {
  return j_ok(m, j) ? m.jobs[j].progress : 0;
}
std::int64_t ckpt_of(const RefModel& m, std::int64_t j) {
  return j_ok(m, j) ? m.jobs[j].ckpt : -1;
}

class Progress : public OneDecision {
 public:
  explicit Progress(const RefModel& m) {
    d_.event = EventKind::kProgress;
    d_.job = pick_job(m, {JobState::kRunning});
    const auto p = progress_of(m, d_.job);
    d_.step = uniform(0, 10) == 9 ? p - 1 : p + uniform(0, 5);
    d_.gpu_ms = uniform(0, 20) == 19 ? -1 : uniform(0, 400);
    if (uniform(0, 20) == 19) {  // at or past the attained-service bound, or near int64's
      const auto attained = j_ok(m, d_.job) ? m.jobs[d_.job].attained : 0;
      d_.gpu_ms = *rc::gen::element<std::int64_t>(
          kRefMaxAttained - attained, kRefMaxAttained - attained + 1,
          std::numeric_limits<std::int64_t>::max() - attained / 2);
    }
  }
};

class Checkpoint : public OneDecision {
 public:
  explicit Checkpoint(const RefModel& m) {
    d_.event = EventKind::kCheckpoint;
    d_.job = pick_job(m, {JobState::kRunning});
    const auto p = progress_of(m, d_.job);
    const auto c = std::max<std::int64_t>(ckpt_of(m, d_.job), 0);
    const int roll = uniform(0, 10);
    d_.step = roll == 9 ? p + 1 : roll == 8 ? c - 1 : uniform(c, std::max(c, p) + 1);
  }
};

class Preempt : public OneDecision {
 public:
  explicit Preempt(const RefModel& m) {
    d_.event = EventKind::kPreempt;
    d_.job = pick_job(m, jobs_where(m, [&](int j) { return running(m, j) && has_favoured(m, j); }));
    d_.beneficiary = pick_beneficiary(m, d_.job);
  }
};

class CheckpointDone : public OneDecision {
 public:
  explicit CheckpointDone(const RefModel& m) {
    d_.event = EventKind::kCheckpointDone;
    d_.job = pick_job(m, {JobState::kCheckpointing});
    d_.step = progress_of(m, d_.job) +
              *rc::gen::weightedElement<std::int64_t>({{16, 0}, {1, -1}, {1, 1}});
  }
};

class Resume : public OneDecision {
 public:
  explicit Resume(const RefModel& m) {
    d_.event = EventKind::kResume;
    auto fits = jobs_where(m, [&](int j) { return can_take(m, j, JobState::kSuspended); });
    d_.job = pick_job(
        m, !fits.empty() && uniform(0, 4) != 3 ? fits : jobs_in(m, {JobState::kSuspended}));
    pick_selection(m, d_.job, SelKind::kFresh, d_);
  }
};

class RestoreDone : public OneDecision {
 public:
  explicit RestoreDone(const RefModel& m) {
    d_.event = EventKind::kRestoreDone;
    d_.job = pick_job(m, {JobState::kRestoring, JobState::kMigrating});
  }
};

class Migrate : public OneDecision {
 public:
  explicit Migrate(const RefModel& m) {
    d_.event = EventKind::kMigrate;
    d_.job = pick_job(m, {JobState::kRunning});
    pick_selection(m, d_.job, SelKind::kMigrate, d_);
    d_.step = progress_of(m, d_.job) +
              *rc::gen::weightedElement<std::int64_t>({{16, 0}, {1, -1}, {1, 1}});
  }
};

class ResizeUp : public OneDecision {
 public:
  explicit ResizeUp(const RefModel& m) {
    d_.event = EventKind::kResizeUp;
    d_.job = pick_job(m, jobs_where(m, [&](int j) { return can_grow(m, j); }));
    pick_selection(m, d_.job, SelKind::kGrow, d_);
  }
};

class ResizeDown : public OneDecision {
 public:
  explicit ResizeDown(const RefModel& m) {
    d_.event = EventKind::kResizeDown;
    d_.job =
        pick_job(m, jobs_where(m, [&](int j) { return can_shrink(m, j) && has_favoured(m, j); }));
    pick_selection(m, d_.job, SelKind::kShrink, d_);
    d_.beneficiary = pick_beneficiary(m, d_.job);
  }
};

class Complete : public OneDecision {
 public:
  explicit Complete(const RefModel& m) {
    d_.event = EventKind::kComplete;
    d_.job = pick_job(m, {JobState::kRunning});
  }
};

class WorkerCrash : public OneDecision {
 public:
  explicit WorkerCrash(const RefModel& m) {
    d_.event = EventKind::kWorkerCrash;
    d_.job = pick_job(m, {JobState::kPlaced, JobState::kRunning, JobState::kCheckpointing,
                          JobState::kMigrating, JobState::kRestoring});
  }
};

class Cancel : public OneDecision {
 public:
  explicit Cancel(const RefModel& m) {
    d_.event = EventKind::kCancel;
    d_.job = pick_job(m, {JobState::kSubmitted, JobState::kQueued, JobState::kPlaced,
                          JobState::kRunning, JobState::kCheckpointing, JobState::kSuspended,
                          JobState::kMigrating, JobState::kRestoring});
  }
};

// A node is lost: the core has no node-loss broadcast, so every job holding a device on the node
// gets its own NodeLoss decision.
class NodeLoss : public DecisionsCmd {
 public:
  explicit NodeLoss(const RefModel& m)
      : node_(uniform(0, m.num_nodes())), origin_(pick_origin(EventKind::kNodeLoss)) {}
  std::vector<core::Decision> decisions(const RefModel& m) const override {
    std::vector<core::Decision> out;
    for (int j = 0; j < m.num_jobs(); ++j) {
      bool on_node = false;
      for (int dev : m.jobs[j].devices) on_node = on_node || m.dev_node[dev] == node_;
      if (!on_node) continue;
      core::Decision d;
      d.event = EventKind::kNodeLoss;
      d.origin = origin_;
      d.job = j;
      out.push_back(d);
    }
    return out;
  }
  void show(std::ostream& os) const override {
    os << "NodeLoss of node " << node_ << " (NodeLoss for every job holding a device on it) ["
       << spec::origin_name(origin_) << "]";
  }

 private:
  int node_;
  spec::Origin origin_;
};

class ClockAdvance : public CmdBase {
 public:
  explicit ClockAdvance(const RefModel&) : ms_(uniform<std::int64_t>(-5, 5000)) {}
  void apply(RefModel& m) const override { m.now_ms += std::max<std::int64_t>(ms_, 0); }
  void run(const RefModel& m0, Sut& sut) const override {
    sut.clock.advance(ms_);
    ++g_stats.clock_advances;
    RC_ASSERT(sut.clock.now_ms() == m0.now_ms + std::max<std::int64_t>(ms_, 0));
  }
  void show(std::ostream& os) const override { os << "ClockAdvance " << ms_ << " ms"; }

 private:
  std::int64_t ms_;
};

template <class C>
CmdPtr make(const RefModel& m) {
  auto c = std::make_shared<C>(m);
  if constexpr (std::is_base_of_v<OneDecision, C>) c->draw_origin();
  return c;
}

// The next command, weighted by what the model state makes interesting, so that sequences reach
// running, preemption, suspension, migration and resizing often. Every kind keeps a small weight,
// so illegal events in every state are tried too.
rc::Gen<CmdPtr> next_command(const RefModel& m) {
  return rc::gen::exec([m]() -> CmdPtr {
    std::array<int, spec::kNumJobStates> n{};
    for (const auto& j : m.jobs) ++n[static_cast<std::size_t>(j.state)];
    auto has = [&](JobState s) { return n[static_cast<std::size_t>(s)] > 0 ? 1 : 0; };
    const int any_running = has(JobState::kRunning);
    const int waiting = has(JobState::kQueued) | has(JobState::kSuspended);
    int holding = 0, growable = 0, preemptible = 0, shrinkable = 0, placeable = 0, resumable = 0;
    for (int j = 0; j < m.num_jobs(); ++j) {
      placeable |= can_take(m, j, JobState::kQueued) ? 1 : 0;
      resumable |= can_take(m, j, JobState::kSuspended) ? 1 : 0;
      holding |= ref_holding(m.jobs[j].state) ? 1 : 0;
      growable |= can_grow(m, j) ? 1 : 0;
      if (running(m, j) && has_favoured(m, j)) {
        preemptible = 1;
        shrinkable |= can_shrink(m, j) ? 1 : 0;
      }
    }
    const int submit = m.num_jobs() < 3 ? 12 : m.num_jobs() < 6 ? 5 : 1;

    using Make = CmdPtr (*)(const RefModel&);
    const std::pair<int, Make> table[] = {
        {submit, &make<Submit>},
        {2 + 12 * has(JobState::kSubmitted), &make<Admit>},
        {2 + 3 * has(JobState::kQueued) + 14 * placeable, &make<Place>},
        {1 + 12 * has(JobState::kPlaced), &make<Start>},
        {1 + 7 * any_running, &make<Progress>},
        {1 + 3 * any_running, &make<Checkpoint>},
        {1 + 2 * (any_running & waiting) + 10 * preemptible, &make<Preempt>},
        {1 + 12 * has(JobState::kCheckpointing), &make<CheckpointDone>},
        {1 + 3 * has(JobState::kSuspended) + 16 * resumable, &make<Resume>},
        {1 + 12 * (has(JobState::kRestoring) | has(JobState::kMigrating)), &make<RestoreDone>},
        {1 + 5 * any_running, &make<Migrate>},
        {1 + 14 * growable, &make<ResizeUp>},
        {1 + 20 * shrinkable, &make<ResizeDown>},
        {1 + 2 * any_running, &make<Complete>},
        {1 + 2 * holding, &make<WorkerCrash>},
        {1 + 1 * holding, &make<NodeLoss>},
        {2, &make<Cancel>},
        {2, &make<ClockAdvance>},
    };
    int total = 0;
    for (const auto& [w, make] : table) total += w;
    int r = uniform(0, total);
    for (const auto& [w, make] : table) {
      if (r < w) return make(m);
      r -= w;
    }
    return make<ClockAdvance>(m);
  });
}

}  // namespace

// ---- The properties ---------------------------------------------------------------------------

TEST(LifecycleFleets, TestFleetsParseAsDescribed) {
  for (int f = 0; f < static_cast<int>(test_fleets().size()); ++f) {
    auto fleet = core::Fleet::parse(test_fleets()[f].to_text());
    ASSERT_TRUE(fleet.ok()) << fleet.reason();
    auto m = RefModel::from_fleet(f, kStartMs);
    ASSERT_EQ(static_cast<int>(fleet->devices.size()), m.num_devices());
    for (int d = 0; d < m.num_devices(); ++d) EXPECT_EQ(fleet->devices[d].node, m.dev_node[d]);
  }
}

RC_GTEST_PROP(Lifecycle, CoreMatchesReferenceModelAndInvariants, ()) {
  const int fleet = uniform(0, static_cast<int>(test_fleets().size()));
  const RefModel m0 = RefModel::from_fleet(fleet, kStartMs);
  RC_LOG() << "fleet " << fleet << " (devices numbered in order):\n"
           << test_fleets()[fleet].to_text();
  Sut sut(fleet);
  check_fleet(m0, *sut.core);
  check_state_invariants(sut.core->cluster(), "creation");
  rc::state::check(m0, sut, [](const RefModel& m) { return next_command(m); });
  ++g_stats.sequences;
  for (std::size_t e = 0; e < sut.committed.size(); ++e)
    if (sut.committed[e]) ++g_stats.sequences_with[e];
}

void print_stats(std::ostream& os) {
  const Stats& s = g_stats;
  os << "\n=== lifecycle_proptest distribution: " << s.sequences << " sequences (last run of "
     << "the property, shrinking included), " << s.decisions << " decisions, " << s.clock_advances
     << " clock advances, " << s.unknown_job_rejected
     << " decisions for nonexistent jobs rejected ===\n";
  os << std::left << std::setw(16) << "origin" << std::right << std::setw(11) << "committed"
     << std::setw(11) << "rejected" << std::setw(28) << "of which for the origin\n";
  std::uint64_t wrong = 0;
  for (int o = 0; o < spec::kNumOrigins; ++o) {
    const auto oi = static_cast<std::size_t>(o);
    wrong += s.origin_wrong[oi];
    os << std::left << std::setw(16) << spec::origin_name(static_cast<spec::Origin>(o))
       << std::right << std::setw(11) << s.origin_committed[oi] << std::setw(11)
       << s.origin_rejected[oi] << std::setw(12) << s.origin_wrong[oi] << "\n";
  }
  os << "origin rejections: " << wrong << " of " << s.decisions << " decisions ("
     << std::fixed << std::setprecision(1)
     << (s.decisions ? 100.0 * static_cast<double>(wrong) / static_cast<double>(s.decisions) : 0.0)
     << "%)\n" << std::defaultfloat;
  os << std::left << std::setw(16) << "event" << std::right << std::setw(11) << "committed"
     << std::setw(11) << "rejected" << std::setw(22) << "sequences with >=1\n";
  for (int e = 0; e < spec::kNumEventKinds; ++e) {
    const auto ev = static_cast<std::size_t>(e);
    os << std::left << std::setw(16) << spec::event_name(static_cast<EventKind>(e)) << std::right
       << std::setw(11) << s.committed[ev] << std::setw(11) << s.rejected[ev] << std::setw(12)
       << s.sequences_with[ev] << " ("
       << (s.sequences ? 100 * s.sequences_with[ev] / s.sequences : 0) << "%)\n";
  }
  os << "rejections by the model's reason:\n";
  for (const auto& [why, n] : s.reject_reasons)
    os << "  " << std::setw(9) << n << "  " << why << "\n";
  os << "lifecycle rows taken:\n";
  for (const auto& r : core::job_rows()) {
    auto it = s.rows.find(r.index);
    os << "  " << std::setw(9) << (it == s.rows.end() ? 0 : it->second) << "  " << r.label()
       << "\n";
  }
}

}  // namespace orrery::proptest

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  long sequences = 10000;
  if (const char* env = std::getenv("ORRERY_PROPTEST_SEQUENCES"); env && *env) {
    char* end = nullptr;
    sequences = std::strtol(env, &end, 10);
    if (*end != '\0' || sequences < 1) {
      std::cerr << "ORRERY_PROPTEST_SEQUENCES must be a positive integer, got '" << env << "'\n";
      return 2;
    }
  }
  // RapidCheck reads RC_PARAMS once, on first use: complete it before any property runs.
  std::string params = std::getenv("RC_PARAMS") ? std::getenv("RC_PARAMS") : "";
  if (params.find("max_success") == std::string::npos)
    params += " max_success=" + std::to_string(sequences);
  // Sequences of 1 to 201 commands (RapidCheck spreads sizes evenly over [0, max_size]): long
  // enough to reach retries exhausted and preempt-suspend-resume or migrate-then-resize chains.
  // 10,000 sequences take a few seconds.
  if (params.find("max_size") == std::string::npos) params += " max_size=200";
  setenv("RC_PARAMS", params.c_str(), 1);

  int rc = RUN_ALL_TESTS();
  orrery::proptest::print_stats(std::cout);
  return rc;
}
