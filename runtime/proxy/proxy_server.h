// orrery-proxy's logic: owns one device through a DeviceBackend and serves the workers attached
// to its shared-memory segment (ring.h), one request at a time on one thread.
//
// Per job it keeps a session: the ranks spliced on this device (in the order the node runtime
// gave), which one is resident, and each rank's allocations. Only the resident rank is served;
// when it reaches its safe point (it has contributed to the step's allreduce) the proxy parks its
// allocations in host memory and makes the next rank resident, round robin. Every address a
// request names is checked against the calling rank's own allocations first.
#pragma once

#include <csignal>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/proxy/backend.h"
#include "runtime/proxy/collective.h"
#include "runtime/proxy/ring.h"
#include "runtime/proxy/shard_persister.h"

namespace orrery::runtime {

struct ProxyOptions {
  std::string shm_name;   // the segment workers attach to ("/orrery-...")
  int device = 0;
  std::string ckpt_dir;   // shards: <ckpt_dir>/job-J/step-S/rank-R.ckpt
  long spin_ns = 50'000;  // how long the proxy spins before sleeping on its doorbell
  // Host memory for periodic cuts persisted in the background (shard_persister.h); 0: every
  // shard is written in line, the rank waiting for its fdatasync. A cut that stops the job is
  // always written in line (the job ends with it, so it stalls no step).
  std::uint64_t ckpt_staging_bytes = 1ull << 30;
  const volatile std::sig_atomic_t* stop_flag = nullptr;  // set by main()'s SIGTERM handler
  // > 0: exit when this process is no longer our parent (the node runtime died), so workers of a
  // dead node do not train on unsupervised: their next call fails and they exit.
  int parent_pid = 0;
};

struct ProxyStats {
  std::uint64_t requests = 0;
  std::uint64_t switches = 0;      // splice switches
  std::uint64_t switch_ns = 0;     // time spent parking and unparking
  std::uint64_t ckpt_bytes = 0, ckpt_ns = 0;  // ckpt_ns: the ranks' stall (in line: the write)
  std::uint64_t ckpt_staged = 0, persist_ns = 0;  // cuts persisted in the background
  std::uint64_t restore_bytes = 0, restore_ns = 0;
};

class ProxyServer {
 public:
  // Creates the segment (fails if the name exists) and marks it ready.
  static Result<std::unique_ptr<ProxyServer>> create(const ProxyOptions& options,
                                                     std::unique_ptr<DeviceBackend> backend);
  ~ProxyServer();
  // Serves until a kShutdown command, request_stop(), or the device becomes unusable (failed()).
  void run();
  void request_stop();
  const ProxyStats& stats() const { return stats_; }
  SpliceCounters splice_counters() const { return be_->splice_counters(); }
  // Why the proxy stopped on its own (the backend's device became unusable), else empty.
  const std::string& failed() const { return failed_; }

 private:
  struct Alloc {
    std::uint64_t size = 0, seq = 0;
  };
  struct Parked {  // a run of adjacent allocations parked as one range while swapped out
    std::uint64_t addr = 0;
    std::unique_ptr<ParkedMemory> mem;
  };
  struct Rank {
    int rank = -1;
    int slot = -1;
    int pid = 0;
    bool gone = false;
    bool hello_done = false;
    std::map<std::uint64_t, Alloc> allocs;
    std::vector<Parked> parked;  // non-empty exactly while the rank is swapped out
    std::uint64_t next_offset = 0, alloc_seq = 0;
    std::int64_t restore_step = -1;
    std::uint64_t replay_seq = 0;  // allocations handed back after a restore
    std::vector<std::string> restored_states;
    bool in_reduce = false;
    bool contributed = false;  // in_reduce: its contribution is in (not held by a negotiation)
    std::int64_t reduce_step = -1;
    std::uint64_t reduce_buf = 0, reduce_count = 0;
    bool reduce_host = false;  // kAllreduceHost: the data is at `reduce_data` (or none: count 0)
    float* reduce_data = nullptr;  // in `window` or `reduce_window`, where the sum goes too
    ShmMapping window;         // the worker's bulk window (Op::kWindow)
    ShmMapping reduce_window;  // the worker's reduce buffer (Op::kWindow, a[1] 1)
    std::uint64_t last_flags = 0;
    std::int64_t last_reduce_step = -1;
  };
  struct Session {
    int job = -1;
    std::int64_t epoch = 0;
    int world = 0;
    std::vector<int> order;
    std::map<int, Rank> ranks;
    std::size_t cur = 0;  // index into order of the resident rank
    std::string collective;
    std::unique_ptr<CollectiveGroup> coll;
    bool coll_done_once = false;  // a result came back: every proxy of the job has opened it
    // Where the allreduce's data goes, decided at the first one (collective_negotiation.h):
    // over the host group, or kept on the device (dcoll; the host group carries the flags).
    // kNegotiating: round 1 (offers) is out; kBootstrapping: round 2 (the NCCL id); kFailed:
    // for good, this incarnation's allreduce fails (reduce_error), on every proxy.
    enum class Reduce { kUnset, kNegotiating, kBootstrapping, kHost, kDevice, kFailed };
    Reduce reduce = Reduce::kUnset;
    std::int64_t negotiation_step = -1;  // the host group's step of round 1 (round 2: + 1)
    DeviceCollectiveSetup agreed;        // kBootstrapping: what round 1 decided
    std::string reduce_error;            // kFailed: why
    std::unique_ptr<DeviceCollective> dcoll;
  };
  struct PendingCheckpoint {
    std::int64_t epoch = 0, at_step = -1;
    bool then_stop = false;
  };

