// The Service's side of the workers' output, in-process with a manual clock: a node's chunks kept
// per rank behind their incarnation's header and read back by clients; refusals with their codes
// (a superseded session, an unknown job or rank, an epoch the job never had, an oversized chunk);
// the output survives a restart of the core (files). Memory mode (no data dir): output_store_test.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/service/service.h"
#include "tests/temp_dir.h"

namespace orrery::service {
namespace {

struct NullLink final : NodeLink {
  void launch(const LaunchCommand&) override {}
  void checkpoint(int, std::int64_t, std::int64_t, bool) override {}
  void stop(int, std::int64_t) override {}
};

class WorkerOutputTest : public ::testing::Test {
 protected:
  // A fleet of one node n1 with 2 devices; job 0 (world 2) submitted and placed there (epoch 1).
  std::unique_ptr<Service> open(const std::string& data_dir, bool fresh) {
    ServiceOptions o;
    o.data_dir = data_dir;
    o.journal.fsync = core::FsyncPolicy::kNever;
    std::optional<core::Fleet> fleet;
    if (fresh) {
      auto f = core::Fleet::parse("region r\ncluster c\nnode n1 host_mem_mib=4096\ndevices host count=2 mem_mib=256\n");
      EXPECT_TRUE(f.ok()) << f.reason();
      fleet = *f;
    }
    auto s = Service::open(o, fleet, clock_);
    EXPECT_TRUE(s.ok()) << s.reason();
    if (!s.ok()) return nullptr;
    auto n = (*s)->register_node("n1", {"host", 2, 256}, {}, std::make_shared<NullLink>());
    EXPECT_TRUE(n.ok()) << n.reason();
    session_ = *n;
    if (fresh) {
      JobSpec spec;
      spec.name = "printer";
      spec.world = 2;
      spec.max_devices = 2;
      spec.steps = 10;
      spec.command = {"orrery-train-mlp"};
      EXPECT_TRUE((*s)->submit(spec).ok());
      (*s)->tick();  // admitted and placed: epoch 1
      EXPECT_EQ((*s)->core().cluster().jobs[0].epoch, 1);
    }
    return std::move(*s);
  }
  static std::string read_all(Service& s, int job, int rank) {
    auto r = s.output(job, rank, 0, kOutputReadMax);
    EXPECT_TRUE(r.ok()) << r.reason();
    return r.ok() ? r->data : "";
  }
  core::ManualClock clock_{1000};
  NodeSession session_;
};

TEST_F(WorkerOutputTest, KeptPerRankAndReadBackByOffset) {
  testing::TempDir d("worker_output");
  auto s = open(d.path(), true);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->worker_output(session_, 0, 1, 1, "step 1\n").ok());
  ASSERT_TRUE(s->worker_output(session_, 0, 1, 1, "step 2\n").ok());
  ASSERT_TRUE(s->worker_output(session_, 0, 1, 0, "rank 0 here\n").ok());
  const std::string want = "--- epoch 1 on node n1 ---\nstep 1\nstep 2\n";
  EXPECT_EQ(read_all(*s, 0, 1), want);
  EXPECT_EQ(read_all(*s, 0, 0), "--- epoch 1 on node n1 ---\nrank 0 here\n");
  EXPECT_TRUE(std::filesystem::exists(d.file("output/job-0/rank-1.log")));
  auto r = s->output(0, 1, want.size() - 7, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data, "step 2\n");
  EXPECT_EQ(r->next_offset, want.size());
  EXPECT_EQ(r->size, want.size());
  EXPECT_FALSE(r->job_ended);
  ASSERT_TRUE(s->cancel(0).ok());
  r = s->output(0, 1, r->next_offset, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->job_ended);
  EXPECT_EQ(r->data, "");
}

TEST_F(WorkerOutputTest, RefusalsSayWhy) {
  testing::TempDir d("worker_output");
  auto s = open(d.path(), true);
  ASSERT_TRUE(s);
  auto st = s->worker_output(session_, 7, 1, 0, "x");
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.reason(), "unknown job 7");
  st = s->worker_output(session_, 0, 1, 2, "x");
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.reason(), "job 0 has no rank 2 (world 2)");
  EXPECT_EQ(s->worker_output(session_, 0, 1, -1, "x").code(), StatusCode::kNotFound);
  st = s->worker_output(session_, 0, 2, 0, "x");  // the job never had epoch 2
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.reason(), "job 0 has no epoch 2 (its newest is 1)");
  st = s->worker_output(session_, 0, 1, 0, std::string(kOutputChunkMax + 1, 'x'));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  // A session the node has replaced by registering again (its old connection ended first: a
  // second agent under a live node's name is refused).
  const NodeSession old = session_;
  s->disconnected(old);
  ASSERT_TRUE(s->register_node("n1", {"host", 2, 256}, {}, std::make_shared<NullLink>()).ok());
  EXPECT_EQ(s->worker_output(old, 0, 1, 0, "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(read_all(*s, 0, 0), "");  // nothing refused was kept
  EXPECT_EQ(s->output(3, 0, 0, 10).code(), StatusCode::kNotFound);
  EXPECT_EQ(s->output(0, 2, 0, 10).code(), StatusCode::kNotFound);
}

TEST_F(WorkerOutputTest, SurvivesARestartOfTheCore) {
  testing::TempDir d("worker_output");
  {
    auto s = open(d.path(), true);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->worker_output(session_, 0, 1, 0, "before the restart\n").ok());
  }
  auto s = open(d.path(), false);  // recovered from the journal
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->worker_output(session_, 0, 1, 0, "after\n").ok());
  EXPECT_EQ(read_all(*s, 0, 0),
            "--- epoch 1 on node n1 ---\nbefore the restart\n--- epoch 1 on node n1 ---\nafter\n");
}

}  // namespace
}  // namespace orrery::service
