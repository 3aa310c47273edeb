"""A transparent job's state at a checkpoint: where it lives and how it comes back.

Everything large lives in proxy device memory, so the proxy cuts, splices and migrates it like
any device memory, and it reaches the shard with the rest of the rank's device state:

    state area (device):  [ small tensors | large tensors (raw bytes, 64-byte aligned) | metadata ]
    header (host state):  fixed 320 bytes, registered with the worker once

The tensors are the model's state_dict (parameters and buffers), the optimizer's per-parameter
tensors (momentum, exp_avg ...) and torch's CPU RNG state. The metadata says where each one is
(name, dtype, shape, offset) and holds the small things: the optimizer's hyperparameters and
scalar state, Python's and NumPy's RNG states, and state_dict() of extra objects (LR schedulers).
It is pickled at a checkpoint only, never per step.

The state area is also the step's reduction buffer (_flat.py): the gradients pass through it
during the allreduce, and the state is written into it after the update, just before the step
boundary that puts it in the shard. One device allocation, so a shard holds the state and
little else (no stale gradient buffer beside it). It is allocated when the loop starts, sized
for the model, its optimizer's per-parameter state (known optimizers; others are guessed) and
the reduction; a checkpoint that needs more allocates a larger area, used from then on (the old
one stays: an allocation of a checkpoint cannot be freed and replayed).

Within a machine the gradients do not pass through the area: Worker::allreduce_host sums them
in host shared memory, and the area holds the state only. Across machines (a tcp:// collective)
the area is the reduction buffer too (allreduce_staged), at least the reduction's size.

The header points at the state: the next step, the area's address, the metadata's offset and
length, and the rank's allocations so far (_allocs.py: a restore repeats them in order, and the
proxy hands the checkpointed ones back at the same addresses with their bytes).
"""

import pickle
import random
import struct
import sys
import time

import torch

from . import Error
from ._allocs import MAX_ENTRIES, AllocLog

_MAGIC = b"ORRTORCH"
_VERSION = 1
# magic, version, nentries, next_step, meta_off, meta_len, count (reduced floats), area address,
# allocation log (_allocs.py)
_FMT = "<8sIIqqqqq%dq" % MAX_ENTRIES
HEADER_BYTES = 320
assert struct.calcsize(_FMT) <= HEADER_BYTES
_ALIGN = 64
_MIB = 1 << 20


