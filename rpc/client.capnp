# The client protocol of `orrery-core serve`: what `orrery` (the CLI) speaks. The C++ side of it
# is core/service/client_api.h; rpc/client_connection.h hands a client an implementation of that
# interface backed by a connection, rpc/client_server.* serves it from the Service.
#
# Every call is an operator request: the service turns it into decisions (origin operator, with
# devices chosen by the placement policy) and commits them through the core's spec guards, so a
# request the spec forbids fails with the guard's reason. A call returns once its decision is
# durable in the journal.
@0xef33a764ab8106cb;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("orrery::rpc::wire");

using Common = import "common.capnp";

# A job as submitted. Values are checked by the service (and the spec's GuardSubmit): a world
# outside [1, 2^20], min/max devices outside [1, world], a non-positive memory, an unknown device
# type, workload or tier, or negative steps are refused with the field's name.
struct JobSpec {
  name @0 :Text;
  tier @1 :Common.Tier = standard;
  deviceType @2 :Text;            # a device type of the fleet, e.g. "host", "H100-80G"
  world @3 :Int64 = 1;            # W workers, fixed for the job's whole life
  minDevices @4 :Int64 = 1;       # elastic range of device counts (replica splicing below W)
  maxDevices @5 :Int64 = 1;
  memMib @6 :Int64 = 64;          # device memory per worker
  workdir @7 :Text;               # absolute working directory of every worker; empty: the node's
  command @8 :List(Text);         # the program and its arguments (argv), at least the program
  steps @9 :Int64;                # training steps the program runs (progress); 0: unknown
  checkpointEvery @10 :Int64;     # periodic checkpoint every N steps (transparent only), 0: none
  tenant @11 :Text;               # who submits it (fair share inside a tier); empty: the default
  env @12 :List(Text);            # "NAME=VALUE" set for every worker
  preemption @13 :Common.Preemption;  # how it is preempted
  graceMs @14 :Int64 = 30000;     # signal: SIGTERM .. SIGKILL
  minRuntimeMs @15 :Int64;        # not evicted by a planner within this long after it starts
}

struct JobStatus {
  job @0 :Int32;
  name @1 :Text;
  tier @2 :Common.Tier;
  state @3 :Common.JobState;
  epoch @4 :Int64;                # incarnation; every (re)start takes a larger one
  world @5 :Int64;
  devices @6 :Int64;              # held now
  splice @7 :Int64;               # workers per device now
  progress @8 :Int64;             # last committed step
  steps @9 :Int64;
  checkpoint @10 :Int64;          # step of the last committed checkpoint, -1 when none
  nodes @11 :List(Text);          # nodes of the devices held
  ageMs @12 :Int64;               # since submission; -1 when unknown
  note @13 :Text;                 # why it waits, why it failed, the final weights' digest
  tenant @14 :Text;
  deviceType @15 :Text;           # the type it runs on, or waits for now (of those its spec names)
}

struct NodeStatus {
  name @0 :Text;
  state @1 :Common.NodeState;
  devices @2 :Int32;
  held @3 :Int32;                 # devices held by jobs
  heartbeatAgeMs @4 :Int64;       # -1 when the node never registered with this core
}

# One line of the cluster's timeline.
struct ClusterEvent {
  seq @0 :UInt64;                 # the committed decision's seq; 0 for a report committing nothing
  timeMs @1 :Int64;               # when: ms since the Unix epoch (orrery-core serve's clock)
  job @2 :Int32 = -1;             # -1 for node events
  node @3 :Text;
  text @4 :Text;                  # "job 2 train-a Running -> Checkpointing: Preempt job 2 for job 3"
}

# Where `watch` delivers events: the client passes one of these. Returning more = false ends the
# watch; so does dropping the Watch handle or the connection.
interface EventSink {
  push @0 (event :ClusterEvent) -> (more :Bool);
}

# Held by the watcher; dropping it ends the watch.
interface Watch {}

interface ClientApi {
  submit @0 (spec :JobSpec) -> (job :Int32);
  cancel @1 (job :Int32) -> ();
  jobs @2 () -> (jobs :List(JobStatus));
  nodes @3 () -> (nodes :List(NodeStatus));
  # Preempt `job` for the waiting job `beneficiary` (-1: the most favoured one the spec allows).
  preempt @4 (job :Int32, beneficiary :Int32 = -1) -> ();
  # Move `job` to other devices (on `toNode` when not empty): a checkpoint at a barrier, then a new
  # incarnation restores it there.
  migrate @5 (job :Int32, toNode :Text) -> ();
  # Change the device count at fixed world size, within the job's elastic range. A shrink frees
  # the devices for the waiting job `beneficiary`, or for no one (-1: the operator's own choice).
  resize @6 (job :Int32, devices :Int32, beneficiary :Int32 = -1) -> ();
  drain @7 (node :Text) -> ();
  undrain @8 (node :Text) -> ();
  # The timeline from `afterSeq` on (exclusive), then every new event as it happens, pushed to
  # `sink` one at a time (the next push waits for the previous one's answer).
  watch @9 (afterSeq :UInt64, sink :EventSink) -> (handle :Watch);
  # A job's timeline and report lines, the last `maxLines`.
  logs @10 (job :Int32, maxLines :Int32 = 100) -> (lines :List(Text));
  # What rank `rank` of `job` wrote (its workers' stdout and stderr, every incarnation), from
  # `offset` on, at most `maxBytes` (capped at 1 MiB). Unknown job or rank -> failed (not found).
  output @11 (job :Int32, rank :Int32, offset :UInt64, maxBytes :UInt32) -> (output :WorkerOutput);
  # Suspend a Running job for no one (a cut, then its devices are free) and hold it: no planner
  # starts it again until `resume`.
  suspend @12 (job :Int32) -> ();
  # Release a job an operator suspended: the planners resume it when devices are free.
  resume @13 (job :Int32) -> ();
}

# A window of one rank's output: the stream of every byte the rank wrote, across its restarts and
# migrations, each incarnation behind a line "--- epoch E on node N ---". The core keeps the newest
# 32-64 MiB per rank; offsets are those of the whole stream.
struct WorkerOutput {
  data @0 :Data;                  # bytes [nextOffset - size(data), nextOffset)
  nextOffset @1 :UInt64;          # where the next read goes on; an offset past the end reads
                                  # nothing, one before the oldest byte kept reads from there
  size @2 :UInt64;                # the stream's end: all the rank wrote so far
  jobEnded @3 :Bool;              # Completed, Failed or Cancelled: no more will come
}
