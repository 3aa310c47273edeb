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
# description is the reason, naming what was wrong ("unknown job 7", "world must be in [1, 2^20],
# got 0", "stale epoch 2 for job 3: current epoch is 4"). A refused request changes nothing.
# `disconnected` means the peer went away; nothing else is used.
