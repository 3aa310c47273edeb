// Unit tests of the checker (checker/): the real lifecycle table is proved; deliberately broken
// machines — built as Boost.MSM front-end tables and introspected exactly as the real one is — make
// the prover and the bounded model checker fail, naming the row and the broken invariant; journals
// written by the core replay cleanly, and bad journals are reported.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <boost/mpl/joint_view.hpp>
#include <boost/mpl/vector.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/temp_dir.h"
#include "checker/bmc.h"
#include "checker/id_order.h"
#include "checker/lifecycle_rows.h"
#include "checker/prover.h"
#include "checker/replay.h"
#include "checker/symbolic.h"
#include "core/job_machine_table.h"
#include "core/row_desc.h"
#include "core/node_bootstrap.h"
#include "core/scheduler_core.h"
#include "spec/invariants.h"

namespace orrery::checker {
namespace {

namespace lc = core::lifecycle;
namespace mpl = boost::mpl;
using spec::EventKind;
using spec::Inv;

constexpr unsigned kTimeoutMs = 60000;
const Shape kProofShape{3, 2, 2};

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// The invariants that failed on table row `row` (1-based).
std::set<Inv> failed_on(const ProofReport& r, int row) {
  std::set<Inv> out;
  for (const auto& ob : r.obligations)
    if (ob.kind == ObligationKind::kInvariant && ob.row == row && !ob.proved) out.insert(ob.inv);
  return out;
}

// Rows (1-based) with at least one failed obligation.
std::set<int> failing_rows(const ProofReport& r) {
  std::set<int> out;
  for (const auto& ob : r.obligations)
    if (!ob.proved) out.insert(ob.row);
  return out;
}

std::string ids(const std::set<Inv>& invs) {
  std::string s;
  for (auto i : invs) s += (s.empty() ? "" : " ") + std::string(spec::inv_id(i));
  return s;
}

const Obligation* find_obligation(const ProofReport& r, int row, Inv inv) {
  for (const auto& ob : r.obligations)
    if (ob.kind == ObligationKind::kInvariant && ob.row == row && ob.inv == inv) return &ob;
  return nullptr;
}

// No obligation may be merely inconclusive: a broken row must be refuted, not time out.
void ExpectDecided(const ProofReport& r) {
  for (const auto& ob : r.obligations)
    EXPECT_FALSE(ob.unknown) << ob.row_label << " " << obligation_name(ob) << ": "
                             << ob.counterexample;
}

// ---- The real table --------------------------------------------------------------------------

TEST(ProverTest, RealLifecycleTableIsProved) {
  const auto rows = lifecycle_rows();
  const auto node_rows = node_lifecycle_rows();
  ASSERT_EQ(rows.size(), 64u);
  ASSERT_EQ(node_rows.size(), 8u);
  constexpr std::size_t kInvs = spec::kAllInvariants.size();
  constexpr std::size_t kPerRow = kInvs + 3;      // every invariant, FRAME, DELTA, ENABLED
  constexpr std::size_t kPerNodeRow = kInvs + 2;  // every invariant, FRAME, ENABLED
  auto r = prove(rows, kProofShape, kTimeoutMs);
  EXPECT_EQ(r.rows, 64);
  EXPECT_EQ(r.node_rows, 8);
  EXPECT_EQ(r.failed, 0);
  // Init x 14 invariants, then per job row 14 invariants, FRAME, DELTA and ENABLED, per node row
  // 14 invariants, FRAME and ENABLED (no node rows share a source and an event), then one
  // DETERMINISTIC per pair of job rows sharing (source, event): the 6 holding sources a job fails
  // from (Placed, Running, Checkpointing, Migrating, Restoring, Resizing) x 2 failure events.
  const std::size_t job_end = kInvs + rows.size() * kPerRow;
  const std::size_t node_end = job_end + node_rows.size() * kPerNodeRow;
  EXPECT_EQ(r.obligations.size(), node_end + 12);
  EXPECT_EQ(r.proved, static_cast<int>(r.obligations.size()));
  for (const auto& ob : r.obligations) {
    EXPECT_TRUE(ob.proved) << ob.row_label << " " << obligation_name(ob) << "\n"
                           << ob.counterexample;
    EXPECT_TRUE(ob.counterexample.empty());
    // Every obligation holds from the local assumptions: the proof is for any fleet size.
    EXPECT_TRUE(ob.local) << ob.row_label << " " << obligation_name(ob);
  }
  for (auto inv : spec::kAllInvariants) EXPECT_TRUE(unbounded(r, inv)) << spec::inv_id(inv);
  ASSERT_EQ(r.obligations.size(), node_end + 12);
  // Init first, then every job row in table order: every invariant, then FRAME, DELTA, ENABLED;
  // then every node row, numbered after the job rows: every invariant, FRAME, ENABLED.
  for (std::size_t i = 0; i < node_end; ++i) {
    const auto& ob = r.obligations[i];
    if (i < kInvs) {
      EXPECT_EQ(ob.row, 0);
      EXPECT_EQ(ob.inv, spec::kAllInvariants[i]);
      EXPECT_EQ(ob.row_label, "Init");
      continue;
    }
    const bool node = i >= job_end;
    const std::size_t per = node ? kPerNodeRow : kPerRow;
    const std::size_t k = node ? i - job_end : i - kInvs;
    if (node) {
      EXPECT_EQ(ob.row, static_cast<int>(rows.size() + k / per + 1));
      EXPECT_EQ(ob.row_label, node_rows[k / per].label());
    } else {
      EXPECT_EQ(ob.row, static_cast<int>(k / per + 1));
      EXPECT_EQ(ob.row_label, rows[k / per].label());
    }
    if (k % per < kInvs) {
      EXPECT_EQ(ob.kind, ObligationKind::kInvariant);
      EXPECT_EQ(ob.inv, spec::kAllInvariants[k % per]);
    } else {
      const auto want = k % per == kInvs                   ? ObligationKind::kFrame
                        : (!node && k % per == kInvs + 1) ? ObligationKind::kDelta
                                                          : ObligationKind::kEnabled;
      EXPECT_EQ(ob.kind, want);
    }
  }
  for (std::size_t i = node_end; i < r.obligations.size(); ++i) {
    const auto& ob = r.obligations[i];
    EXPECT_EQ(ob.kind, ObligationKind::kDeterministic);
    EXPECT_EQ(rows[ob.row - 1].src, rows[ob.other_row - 1].src);
    EXPECT_EQ(rows[ob.row - 1].event, rows[ob.other_row - 1].event);
  }
}

// The node table's one guard is what keeps a node from going Down under a job: without it,
// FailedOver breaks INV-NODE (a device held on a Down node), with a counterexample.
TEST(ProverTest, NodeFailoverWithoutItsGuardBreaksNodeInvariant) {
  auto node_rows = node_lifecycle_rows();
  bool dropped = false;
  for (auto& r : node_rows)
    if (r.event == spec::NodeEvent::kFailedOver) {
      r.guard = nullptr;
      r.guard_name = "none";
      dropped = true;
    }
  ASSERT_TRUE(dropped);
  auto r = prove(lifecycle_rows(), node_rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  std::vector<std::string> failed;
  for (const auto& ob : r.obligations)
    if (!ob.proved) failed.push_back(ob.row_label + " " + obligation_name(ob));
  ASSERT_EQ(failed.size(), 1u) << ::testing::PrintToString(failed);
  EXPECT_EQ(failed[0], "node #8 Lost --FailedOver--> Down [none] INV-NODE");
  for (const auto& ob : r.obligations) {
    if (!ob.proved) {
      EXPECT_NE(ob.counterexample.find("owner=job"), std::string::npos) << ob.counterexample;
    }
  }
  EXPECT_FALSE(unbounded(r, spec::Inv::kNode));
}

// GuardGang without its clause about nodes.
struct GangWithoutUp {
  static constexpr std::string_view name = "gang_fits_anywhere";
  template <class D>
  static spec::Clauses<D> clauses(const D& d, const spec::ClusterVars<D>& s, int j,
                                  const spec::Params<D>& p) {
    auto cs = spec::GuardGang::clauses(d, s, j, p);
    spec::Clauses<D> out;
    for (auto& c : cs)
      if (c.name != "new devices on nodes that are Up") out.push_back(c);
    return out;
  }
};

// Without the "new devices on nodes that are Up" clause, placement breaks INV-NODE's step part
// (a job enters a holding state on a node that is not Up) on every row that takes devices.
TEST(ProverTest, PlacementOnANodeThatIsNotUpBreaksNodeInvariant) {
  auto rows = lifecycle_rows();
  int replaced = 0;
  for (auto& r : rows)
    if (r.guard_name == spec::GuardGang::name) {
      r.guard = &GangWithoutUp::clauses<Z3Domain>;
      ++replaced;
    }
  ASSERT_EQ(replaced, 2);  // Place and Resume
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  std::set<int> node_failures;
  for (const auto& ob : r.obligations)
    if (!ob.proved) {
      EXPECT_EQ(ob.kind, ObligationKind::kInvariant) << ob.row_label;
      EXPECT_EQ(ob.inv, spec::Inv::kNode) << ob.row_label;
      node_failures.insert(ob.row);
    }
  EXPECT_EQ(node_failures, (std::set<int>{3, 11}));
}

// An effect that changes another job breaks FRAME (and the symmetry the proof relies on).
struct EffectTouchesJob1 {
  static constexpr std::string_view name = "touches_job1";
  template <class D>
  static void apply(const D& d, spec::ClusterVars<D>& s, int, const spec::Params<D>&) {
    if (s.num_jobs() > 1) s.jobs[1].progress = s.jobs[1].progress + d.k(1);
  }
};

TEST(ProverTest, EffectOnAnotherJobFailsFrame) {
  namespace L = core::lifecycle;
  using Table = boost::mpl::vector<
      L::Row<L::Running, L::Progress, L::Running, core::SpecAction<EffectTouchesJob1>,
             core::SpecGuard<spec::GuardProgress>>>;
  auto r = prove(core::rows_of<Z3Domain, Table>(), kProofShape, kTimeoutMs);
  ExpectDecided(r);
  bool frame_failed = false;
  for (const auto& ob : r.obligations)
    if (ob.kind == ObligationKind::kFrame && ob.row == 1 && !ob.proved) frame_failed = true;
  EXPECT_TRUE(frame_failed);
}

// Two rows for the same (source, event) whose guards overlap fail DETERMINISTIC.
TEST(ProverTest, OverlappingGuardsFailDeterminism) {
  namespace L = core::lifecycle;
  using Table = boost::mpl::vector<
      L::Row<L::Running, L::WorkerCrash, L::Queued, core::SpecAction<spec::EffectRequeue>,
             core::SpecGuard<spec::GuardRetry>>,
      L::Row<L::Running, L::WorkerCrash, L::Failed, core::SpecAction<spec::EffectGiveUp>>>;
  auto r = prove(core::rows_of<Z3Domain, Table>(), kProofShape, kTimeoutMs);
  ExpectDecided(r);
  int det = 0;
  for (const auto& ob : r.obligations)
    if (ob.kind == ObligationKind::kDeterministic) {
      ++det;
      EXPECT_FALSE(ob.proved);
      EXPECT_EQ(ob.row, 1);
      EXPECT_EQ(ob.other_row, 2);
      EXPECT_NE(ob.counterexample.find("both rows #1 and #2 are enabled"), std::string::npos)
          << ob.counterexample;
    }
  EXPECT_EQ(det, 1);
}

// ---- Broken machines as MSM tables -----------------------------------------------------------

// A missing guard: preemption in favour of anyone.
using MissingGuardTable = mpl::vector<lc::Row<lc::Running, lc::Preempt, lc::Checkpointing>>;

TEST(ProverTest, MissingGuardFailsTierInvariant) {
  auto rows = core::rows_of<Z3Domain, MissingGuardTable>();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].guard, nullptr);
  auto r = prove(rows, {}, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  // Init, the row's invariants, FRAME, DELTA, ENABLED (no node rows).
  EXPECT_EQ(r.obligations.size(), 2 * spec::kAllInvariants.size() + 3);
  EXPECT_GT(r.failed, 0);
  EXPECT_EQ(failing_rows(r), std::set<int>{1});
  EXPECT_EQ(failed_on(r, 1), std::set<Inv>{Inv::kTier}) << ids(failed_on(r, 1));
  const auto* ob = find_obligation(r, 1, Inv::kTier);
  ASSERT_NE(ob, nullptr);
  EXPECT_FALSE(ob->proved);
  EXPECT_TRUE(contains(ob->row_label, "Running --Preempt--> Checkpointing")) << ob->row_label;
  EXPECT_TRUE(contains(ob->row_label, "#1 ")) << ob->row_label;
  EXPECT_FALSE(ob->counterexample.empty());
  EXPECT_TRUE(contains(ob->counterexample, "INV-TIER")) << ob->counterexample;
  EXPECT_TRUE(contains(ob->counterexample, "Preempt")) << ob->counterexample;
}

// A wrong effect: takes the devices like EffectAcquire but starts no new incarnation.
struct BadAcquire {
  static constexpr std::string_view name = "take_devices_same_epoch";
  template <class D>
  static void apply(const D& d, spec::ClusterVars<D>& s, int j, const spec::Params<D>& p) {
    s.jobs[j].resv_gen = s.jobs[j].resv_gen + d.k(1);
    spec::move_to_selected(d, s, j, p, s.jobs[j].epoch);
  }
};
using WrongEffectTable = mpl::vector<lc::Row<lc::Queued, lc::Place, lc::Placed,
                                             core::SpecAction<BadAcquire>,
                                             core::SpecGuard<spec::GuardGang>>>;

TEST(ProverTest, WrongEffectFailsEpochInvariant) {
  auto rows = core::rows_of<Z3Domain, WrongEffectTable>();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].action_name, "take_devices_same_epoch");
  EXPECT_EQ(rows[0].guard_name, "gang_fits");
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  const auto failed = failed_on(r, 1);
  std::cout << "[ wrong effect ] " << rows[0].label() << " fails: " << ids(failed) << "\n";
  EXPECT_TRUE(failed.count(Inv::kEpoch)) << ids(failed);
  EXPECT_EQ(failing_rows(r), std::set<int>{1});
  const auto* ob = find_obligation(r, 1, Inv::kEpoch);
  ASSERT_NE(ob, nullptr);
  EXPECT_TRUE(contains(ob->counterexample, "INV-EPOCH")) << ob->counterexample;
}

