// EnteredTimes (core/policy/entered_times.h): when each job of a replayed journal entered its
// state, for Planner::job_recovered. Fed here with a core's commits, as SchedulerCore::recover
// feeds it.
#include <gtest/gtest.h>

#include "core/clock.h"
#include "core/node_bootstrap.h"
#include "core/policy/entered_times.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {
namespace {

using spec::EventKind;

class EnteredTimesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fleet = Fleet::parse("region r\ncluster c\nnode n1 host_mem_mib=4096\ndevices host count=2 mem_mib=256\n");
    ASSERT_TRUE(fleet.ok()) << fleet.reason();
    auto c = SchedulerCore::create(*fleet, clock_, nullptr);
    ASSERT_TRUE(c.ok()) << c.reason();
    core_ = std::move(*c);
    ASSERT_TRUE(bring_up_all_nodes(*core_).ok());
  }
  // Commits `d` at `at_ms` and feeds it to the times, as a replay would.
  void commit(Decision d, std::int64_t at_ms, bool same_clock = true) {
    clock_.advance(at_ms - clock_.now_ms());
    auto c = core_->commit(d);
    ASSERT_TRUE(c.ok()) << d.describe() << ": " << c.reason();
    times_.replayed(*core_, *c, d, same_clock);
  }
  static Decision ev(EventKind e, spec::Origin origin, std::int64_t job = 0) {
    Decision d;
    d.event = e;
    d.origin = origin;
    d.job = job;
    return d;
  }
  ManualClock clock_{0};
  std::unique_ptr<SchedulerCore> core_;
  EnteredTimes times_;
};

TEST_F(EnteredTimesTest, AChangeOfStateOrTheReleaseOfAHoldSetsTheTimeAndNothingElse) {
  // And each placement or resume, how long the job waited before it.
  EXPECT_EQ(times_.since(0), -1);  // unknown job
  commit(Decision::submit("j", spec::Tier::kStandard, "host", 2, 2, 2, 128), 1000);
  EXPECT_EQ(times_.since(0), 1000);
  commit(ev(EventKind::kAdmit, spec::Origin::kPlanner), 2000);
  EXPECT_EQ(times_.since(0), 2000);  // Queued at 2000
  auto place = ev(EventKind::kPlace, spec::Origin::kPlanner);
  place.devices = {0, 1};
  place.splice = 1;
  EXPECT_EQ(times_.waited(0), -1);  // never placed
  commit(place, 3000);
  EXPECT_EQ(times_.waited(0), 1000);  // Queued at 2000, placed at 3000
  commit(ev(EventKind::kStart, spec::Origin::kRuntime), 4000);
  EXPECT_EQ(times_.since(0), 4000);  // Running at 4000
  auto progress = ev(EventKind::kProgress, spec::Origin::kRuntime);
  progress.step = 5;
  commit(progress, 5000);
  EXPECT_EQ(times_.since(0), 4000);  // Running -> Running: unchanged
  // An operator's suspension for no one: held once suspended.
  auto suspend = ev(EventKind::kPreempt, spec::Origin::kOperator);
  suspend.beneficiary = -1;
  commit(suspend, 6000);
  auto done = ev(EventKind::kCheckpointDone, spec::Origin::kRuntime);
  done.step = 5;
  commit(done, 7000);
  ASSERT_NE(core_->cluster().jobs[0].hold, 0);
  EXPECT_EQ(times_.since(0), 7000);  // Suspended (held) at 7000
  commit(ev(EventKind::kRelease, spec::Origin::kOperator), 9000);
  EXPECT_EQ(times_.since(0), 9000);  // released: it waits for devices from then
  commit(ev(EventKind::kRelease, spec::Origin::kOperator), 9500);
  EXPECT_EQ(times_.since(0), 9000);  // a Release of a job not held: unchanged
  // Times of another clock (an older orrery-core's boot-relative journal): unknown.
  auto resume = ev(EventKind::kResume, spec::Origin::kPlanner);
  resume.devices = {0, 1};
  resume.splice = 1;
  commit(resume, 10000, /*same_clock=*/false);
  EXPECT_EQ(times_.since(0), -1);
  EXPECT_EQ(times_.waited(0), -1);
}

}  // namespace
}  // namespace orrery::core::policy
