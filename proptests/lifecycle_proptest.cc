// Stateful property test of the scheduler core: random command sequences (submit, admit, place,
// run, preempt, migrate, resize, the cuts that carry them out, aborts of in-flight operations,
// fail, cancel, release, ...) are driven through the real SchedulerCore and an independent
// reference model (proptests/reference_model.h). Each decision claims an origin: mostly the one
// that decides its event in practice (an Abort: the runtime or the core's timers), sometimes an
// operator, and about one in twenty an origin that may not decide it. After every decision:
//   - the core accepts exactly what the model accepts, and reports the same row source/target,
//     sequence number and time; it rejects for the origin exactly when the model does (the origin
//     is checked before the job and the parameters); when the model rejects a selection only
//     because a device is reserved for another job, the core names that clause;
//   - every job's variables (state, spec and preemption mode, devices, splice, epoch, progress, checkpoint, failures,
//     attained service, the beneficiary of a preemption or shrink, a move's target set and its
//     splice) and held set agree with the model; every device's owner and owner epoch, and
//     whether it is live-reserved and for whom (a waiting job, or a moving one's target); and
//     every counter (devices held and host memory used per node, admitted premium demand) against
//     the model's own sums. A rejected decision leaves the whole cluster state untouched;
//   - every state invariant holds on core.cluster(), and every step invariant on
//     (state before, job, params_for(decision), state after).
// At the end, with the default number of sequences or more, the run must have covered every
// event, every lifecycle row, every origin (committed and refused for the origin), every origin
// that may decide Abort, and the reservation paths of moves (see check_coverage): a generator
// that stops reaching a part of the lifecycle fails the test instead of silently testing less.
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
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/decision.h"
#include "core/fleet.h"
#include "core/row_desc.h"
#include "core/node_bootstrap.h"
#include "core/scheduler_core.h"
#include "proptests/cluster_diff.h"
#include "proptests/generators.h"
#include "proptests/reference_model.h"
#include "spec/guards.h"
#include "spec/invariants.h"

namespace orrery::proptest {
namespace {

using spec::EventKind;
using spec::JobState;

constexpr std::int64_t kStartMs = 1'000;

// The clause of GuardGang that the reservation rule is (the core names failed clauses).
constexpr std::string_view kReservedClause = "devices not reserved for another job";

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
  // Reservations, in devices (see Prediction).
  std::array<std::uint64_t, spec::kNumEventKinds> resv_created{};
  std::array<std::uint64_t, spec::kNumEventKinds> resv_consumed{};
  std::array<std::uint64_t, spec::kNumEventKinds> resv_voided{};
  std::uint64_t resv_overridden = 0;  // taken by a job favoured over the one they were kept for
  // Decisions the model rejects only because a selected device is reserved for another job.
  std::array<std::uint64_t, spec::kNumEventKinds> blocked_by_reservation{};
  // Rejected decisions whose core reason names the reservation clause (any other clause may have
  // failed too).
  std::uint64_t core_named_reservation = 0;
  std::uint64_t suspend_without_reservation = 0;
  // Cuts of moves stored after their target was lost (rejected; the move must be aborted).
  std::uint64_t move_target_lost = 0;
  // Commits per event and origin; commits per target state.
  std::array<std::array<std::uint64_t, spec::kNumOrigins>, spec::kNumEventKinds> by_origin{};
  std::array<std::uint64_t, spec::kNumJobStates> entered{};
  std::uint64_t sequences_with_reservation = 0;
  std::uint64_t max_live_reservations = 0;  // devices live-reserved at once
};
Stats g_stats;

// ---- The system under test ----------------------------------------------------------------------

struct Sut {
  core::ManualClock clock{kStartMs};
  std::unique_ptr<core::SchedulerCore> core;
  std::array<std::uint64_t, spec::kNumEventKinds> committed{};  // this sequence
  std::uint64_t reserved = 0;  // devices reserved in this sequence