// An extra row: a completed job starts running again.
using ExtraRowTable = mpl::vector<lc::Row<lc::Completed, lc::Start, lc::Running>>;

TEST(ProverTest, ExtraRowOutOfATerminalStateFailsTermInvariant) {
  auto rows = core::rows_of<Z3Domain, ExtraRowTable>();
  ASSERT_EQ(rows.size(), 1u);
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  const auto failed = failed_on(r, 1);
  std::cout << "[ extra row ] " << rows[0].label() << " fails: " << ids(failed) << "\n";
  EXPECT_TRUE(failed.count(Inv::kTerm)) << ids(failed);
  EXPECT_TRUE(failed.count(Inv::kGang)) << ids(failed);  // Running with no devices
  const auto* ob = find_obligation(r, 1, Inv::kTerm);
  ASSERT_NE(ob, nullptr);
  EXPECT_TRUE(contains(ob->counterexample, "INV-TERM")) << ob->counterexample;
}

// ---- Removing the guard of every preemption, resize, migration row ---------------------------

bool guard_matters(EventKind e) {
  return e == EventKind::kPreempt || e == EventKind::kResizeUp || e == EventKind::kResizeDown ||
         e == EventKind::kMigrate || e == EventKind::kCheckpointDone || e == EventKind::kResume;
}

std::vector<int> guarded_rows() {
  std::vector<int> out;
  for (const auto& r : lifecycle_rows())
    if (guard_matters(r.event)) out.push_back(r.index);
  return out;
}

class GuardRemovedTest : public ::testing::TestWithParam<int> {};