  ProxyServer(const ProxyOptions& o, std::unique_ptr<DeviceBackend> b) : opt_(o), be_(std::move(b)) {}

  bool process_commands();
  bool discover_slots();
  bool serve_session(Session& s);
  void check_dead_workers();
  void idle_wait(std::uint32_t doorbell_seen);

  Status hello(int slot, const Request& r);
  // Serves one request of the resident rank; returns false if the response is deferred.
  bool serve(Session& s, Rank& rk, const Request& r, Response* out);
  Status switch_to_next(Session& s);
  Status make_resident(Rank& rk);
  Status park_rank(Rank& rk);
  void free_rank(Rank& rk);
  void drop_session(int job, const std::string& why);
  void end_session(std::map<int, Session>::iterator it, bool dead);
  void finish_rank(Session& s, Rank& rk, const std::string& why);
  Result<std::uint64_t> check_range(const Session& s, const Rank& rk, std::uint64_t addr,
                                    std::uint64_t len, const std::string& what) const;
  Status restore_rank(Session& s, Rank& rk);
  // rk's shard for `boundary`: true once durable (written in line), false if staged for the
  // persister (only when may_defer and it fits the staging budget).
  Result<bool> write_checkpoint(Session& s, Rank& rk, std::int64_t boundary, const WorkerSlot& slot,
                                std::uint64_t nstates, bool may_defer);
  // Shards the persister finished since the last call, published to their slots; true if any.
  bool publish_persisted();
  std::uint64_t flags_for(const Session& s, std::int64_t step);
  // The allreduce: where its data goes (decided locally for one proxy, else negotiated), the
  // end of a negotiation, and rk's contribution for rk.reduce_step.
  Status choose_reduce(Session& s, std::int64_t step, std::uint64_t count);
  Status finish_negotiation(Session& s, const float* sum);
  Status finish_bootstrap(Session& s, const float* sum);
  // While a negotiation is open: its round's result, once there, taken (true), else false.
  bool serve_negotiation(Session& s, Rank& rk, WorkerSlot& ws);
  Status contribute(Session& s, Rank& rk);
  bool begin_reduce(Session& s, Rank& rk, std::uint64_t buf, std::uint64_t count,
                    std::int64_t step, bool host, Response* out);
  // The job's allreduce fails from here on (Reduce::kFailed): rk's step is marked failed for
  // the other proxies (kFlagReduceFailed) unless rk already contributed. Returns the error.
  Status fail_reduce(Session& s, Rank& rk, const std::string& why);
  // rk's allreduce answered with st's error (it waits no more); true, for serve_session.
  bool answer_reduce_error(Rank& rk, WorkerSlot& ws, const Status& st);
  // rk's step on the host group with no data: one float carrying `flags`.
  Status contribute_flags(Session& s, const Rank& rk, std::uint64_t flags);

  ProxyOptions opt_;
  ShmMapping map_;  // declared before be_: the backend unpins it before it is unmapped
  std::unique_ptr<DeviceBackend> be_;
  ProxySegment* seg_ = nullptr;
  bool stop_ = false;
  std::map<int, Session> sessions_;
  std::map<int, PendingCheckpoint> pending_;
  std::map<int, std::int64_t> newest_epoch_;
  struct SlotOwner {
    int job = -1, rank = -1;
  };
  SlotOwner owner_[kMaxWorkers];
  ProxyStats stats_;
  std::uint64_t loops_ = 0;
  std::uint64_t nonce_ = 0;  // names this proxy in collective negotiations
  std::string failed_;
  // Last: destroyed first, so it persists what is staged while the segment is still mapped.
  std::unique_ptr<ShardPersister> persister_;
};

}  // namespace orrery::runtime
