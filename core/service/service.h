// The daemon's logic of `orrery-core serve`, against plain C++ interfaces (no Cap'n Proto): it owns
// the SchedulerCore, implements the client API, takes node registrations, heartbeats and reports,
// and runs the planner loop. rpc/ serves it over Cap'n Proto; tests drive it in-process too.
//
// Single-threaded: every method is called from one thread (the server's event loop).
//
// Durability before action. Every decision is committed through the core's spec guards and
// journaled; the service *acts* on it (a command to a node agent, an answer or event to a client)
// only once durable: each entry point ends by syncing the journal and then running the actions
// its decisions queued (settle()).
//
// Data directory:
//   DATA/journal              the decision journal (recovered on restart)
//   DATA/jobs/job-<J>.spec    what the journal does not hold of a submitted job (workload, args,
//                             steps, checkpoint period), written and synced before its Submit
//   DATA/checkpoints/...      the checkpoint store (core/service/checkpoint_store.h)
//
// The planner loop (tick()), in order: heartbeat monitor (a node silent for longer than the
// timeout: HeartbeatLost, then NodeLoss for every job holding its devices, then FailedOver);
// give up cuts not stored in time; migrate running jobs off Draining nodes; ask running jobs for
// their periodic checkpoints; then a round of the planner (ServiceOptions::policy, the same code
// orrery-sim runs: admission, placement, preemption, shrink and growth; core/policy/planner.h),
// whose proposals PlanLink carries out the runtime's way.
//
// Aggregation of node reports into job events (each report's epoch must be the job's current one,
// else it is refused and that stale incarnation is told to stop): Start / RestoreDone once every
// node of the placement started; Progress at the smallest step all nodes reached; Checkpoint /
// CheckpointDone once every rank's shard of the step is in the checkpoint store; Complete once
// every node completed; WorkerCrash on any crash (the other nodes are told to stop).
//
// Reconciliation. After a restart the core knows from its journal which incarnations hold devices
// but not what runs: an agent's (re)registration carries its running incarnations; the current
// ones on the node are adopted, the rest stopped; a Placed incarnation not running is launched
// again, any other one missing is a WorkerCrash. A node that never re-registers is lost after the
// heartbeat timeout, counted from the service's start.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/fleet.h"
#include "core/journal.h"
#include "core/policy/gang_placer.h"
#include "core/policy/planner.h"
#include "core/scheduler_core.h"
#include "core/service/checkpoint_store.h"
#include "core/service/client_api.h"
#include "core/service/job_spec_check.h"
#include "core/service/node_api.h"

namespace orrery::service {

struct ServiceOptions {
  std::string data_dir;
  std::int64_t heartbeat_timeout_ms = 5000;
  // A checkpoint cut (periodic, preemption, migration, resize) not stored within this long is
  // given up: the job counts a WorkerCrash and restarts from its last committed checkpoint.
  std::int64_t cut_timeout_ms = 60000;
  // Progress reports are committed at most this often per job (cuts and completion commit the
  // step they need at once).
  std::int64_t progress_every_ms = 1000;
  core::JournalOptions journal{core::FsyncPolicy::kGroup, 256};
  // The planner (core/policy/planner.h): orrery, fifo or tiresias, the same code orrery-sim runs.
  std::string policy = "orrery";
};

class Service final : public ClientApi {
 public:
  // Opens DATA: recovers from DATA/journal when it exists (a given `fleet` must then equal the
  // journal's), else starts a fresh core over `fleet` (required then).
  static Result<std::unique_ptr<Service>> open(const ServiceOptions& options,
                                               std::optional<core::Fleet> fleet,
                                               const core::Clock& clock);
  ~Service() override;

  // ClientApi. watch() delivers the backlog, then keeps `on_event` and calls it from the thread
  // that drives the service for every new event until it returns false (it returns at once).
  Result<int> submit(const JobSpec& spec) override;
  Status cancel(int job) override;
  Result<std::vector<JobStatus>> jobs() override;
  Result<std::vector<NodeStatus>> nodes() override;
  Status preempt(int job, int beneficiary) override;
  Status migrate(int job, std::optional<std::string> to_node) override;
  Status resize(int job, int devices, int beneficiary) override;
  Status drain(const std::string& node) override;
  Status undrain(const std::string& node) override;
  Status watch(std::uint64_t after_seq,
               const std::function<bool(const ClusterEvent&)>& on_event) override;
  Result<std::vector<std::string>> logs(int job, int max_lines) override;

  // Node side.
  Result<NodeSession> register_node(const std::string& name, const NodeInventory& inventory,
                                    const std::vector<Incarnation>& running,
                                    std::shared_ptr<NodeLink> link, const std::string& host = "");
  Status heartbeat(const NodeSession& session);
  Status report(const NodeSession& session, const NodeReport& report);
  // Shard transfers of a registered node (the session must be current).
  Result<std::unique_ptr<ShardUpload>> upload_shard(const NodeSession& session, int job,
                                                    std::int64_t epoch, std::int64_t step,
                                                    int rank, std::uint64_t size,
                                                    std::uint32_t crc);
  Result<std::unique_ptr<ShardDownload>> download_shard(const NodeSession& session, int job,
                                                        std::int64_t step, int rank);
  // The transport could not deliver a command, or the agent refused it.
  void command_failed(const NodeSession& session, int job, std::int64_t epoch,
                      const std::string& what);
  // The connection of `session` ended (the heartbeat monitor decides whether the node is lost).
  void disconnected(const NodeSession& session);