// The checker sees the table as RowDesc values: the guard pointer set to nullptr is the row with
// its guard removed. The whole table is proved, as orrery-check would: only that row may fail.
TEST_P(GuardRemovedTest, FailsOnThatRowNamingTheInvariant) {
  const int index = GetParam();
  auto rows = lifecycle_rows();
  auto& row = rows[index - 1];
  ASSERT_EQ(row.index, index);
  ASSERT_NE(row.guard, nullptr) << row.label();
  row.guard = nullptr;
  row.guard_name = "none";
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  const auto failed = failed_on(r, index);
  std::cout << "[ guard removed ] " << row.label() << " fails: " << ids(failed) << "\n";
  EXPECT_FALSE(failed.empty()) << row.label() << " still proves without its guard";
  EXPECT_EQ(failing_rows(r), std::set<int>{index}) << "other rows must be unaffected";
  for (auto inv : failed) {
    const auto* ob = find_obligation(r, index, inv);
    ASSERT_NE(ob, nullptr);
    EXPECT_EQ(ob->row_label, row.label());
    EXPECT_TRUE(contains(ob->counterexample, spec::inv_id(inv))) << ob->counterexample;
  }
  // The invariant each guard is there for.
  switch (row.event) {
    case EventKind::kPreempt:
    case EventKind::kResizeDown:
      // A preemption or a shrink decided for a job that is not favoured.
      EXPECT_TRUE(failed.count(Inv::kTier)) << ids(failed);
      break;
    case EventKind::kCheckpointDone:
      // A cut committed at another step than the current one.
      EXPECT_TRUE(failed.count(Inv::kCkpt)) << ids(failed);
      if (row.src != spec::JobState::kCheckpointing) {
        // A migration or resize carried out on a target that no longer fits: devices another job
        // holds, or of the wrong type.
        EXPECT_TRUE(failed.count(Inv::kGang)) << ids(failed);
        EXPECT_TRUE(failed.count(Inv::kExcl)) << ids(failed);
      }
      break;
    case EventKind::kResume:
      EXPECT_TRUE(failed.count(Inv::kGang)) << ids(failed);
      EXPECT_TRUE(failed.count(Inv::kExcl)) << ids(failed);
      break;
    case EventKind::kResizeUp:
    case EventKind::kMigrate:
      // The decision only records the target (the devices are taken when the cut is stored, under
      // GuardMove): without its guard the target need not be a gang of the job.
      EXPECT_TRUE(failed.count(Inv::kSplice)) << ids(failed);
      break;
    default:
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(PreemptionResizeMigrationRows, GuardRemovedTest,
                         ::testing::ValuesIn(guarded_rows()),
                         [](const ::testing::TestParamInfo<int>& info) {
                           const auto rows = lifecycle_rows();
                           const auto& r = rows[info.param - 1];
                           return "Row" + std::to_string(info.param) + "_" +
                                  std::string(spec::state_name(r.src)) +
                                  std::string(spec::event_name(r.event));
                         });

TEST(GuardRemovedSetTest, CoversEveryPreemptionResizeAndMigrationRow) {
  // ResizeUp, ResizeDown, Preempt, CheckpointDone from Checkpointing, Resume, Migrate, and
  // CheckpointDone from Migrating and from Resizing.
  EXPECT_EQ(guarded_rows(), (std::vector<int>{7, 8, 9, 10, 11, 13, 14, 15}));
}

// The same at the MSM type level: the real table with the shrink row's guard replaced by
// boost::msm::front::none.
using MainRowsShrinkUnguarded = mpl::vector<
    lc::Row<lc::New, lc::Submit, lc::Submitted, lc::Do<spec::EffectSubmit>, lc::If<spec::GuardSubmit>>,
    lc::Row<lc::Submitted, lc::Admit, lc::Queued, lc::Do<spec::EffectAdmit>>,
    lc::Row<lc::Queued, lc::Place, lc::Placed, lc::Do<spec::EffectAcquire>, lc::If<spec::GuardGang>>,
    lc::Row<lc::Placed, lc::Start, lc::Running>,
    lc::Row<lc::Running, lc::Progress, lc::Running, lc::Do<spec::EffectProgress>, lc::If<spec::GuardProgress>>,
    lc::Row<lc::Running, lc::Checkpoint, lc::Running, lc::Do<spec::EffectCheckpoint>, lc::If<spec::GuardCheckpoint>>,
    lc::Row<lc::Running, lc::ResizeUp, lc::Resizing, lc::Do<spec::EffectPlanMove>, lc::If<spec::GuardGrow>>,
    lc::Row<lc::Running, lc::ResizeDown, lc::Resizing, lc::Do<spec::EffectPlanShrink>, boost::msm::front::none>,
    lc::Row<lc::Running, lc::Preempt, lc::Checkpointing, lc::Do<spec::EffectPreempt>, lc::If<spec::GuardPreempt>>,
    lc::Row<lc::Checkpointing, lc::CheckpointDone, lc::Suspended, lc::Do<spec::EffectSuspend>, lc::If<spec::GuardCut>>,
    lc::Row<lc::Suspended, lc::Resume, lc::Restoring, lc::Do<spec::EffectAcquire>, lc::If<spec::GuardGang>>,
    lc::Row<lc::Restoring, lc::RestoreDone, lc::Running>,
    lc::Row<lc::Running, lc::Migrate, lc::Migrating, lc::Do<spec::EffectPlanMove>, lc::If<spec::GuardMigrate>>,
    lc::Row<lc::Migrating, lc::CheckpointDone, lc::Restoring, lc::Do<spec::EffectMove>, lc::If<spec::GuardMove>>,
    lc::Row<lc::Resizing, lc::CheckpointDone, lc::Restoring, lc::Do<spec::EffectMove>, lc::If<spec::GuardMove>>,
    lc::Row<lc::Running, lc::Complete, lc::Completed, lc::Do<spec::EffectComplete>>,
    lc::Row<lc::Queued, lc::Release, lc::Queued, lc::Do<spec::EffectUnreserve>>,
    lc::Row<lc::Suspended, lc::Release, lc::Suspended, lc::Do<spec::EffectUnreserve>>>;
using ShrinkUnguardedTable =
    mpl::joint_view<mpl::joint_view<MainRowsShrinkUnguarded, lc::InFlightRows>,
                    mpl::joint_view<lc::FailureRows, lc::CancelRows>>;

TEST(ProverTest, MsmTableWithAGuardReplacedByNoneFailsNamingThatRow) {
  auto rows = core::rows_of<Z3Domain, ShrinkUnguardedTable>();
  const auto real = lifecycle_rows();
  ASSERT_EQ(rows.size(), real.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i == 7) continue;
    EXPECT_EQ(rows[i].label(), real[i].label());  // the copy is faithful but for row 8
  }
  EXPECT_EQ(rows[7].label(),
            "#8 Running --ResizeDown--> Resizing [none / record_target_beneficiary]");
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  EXPECT_GT(r.failed, 0);
  EXPECT_EQ(failing_rows(r), std::set<int>{8});
  const auto failed = failed_on(r, 8);
  std::cout << "[ MSM table, guard = none ] " << rows[7].label() << " fails: " << ids(failed)
            << "\n";
  EXPECT_TRUE(failed.count(Inv::kTier)) << ids(failed);
  const auto* ob = find_obligation(r, 8, Inv::kTier);
  ASSERT_NE(ob, nullptr);
  EXPECT_TRUE(contains(ob->counterexample, "ResizeDown")) << ob->counterexample;
  EXPECT_TRUE(contains(ob->counterexample, "violates INV-TIER")) << ob->counterexample;
}

// A shape too small for a row to fire makes that row's obligations vacuous: ENABLED fails on it.
TEST(ProverTest, RowThatCannotFireOnTheShapeFailsEnabled) {
  auto r = prove(lifecycle_rows(), Shape{1, 1, 1}, kTimeoutMs);
  ExpectDecided(r);
  std::set<int> not_enabled;
  for (const auto& ob : r.obligations)
    if (ob.kind == ObligationKind::kEnabled && !ob.proved) {
      not_enabled.insert(ob.row);
      EXPECT_TRUE(contains(ob.counterexample, "can never fire")) << ob.counterexample;
    }
  // One device: no job can grow or shrink. (Preempt can fire with one job: an operator's
  // suspension is for no one.)
  EXPECT_EQ(not_enabled, (std::set<int>{7, 8}));
  EXPECT_EQ(failing_rows(r), (std::set<int>{7, 8}));
  EXPECT_FALSE(unbounded(r, Inv::kTier));
}

// ---- Removing the counter update from any effect ---------------------------------------------

// E with its counter update removed: whatever E does to the per-node and fleet counters is undone.
template <class E>
struct WithoutCounterUpdate {
  template <class D>
  static void apply(const D& d, spec::ClusterVars<D>& s, int j, const spec::Params<D>& p) {
    auto held = s.node_held, swap = s.node_swap, premium = s.premium_admitted;
    E::apply(d, s, j, p);
    s.node_held = held;
    s.node_swap = swap;
    s.premium_admitted = premium;
  }
};

using EffectFn = void (*)(const Z3Domain&, SymCluster&, int, const SymParams&);

template <class E>
void add_without_counters(std::map<std::string_view, EffectFn>& m) {
  m[E::name] = &WithoutCounterUpdate<E>::template apply<Z3Domain>;
}

// Every effect that updates a counter, by name.
std::map<std::string_view, EffectFn> effects_without_counters() {
  std::map<std::string_view, EffectFn> m;
  add_without_counters<spec::EffectAdmit>(m);
  add_without_counters<spec::EffectAcquire>(m);
  add_without_counters<spec::EffectMove>(m);
  add_without_counters<spec::EffectSuspend>(m);
  add_without_counters<spec::EffectComplete>(m);
  add_without_counters<spec::EffectCancel>(m);
  add_without_counters<spec::EffectRequeue>(m);
  add_without_counters<spec::EffectRequeueNoFault>(m);
  add_without_counters<spec::EffectGiveUp>(m);
  add_without_counters<spec::EffectRequeuePlatform>(m);
  add_without_counters<spec::EffectGiveUpPlatform>(m);
  return m;
}

// Rows are proved independently, so one proof of the table with every counter update removed
// shows, row by row, that each removal is caught: DELTA and INV-INDEX fail on exactly the rows
// whose effect updates a counter. The one exception is cancellation from Submitted: a submitted
// job is neither admitted nor holding, so its effect's counter update changes nothing there.
TEST(ProverTest, EffectWithoutItsCounterUpdateFailsDeltaAndIndexOnItsRow) {
  auto rows = lifecycle_rows();
  const auto wrapped = effects_without_counters();
  std::set<int> expected;
  for (auto& row : rows) {
    auto it = wrapped.find(row.action_name);
    if (it == wrapped.end()) continue;
    row.effect = it->second;
    if (!(row.src == spec::JobState::kSubmitted && row.event == EventKind::kCancel))
      expected.insert(row.index);
  }
  // Every row but Submit, Start, Progress and Checkpoint (#19-#24 too), the decisions that only
  // record a target or a beneficiary (ResizeUp, ResizeDown, Preempt, Migrate), RestoreDone, the
  // two Release rows, the three Abort rows that restart in place (#26-#28), and #54.
  EXPECT_EQ(expected.size(), 41u);
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  EXPECT_EQ(failing_rows(r), expected);
  for (int index : expected) {
    const auto& row = rows[index - 1];
    bool delta_failed = false;
    for (const auto& ob : r.obligations)
      if (ob.kind == ObligationKind::kDelta && ob.row == index && !ob.proved) {
        delta_failed = true;
        EXPECT_EQ(ob.row_label, row.label());
        EXPECT_TRUE(contains(ob.counterexample, "a counter did not change")) << ob.counterexample;
      }
    EXPECT_TRUE(delta_failed) << row.label();
    EXPECT_TRUE(failed_on(r, index).count(Inv::kIndex)) << row.label() << ": "
                                                         << ids(failed_on(r, index));
  }
}

// ---- Removing any reservation clause -----------------------------------------------------------

// G without its clause "devices not reserved for another job".
template <class G>
struct WithoutReservationClause {
  template <class D>
  static spec::Clauses<D> clauses(const D& d, const spec::ClusterVars<D>& s, int j,
                                  const spec::Params<D>& p) {
    auto cs = G::clauses(d, s, j, p);
    auto n = cs.size();
    cs.erase(std::remove_if(cs.begin(), cs.end(),
                            [](const auto& c) {
                              return c.name == "devices not reserved for another job";
                            }),
             cs.end());
    if (cs.size() + 1 != n) std::abort();  // the clause must exist, once
    return cs;
  }
};

TEST(ProverTest, PlacementWithoutTheReservationClauseFailsReserveOnItsRow) {
  auto rows = lifecycle_rows();
  rows[2].guard = &WithoutReservationClause<spec::GuardGang>::clauses<Z3Domain>;     // #3 Place
  rows[6].guard = &WithoutReservationClause<spec::GuardGrow>::clauses<Z3Domain>;     // #7 ResizeUp
  rows[7].guard = &WithoutReservationClause<spec::GuardShrink>::clauses<Z3Domain>;   // #8 ResizeDown
  rows[10].guard = &WithoutReservationClause<spec::GuardGang>::clauses<Z3Domain>;    // #11 Resume
  rows[12].guard = &WithoutReservationClause<spec::GuardMigrate>::clauses<Z3Domain>; // #13 Migrate
  rows[13].guard = &WithoutReservationClause<spec::GuardMove>::clauses<Z3Domain>;    // #14 Migrating
  rows[14].guard = &WithoutReservationClause<spec::GuardMove>::clauses<Z3Domain>;    // #15 Resizing
  for (int i : {13, 14}) ASSERT_EQ(rows[i].event, EventKind::kCheckpointDone);
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  // Devices change hands where a job takes them: placement, resume, and a migration or resize
  // carried out when its cut is stored; and a reservation changes hands where a move is decided
  // (a grow, #7, or a migration, #13, reserving its target: without the clause it could replace
  // the reservation of a waiting job it does not outrank, which INV-RESERVE (d) forbids). A shrink
  // keeps a subset of the job's own devices, never reserved ones (a reserved device is free):
  // there the clause is redundant.
  const std::set<int> expected{3, 7, 11, 13, 14, 15};
  std::cout << "[ reservation clause removed ] failing rows:";
  for (int index : failing_rows(r)) std::cout << " #" << index << " (" << ids(failed_on(r, index)) << ")";
  std::cout << "\n";
  EXPECT_EQ(failing_rows(r), expected);
  for (int index : expected) {
    EXPECT_TRUE(failed_on(r, index).count(Inv::kReserve)) << ids(failed_on(r, index));
    const auto* ob = find_obligation(r, index, Inv::kReserve);
    ASSERT_NE(ob, nullptr);
    EXPECT_TRUE(contains(ob->counterexample, "resv=job")) << ob->counterexample;
    EXPECT_TRUE(contains(ob->counterexample, "violates INV-RESERVE")) << ob->counterexample;
  }
}

// E without any write to the per-device reservation fields: freed devices are not reserved, taken
// devices keep their stale reservation entries.
template <class E>
struct WithoutReservationWrites {
  template <class D>
  static void apply(const D& d, spec::ClusterVars<D>& s, int j, const spec::Params<D>& p) {
    auto resv_for = s.resv_for, resv_gen = s.resv_gen;
    E::apply(d, s, j, p);
    s.resv_for = resv_for;
    s.resv_gen = resv_gen;
  }
};

// E without starting a new reservation generation for the acting job.
template <class E>
struct WithoutNewGeneration {
  template <class D>
  static void apply(const D& d, spec::ClusterVars<D>& s, int j, const spec::Params<D>& p) {
    auto gen = s.jobs[j].resv_gen;
    E::apply(d, s, j, p);
    s.jobs[j].resv_gen = gen;
  }
};

TEST(ProverTest, EffectsWithoutTheirReservationClausesFailReserveOnTheirRows) {
  auto rows = lifecycle_rows();
  auto at = [&](int index, spec::JobState src, EventKind event) -> SymRow& {
    auto& row = rows[index - 1];
    EXPECT_EQ(row.src, src) << row.label();
    EXPECT_EQ(row.event, event) << row.label();
    return row;
  };
  using spec::JobState;
  at(7, JobState::kRunning, EventKind::kResizeUp).effect =
      &WithoutReservationWrites<spec::EffectPlanMove>::apply<Z3Domain>;
  at(8, JobState::kRunning, EventKind::kResizeDown).effect =
      &WithoutReservationWrites<spec::EffectPlanShrink>::apply<Z3Domain>;
  at(10, JobState::kCheckpointing, EventKind::kCheckpointDone).effect =
      &WithoutReservationWrites<spec::EffectSuspend>::apply<Z3Domain>;
  at(13, JobState::kRunning, EventKind::kMigrate).effect =
      &WithoutReservationWrites<spec::EffectPlanMove>::apply<Z3Domain>;
  at(14, JobState::kMigrating, EventKind::kCheckpointDone).effect =
      &WithoutReservationWrites<spec::EffectMove>::apply<Z3Domain>;
  at(15, JobState::kResizing, EventKind::kCheckpointDone).effect =
      &WithoutReservationWrites<spec::EffectMove>::apply<Z3Domain>;
  at(3, JobState::kQueued, EventKind::kPlace).effect =
      &WithoutNewGeneration<spec::EffectAcquire>::apply<Z3Domain>;
  at(11, JobState::kSuspended, EventKind::kResume).effect =
      &WithoutNewGeneration<spec::EffectAcquire>::apply<Z3Domain>;
  for (auto& row : rows)
    if (row.event == EventKind::kCancel)
      row.effect = &WithoutNewGeneration<spec::EffectCancel>::apply<Z3Domain>;
  // A preemption victim, or a job shrinking for a beneficiary, that fails or is cancelled before
  // its cut is stored: the devices it gives up must still be reserved for the job they were for.
  for (int index : {42, 44}) {
    EXPECT_EQ(rows[index - 1].src, JobState::kCheckpointing);
    rows[index - 1].effect = &WithoutReservationWrites<spec::EffectRequeue>::apply<Z3Domain>;
  }
  for (int index : {43, 45}) {
    EXPECT_EQ(rows[index - 1].src, JobState::kCheckpointing);
    rows[index - 1].effect = &WithoutReservationWrites<spec::EffectGiveUp>::apply<Z3Domain>;
  }
  for (int index : {30, 32}) {
    EXPECT_EQ(rows[index - 1].src, JobState::kResizing);
    rows[index - 1].effect = &WithoutReservationWrites<spec::EffectRequeue>::apply<Z3Domain>;
  }
  for (int index : {31, 33}) {
    EXPECT_EQ(rows[index - 1].src, JobState::kResizing);
    rows[index - 1].effect = &WithoutReservationWrites<spec::EffectGiveUp>::apply<Z3Domain>;
  }
  at(58, JobState::kCheckpointing, EventKind::kCancel).effect =
      &WithoutReservationWrites<spec::EffectCancel>::apply<Z3Domain>;
  at(62, JobState::kResizing, EventKind::kCancel).effect =
      &WithoutReservationWrites<spec::EffectCancel>::apply<Z3Domain>;
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  std::cout << "[ reservation writes removed ] failing rows:";
  for (int index : failing_rows(r)) std::cout << " #" << index << " (" << ids(failed_on(r, index)) << ")";
  std::cout << "\n";
  // Cancellation must void the reservations of a job that is waiting (#55 from Queued, #59 from
  // Suspended); from any other state the job has no live reservation and the new generation is
  // redundant (#58 and #62 fail for the reservation writes removed there). A move's decision
  // (#7, #13) that does not reserve its target breaks no invariant: the target is checked again
  // when the cut is stored (GuardMove), so the reservation is for progress, not for safety; a
  // shrink (#8) targets devices the job holds, which are never reserved.
  const std::set<int> expected{3, 10, 11, 14, 15, 30, 31, 32, 33, 42, 43, 44, 45, 55, 58, 59, 62};
  EXPECT_EQ(failing_rows(r), expected);
  for (int index : expected) {
    SCOPED_TRACE(rows[index - 1].label());
    EXPECT_TRUE(failed_on(r, index).count(Inv::kReserve)) << ids(failed_on(r, index));
    const auto* ob = find_obligation(r, index, Inv::kReserve);
    ASSERT_NE(ob, nullptr);
    EXPECT_TRUE(contains(ob->counterexample, "violates INV-RESERVE")) << ob->counterexample;
  }
}

// ---- INV-SPLICE: a move never swaps a device within one incarnation ---------------------------

// GuardShrink without "keeps a subset of the held devices": a shrink may name a target with a
// device the job does not hold.
struct ShrinkWithoutSubset {
  static constexpr std::string_view name = "shrinks_anywhere";
  template <class D>
  static spec::Clauses<D> clauses(const D& d, const spec::ClusterVars<D>& s, int j,
                                  const spec::Params<D>& p) {
    auto cs = spec::GuardShrink::clauses(d, s, j, p);
    const auto n = cs.size();
    cs.erase(std::remove_if(cs.begin(), cs.end(),
                            [](const auto& c) {
                              return c.name == "keeps a subset of the held devices";
                            }),
             cs.end());
    if (cs.size() + 1 != n) std::abort();  // the clause must exist, once
    return cs;
  }
};

// The real table with the shrink row's guard replaced, at the MSM type level.
using MainRowsShrinkAnywhere = mpl::vector<
    lc::Row<lc::New, lc::Submit, lc::Submitted, lc::Do<spec::EffectSubmit>, lc::If<spec::GuardSubmit>>,
    lc::Row<lc::Submitted, lc::Admit, lc::Queued, lc::Do<spec::EffectAdmit>>,
    lc::Row<lc::Queued, lc::Place, lc::Placed, lc::Do<spec::EffectAcquire>, lc::If<spec::GuardGang>>,
    lc::Row<lc::Placed, lc::Start, lc::Running>,
    lc::Row<lc::Running, lc::Progress, lc::Running, lc::Do<spec::EffectProgress>, lc::If<spec::GuardProgress>>,
    lc::Row<lc::Running, lc::Checkpoint, lc::Running, lc::Do<spec::EffectCheckpoint>, lc::If<spec::GuardCheckpoint>>,
    lc::Row<lc::Running, lc::ResizeUp, lc::Resizing, lc::Do<spec::EffectPlanMove>, lc::If<spec::GuardGrow>>,
    lc::Row<lc::Running, lc::ResizeDown, lc::Resizing, lc::Do<spec::EffectPlanShrink>, lc::If<ShrinkWithoutSubset>>,
    lc::Row<lc::Running, lc::Preempt, lc::Checkpointing, lc::Do<spec::EffectPreempt>, lc::If<spec::GuardPreempt>>,
    lc::Row<lc::Checkpointing, lc::CheckpointDone, lc::Suspended, lc::Do<spec::EffectSuspend>, lc::If<spec::GuardCut>>,
    lc::Row<lc::Suspended, lc::Resume, lc::Restoring, lc::Do<spec::EffectAcquire>, lc::If<spec::GuardGang>>,
    lc::Row<lc::Restoring, lc::RestoreDone, lc::Running>,
    lc::Row<lc::Running, lc::Migrate, lc::Migrating, lc::Do<spec::EffectPlanMove>, lc::If<spec::GuardMigrate>>,
    lc::Row<lc::Migrating, lc::CheckpointDone, lc::Restoring, lc::Do<spec::EffectMove>, lc::If<spec::GuardMove>>,
    lc::Row<lc::Resizing, lc::CheckpointDone, lc::Restoring, lc::Do<spec::EffectMove>, lc::If<spec::GuardMove>>,
    lc::Row<lc::Running, lc::Complete, lc::Completed, lc::Do<spec::EffectComplete>>,
    lc::Row<lc::Queued, lc::Release, lc::Queued, lc::Do<spec::EffectUnreserve>>,
    lc::Row<lc::Suspended, lc::Release, lc::Suspended, lc::Do<spec::EffectUnreserve>>>;
using ShrinkAnywhereTable =
    mpl::joint_view<mpl::joint_view<MainRowsShrinkAnywhere, lc::InFlightRows>,
                    mpl::joint_view<lc::FailureRows, lc::CancelRows>>;

// A shrink that may let a new device in (a target that is not a subset of the held devices) is
// a swap within one incarnation: INV-SPLICE fails on the shrink row, and only there.
TEST(ProverTest, ShrinkGuardLettingANewDeviceInFailsSplice) {
  auto rows = core::rows_of<Z3Domain, ShrinkAnywhereTable>();
  const auto real = lifecycle_rows();
  ASSERT_EQ(rows.size(), real.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i == 7) continue;
    EXPECT_EQ(rows[i].label(), real[i].label());  // faithful but for row 8
  }
  EXPECT_EQ(rows[7].label(),
            "#8 Running --ResizeDown--> Resizing [shrinks_anywhere / record_target_beneficiary]");
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  EXPECT_EQ(failing_rows(r), std::set<int>{8});
  const auto failed = failed_on(r, 8);
  std::cout << "[ shrink without its subset clause ] " << rows[7].label() << " fails: "
            << ids(failed) << "\n";
  EXPECT_TRUE(failed.count(Inv::kSplice)) << ids(failed);
  const auto* ob = find_obligation(r, 8, Inv::kSplice);
  ASSERT_NE(ob, nullptr);
  EXPECT_TRUE(contains(ob->counterexample, "violates INV-SPLICE")) << ob->counterexample;
  EXPECT_TRUE(contains(ob->counterexample, "ResizeDown")) << ob->counterexample;
  EXPECT_FALSE(unbounded(r, Inv::kTier));
}

