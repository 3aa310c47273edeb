"""orrery.torch: a PyTorch data-parallel training loop as a transparent orrery job.

A torch DDP script becomes an orrery job by changing a few lines (docs/pytorch.md):

    import orrery.torch as ot                           # was: import torch.distributed as dist
    from orrery.torch import DDP                        # was: from torch.nn.parallel import ...
    ot.init()                                           # was: dist.init_process_group("gloo")
    for step in ot.steps(range(args.steps), model, opt):  # was: for step in range(args.steps):
    ot.finish()                                         # was: dist.destroy_process_group()

What the step iterator does, around the loop body the script already has:
  - first, if this incarnation is restored from a checkpoint: model, optimizer, RNG states and
    extras come back, and iteration resumes at the checkpointed step (the data position is the
    step index: the script derives its batch from `step`);
  - inside the body's opt.step(): the gradients go through the step's one rank-ordered allreduce
    (the safe point; see _flat.py) before the optimizer's own update;
  - after the body: if this boundary was agreed for a checkpoint, the state is written to proxy
    device memory (_state.py); then step_boundary, which writes the shard and may say stop, in
    which case the process exits with status 3 (stopped after its checkpoint);
  - at the end: the final parameters' digest is reported (the node runtime's completion note).

No torch.distributed process group is used: a gloo collective of a rank that is spliced out
(waiting, parked, for its turn on a shared device) would deadlock the job. Rank 0's initial
parameters reach every rank by seeded identical initialisation, which the first step verifies.
"""

import hashlib
import os
import sys
import time

import torch

import orrery

from ._flat import GradReducer
from ._state import JobState

_worker = None
_digest_reported = False


def init(backend=None, **_ignored):
    """Connects this rank to its device proxy (replaces dist.init_process_group)."""
    global _worker
    if _worker is None:
        _worker = orrery.connect()
        r = os.environ.get("RANK")
        if r is not None and int(r) != _worker.rank:
            raise orrery.Error("RANK=%s but ORRERY_RANK=%d" % (r, _worker.rank))
    return _worker


# The drop-in names of torch.distributed that need no collective of their own.
init_process_group = init


def is_initialized():
    return _worker is not None and not _worker.closed


def worker():
    """The orrery.Worker of this process (after init())."""
    if _worker is None:
        raise orrery.Error("orrery.torch.init() was not called")
    return _worker


def get_rank():
    return worker().rank


def get_world_size():
    return worker().world


def digest(model):
    """sha256 over the raw bytes of all parameters, in order (the job's result)."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().data)
    return h.hexdigest()


def finish():
    """Says goodbye to the proxy (replaces dist.destroy_process_group)."""
    global _worker
    if _worker is not None:
        _worker.close()
        _worker = None


destroy_process_group = finish


class DDP(torch.nn.Module):
    """Stands where torch's DistributedDataParallel stood: the same `module` attribute and
    state_dict names ("module."), no process group, no hooks. Gradients are reduced by
    orrery.torch.steps() through the step's rank-ordered allreduce instead. DDP's keyword
    arguments (device_ids, broadcast_buffers ...) are accepted and need nothing here."""

    def __init__(self, module, *args, **kwargs):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


class Steps:
    """The training loop's steps as safe points (see the module's docstring)."""

    def __init__(self, iterable, model, optimizer, extras=(), log=None):
        self.w = init()
        self.iterable = iterable
        self.model = model
        self.opt = optimizer
        self.log = log if log is not None else bool(os.environ.get("ORRERY_TORCH_LOG"))
        # Within a machine the gradients are summed in host shared memory (allreduce_host);
        # across machines through device memory (_flat.py).
        host_reduce = not self.w.env["collective"].startswith("tcp://")
        self.reducer = GradReducer(self.w, model, lambda: self.state.area(), host_reduce)
        self.state = JobState(self.w, model, optimizer, extras, self.reducer.count, host_reduce)
        self.start = 0
        if self.w.restored:
            t0 = time.perf_counter()
            self.start = self.state.restore()
            self._say("restored step %d in %.3f s" % (self.start, time.perf_counter() - t0))
        self.step = None
        self.flags = 0
        self.stepped = False
        self._wrap(optimizer)

    def _say(self, text):
        if self.log:
            print("orrery.torch: rank %d: %s" % (self.w.rank, text), file=sys.stderr, flush=True)

    def _wrap(self, opt):
        """opt.step() of this optimizer instance reduces the gradients first."""
        inner = opt.step
        me = self

        def step(*args, **kwargs):
            if me.step is None:
                return inner(*args, **kwargs)  # outside orrery's loop: a plain update
            if me.stepped:
                raise orrery.Error("opt.step() twice in step %d: orrery reduces once per step"
                                   % me.step)
            me.flags = me.reducer.reduce(me.step, check_params=me.step == me.start)
            me.state.log.after_first_reduce()
            me.stepped = True
            return inner(*args, **kwargs)

        opt.step = step

    def _items(self):
        it = self.iterable
        if isinstance(it, (range, list, tuple)):
            return iter(it[self.start:])
        it = iter(it)
        for _ in range(self.start):  # the data position is the step index
            next(it)
        return it

    def __iter__(self):
        try:
            for i, item in enumerate(self._items(), self.start):
                self.step, self.stepped, self.flags = i, False, 0
                yield item
                self._boundary(i)
        finally:
            self.step = None  # a loop left early: opt.step() is a plain update again
        self._report()

    def _boundary(self, i):
        """After step i's body: the checkpoint if one was agreed, the boundary, maybe a stop."""
        if not self.stepped:
            raise orrery.Error("step %d ended without opt.step(): orrery's safe point is the "
                               "gradient reduction inside it, once per step" % i)
        t0 = time.perf_counter()
        if self.flags & orrery.FLAG_CHECKPOINT:
            self.state.save(i + 1)
        b = self.w.step_boundary(i + 1)
        if b.checkpointed:
            _, nbytes, to_dev = self.state.last_cut
            self._say("checkpoint at step %d: %d bytes, %.4f s (state to device %.4f s)"
                      % (i + 1, nbytes, time.perf_counter() - t0, to_dev))
        if b.stop:
            self._say("stopped after step %d" % (i + 1))
            global _worker
            _worker = None
            orrery.exit_stopped(self.w)

    def _report(self):
        global _digest_reported
        d = digest(self.model)
        self.w.report("done rank=%d world=%d digest=%s" % (self.w.rank, self.w.world, d))
        _digest_reported = True


def steps(iterable, model, optimizer, *extras, log=None):
    """Iterates `iterable` (the steps: range(N), or any iterable whose i-th item is step i's)
    with orrery's safe points around each step. `extras` are objects with state_dict() and
    load_state_dict() (LR schedulers, GradScaler ...) saved with the checkpoint."""
    return Steps(iterable, model, optimizer, extras, log=log)
