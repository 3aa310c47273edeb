// The daemon's logic of `orrery-core serve`, against plain C++ interfaces (no Cap'n Proto): it owns
// the SchedulerCore and the protocol of the jobs' incarnations (core/protocol/protocol.h),
// implements the client API, takes node registrations, heartbeats and reports, and runs the
// planner loop. rpc/ serves it over Cap'n Proto; tests drive it in-process too.
//
// Single-threaded: every method is called from one thread (the server's event loop).
//
// Durability before action. Every decision is committed through the core's spec guards and
// journaled; the service *acts* on it (a command to a node agent, an answer or event to a client)
// only once durable: each entry point ends by syncing the journal, then sending the commands whose
// decisions are durable (settle()).
//
// One lifecycle. The service keeps no protocol of its own: every decision, whoever proposes it
// (an operator through the client API, the planner, the protocol from the nodes' reports), is
// committed through protocol::Driver, and the protocol says which commands carry it out. What the
// runtime does happens inside a state of the proved machine (Placed, Checkpointing, Migrating,
// Resizing, Restoring) and ends with a runtime report or an Abort row (docs/architecture.md).
//
// Data directory:
//   DATA/journal              the decision journal (recovered on restart): every job spec whole
//   DATA/jobs/job-<J>.result  a completed job's final words (the digest of its weights)
//   DATA/checkpoints/...      the checkpoint store (core/service/checkpoint_store.h)
//   DATA/output/job-<J>/...   the workers' output (core/service/output_store.h)
//
// Files, by concept: service.cc (opening, committing, settling), submission.cc (the client API's
// queries and submissions), operator_actions.cc (preempt, migrate, resize, drain), node_links.cc
// (registration, reports, shards, commands to agents), planner_tick.cc (heartbeats, drains, the
// planner), metrics.cc (/metrics), worker_output.cc (the workers' output).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/fleet.h"
#include "core/journal.h"
#include "core/policy/gang_placer.h"
#include "core/policy/planner.h"
#include "core/protocol/driver.h"
#include "core/protocol/protocol.h"
#include "core/fleet_fit.h"
#include "core/scheduler_core.h"
#include "core/service/checkpoint_store.h"
#include "core/service/client_api.h"
#include "core/service/job_spec_check.h"
#include "core/service/node_api.h"
#include "core/service/output_store.h"

namespace orrery::service {

struct ServiceOptions {
  std::string data_dir;
  std::int64_t heartbeat_timeout_ms = 5000;
  // A cut (preemption, migration, resize) not stored within this long is aborted: the job restarts
  // in place from its last committed checkpoint. A periodic cut is given up after as long.
  std::int64_t cut_timeout_ms = 60000;
  // A launch or restore not started on every node within this long is aborted: the job waits
  // again (Queued) from its last committed checkpoint.
  std::int64_t launch_timeout_ms = 120000;
  // Progress reports are committed at most this often per job (cuts and completion commit the
  // step they need at once).
  std::int64_t progress_every_ms = 1000;
  core::JournalOptions journal{core::FsyncPolicy::kGroup, 256};
  // The planner (core/policy/planner.h): orrery, fifo, tiresias or afs, the same code orrery-sim
  // runs; and the device types' relative speeds it places by (PlannerOptions::type_speed; each a
  // type of the fleet).
  std::string policy = "orrery";
  std::map<std::string, double> type_speed;
  // A gang that one node of its type can hold goes on one node, as a Kubernetes pod does
  // (PlannerOptions::one_node_gangs; orrery-core serve --one-node): the planner's placements and
  // cuts, and the check at submission that a job can ever be placed. false: gangs span a
  // cluster's nodes, then a region's.
  bool one_node_gangs = false;
  // Where signal jobs save themselves (ORRERY_CHECKPOINT_DIR = ROOT/job-J): a path every node
  // sees alike (a shared filesystem across machines). Empty: DATA/user-checkpoints, or the node's
  // own folder when the service has no data directory.
  std::string user_checkpoint_root;
};

class Service final : public ClientApi, public protocol::CommitListener {
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
  Status suspend(int job) override;
  Status resume(int job) override;
  Status drain(const std::string& node) override;
  Status undrain(const std::string& node) override;
  Status watch(std::uint64_t after_seq,
               const std::function<bool(const ClusterEvent&)>& on_event) override;
  Result<std::vector<std::string>> logs(int job, int max_lines) override;
  Result<WorkerOutput> output(int job, int rank, std::uint64_t offset, std::uint32_t max_bytes) override;

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
  // Output of rank `rank` written by incarnation `epoch` (worker_output.cc): kept in DATA/output
  // (core/service/output_store.h). Refused: a stale session (kFailedPrecondition), an unknown job
  // or rank (kNotFound), an epoch the job never had, a chunk over kOutputChunkMax.
  Status worker_output(const NodeSession& session, int job, std::int64_t epoch, int rank,
                       std::string_view data);
  // The transport could not deliver a command, or the agent refused it. `cut`: it was a checkpoint
  // command (a refused periodic cut fails that cut only; the job runs on).
  void command_failed(const NodeSession& session, int job, std::int64_t epoch,
                      const std::string& what, bool cut = false);
  // The connection of `session` ended (the heartbeat monitor decides whether the node is lost).
  void disconnected(const NodeSession& session);