// Progress that also moves the job onto as many selected devices, keeping its epoch: nothing but
// INV-SPLICE's step part (an epoch never swaps a device) forbids it — the devices are taken under
// the job's own epoch (INV-EPOCH holds), the gang fits (INV-GANG, INV-EXCL, INV-CAP hold), the
// job keeps its device count (INV-TIER: nothing is taken from it).
struct ProgressAndSwap {
  static constexpr std::string_view name = "advance_and_swap_same_epoch";
  template <class D>
  static void apply(const D& d, spec::ClusterVars<D>& s, int j, const spec::Params<D>& p) {
    spec::EffectProgress::apply(d, s, j, p);
    spec::move_to_selected(d, s, j, p, s.jobs[j].epoch);
  }
};
struct ProgressOnAGang {
  static constexpr std::string_view name = "monotone_step_gang_fits";
  template <class D>
  static spec::Clauses<D> clauses(const D& d, const spec::ClusterVars<D>& s, int j,
                                  const spec::Params<D>& p) {
    auto cs = spec::GuardGang::clauses(d, s, j, p);
    for (auto& c : spec::GuardProgress::clauses(d, s, j, p)) cs.push_back(c);
    // As many devices as now: a swap, not a shrink (which INV-TIER would refuse as preemptive).
    cs.push_back({"as many devices as now", d.size(p.sel) == s.jobs[j].devices});
    return cs;
  }
};
using SwapAtTheSameEpochTable = mpl::vector<lc::Row<lc::Running, lc::Progress, lc::Running,
                                                    lc::Do<ProgressAndSwap>, lc::If<ProgressOnAGang>>>;

