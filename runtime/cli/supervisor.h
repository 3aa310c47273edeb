// `orrery up`'s supervisor: keeps a few daemons (the core, the node agents) running, each in a
// process group of its own, and starts one that died again on the same arguments, after a delay
// that grows while it keeps dying. The daemons already survive each other's restarts (a node agent
// reconnects to a restarted core and registers what it runs; a restarted core recovers its journal
// and adopts the incarnations the agents report: docs/runtime.md, "The core service"), so a
// restart on the same data and port is all a local cluster needs to outlive a kill -9.
//
// Signals are taken synchronously (sigtimedwait in wait()), so that restarts and the shutdown run
// in ordinary code. The supervisor is also the subreaper of what its daemons leave behind: when a
// node agent dies, its proxies and workers are reparented here, and the rest of its process group
// is killed and reaped before the agent starts again, so no old worker runs beside the new agent.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace orrery::cli {

using Millis = std::chrono::milliseconds;

// The restart delay: `first` after an exit, doubled after each further exit up to `max`, and back
// to `first` once a run lasted `stable`: a daemon that had been fine for that long is in a new
// incident, not in the same crash loop, and should be back quickly.
struct BackoffPolicy {
  Millis first{500};
  Millis max{30000};
  Millis stable{60000};
};

class RestartBackoff {
 public:
  explicit RestartBackoff(BackoffPolicy policy = {}) : policy_(policy), next_(policy.first) {}
  // The process exited after running for `ran`: how long to wait before starting it again.
  Millis after_exit(Millis ran);

 private:
  BackoffPolicy policy_;
  Millis next_;
};

struct ProcessSpec {
  std::string name;               // unique: "core", "node1"
  std::string label;              // in messages: "core", "node node1"
  std::vector<std::string> argv;  // argv[0]: the executable's path
  std::string log;                // stdout and stderr go there, appended across restarts
};

// "exit status 1", "killed by signal 9", from a wait status.
std::string describe_exit(int wait_status);

class Supervisor {
 public:
  // Blocks SIGINT, SIGTERM and SIGCHLD in the calling thread (wait() takes them), restores their
  // default actions (a shell starts background jobs with SIGINT ignored), and makes this process
  // the subreaper of its daemons' orphans. Messages go to `report`, one line each.
  Supervisor(BackoffPolicy policy, std::ostream& report);
  // Stops what still runs (stop() with a 2 s grace) and restores the signal mask.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts `spec` now, in a new process group, with stdin from /dev/null and SIGTERM should this
  // process die (PR_SET_PDEATHSIG). Unavailable when it cannot fork.
  Status start(ProcessSpec spec);

  // Off (the default): a process that exits stays down and exit_status() tells, for a caller that
  // is still bringing things up. On: each one that exits from then on is reported, the rest of its
  // group killed, and started again after its backoff (`orrery up: node node1 exited (killed by
  // signal 9); restarting in 1.0 s (restart 2); log ...`, then `orrery up: node node1 started
  // again (pid 4242)`).
  void set_restarting(bool on) { restarting_ = on; }

  // Waits up to `limit` for SIGINT or SIGTERM, reaping what exits and (re)starting what is due
  // meanwhile. Returns the signal that asks to stop, or 0 when `limit` passed.
  int wait(Millis limit);

  // The wait status of `name`'s last exit while it is down; nullopt while it runs (or is unknown).
  std::optional<int> exit_status(const std::string& name) const;
  // The pid (and process group) of `name` while it runs, else -1.
  pid_t pid(const std::string& name) const;

  // SIGTERM to every process group, the last started first (node agents stop their workers while
  // the core is still there to hear it), SIGKILL to any group with a process left after `grace`,
  // everything reaped. Nothing is restarted afterwards.
  void stop(Millis grace);

 private:
  using Clock = std::chrono::steady_clock;
  struct Proc {
    ProcessSpec spec;
    pid_t pid = -1;           // leader and group id of the current (or last) run
    bool running = false;
    bool group_left = false;  // the leader is gone, members of its group may not be
    int status = 0;           // wait status of the last exit
    bool restart_pending = false;
    Clock::time_point started;
    Clock::time_point restart_at;
    int restarts = 0;
    RestartBackoff backoff;
  };

  Status spawn(Proc& p);
  void reap();                 // every child that exited, leaders and adopted orphans
  bool group_gone(Proc& p);    // nothing of p's last group left (reaps what it can)
  void handle_exits();         // report and schedule restarts
  void start_due();            // start what is due and whose old group is gone

  std::ostream& report_;
  BackoffPolicy policy_;
  sigset_t mask_{};
  sigset_t old_mask_{};
  bool restarting_ = false;
  bool stopped_ = false;
  std::vector<Proc> procs_;
};

}  // namespace orrery::cli
