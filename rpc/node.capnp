# The node protocol of `orrery-core serve`: what `orrery-node` speaks. Two directions over ONE
# connection, which the node opens (a node needs no listening port):
#
#   node -> core   NodeApi.register(), then NodeSession: heartbeats, job reports, checkpoint shards
#   core -> node   NodeAgent, a capability the node passes in register(): commands for its jobs
#
# Fencing. Every command and every report names the job's epoch (its incarnation number, strictly
# larger at every (re)start). The agent refuses a command whose epoch is older than the newest it
# has seen for that job; the core refuses a report whose epoch is not the job's current one, and
# tells that stale incarnation to stop. So a job never runs twice, whatever reconnects and restarts
# happen.
#
# Reconciliation. register() carries what the node runs now. After a core restart (or a network
# cut) the agent reconnects with backoff and registers again; the core adopts the incarnations whose
# epoch is current and that hold devices on the node, and stops the rest.
@0xda365424aac279cf;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("orrery::rpc::wire");

using Common = import "common.capnp";

# What the node brings. Checked against the fleet file's entry for the node's name: the same device
# type and count, at least the configured memory per device.
struct Inventory {
  deviceType @0 :Text;            # e.g. "host"
  devices @1 :Int32;
  deviceMemMib @2 :Int64;
}

# One incarnation running on the node.
struct Incarnation {
  job @0 :Int32;
  epoch @1 :Int64;
}

# A report about one job from this node. The core aggregates the reports of all nodes of a job's
# placement into job events: Start (every node started), CheckpointDone / Checkpoint (every rank's
# shard of the step is in the core's checkpoint store), Complete (every node completed),
# WorkerCrash (any node crashed).
struct JobReport {
  kind @0 :Kind;
  enum Kind {
    started @0;       # every local rank is running (restored, when the launch asked for it)
    progress @1;      # the job's local ranks all completed `step`
    checkpointed @2;  # the local shards of `step` are written AND uploaded (uploadShard) already
    stopped @3;       # stopped on request
    completed @4;     # every local rank finished its last step; the weights' digest in `detail`
    crashed @5;       # a worker or proxy died; `detail` says which and how
  }
  job @1 :Int32;
  epoch @2 :Int64;
  step @3 :Int64;
  gpuMs @4 :Int64;    # progress: device time since the last report
  detail @5 :Text;
  platform @6 :Bool;  # crashed: the platform failed (the proxy died, a shard was lost), not the
                      # job's program; it does not spend the job's retries
}

# This node's share of an incarnation: local device index -> the ranks spliced on it.
struct LocalPlacement {
  device @0 :Int32;
  ranks @1 :List(Int32);
}

struct Launch {
  job @0 :Int32;
  epoch @1 :Int64;
  world @2 :Int32;
  local @3 :List(LocalPlacement);
  workdir @4 :Text;               # absolute; empty: the node's data directory
  command @5 :List(Text);         # the program and its arguments
  restoreStep @6 :Int64 = -1;     # >= 0: restore the local ranks from that step's shards, which
                                  # the agent downloads from the core (downloadShard) first
  collective @7 :Text;            # collective group name, the same on every node of the job
  env @8 :List(Text);             # "NAME=VALUE" the job sets
  preemption @9 :Common.Preemption;
  graceMs @10 :Int64;             # signal: SIGTERM .. SIGKILL
  checkpointDir @11 :Text;        # ORRERY_CHECKPOINT_DIR (a signal job's own checkpoints)
  restartCount @12 :Int64;        # ORRERY_RESTART_COUNT
  masterAddr @13 :Text;           # MASTER_ADDR/MASTER_PORT: rank 0's node, for torch.distributed
  masterPort @14 :Int32;
}

# The node side: commands from the core. Each refuses an epoch older than the newest the agent has
# seen for the job ("stale epoch ..."), and a job or epoch it does not run where one is needed.
interface NodeAgent {
  # Starts this node's share of an incarnation (downloading the shards to restore first).
  launch @0 (launch :Launch) -> ();
  # Checkpoint at a step boundary (atStep < 0: the next one the job's ranks agree on) and, when
  # thenStop, exit afterwards. Completion comes back as `checkpointed` (then `stopped`) reports.
  checkpoint @1 (job :Int32, epoch :Int64, atStep :Int64, thenStop :Bool) -> ();
  # Kill the incarnation's workers now, no checkpoint.
  stop @2 (job :Int32, epoch :Int64) -> ();
  # (There is no relaunch: every (re)start of a job, a resize's too, is a launch of a new epoch,
  # and a node the new placement leaves is told to stop the old one.)
}

# Bound to one registered node (one registration). Calls on a session the node has since
# replaced by a newer registration fail with "session superseded".
interface NodeSession {
  heartbeat @0 () -> (timeoutMs :Int64);   # the core's heartbeat timeout, to pace the node
  # A refused report (stale epoch, unknown job, a job not placed on this node) fails; the core has
  # then told the stale incarnation to stop.
  report @1 (report :JobReport) -> ();
  # Upload the shard of (job, step, rank) taken by incarnation `epoch`: `size` bytes whose CRC-32C
  # is `crc32c`, streamed into the returned sink. The store keeps it only if done() sees exactly
  # that size and checksum; otherwise done() fails and nothing is stored.
  uploadShard @2 (job :Int32, epoch :Int64, step :Int64, rank :Int32, size :UInt64,
                  crc32c :UInt32) -> (sink :Common.ByteSink);
  # Stream the stored shard of (job, step, rank) into `sink`; returns its size and CRC-32C (the
  # receiver checks them). Unknown shard -> failed.
  downloadShard @3 (job :Int32, step :Int64, rank :Int32, sink :Common.ByteSink)
      -> (size :UInt64, crc32c :UInt32);
  # New output (stdout and stderr as the process wrote them) of rank `rank` of incarnation `epoch`,
  # at most 1 MiB a call, sent before the reports of the same moment (so a job's last lines arrive
  # before the report that ends it). The core appends it to the rank's output, behind a line
  # "--- epoch E on node N ---" where an incarnation begins. Refused: a superseded session, an
  # unknown job or rank, an epoch the job never had, a larger chunk; the node drops a refused chunk
  # and keeps one it could not deliver for its next connection.
  output @4 (job :Int32, epoch :Int64, rank :Int32, data :Data) -> ();
}

interface NodeApi {
  # Registers node `name` (a node of the fleet file) with its inventory and what it runs now, and
  # hands the core its command capability. Unknown node, inventory not matching the fleet, or a node
  # still being failed over (retry later) -> failed.
  # `host`: the address other nodes reach this one at (a job spanning nodes meets in a TCP
  # collective served on the node of its rank 0); empty: the core uses the loopback address.
  register @0 (name :Text, inventory :Inventory, running :List(Incarnation), agent :NodeAgent,
               host :Text) -> (session :NodeSession, heartbeatMs :Int64);
}