TEST(ProverTest, EffectSwappingADeviceAtTheSameEpochFailsSpliceStep) {
  auto rows = core::rows_of<Z3Domain, SwapAtTheSameEpochTable>();
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  const auto failed = failed_on(r, 1);
  std::cout << "[ swap at the same epoch ] " << rows[0].label() << " fails: " << ids(failed)
            << "\n";
  EXPECT_EQ(failed, std::set<Inv>{Inv::kSplice}) << ids(failed);
  const auto* ob = find_obligation(r, 1, Inv::kSplice);
  ASSERT_NE(ob, nullptr);
  EXPECT_TRUE(contains(ob->counterexample, "violates INV-SPLICE")) << ob->counterexample;
}

// ---- Premium admission beyond the reserve (spare) ----------------------------------------------

// Admission that counts every premium job against the reserve (none spare): INV-ADMIT's fleet part
// fails on the Admit row.
struct AdmitIgnoringTheReserve {
  static constexpr std::string_view name = "count_admitted_always";
  template <class D>
  static void apply(const D& d, spec::ClusterVars<D>& s, int j, const spec::Params<D>&) {
    auto& job = s.jobs[j];
    s.premium_admitted.front() = s.premium_admitted.front() +
                                 d.ite(spec::is(d, job.tier, spec::Tier::kPremium), job.min_dev, d.k(0));
    job.spare = d.k(0);
  }
};
// A (re)start that lets a spare job join the reserve whether or not it has room (the real effect,
// then a join for one it left spare).
struct AcquireJoiningWithoutRoom {
  static constexpr std::string_view name = "new_epoch_take_devices_join_always";
  template <class D>
  static void apply(const D& d, spec::ClusterVars<D>& s, int j, const spec::Params<D>& p) {
    spec::EffectAcquire::apply(d, s, j, p);
    auto& job = s.jobs[j];
    s.premium_admitted.front() =
        s.premium_admitted.front() + d.ite(job.spare == d.k(1), job.min_dev, d.k(0));
    job.spare = d.k(0);
  }
};
// A (re)start that demotes a premium job within the reserve to spare (giving its share back): the
// counter stays right, but the guarantee is taken away: INV-ADMIT's step part fails.
struct AcquireDemoting {
  static constexpr std::string_view name = "new_epoch_take_devices_demote";
  template <class D>
  static void apply(const D& d, spec::ClusterVars<D>& s, int j, const spec::Params<D>& p) {
    spec::EffectAcquire::apply(d, s, j, p);
    auto& job = s.jobs[j];
    const auto demote = spec::is(d, job.tier, spec::Tier::kPremium) && job.spare == d.k(0);
    s.premium_admitted.front() = s.premium_admitted.front() - d.ite(demote, job.min_dev, d.k(0));
    job.spare = d.ite(demote, d.k(1), job.spare);
  }
};
using AdmitIgnoringTheReserveTable =
    mpl::vector<lc::Row<lc::Submitted, lc::Admit, lc::Queued, lc::Do<AdmitIgnoringTheReserve>>>;
