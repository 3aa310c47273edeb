"""One flat float32 buffer per step: the model's gradients, its float buffers and a check slot
per rank, reduced by the step's single rank-ordered allreduce.

Layout of the buffer (count = P + B + W floats):

    [ gradients (P) | float buffers (B) | init check (W) ]

- Gradients are scaled by 1/W before the sum, as torch's DDP does (it multiplies while copying
  into its buckets), so every rank ends with the mean. The parameters' .grad become views into
  the buffer: with zero_grad(set_to_none=False) backward accumulates straight into it and no copy
  is made; otherwise each step's fresh .grad is copied in once.
- Float buffers (BatchNorm running stats ...) are rank 0's: the other ranks contribute -0.0,
  the identity of IEEE addition (x + -0.0 == x bit for bit, +0.0 included), so the sum is rank
  0's bytes. DDP broadcasts rank 0's buffers before each forward; syncing them after the step's
  forward gives every rank the same buffers at the next forward, which is the same thing.
- The check slots carry a 23-bit hash of each rank's parameters on the first step of an
  incarnation (rank r writes only slot r; exact in float32): every rank then verifies that all
  ranks started from identical parameters, which seeded initialisation (or the checkpoint)
  must give. A mismatch is an error naming the cause, not silently diverging replicas.

Within a machine the buffer is summed in place by Worker::allreduce_host (host shared memory
between the job's workers; the safe point is a one-float allreduce through the proxy). Across
machines (a tcp:// collective) it goes through the job's state area in device memory
(_state.py): copied in, reduced by the proxies, copied back, in one call (allreduce_staged).
"""

import hashlib

import torch

from . import Error


def params_hash23(params):
    """A 23-bit hash of the parameters' bytes (exactly representable as float32)."""
    h = hashlib.sha256()
    for p in params:
        h.update(p.detach().contiguous().numpy().data)
    return int.from_bytes(h.digest()[:4], "little") & ((1 << 23) - 1)


class GradReducer:
    def __init__(self, worker, model, area, host_reduce):
        self.worker = worker
        self.world = worker.world
        self.rank = worker.rank
        self.params = [p for p in model.parameters() if p.requires_grad]
        for p in self.params:
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise Error("orrery.torch reduces float32 CPU parameters; found %s on %s"
                            % (p.dtype, p.device))
        self.buffers = [b for b in model.buffers() if b.dtype == torch.float32]
        self.P = sum(p.numel() for p in self.params)
        self.B = sum(b.numel() for b in self.buffers)
        self.count = self.P + self.B + self.world
        self.flat = torch.zeros(self.count, dtype=torch.float32)
        self.grad_views = []
        off = 0
        for p in self.params:
            self.grad_views.append(self.flat[off:off + p.numel()].view_as(p))
            off += p.numel()
        self.buf_views = []
        for b in self.buffers:
            self.buf_views.append(self.flat[off:off + b.numel()].view_as(b))
            off += b.numel()
        self.grads = self.flat[:self.P]
        self.check = self.flat[self.P + self.B:]
        self.area = area  # () -> the device buffer's address (across machines)
        self.host_reduce = host_reduce
        self.scale = 1.0 / self.world

    def reduce(self, step, check_params):
        """Gradients (and buffers) summed across the job; returns the step's agreed flags."""
        for p, v in zip(self.params, self.grad_views):
            g = p.grad
            if g is None:
                v.zero_()  # an unused parameter contributes nothing, as with DDP
            elif g.data_ptr() != v.data_ptr():
                v.copy_(g)
            if g is None or g.data_ptr() != v.data_ptr():
                p.grad = v
        self.grads.mul_(self.scale)
        for b, v in zip(self.buffers, self.buf_views):
            if self.rank == 0:
                v.copy_(b)
            else:
                v.fill_(-0.0)
        self.check.zero_()
        tag = None
        if check_params:
            tag = params_hash23(self.params)
            self.check[self.rank] = float(tag)
        if self.host_reduce:
            flags = self.worker.allreduce_host(self.flat.data_ptr(), self.count, step)
        else:
            flags = self.worker.allreduce_staged(self.flat.data_ptr(), self.area(), self.count,
                                                 step)
        if self.rank != 0:
            for b, v in zip(self.buffers, self.buf_views):
                b.copy_(v)
        if tag is not None:
            got = [int(x) for x in self.check.tolist()]
            if any(t != tag for t in got):
                raise Error("ranks started from different parameters (hashes %s): seed the "
                            "model's initialisation identically on every rank (torch.manual_seed "
                            "before building it)" % got)
        return flags