  explicit Sut(int fleet_index) {
    auto fleet = core::Fleet::parse(test_fleets().at(fleet_index).to_text());
    if (!fleet) throw std::runtime_error("test fleet does not parse: " + fleet.reason());
    auto c = core::SchedulerCore::create(std::move(*fleet), clock, nullptr);
    if (!c) throw std::runtime_error("cannot create core: " + c.reason());
    core = std::move(*c);
    // The reference model has every node Up: node agents are not part of these sequences.
    if (auto st = core::bring_up_all_nodes(*core); !st)
      throw std::runtime_error("cannot bring the nodes up: " + st.reason());
  }
};

// ---- Checks ---------------------------------------------------------------------------------

std::string show_cluster(const Cluster& c) {
  std::ostringstream o;
  for (int j = 0; j < c.num_jobs(); ++j) {
    const auto& job = c.jobs[j];
    o << "    core job " << j << ": " << spec::state_name(static_cast<JobState>(job.state))
      << " devices=" << job.devices << " " << show_devset(job.held) << " x" << job.splice
      << " epoch=" << job.epoch << " progress=" << job.progress << " ckpt=" << job.ckpt
      << " failures=" << job.failures << " attained=" << job.attained << " ben=" << job.ben
      << " resv_gen=" << job.resv_gen << " mode=" << job.mode;
    if (!job.target.empty() || job.tsplice != 0)
      o << " target=" << show_devset(job.target) << " x" << job.tsplice;
    o << "\n";
  }
  o << "    core devices:";
  for (int d = 0; d < c.num_devices(); ++d) {
    o << " " << d << ":";
    if (c.owner[d] >= 0) o << "j" << c.owner[d] << "@" << c.owner_epoch[d];
    else o << "free";
    if (c.resv_for[d] >= 0)
      o << "(resv j" << c.resv_for[d] << " gen " << c.resv_gen[d]
        << (live_reservation(c, d) >= 0 ? " live" : " void") << ")";
  }
  o << "\n    core counters: node_held=[";
  for (int n = 0; n < c.nodes; ++n) o << (n ? "," : "") << c.node_held[n];
  o << "] node_swap=[";
  for (int n = 0; n < c.nodes; ++n) o << (n ? "," : "") << c.node_swap[n];
  o << "] premium_admitted=" << c.premium_admitted.front() << "\n";
  return o.str();
}

std::string show_model(const RefModel& m) {
  std::ostringstream o;
  for (int j = 0; j < m.num_jobs(); ++j)
    o << "    model job " << j << ": " << describe_job(m.jobs[j]) << "\n";
  o << "    model reservations:";
  bool any = false;
  for (int d = 0; d < m.num_devices(); ++d)
    if (m.reserved_for[d] >= 0) {
      o << " " << d << "->j" << m.reserved_for[d];
      any = true;
    }
  o << (any ? "\n" : " none\n");
  return o.str();
}

// The fleet the core parsed has the layout the model describes.
void check_fleet(const RefModel& m, const core::SchedulerCore& core) {
  const auto& f = core.fleet();
  RC_ASSERT(f.num_devices() == m.num_devices());
  RC_ASSERT(static_cast<int>(f.nodes.size()) == m.num_nodes());
  RC_ASSERT(f.premium_reserve == m.reserve);
  for (int d = 0; d < m.num_devices(); ++d) {
    RC_ASSERT(f.device_node(d) == m.dev_node[d]);
    RC_ASSERT(f.device_types[f.device_type(d)] == m.type_names[m.dev_type[d]]);
    RC_ASSERT(f.device_mem(d) == m.dev_mem[d]);
  }
  for (int n = 0; n < m.num_nodes(); ++n) RC_ASSERT(f.nodes[n].host_mem_mib == m.host_mem[n]);
  // The spec's view of the fleet (what the guards read) agrees too.
  const Cluster& c = core.cluster();
  RC_ASSERT(c.num_devices() == m.num_devices());
  RC_ASSERT(c.nodes == m.num_nodes());
  for (int d = 0; d < m.num_devices(); ++d) {
    RC_ASSERT(c.node_of(d) == m.dev_node[d]);
    RC_ASSERT(c.dev_type(d) == static_cast<std::int64_t>(f.device_type(d)));
    RC_ASSERT(c.dev_mem(d) == m.dev_mem[d]);
  }
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
    field("ben", k.ben, r.ben);
    field("tsplice", k.tsplice, r.tsplice);
    field("mode", k.mode, r.mode);
    field("faults", k.faults, r.faults);
    field("hold", k.hold, r.hold ? 1 : 0);
    field("spare", k.spare, r.spare ? 1 : 0);
    // resv_gen is the core's bookkeeping for reservation liveness, compared below as liveness
    // per device (its monotonicity is INV-RESERVE's step part, checked after every decision).
    if (!std::equal(k.held.begin(), k.held.end(), r.devices.begin(), r.devices.end()))
      bad << "job " << j << " held: core " << show_devset(k.held) << ", model "
          << show_devset(spec::Concrete::DevSet(r.devices.begin(), r.devices.end())) << "\n";
    if (!std::equal(k.target.begin(), k.target.end(), r.target.begin(), r.target.end()))
      bad << "job " << j << " target: core " << show_devset(k.target) << ", model "
          << show_devset(spec::Concrete::DevSet(r.target.begin(), r.target.end())) << "\n";
  }
  if (c.num_devices() == m.num_devices()) {
    for (int d = 0; d < m.num_devices(); ++d) {
      const int holder = m.holder_of(d);
      const std::int64_t epoch = holder >= 0 ? m.jobs[holder].epoch : 0;
      if (c.owner[d] != holder)
        bad << "device " << d << " owner: core " << c.owner[d] << ", model " << holder << "\n";
      if (c.owner_epoch[d] != epoch)
        bad << "device " << d << " owner epoch: core " << c.owner_epoch[d] << ", model " << epoch
            << "\n";
      if (live_reservation(c, d) != m.reserved_for[d])
        bad << "device " << d << " live reservation for: core " << live_reservation(c, d)
            << " (resv_for " << c.resv_for[d] << " gen " << c.resv_gen[d] << "), model "
            << m.reserved_for[d] << "\n";
    }
  }
  if (c.nodes == m.num_nodes()) {
    for (int n = 0; n < m.num_nodes(); ++n) {
      if (c.node_held[n] != m.node_held(n))
        bad << "node " << n << " devices held: core counter " << c.node_held[n] << ", model sum "
            << m.node_held(n) << "\n";
      if (c.node_swap[n] != m.node_swap(n))
        bad << "node " << n << " host memory for swapped-out workers: core counter "
            << c.node_swap[n] << ", model sum " << m.node_swap(n) << "\n";
    }
  }
  if (c.premium_admitted.front() != m.premium_admitted())
    bad << "admitted premium demand: core counter " << c.premium_admitted.front()
        << ", model sum " << m.premium_admitted() << "\n";
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
    // The core evaluates every clause of a guard and names all that fail, so a selection the
    // model rejects for a reservation must have the reservation clause among the core's reasons.
    const bool core_reserved = got.reason().find(kReservedClause) != std::string::npos;
    if (want.blocked_by_reservation && !core_reserved)
      RC_FAIL("the model rejects '" + what + "' because a selected device is reserved for " +
              "another job, but the core does not name '" + std::string(kReservedClause) +
              "'\n  core says: " + got.reason() + "\n" + show_cluster(pre) + show_model(m));
    if (core_reserved) ++g_stats.core_named_reservation;
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
    g_stats.resv_created[ev] += static_cast<std::uint64_t>(want.resv_created);
    g_stats.resv_consumed[ev] += static_cast<std::uint64_t>(want.resv_consumed);
    g_stats.resv_voided[ev] += static_cast<std::uint64_t>(want.resv_voided);
    g_stats.resv_overridden += static_cast<std::uint64_t>(want.resv_overridden);
    sut.reserved += static_cast<std::uint64_t>(want.resv_created);
    if (want.suspend_without_reservation) ++g_stats.suspend_without_reservation;
    ++g_stats.by_origin[ev][origin];
    ++g_stats.entered[static_cast<std::size_t>(want.to)];
    std::uint64_t live = 0;
    for (int r : m.reserved_for) live += r >= 0 ? 1 : 0;
    g_stats.max_live_reservations = std::max(g_stats.max_live_reservations, live);
  } else {
    ++g_stats.rejected[ev];
    ++g_stats.origin_rejected[origin];
    if (want.wrong_origin) ++g_stats.origin_wrong[origin];
    if (want.blocked_by_reservation) ++g_stats.blocked_by_reservation[ev];
    if (want.move_target_lost) ++g_stats.move_target_lost;
    ++g_stats.reject_reasons[std::string(spec::event_name(d.event)) + ": " + want.why];
    if (!want.wrong_origin && d.event != EventKind::kSubmit &&
        (d.job < 0 || d.job >= pre.num_jobs()))
      ++g_stats.unknown_job_rejected;
    if (auto diff = cluster_diff(pre, core.cluster()); !diff.empty())
      RC_FAIL("rejected '" + what + "' changed the cluster (" + got.reason() +
              "); before vs after:\n" + diff + "  before:\n" + show_cluster(pre) +
              "  after:\n" + show_cluster(core.cluster()));
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

// One generated step (proptests/generators.h): decisions for the core and the model, or a clock
// advance.
class StepCmd : public CmdBase {
 public:
  explicit StepCmd(Step s) : s_(std::move(s)) {}
  void apply(RefModel& m) const override {
    if (s_.kind == Step::Kind::kClock) {
      m.now_ms += std::max<std::int64_t>(s_.ms, 0);
      return;
    }
    for (const auto& d : s_.decisions(m)) predict(m, d);
  }
  void run(const RefModel& m0, Sut& sut) const override {
    if (s_.kind == Step::Kind::kClock) {
      sut.clock.advance(s_.ms);
      ++g_stats.clock_advances;
      RC_ASSERT(sut.clock.now_ms() == m0.now_ms + std::max<std::int64_t>(s_.ms, 0));
      return;
    }
    RefModel m = m0;
    for (const auto& d : s_.decisions(m0)) drive(m, sut, d);
  }
  void show(std::ostream& os) const override { os << s_.show(); }

 private:
  Step s_;
};

rc::Gen<CmdPtr> next_command(const RefModel& m) {
  return rc::gen::exec([m]() -> CmdPtr { return std::make_shared<StepCmd>(next_step(m)); });
}

}  // namespace