using JoinWithoutRoomTable = mpl::vector<
    lc::Row<lc::Queued, lc::Place, lc::Placed, lc::Do<AcquireJoiningWithoutRoom>, lc::If<spec::GuardGang>>>;
using DemotingTable = mpl::vector<
    lc::Row<lc::Queued, lc::Place, lc::Placed, lc::Do<AcquireDemoting>, lc::If<spec::GuardGang>>>;

template <class Table>
std::set<Inv> failed_on_its_one_row(const char* what) {
  auto rows = core::rows_of<Z3Domain, Table>();
  auto r = prove(rows, kProofShape, kTimeoutMs);
  ExpectDecided(r);
  EXPECT_EQ(failing_rows(r), std::set<int>{1});
  const auto failed = failed_on(r, 1);
  std::cout << "[ " << what << " ] " << rows[0].label() << " fails: " << ids(failed) << "\n";
  return failed;
}

TEST(ProverTest, AdmissionThatIgnoresTheReserveFailsAdmit) {
  EXPECT_EQ(failed_on_its_one_row<AdmitIgnoringTheReserveTable>("admission ignoring the reserve"),
            std::set<Inv>{Inv::kAdmit});
}

TEST(ProverTest, SpareJobJoiningTheReserveWithoutRoomFailsAdmit) {
  EXPECT_EQ(failed_on_its_one_row<JoinWithoutRoomTable>("joining without room"),
            std::set<Inv>{Inv::kAdmit});
}

TEST(ProverTest, DemotingAJobWithinTheReserveFailsAdmitStep) {
  EXPECT_EQ(failed_on_its_one_row<DemotingTable>("demotion to spare"), std::set<Inv>{Inv::kAdmit});
}

// ---- Another device type for a waiting job (Retype) -------------------------------------------

// A retype that keeps the job's reservations (made for devices of its old type): INV-WORLD's step
// part fails (the type changes only with the reservations voided).
struct RetypeKeepingReservations {
  static constexpr std::string_view name = "take_type_keep_reservations";
  template <class D>
  static void apply(const D&, spec::ClusterVars<D>& s, int j, const spec::Params<D>& p) {
    s.jobs[j].dtype = p.dtype;
  }
};
using RetypeKeepingReservationsTable = mpl::vector<
    lc::Row<lc::Queued, lc::Retype, lc::Queued, lc::Do<RetypeKeepingReservations>, lc::If<spec::GuardRetype>>>;
// The real retype, from Running: the job would hold devices of a type that is no longer its own.
using RetypeWhileRunningTable = mpl::vector<
    lc::Row<lc::Running, lc::Retype, lc::Running, lc::Do<spec::EffectRetype>, lc::If<spec::GuardRetype>>>;

TEST(ProverTest, RetypeKeepingTheReservationsFailsWorldStep) {
  EXPECT_EQ(failed_on_its_one_row<RetypeKeepingReservationsTable>("retype keeping reservations"),
            std::set<Inv>{Inv::kWorld});
}

TEST(ProverTest, RetypeOfARunningJobFailsWorldAndGang) {
  const auto failed = failed_on_its_one_row<RetypeWhileRunningTable>("retype while running");
  EXPECT_TRUE(failed.count(Inv::kWorld) != 0) << ids(failed);
  EXPECT_TRUE(failed.count(Inv::kGang) != 0) << ids(failed);
}

// ---- ORDER: job ids are compared only for equality --------------------------------------------

TEST(IdOrderTest, RealTablesCompareIdsOnlyForEquality) {
  const auto rows = lifecycle_order_rows();
  ASSERT_EQ(rows.size(), lifecycle_rows().size());
  auto r = check_id_order(rows, node_lifecycle_order_rows(), kProofShape);
  EXPECT_TRUE(r.ok()) << ::testing::PrintToString(r.violations);
  std::cout << "[ ORDER ] " << r.formulas << " evaluations, " << r.ms << " ms\n";
  // The domain: 2 clusters x (14 invariants' parts, the initial state, the fleet; then per row
  // and acting job: guard, effect, 8 step parts, DELTA; node guards). Renaming: 5 clusters x 2
  // renamings x (per row and acting job: guard, effect, invariants).
  EXPECT_GT(r.formulas, 2 * 64 * 3 * 11 + 5 * 2 * 64 * 3 * 3);
  const auto ob = id_order_obligation(r);
  EXPECT_EQ(ob.kind, ObligationKind::kIdOrder);
  EXPECT_EQ(obligation_name(ob), "ORDER");
  EXPECT_TRUE(ob.proved);
  EXPECT_TRUE(ob.counterexample.empty()) << ob.counterexample;
}

// Preemption only of jobs whose id is below the beneficiary's. With job 0 acting that clause
// always holds (a beneficiary is another job, so its id is at least 1): the inductive proof, which
// fixes the acting job at index 0, proves the row; yet job 2 could never be preempted for jobs 0
// or 1. ORDER is what refuses it.
struct PreemptLowerIdsOnly {
  static constexpr std::string_view name = "favoured_and_higher_id";
  template <class D>
  static spec::Clauses<D> clauses(const D& d, const spec::ClusterVars<D>& s, int j,
                                  const spec::Params<D>& p) {
    auto cs = spec::GuardPreempt::clauses(d, s, j, p);
    cs.push_back({"victim's id below the beneficiary's", d.k(j) <= p.beneficiary});
    return cs;
  }
};
using OrderedIdGuardTable =
    mpl::vector<lc::Row<lc::Running, lc::Preempt, lc::Checkpointing, lc::Do<spec::EffectPreempt>,
                        lc::If<PreemptLowerIdsOnly>>>;

TEST(IdOrderTest, GuardComparingIdsWithLessEqualFailsOrderButNotTheProof) {
  // The proof with job 0 acting does not see it.
  auto proof = prove(core::rows_of<Z3Domain, OrderedIdGuardTable>(), {}, kProofShape, kTimeoutMs);
  ExpectDecided(proof);
  EXPECT_EQ(proof.failed, 0);
  // ORDER does, naming the guard, the row and the operator.
  auto r = check_id_order(core::rows_of<IdOrderDomain, OrderedIdGuardTable>(), {}, kProofShape);
  ASSERT_FALSE(r.ok());
  bool ordered = false;
  for (const auto& v : r.violations) {
    EXPECT_TRUE(contains(v, "the guard favoured_and_higher_id of #1 Running --Preempt--> "
                            "Checkpointing"))
        << v;
    ordered |= contains(v, "a job id takes part in `<=`");
  }
  EXPECT_TRUE(ordered) << ::testing::PrintToString(r.violations);
  const auto ob = id_order_obligation(r);
  EXPECT_FALSE(ob.proved);
  EXPECT_FALSE(ob.unknown);
  EXPECT_TRUE(contains(ob.counterexample, "favoured_and_higher_id")) << ob.counterexample;
  ProofReport report;
  add_obligation(report, ob);
  EXPECT_EQ(report.failed, 1);
}

