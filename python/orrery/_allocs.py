"""A rank's device allocations in the order a restore must repeat them.

After a restore the proxy hands the checkpointed allocations back, with their bytes, at the same
addresses, but only to allocation calls made in the original order and sizes (a different size
is refused). Two parties allocate in an orrery.torch rank:
  - orrery.torch itself: the state area when the loop starts, a larger one if a checkpoint
    outgrows it (_state.py);
  - the worker library: Worker::allreduce_host allocates a one-float device buffer (its safe
    point's flags) at its first call in each process.
So the log records every allocation as (size, owner); the checkpoint header carries it. A restore
replays the log in order; an entry of the worker's is left to the worker's own first call, which
replays it (same size), and the rest follows that call. When no entry is left for it, the
worker's first call is a new allocation, logged. Across machines (a tcp:// collective) orrery.torch
reduces through its state area instead of allreduce_host: the worker allocates nothing, and an
entry of the worker's from an earlier incarnation is replayed here as a placeholder.
"""

MINE, WORKER = 0, 1
WORKER_FLAG_BYTES = 64  # allreduce_host's device buffer (runtime/worker/worker_host_reduce.cc)
MAX_ENTRIES = 32


class AllocLog:
    def __init__(self, worker, host_reduce, checkpointed=()):
        self.w = worker
        self.host_reduce = host_reduce   # this incarnation reduces through allreduce_host
        self.entries = []                # (size, owner) made or replayed here, in order
        self.pending = list(checkpointed)  # the checkpoint's entries not yet replayed
        self.areas = []                  # (address, size) of orrery.torch's areas, in order
        self.left_to_worker = False      # pending[0] is the worker's: its first call replays it
        self.first_reduce_done = False

    def replay(self):
        """Repeats the checkpoint's allocations, up to one the worker makes itself."""
        while self.pending:
            size, owner = self.pending[0]
            if owner == WORKER and self.host_reduce and not self.first_reduce_done:
                self.left_to_worker = True
                return
            self.pending.pop(0)
            addr = self.w.alloc(size)
            self.entries.append((size, owner))
            if owner == MINE:
                self.areas.append((addr, size))

    def new_area(self, size):
        if self.pending:
            raise AssertionError("a new allocation before the checkpoint's are replayed")
        if len(self.entries) >= MAX_ENTRIES:
            from . import Error
            raise Error("more than %d device allocations to checkpoint" % MAX_ENTRIES)
        addr = self.w.alloc(size)
        self.entries.append((size, MINE))
        self.areas.append((addr, size))
        return addr

    def after_first_reduce(self):
        """The worker's first allreduce_host call has allocated (or replayed) its buffer."""
        if self.first_reduce_done:
            return
        self.first_reduce_done = True
        if not self.host_reduce:
            return
        if self.left_to_worker:
            self.entries.append(self.pending.pop(0))
            self.left_to_worker = False
            self.replay()
        else:
            self.entries.append((WORKER_FLAG_BYTES, WORKER))

    # The header's encoding: a size, negative for the worker's entries.
    def encoded(self):
        return [-s if o == WORKER else s for s, o in self.entries]

    @staticmethod
    def decode(values):
        return [(-v, WORKER) if v < 0 else (v, MINE) for v in values]