  // One round of the planner loop (see above). Call it every ~100 ms.
  void tick();

  // Drops every watcher and node link (the transport behind them is shutting down).
  void detach_transport();

  // Prometheus text exposition format.
  std::string metrics_text() const;

  std::int64_t heartbeat_timeout_ms() const { return options_.heartbeat_timeout_ms; }
  const core::SchedulerCore& core() const { return *core_; }
  // One line on what recovery found, for the daemon's start-up message.
  const std::string& recovery_summary() const { return recovery_summary_; }

 private:
  struct Track;  // what the service knows of a job beyond the core's state
  struct NodeConn;
  Service(ServiceOptions options, const core::Clock& clock);

  // Commits a job decision; on success its event is logged and queued for watchers.
  Result<core::Committed> commit(const core::Decision& d);
  Result<core::Committed> commit_node(spec::NodeEvent e, spec::Origin origin, int node);
  // Syncs the journal, then runs the actions queued since the last settle().
  void settle();
  void after_durable(std::function<void()> action);
  void emit(std::uint64_t seq, int job, const std::string& node, const std::string& text);

  Track& track(int job);
  void begin_incarnation(int job);  // new epoch placed: reset aggregation, queue launches
  // (node, that node's command) for every node of the job's placement.
  std::vector<std::pair<int, LaunchCommand>> launches(int job, std::int64_t restore_step) const;
  std::set<int> nodes_of(int job) const;
  void send_launches(int job, std::int64_t restore_step, bool relaunch);
  void send_stop_all(int job, std::int64_t epoch, const std::set<int>& nodes);
  void send_cut(int job);  // checkpoint-and-stop on every node of the incarnation
  NodeLink* link(int node) const;
  bool session_current(const NodeSession& s) const;

  void on_checkpointed(int job, std::int64_t step);
  void on_cut_done(int job, std::int64_t step);
  void relaunch_same(int job, std::int64_t step, const std::string& why);  // preempt / migrate / resize cut complete
  Status ensure_progress(int job, std::int64_t step);
  void crash(int job, const std::string& why);
  void monitor_heartbeats();
  void fail_over(int node);
  void plan();
  bool started_everywhere(int job);  // every node of the placement started this incarnation
  // The planner's side of a round (core/policy/planner.h).
  class PlanLink final : public core::policy::PlanContext {
   public:
    explicit PlanLink(Service* s) : s_(s) {}
    bool propose(const core::Decision& d) override;
    bool cut_pending(int job) const override;
    void note(int job, const std::string& why) override;

   private:
    Service* s_;
  };
  int pick_beneficiary(int victim) const;
  std::optional<core::Decision> migrate_decision(int job, const std::optional<std::string>& to,
                                                 std::string* why) const;

  Status check_beneficiary(int beneficiary) const;
  Status persist_spec(int job, const JobSpec& spec);
  Status persist_result(int job, const std::string& detail);
  static Status write_durably(const std::string& path, const std::string& text);
  void load_specs();

  ServiceOptions options_;
  const core::Clock& clock_;
  std::unique_ptr<core::JournalWriter> journal_;
  std::unique_ptr<core::SchedulerCore> core_;
  // Gang placement over core_, following its commits (core/policy/gang_placer.h).
  std::unique_ptr<core::policy::GangPlacer> placer_;
  std::unique_ptr<core::policy::Planner> planner_;  // ServiceOptions::policy
  std::unique_ptr<CheckpointStore> store_;
  std::map<int, std::unique_ptr<Track>> tracks_;
  std::set<int> active_;  // jobs not Completed, Failed or Cancelled
  std::vector<std::unique_ptr<NodeConn>> conns_;  // per fleet node
  std::vector<std::function<void()>> actions_;
  std::vector<ClusterEvent> timeline_;
  std::vector<ClusterEvent> pending_events_;  // emitted once durable
  std::vector<std::function<bool(const ClusterEvent&)>> watchers_;
  std::uint64_t next_session_ = 1;
  std::int64_t started_ms_ = 0;
  std::string recovery_summary_;
  // This cluster's identity (DATA/cluster_id, made once from the random device): a prefix of the
  // shared-memory names of its collectives, so two clusters on one machine (or an old cluster's
  // leftovers) never meet in the same segment.
  std::string cluster_id_;
  // Counters for /metrics.
  std::uint64_t rejected_reports_ = 0, shards_uploaded_ = 0, commands_failed_ = 0;
  std::uint64_t planner_rejected_ = 0;
};

}  // namespace orrery::service