// A job id made from the acting job's index by arithmetic: the preemption remembers "the next
// slot" as its beneficiary. The sum is written where an id belongs, so its operands are ids, and
// they took part in `+`.
struct PreemptForTheNextSlot {
  static constexpr std::string_view name = "remember_next_slot";
  template <class D>
  static void apply(const D& d, spec::ClusterVars<D>& s, int j, const spec::Params<D>&) {
    s.jobs[j].ben = d.k(j) + d.k(1);
  }
};
// A guard that orders an index literal which is also used as an id (compared with owners).
struct GangForLowSlots {
  static constexpr std::string_view name = "gang_fits_low_slots";
  template <class D>
  static spec::Clauses<D> clauses(const D& d, const spec::ClusterVars<D>& s, int j,
                                  const spec::Params<D>& p) {
    auto cs = spec::GuardGang::clauses(d, s, j, p);
    const auto me = d.k(j);
    auto mine = d.b(true);
    d.members(p.sel, [&](int dev, const typename D::Bool& in) {
      mine = mine && d.implies(in, s.owner[dev] == me || s.owner[dev] == d.k(-1));
    });
    cs.push_back({"selection free or mine", mine});
    cs.push_back({"a low slot", me < d.k(2)});
    return cs;
  }
};
using IdArithmeticTable = mpl::vector<
    lc::Row<lc::Running, lc::Preempt, lc::Checkpointing, lc::Do<PreemptForTheNextSlot>,
            lc::If<spec::GuardPreempt>>,
    lc::Row<lc::Queued, lc::Place, lc::Placed, lc::Do<spec::EffectAcquire>, lc::If<GangForLowSlots>>>;

TEST(IdOrderTest, IdsMadeFromJobIndicesAreTrackedThroughTheirUse) {
  auto r = check_id_order(core::rows_of<IdOrderDomain, IdArithmeticTable>(), {}, kProofShape);
  ASSERT_FALSE(r.ok());
  bool effect = false, guard = false;
  for (const auto& v : r.violations) {
    if (contains(v, "the effect remember_next_slot of #1") && contains(v, "`+`")) effect = true;
    if (contains(v, "the guard gang_fits_low_slots of #2") && contains(v, "`<`")) guard = true;
    // Nothing else of these rows orders ids: not the real GuardPreempt, GuardGang, EffectAcquire,
    // nor any invariant over their steps.
    EXPECT_TRUE(contains(v, "remember_next_slot") || contains(v, "gang_fits_low_slots")) << v;
  }
  EXPECT_TRUE(effect) << ::testing::PrintToString(r.violations);
  EXPECT_TRUE(guard) << ::testing::PrintToString(r.violations);
}

// What the domain cannot see, plain C++ on slot indices, renaming the jobs does: a guard that
// reads job 0's tier whoever acts, and one that lets only the first two slots grow.
struct GrowUnlessJob0IsPremium {
  static constexpr std::string_view name = "grows_unless_job0_premium";
  template <class D>
  static spec::Clauses<D> clauses(const D& d, const spec::ClusterVars<D>& s, int j,
                                  const spec::Params<D>& p) {
    auto cs = spec::GuardGrow::clauses(d, s, j, p);
    cs.push_back({"job 0 not premium", !spec::is(d, s.jobs[0].tier, spec::Tier::kPremium)});
    return cs;
  }
};
struct ShrinkInLowSlots {
  static constexpr std::string_view name = "shrinks_in_low_slots";
  template <class D>
  static spec::Clauses<D> clauses(const D& d, const spec::ClusterVars<D>& s, int j,
                                  const spec::Params<D>& p) {
    auto cs = spec::GuardShrink::clauses(d, s, j, p);
    cs.push_back({"a low slot", d.b(j < 2)});
    return cs;
  }
};
using SlotIndexTable = mpl::vector<
    lc::Row<lc::Running, lc::ResizeUp, lc::Resizing, lc::Do<spec::EffectPlanMove>,
            lc::If<GrowUnlessJob0IsPremium>>,
    lc::Row<lc::Running, lc::ResizeDown, lc::Resizing, lc::Do<spec::EffectPlanShrink>,
            lc::If<ShrinkInLowSlots>>>;

TEST(IdOrderTest, FormulasThatSingleOutASlotFailRenaming) {
  auto r = check_id_order(core::rows_of<IdOrderDomain, SlotIndexTable>(), {}, kProofShape);
  ASSERT_FALSE(r.ok());
  bool job0 = false, low = false;
  for (const auto& v : r.violations) {
    EXPECT_TRUE(contains(v, "renaming the jobs")) << v;  // no id value is ordered
    job0 |= contains(v, "changes the guard grows_unless_job0_premium of #1");
    low |= contains(v, "changes the guard shrinks_in_low_slots of #2");
  }
  EXPECT_TRUE(job0) << ::testing::PrintToString(r.violations);
  EXPECT_TRUE(low) << ::testing::PrintToString(r.violations);
}

// ---- Bounded model checking ------------------------------------------------------------------

using BrokenRunTable = mpl::vector<
    lc::Row<lc::New, lc::Submit, lc::Submitted, lc::Do<spec::EffectSubmit>, lc::If<spec::GuardSubmit>>,
    lc::Row<lc::Submitted, lc::Start, lc::Running>>;

TEST(BmcTest, FindsARunBreakingAnInvariant) {
  auto rows = core::rows_of<Z3Domain, BrokenRunTable>();
  ASSERT_EQ(rows.size(), 2u);
  auto r = bmc(rows, Shape{1, 1, 1}, 3, 3, kTimeoutMs);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.unknown) << r.counterexample;
  EXPECT_EQ(r.depth, 3);
  EXPECT_EQ(r.depth_checked, 1);  // Submit alone is fine; Submit, Start is not
  EXPECT_TRUE(contains(r.counterexample, "violates INV-GANG")) << r.counterexample;
  EXPECT_TRUE(contains(r.counterexample, "step 1: Submit job0")) << r.counterexample;
  EXPECT_TRUE(contains(r.counterexample, "step 2: Start job0")) << r.counterexample;
  EXPECT_TRUE(contains(r.counterexample, "Submitted --Start--> Running")) << r.counterexample;
  // Start is the one choice one step does not close (Submit and the 8 node rows are closed): the
  // run is found by asking about runs that end in it.
  EXPECT_EQ(r.choices, 2 + 8);
  EXPECT_EQ(r.closed, r.choices - 1);
  std::cout << "[ bmc counterexample ]\n" << r.counterexample;
  // With two slots, submitted in slot order (the symmetry reduction), the same run is found.
  auto two = bmc(rows, Shape{2, 1, 1}, 3, 3, kTimeoutMs);
  EXPECT_FALSE(two.ok);
  EXPECT_EQ(two.depth_checked, 1);
  EXPECT_TRUE(contains(two.counterexample, "violates INV-GANG")) << two.counterexample;
}

TEST(BmcTest, RealTableHasNoShortViolation) {
  auto r = bmc(lifecycle_rows(), Shape{1, 1, 1}, 3, 3, kTimeoutMs);
  EXPECT_TRUE(r.ok) << r.counterexample;
  EXPECT_FALSE(r.unknown);
  EXPECT_EQ(r.depth_checked, 3);
  EXPECT_EQ(r.unrolled, 3);
  EXPECT_EQ(r.seconds_per_depth.size(), 3u);
  EXPECT_FALSE(r.all_depths);  // all three depths unrolled: no induction needed
  // One step keeps the invariants whatever the choice: no run needs a query.
  EXPECT_EQ(r.choices, 64 + 8);
  EXPECT_EQ(r.closed, r.choices);
  EXPECT_EQ(r.queries_per_depth, (std::vector<int>{0, 0, 0}));
}

// The shortcut cross-checked: asking the solver about runs ending in every choice, closed or not,
// gives the same verdict on the real table.
TEST(BmcTest, EveryPathAgreesWithTheOneStepShortcut) {
  auto r = bmc(lifecycle_rows(), Shape{2, 1, 2}, 3, 3, kTimeoutMs, /*every_path=*/true);
  EXPECT_TRUE(r.ok) << r.counterexample;
  EXPECT_EQ(r.depth_checked, 3);
  EXPECT_EQ(r.closed, r.choices);
  EXPECT_EQ(r.queries_per_depth, (std::vector<int>{1, 1, 1}));
}

// Unrolled to 2, the induction step closes depth 12 and every other.
TEST(BmcTest, InductionStepClosesTheDepthsBeyondTheUnrolledOnes) {
  auto r = bmc(lifecycle_rows(), Shape{2, 1, 2}, 12, 2, kTimeoutMs);
  EXPECT_TRUE(r.ok) << r.counterexample;
  EXPECT_EQ(r.unrolled, 2);
  EXPECT_EQ(r.induction_k, 1);
  EXPECT_TRUE(r.all_depths);
  EXPECT_EQ(r.depth_checked, 12);
  EXPECT_EQ(r.choices, 2 * 64 + 8);
}

// A machine whose bad state is reachable only after two steps: unrolling one step finds nothing,
// and the induction step does not close (its state need not be reachable, but nothing says it is
// not), so the depth is reported as not established rather than as proved.
TEST(BmcTest, InductionThatDoesNotCloseIsInconclusive) {
  auto r = bmc(core::rows_of<Z3Domain, BrokenRunTable>(), Shape{1, 1, 1}, 5, 1, kTimeoutMs);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.unknown);
  EXPECT_EQ(r.unrolled, 1);
  EXPECT_EQ(r.depth_checked, 1);
  EXPECT_EQ(r.induction_k, 0);
  EXPECT_TRUE(contains(r.counterexample, "depth 5 not established")) << r.counterexample;
  EXPECT_TRUE(contains(r.counterexample, "does not close")) << r.counterexample;
}

// ---- Journal replay ----------------------------------------------------------------------------