// ---- The properties ---------------------------------------------------------------------------

TEST(LifecycleFleets, TestFleetsParseAsDescribed) {
  for (int f = 0; f < static_cast<int>(test_fleets().size()); ++f) {
    auto fleet = core::Fleet::parse(test_fleets()[f].to_text());
    ASSERT_TRUE(fleet.ok()) << fleet.reason();
    auto m = RefModel::from_fleet(f, kStartMs);
    ASSERT_EQ(fleet->num_devices(), m.num_devices());
    for (int d = 0; d < m.num_devices(); ++d) EXPECT_EQ(fleet->device_node(d), m.dev_node[d]);
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
  if (sut.reserved) ++g_stats.sequences_with_reservation;
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
     << std::setw(11) << "rejected" << std::setw(22) << "sequences with >=1"
     << "   committed by planner/runtime/operator/core\n";
  for (int e = 0; e < spec::kNumEventKinds; ++e) {
    const auto ev = static_cast<std::size_t>(e);
    std::ostringstream pct;
    pct << s.sequences_with[ev] << " ("
        << (s.sequences ? 100 * s.sequences_with[ev] / s.sequences : 0) << "%)";
    os << std::left << std::setw(16) << spec::event_name(static_cast<EventKind>(e)) << std::right
       << std::setw(11) << s.committed[ev] << std::setw(11) << s.rejected[ev] << std::setw(18)
       << pct.str() << "   ";
    for (int o = 0; o < spec::kNumOrigins; ++o)
      os << (o ? "/" : "") << s.by_origin[ev][static_cast<std::size_t>(o)];
    os << "\n";
  }
  os << "commits by target state:";
  for (int st = 0; st < spec::kNumJobStates; ++st)
    os << " " << spec::state_name(static_cast<JobState>(st)) << "="
       << s.entered[static_cast<std::size_t>(st)];
  os << "\n";

  // Reservations, in devices.
  std::uint64_t created = 0, consumed = 0, voided = 0, blocked = 0;
  for (std::size_t e = 0; e < spec::kNumEventKinds; ++e) {
    created += s.resv_created[e];
    consumed += s.resv_consumed[e];
    voided += s.resv_voided[e];
    blocked += s.blocked_by_reservation[e];
  }
  os << "reservations (devices): " << created << " created, " << consumed << " consumed, "
     << voided << " voided, " << s.resv_overridden
     << " taken by a job favoured over the one they were kept for; " << s.sequences_with_reservation << " sequences reserved a device ("
     << (s.sequences ? 100 * s.sequences_with_reservation / s.sequences : 0)
     << "%), at most " << s.max_live_reservations << " live at once; "
     << s.suspend_without_reservation
     << " preemption checkpoints committed after their beneficiary stopped waiting; "
     << s.move_target_lost << " cuts of moves refused because their target no longer fits\n";
  os << std::left << std::setw(16) << "event" << std::right << std::setw(11) << "created"
     << std::setw(11) << "consumed" << std::setw(11) << "voided"
     << "   rejected for another's reservation\n";
  for (int e = 0; e < spec::kNumEventKinds; ++e) {
    const auto ev = static_cast<std::size_t>(e);
    if (!s.resv_created[ev] && !s.resv_consumed[ev] && !s.resv_voided[ev] &&
        !s.blocked_by_reservation[ev])
      continue;
    os << std::left << std::setw(16) << spec::event_name(static_cast<EventKind>(e)) << std::right
       << std::setw(11) << s.resv_created[ev] << std::setw(11) << s.resv_consumed[ev]
       << std::setw(11) << s.resv_voided[ev] << std::setw(12) << s.blocked_by_reservation[ev]
       << "\n";
  }
  os << "rejected for a reservation: " << blocked << " by the model's first failing rule, "
     << s.core_named_reservation << " with the core naming '" << kReservedClause
     << "' among its failed clauses\n";

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

// What a run of the default size must have exercised. Returns the gaps, one per line ("" when none).
std::string coverage_gaps() {
  const Stats& s = g_stats;
  std::ostringstream gaps;
  for (int e = 0; e < spec::kNumEventKinds; ++e)
    if (!s.committed[static_cast<std::size_t>(e)])
      gaps << "  event " << spec::event_name(static_cast<EventKind>(e)) << " never committed\n";
  for (int st = 0; st < spec::kNumJobStates; ++st)
    if (st != static_cast<int>(JobState::kNew) && !s.entered[static_cast<std::size_t>(st)])
      gaps << "  state " << spec::state_name(static_cast<JobState>(st)) << " never entered\n";
  // Except the rows of a job at the platform cap (kMaxPlatformFaults node losses of one job: far
  // beyond a sequence of 200 decisions); domain_equivalence_proptest and job_machine_test take
  // those rows from states that have reached the cap.
  for (const auto& r : core::job_rows())
    if (!s.rows.count(r.index) && r.guard_name != spec::GuardFaultsExhausted::name)
      gaps << "  row " << r.label() << " never taken\n";
  for (int o = 0; o < spec::kNumOrigins; ++o) {
    const auto oi = static_cast<std::size_t>(o);
    const auto name = spec::origin_name(static_cast<spec::Origin>(o));
    if (!s.origin_committed[oi]) gaps << "  nothing committed from origin " << name << "\n";
    // Operators may decide anything: nothing is ever refused for being theirs.
    if (o != static_cast<int>(spec::Origin::kOperator) && !s.origin_wrong[oi])
      gaps << "  nothing refused for origin " << name << "\n";
  }
  // Abort: from each origin that may decide it.
  const auto abort = static_cast<std::size_t>(EventKind::kAbort);
  for (auto o : {spec::Origin::kRuntime, spec::Origin::kCore, spec::Origin::kOperator})
    if (!s.by_origin[abort][static_cast<std::size_t>(o)])
      gaps << "  no Abort committed from origin " << spec::origin_name(o) << "\n";
  // Reservations of moves: made when a migration or growth is decided, consumed when it is
  // carried out, voided when it is aborted; a mover's reservation taken by a job that outranks it,
  // and the cut then refused; reservations for a shrink's beneficiary.
  auto need = [&](std::uint64_t n, const char* what) {
    if (!n) gaps << "  never: " << what << "\n";
  };
  auto at = [](const auto& a, EventKind e) { return a[static_cast<std::size_t>(e)]; };
  need(at(s.resv_created, EventKind::kMigrate), "devices reserved by a Migrate");
  need(at(s.resv_created, EventKind::kResizeUp), "devices reserved by a ResizeUp");
  need(at(s.resv_consumed, EventKind::kCheckpointDone), "reservations consumed by a move's cut");
  need(at(s.resv_created, EventKind::kCheckpointDone), "devices reserved by a stored cut");
  need(at(s.resv_voided, EventKind::kAbort), "reservations voided by an Abort");
  need(at(s.resv_created, EventKind::kWorkerCrash) + at(s.resv_created, EventKind::kNodeLoss),
       "devices reserved for a beneficiary by a failure");
  need(s.resv_overridden, "a reservation taken by a job that outranks its holder");
  need(s.move_target_lost, "a move's cut refused because its target no longer fits");
  need(at(s.blocked_by_reservation, EventKind::kPlace), "a Place refused for a reservation");
  return gaps.str();
}

}  // namespace orrery::proptest

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto sequences = orrery::proptest::count_from_env("ORRERY_PROPTEST_SEQUENCES", 10000);
  if (!sequences) return 2;
  // RapidCheck reads RC_PARAMS once, on first use: complete it before any property runs.
  std::string params = std::getenv("RC_PARAMS") ? std::getenv("RC_PARAMS") : "";
  if (params.find("max_success") == std::string::npos)
    params += " max_success=" + std::to_string(*sequences);
  // Sequences of 1 to 201 commands (RapidCheck spreads sizes evenly over [0, max_size]): long
  // enough to reach retries exhausted and preempt-suspend-resume or migrate-then-resize chains.
  // 10,000 sequences (about 480,000 decisions) take 10-20 s on the 2-core build machines.
  if (params.find("max_size") == std::string::npos) params += " max_size=200";
  setenv("RC_PARAMS", params.c_str(), 1);

  int rc = RUN_ALL_TESTS();
  orrery::proptest::print_stats(std::cout);
  // Coverage is a property of a full-size run: a smaller one (or one that reproduces a failure,
  // or runs only some tests) is not held to it.
  const bool full = *sequences >= 10000 && params.find("reproduce") == std::string::npos &&
                    ::testing::GTEST_FLAG(filter) == "*";
  if (full && rc == 0) {
    if (auto gaps = orrery::proptest::coverage_gaps(); !gaps.empty()) {
      std::cout << "\nFAILED: coverage: the run left parts of the lifecycle unexercised:\n" << gaps;
      rc = 1;
    } else {
      std::cout << "coverage: every event, state, row, origin and move reservation path "
                   "exercised\n";
    }
  }
  return rc;
}
