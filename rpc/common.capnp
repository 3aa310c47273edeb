# Types shared by the client and node protocols of `orrery-core serve`.
#
# Enumerants mirror spec/vocabulary.h in the same order; the adapters (rpc/convert.*) map them and
# reject values they do not know (a newer peer), so a wrong number never reaches the core.
@0xa97879fb3748d7ff;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("orrery::rpc::wire");

enum Tier {
  premium @0;
  standard @1;
  basic @2;
}

# How a job's program is preempted (spec::Preemption).
enum Preemption {
  transparent @0;   # through orrery's worker library: cut at safe points, bit-identical
  signal @1;        # SIGTERM, SIGKILL after the grace period; it saves itself
  requeue @2;       # killed and restarted from scratch
}

enum JobState {
  new @0;
  submitted @1;
  queued @2;
  placed @3;
  running @4;
  checkpointing @5;
  suspended @6;
  migrating @7;
  restoring @8;
  completed @9;
  failed @10;
  cancelled @11;
}

enum NodeState {
  down @0;
  joining @1;
  up @2;
  draining @3;
  lost @4;
}

# A stream of bytes (a checkpoint shard). The writer calls write() for each chunk (flow-controlled
# by Cap'n Proto's streaming), then done(). A sink whose write() or done() throws has discarded
# what it received: the transfer failed as a whole, nothing half-written is ever visible.
interface ByteSink {
  write @0 (chunk :Data) -> stream;   # chunks of at most 1 MiB
  done @1 () -> ();                   # the receiver checks size and checksum here
}

# Errors. Every method reports a refused request as a Cap'n Proto exception of type `failed` whose
# description is the refusal's status code (base/result.h) in brackets, a space, then the reason
# naming what was wrong:
#
#   [not found] unknown job 7
#   [invalid argument] world must be in [1, 2^20], got 0
#   [failed precondition] stale epoch 2 for job 3: current epoch is 4
#   [permission denied] authentication failed: wrong secret
#
# The tag is the code's name as status_code_name() prints it: ok is never sent; invalid argument,
# not found, already exists, failed precondition, unavailable, permission denied, deadline
# exceeded, resource exhausted, aborted, internal, unknown. The receiving side (rpc/wire_status.h,
# status_of) turns the exception back into a Status with that code and the reason without the tag.
# Exceptions KJ raises itself map by type: `disconnected` (the peer went away) and `overloaded`
# are unavailable, `unimplemented` (a peer without the method) internal, and a `failed`
# description without a known tag (an older peer) unknown, its whole text the reason. Nothing
# else is sent. A refused request changes nothing.