class ReplayTest : public ::testing::Test {
 protected:

  // The node decisions write_journal() starts with (2 nodes: Register, Ready), and its job
  // decisions.
  static constexpr std::uint64_t kNodeDecisions = 4;
  static constexpr std::uint64_t kJobDecisions = 16;

  // A short run of the core on the default fleet, journaled; returns the decisions committed.
  std::uint64_t write_journal() {
    auto w = core::JournalWriter::open(path_, {core::FsyncPolicy::kNever, 4});
    EXPECT_TRUE(w.ok()) << w.reason();
    if (!w.ok()) return 0;
    core::ManualClock clock(5);
    auto sc = core::SchedulerCore::create(core::default_fleet(), clock, w->get());
    EXPECT_TRUE(sc.ok()) << sc.reason();
    if (!sc.ok()) return 0;
    auto& c = **sc;
    EXPECT_TRUE(core::bring_up_all_nodes(c).ok());  // kNodeDecisions node decisions
    auto commit = [&](core::Decision d) {
      clock.advance(3);
      auto r = c.commit(d);
      EXPECT_TRUE(r.ok()) << d.describe() << ": " << r.reason();
    };
    core::Decision d;
    d.event = EventKind::kSubmit;
    d.name = "a";
    d.tier = spec::Tier::kBasic;
    d.device_type = "H100-80G";
    d.world = 4;
    d.min_devices = 1;
    d.max_devices = 4;
    d.mem_mib = 512;
    commit(d);
    d.name = "b";
    d.tier = spec::Tier::kPremium;
    d.world = d.min_devices = d.max_devices = 2;
    commit(d);
    auto ev = [](EventKind e, std::int64_t job) {
      core::Decision x;
      x.event = e;
      x.job = job;
      return x;
    };
    commit(ev(EventKind::kAdmit, 0));
    commit(ev(EventKind::kAdmit, 1));
    auto place = ev(EventKind::kPlace, 0);
    place.devices = {0, 1};
    place.splice = 2;
    commit(place);
    commit(ev(EventKind::kStart, 0));
    auto prog = ev(EventKind::kProgress, 0);
    prog.step = 4;
    prog.gpu_ms = 40;
    commit(prog);
    // The shrink is decided (Resizing), carried out when its cut is stored (a new incarnation
    // restores on device 0; device 1 is reserved for job 1), and the job runs again.
    auto shrink = ev(EventKind::kResizeDown, 0);
    shrink.devices = {0};
    shrink.splice = 4;
    shrink.beneficiary = 1;
    commit(shrink);
    auto done = ev(EventKind::kCheckpointDone, 0);
    done.step = 4;
    commit(done);
    commit(ev(EventKind::kRestoreDone, 0));
    auto pre = ev(EventKind::kPreempt, 0);
    pre.beneficiary = 1;
    commit(pre);
    commit(done);
    auto place_b = ev(EventKind::kPlace, 1);
    place_b.devices = {4, 5};
    place_b.splice = 1;
    commit(place_b);
    commit(ev(EventKind::kStart, 1));
    commit(ev(EventKind::kCancel, 0));
    commit(ev(EventKind::kComplete, 1));
    EXPECT_TRUE((*w)->flush().ok());
    return c.committed();
  }

  std::string file_bytes() const { return orrery::testing::read_bytes(path_); }
  void set_file_bytes(const std::string& bytes) const {
    orrery::testing::write_bytes(path_, bytes);
  }

  orrery::testing::TempDir tmp_{"orrery_checker_test"};
  const std::string& dir_ = tmp_.path();
  std::string path_ = tmp_.file("decisions.jrnl");
};

TEST_F(ReplayTest, JournalOfACoreRunReplaysCleanly) {
  const auto n = write_journal();
  ASSERT_EQ(n, kNodeDecisions + kJobDecisions);
  auto r = replay_journal(path_);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  EXPECT_EQ(r.records, n + 1);
  EXPECT_EQ(r.decisions, n);
  // A state check per invariant for the initial state and after each decision, a step check
  // per invariant with a step part per job decision.
  int step_parts = 0;
  for (auto inv : spec::kAllInvariants) step_parts += spec::has_step_part(inv) ? 1 : 0;
  EXPECT_EQ(step_parts, 11);  // INV-HOLD and INV-ADMIT have one too
  EXPECT_EQ(r.checks, static_cast<int>(spec::kAllInvariants.size()) * (n + 1) + step_parts * kJobDecisions);
  EXPECT_TRUE(r.clean_tail);
  EXPECT_TRUE(r.tail_error.empty());
}

// The sampling options change what is checked when, never the verdict on a good journal.
TEST_F(ReplayTest, FullAndSampledChecksAgreeOnAGoodJournal) {
  const auto n = write_journal();
  ASSERT_EQ(n, kNodeDecisions + kJobDecisions);
  ReplayOptions every;
  every.full_every = 1;  // the whole state after every decision, as replay did before
  auto r = replay_journal(path_, every);
  EXPECT_TRUE(r.ok) << r.error << (r.violations.empty() ? "" : r.violations.front());
  EXPECT_EQ(r.full_checks, n + 1);  // the initial state and after each decision
  EXPECT_EQ(r.checked_decisions, n);
  ReplayOptions ends;
  ends.full_every = 0;  // only on the initial state and after the last decision
  ends.check_every = 3;
  ends.pipelined = false;
  auto s = replay_journal(path_, ends);
  EXPECT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.full_checks, 2u);
  EXPECT_EQ(s.checked_decisions, n / 3);  // every third
  EXPECT_EQ(s.decisions, n);
}

TEST_F(ReplayTest, MissingFileIsAnError) {
  auto r = replay_journal(dir_ + "/no-such.jrnl");
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.error.empty());
  EXPECT_TRUE(r.unreadable);  // orrery-check exits 1
  EXPECT_EQ(r.decisions, 0u);
}

TEST_F(ReplayTest, NotAJournalIsAnError) {
  set_file_bytes("this is not a journal at all");
  auto r = replay_journal(path_);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.error.empty());
}

TEST_F(ReplayTest, CorruptTailReplaysTheGoodRecordsAndSaysSo) {
  const auto n = write_journal();
  ASSERT_GT(n, 1u);
  auto bytes = file_bytes();
  bytes[bytes.size() - 1] = static_cast<char>(~bytes[bytes.size() - 1]);
  set_file_bytes(bytes);
  auto r = replay_journal(path_);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.clean_tail);
  EXPECT_FALSE(r.tail_error.empty());
  EXPECT_EQ(r.decisions, n - 1);
  EXPECT_EQ(r.records, n);
}

// A bad record with valid ones after it is damage, not a torn tail: nothing is replayed and
// orrery-check exits 1 instead of reporting the first record as the whole journal.
TEST_F(ReplayTest, CorruptMiddleRecordIsUnreadable) {
  const auto n = write_journal();
  ASSERT_GT(n, 2u);
  auto contents = core::read_journal(path_);
  ASSERT_TRUE(contents.ok()) << contents.reason();
  ASSERT_EQ(contents->records.size(), n + 1);
  ASSERT_FALSE(contents->records[1].empty());
  const std::uint64_t record2 = 8 + 8 + contents->records[0].size();  // the first decision
  auto bytes = file_bytes();
  bytes[record2 + 8 + contents->records[1].size() / 2] ^= 0x01;
  set_file_bytes(bytes);
  auto r = replay_journal(path_);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.unreadable);
  EXPECT_TRUE(contains(r.error, "corrupt record 2 at offset " + std::to_string(record2)))
      << r.error;
  EXPECT_TRUE(contains(r.error, "damaged in the middle")) << r.error;
  EXPECT_EQ(r.records, 0u);
  EXPECT_EQ(r.decisions, 0u);
  EXPECT_EQ(file_bytes(), bytes);
}

TEST_F(ReplayTest, RecordThatDoesNotReplayIsAnError) {
  {
    auto w = core::JournalWriter::open(path_, {core::FsyncPolicy::kNever, 1});
    ASSERT_TRUE(w.ok()) << w.reason();
    ASSERT_TRUE((*w)->append(core::encode_fleet_record(core::default_fleet().to_text())).ok());
    core::Decision start;
    start.event = EventKind::kStart;
    start.job = 0;
    ASSERT_TRUE((*w)->append(core::encode_decision_record(start, 1)).ok());
  }
  auto r = replay_journal(path_);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.unreadable);  // readable but wrong: orrery-check exits 2
  EXPECT_TRUE(contains(r.error, "journal record 2")) << r.error;
  EXPECT_TRUE(contains(r.error, "unknown job 0")) << r.error;
  EXPECT_EQ(r.decisions, 0u);
}

TEST_F(ReplayTest, JournalWithoutFleetRecordIsAnError) {
  {
    auto w = core::JournalWriter::open(path_, {core::FsyncPolicy::kNever, 1});
    ASSERT_TRUE(w.ok()) << w.reason();
  }
  auto r = replay_journal(path_);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.unreadable);
  EXPECT_TRUE(contains(r.error, "no records")) << r.error;
}

}  // namespace
}  // namespace orrery::checker