  // One round of the planner loop: heartbeats (a node silent for longer than the timeout is
  // lost: HeartbeatLost, NodeLoss for every job holding its devices, FailedOver), the protocol's
  // timeouts and periodic checkpoints, migrations off Draining nodes, then a round of the planner
  // (ServiceOptions::policy, the same code orrery-sim runs). Call it every ~100 ms.
  void tick();

  // Drops every watcher and node link (the transport behind them is shutting down).
  void detach_transport();

  // Prometheus text exposition format.
  std::string metrics_text() const;

  std::int64_t heartbeat_timeout_ms() const { return options_.heartbeat_timeout_ms; }
  const core::SchedulerCore& core() const { return *core_; }
  const protocol::Protocol& protocol() const { return *protocol_; }
  // One line on what recovery found, for the daemon's start-up message.
  const std::string& recovery_summary() const { return recovery_summary_; }

 private:
  struct JobView;  // what the service shows of a job beyond the core's state
  struct NodeConn;
  Service(ServiceOptions options, const core::Clock& clock);

  // Commits a job decision through the protocol's driver; on success its event is logged and
  // queued for watchers, and the protocol's proposals that follow are committed too.
  Result<core::Committed> commit(const core::Decision& d);
  Result<core::Committed> commit_node(spec::NodeEvent e, spec::Origin origin, int node);
  // protocol::CommitListener.
  void committed(const core::Committed& c, const core::Decision& d) override;
  void refused(const core::Decision& d, const Status& why) override;
  // Commits the protocol's proposals, syncs the journal, then sends the commands (and tells the
  // watchers the events) whose decisions are durable.
  void settle();
  void emit(std::uint64_t seq, int job, const std::string& node, const std::string& text);
  void take_notes();

  JobView& view(int job);
  void remember_spec(int job, const core::Decision& submit);
  // The agent's command for one of the protocol's commands.
  void send(const protocol::Command& c);
  LaunchCommand launch_command(int job, int node, std::int64_t restore_step) const;
  std::set<int> nodes_of(int job) const;
  NodeLink* link(int node) const;
  bool session_current(const NodeSession& s) const;
  // A job in a cut state whose cut is whole in the store (after a restart of the core): reported.
  void report_stored_cut(int job);

  void monitor_heartbeats();
  void fail_over(int node);
  void plan();
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
  Status check_running_idle(int job, const char* what) const;
  Status persist_result(int job, const std::string& detail);
  static Status write_durably(const std::string& path, const std::string& text);

  ServiceOptions options_;
  const core::Clock& clock_;
  std::unique_ptr<core::JournalWriter> journal_;
  std::unique_ptr<core::SchedulerCore> core_;
  // Whether a job could ever be placed on core_'s fleet (fixed for its life): built once, asked
  // at every submission.
  std::unique_ptr<core::FleetFit> fit_;
  std::unique_ptr<protocol::Protocol> protocol_;
  std::unique_ptr<protocol::Driver> driver_;
  // Gang placement over core_, following its commits (core/policy/gang_placer.h).
  std::unique_ptr<core::policy::GangPlacer> placer_;
  std::unique_ptr<core::policy::Planner> planner_;  // ServiceOptions::policy
  std::unique_ptr<CheckpointStore> store_;
  // The workers' output (worker_output.cc), made on first use: DATA/output, or memory without DATA.
  std::unique_ptr<OutputStore> output_;
  OutputStore& output_store();
  std::map<int, std::unique_ptr<JobView>> views_;
  std::set<int> active_;  // jobs not Completed, Failed or Cancelled
  std::vector<std::unique_ptr<NodeConn>> conns_;  // per fleet node
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
  std::uint64_t planner_rejected_ = 0, aborted_ = 0;
};

}  // namespace orrery::service