def _align(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


_SMALL = 64 << 10  # tensors below this travel together in one copy


def _nbytes(t):
    return t.numel() * t.element_size()


def _dtype_name(dt):
    return str(dt).replace("torch.", "")


def _dtype(name):
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise Error("checkpoint names an unknown dtype %r" % name)
    return dt


def _opt_params(opt):
    return [p for g in opt.param_groups for p in g["params"]]


def _opt_slots(opt):
    """How many parameter-sized tensors the optimizer keeps per parameter (a guess for others)."""
    name, d = type(opt).__name__, opt.defaults
    if name == "SGD":
        return 1 if d.get("momentum", 0) else 0
    if name in ("Adam", "AdamW"):
        return 3 if d.get("amsgrad") else 2
    if name == "RMSprop":
        return 1 + bool(d.get("momentum", 0)) + bool(d.get("centered"))
    if name in ("Adagrad", "Adadelta"):
        return 1 if name == "Adagrad" else 2
    return 2


def _estimate(model, opt):
    """Bytes of the state area for the model and optimizer, with room for the metadata."""
    sd = list(model.state_dict().values())
    params = _opt_params(opt)
    n = sum(_align(t.numel() * t.element_size()) for t in sd)
    n += _opt_slots(opt) * sum(_align(p.numel() * p.element_size()) for p in params)
    n += _ALIGN * 2 * len(params)  # small per-parameter tensors (Adam's step)
    return n + _align(5056) + (256 << 10)  # torch's RNG state, the metadata


class JobState:
    """The header (registered host state) and the state area of one rank."""

    def __init__(self, worker, model, opt, extras, count, host_reduce):
        self.worker = worker
        self.model = model
        self.opt = opt
        self.extras = list(extras)
        self.count = count
        self.host_reduce = host_reduce
        self.header = bytearray(HEADER_BYTES)
        worker.register_host_state(self.header)  # filled here on a restore
        self.last_cut = None  # (next_step, bytes, seconds to device memory) of the last save
        self.restored_area = None
        if worker.restored:
            f = self._fields()
            self.restored_area = f[7]
            self.log = AllocLog(worker, host_reduce, AllocLog.decode(f[8:8 + f[2]]))
            self.log.replay()  # up to the worker's own allocation, if any
        else:
            self.log = AllocLog(worker, host_reduce)
            size = _estimate(model, opt) if host_reduce else max(4 * count, _estimate(model, opt))
            self.log.new_area((size + (64 << 10) - 1) // (64 << 10) * (64 << 10))

    def area(self):
        """The device address of the state area (the reduction buffer across machines)."""
        return self.log.areas[-1][0]

    def _fields(self):
        f = struct.unpack_from(_FMT, self.header)
        if f[0] != _MAGIC or f[1] != _VERSION:
            raise Error("the checkpoint was not written by orrery.torch (version %d)" % _VERSION)
        if f[2] > MAX_ENTRIES:
            raise Error("the checkpoint's header is damaged (%d allocations)" % f[2])
        if f[6] != self.count:
            raise Error("the checkpoint is of another model: %d reduced floats, this one %d"
                        % (f[6], self.count))
        return f

    # ---- restore ----

    def restore(self):
        """Loads the checkpointed state back; returns the step to continue from."""
        _, _, _, next_step, meta_off, meta_len, _, dev = self._fields()[:8]
        if next_step != self.worker.restored_step:
            raise Error("the checkpoint's header says step %d, the shard step %d"
                        % (next_step, self.worker.restored_step))
        # The area may not be replayed yet (it can follow the worker's allocation), but it is the
        # rank's restored memory: readable at its address already.
        meta = pickle.loads(self.worker.read(dev + meta_off, meta_len))
        self._load(dev, meta)
        return next_step

    def _read_into(self, t, dev, off, nbytes):
        if nbytes == 0:
            return
        if nbytes < _SMALL:  # from the small tensors' region, read once
            t.copy_(self._small[off:off + nbytes].view(t.dtype).view(t.shape))
        elif t.is_contiguous():
            self.worker.copy_d2h(t.data_ptr(), dev + off, nbytes)
        else:
            tmp = torch.empty(t.shape, dtype=t.dtype)
            self.worker.copy_d2h(tmp.data_ptr(), dev + off, nbytes)
            t.copy_(tmp)

    def _load(self, dev, meta):
        self._small = torch.empty(meta["small_bytes"], dtype=torch.uint8)
        if meta["small_bytes"]:
            self.worker.copy_d2h(self._small.data_ptr(), dev, meta["small_bytes"])
        sd = self.model.state_dict()
        if [e[0] for e in meta["model"]] != list(sd.keys()):
            raise Error("the checkpoint's model has other tensors than this model")
        with torch.no_grad():
            for name, dt, shape, off, nbytes in meta["model"]:
                t = sd[name]
                if _dtype_name(t.dtype) != dt or list(t.shape) != shape:
                    raise Error("checkpoint tensor %s is %s%s, the model's %s%s"
                                % (name, dt, shape, _dtype_name(t.dtype), list(t.shape)))
                self._read_into(t, dev, off, nbytes)
        params = _opt_params(self.opt)
        state = {}
        for pidx, key, dt, shape, off, nbytes in meta["opt_tensors"]:
            t = torch.empty(shape, dtype=_dtype(dt))
            self._read_into(t, dev, off, nbytes)
            state.setdefault(pidx, {})[key] = t
        for pidx, key, value in meta["opt_scalars"]:
            state.setdefault(pidx, {})[key] = value
        self.opt.state.clear()
        for pidx, s in state.items():
            self.opt.state[params[pidx]] = s
        for g, saved in zip(self.opt.param_groups, meta["param_groups"]):
            g.update(saved)
        for obj, sd_extra in zip(self.extras, meta["extras"]):
            obj.load_state_dict(sd_extra)
        off, nbytes = meta["torch_rng"]
        rng = torch.empty(nbytes, dtype=torch.uint8)
        self._read_into(rng, dev, off, nbytes)
        torch.set_rng_state(rng)
        self._small = None
        random.setstate(meta["py_rng"])
        if meta.get("np_rng") is not None and "numpy" in sys.modules:
            sys.modules["numpy"].random.set_state(meta["np_rng"])

    # ---- save ----

    def save(self, next_step):
        """Writes the state after `next_step` steps to device memory and points the header at
        it; the step boundary that follows puts both into this rank's shard."""
        t0 = time.perf_counter()
        placed = []  # (tensor, its entry: the last two fields become offset and bytes)

        def want(t, entry):
            placed.append((t, entry))
            return entry

        model_entries = [want(t.detach(), [name, _dtype_name(t.dtype), list(t.shape), 0, 0])
                         for name, t in self.model.state_dict().items()]
        opt_tensors, opt_scalars = [], []
        for pidx, p in enumerate(_opt_params(self.opt)):
            for key, v in sorted(self.opt.state.get(p, {}).items()):
                if torch.is_tensor(v):
                    opt_tensors.append(want(v.detach().cpu(), [pidx, key, _dtype_name(v.dtype),
                                                               list(v.shape), 0, 0]))
                else:
                    opt_scalars.append((pidx, key, v))
        rng_at = want(torch.get_rng_state(), [0, 0])
        # Small tensors first, packed: one copy for all of them (each copy is a round trip to
        # the proxy), then one per large tensor.
        placed.sort(key=lambda x: _nbytes(x[0]) >= _SMALL)
        off = small_end = 0
        for t, e in placed:
            e[-2], e[-1] = off, _nbytes(t)
            off = _align(off + e[-1])
            if e[-1] < _SMALL:
                small_end = off
        np_rng = None
        if "numpy" in sys.modules:
            np_rng = sys.modules["numpy"].random.get_state()
        meta = {
            "model": model_entries,
            "opt_tensors": opt_tensors,
            "opt_scalars": opt_scalars,
            "param_groups": [{k: v for k, v in g.items() if k != "params"}
                             for g in self.opt.param_groups],
            "extras": [obj.state_dict() for obj in self.extras],
            "torch_rng": rng_at,
            "py_rng": random.getstate(),
            "np_rng": np_rng,
            "small_bytes": small_end,
        }
        blob = pickle.dumps(meta, protocol=pickle.HIGHEST_PROTOCOL)
        meta_off = off
        total = meta_off + len(blob)
        dev = self._area(total)
        staging = torch.empty(small_end, dtype=torch.uint8)
        for t, e in placed:
            at, nbytes = e[-2], e[-1]
            if nbytes == 0:
                continue
            src = t if t.is_contiguous() else t.contiguous()
            if nbytes < _SMALL:
                staging[at:at + nbytes].copy_(src.reshape(-1).view(torch.uint8))
            else:
                self.worker.copy_h2d(dev + at, src.data_ptr(), nbytes)
        if small_end:
            self.worker.copy_h2d(dev, staging.data_ptr(), small_end)
        self.worker.write(dev + meta_off, blob)
        log = self.log.encoded()
        struct.pack_into(_FMT, self.header, 0, _MAGIC, _VERSION, len(log), next_step,
                         meta_off, len(blob), self.count, dev, *(log + [0] * (MAX_ENTRIES - len(log))))
        self.last_cut = (next_step, total, time.perf_counter() - t0)

    def _area(self, total):
        """The state area's device address: the latest one, or a new larger one."""
        addr, size = self.log.areas[-1]
        if size >= total:
            return addr
        size = total + total // 4  # room to grow
        if not self.host_reduce:
            size = max(size, 4 * self.count)  # the reduction buffer too
        return self.log.new_area((size + _MIB - 1) // _MIB * _MIB)
