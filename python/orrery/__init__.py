"""orrery's worker API for Python programs.

A program started by orrery's node runtime reaches its device proxy through a Worker: device
memory at stable addresses, one rank-ordered allreduce per step (the safe point where splicing
switches ranks and checkpoints are agreed), and a step boundary after each step's update (where
this rank's checkpoint shard is written when one was agreed). The C++ contract is
runtime/worker/worker.h; this package is the same API, and `orrery.torch` builds PyTorch
training on it.

    import orrery
    w = orrery.connect()            # from ORRERY_PROXY, ORRERY_RANK ... (set by the node runtime)
    buf = w.alloc(4 * n)
    flags = w.allreduce(buf, n, step)
    b = w.step_boundary(step + 1)
    if b.stop: orrery.exit_stopped(w)

Nothing here imports torch.
"""

import os
import sys

from ._orrery import (  # noqa: F401  (re-exported API)
    DATA_BYTES,
    EXIT_STOPPED,
    FLAG_CHECKPOINT,
    FLAG_STOP,
    Error,
    StepBoundary,
    Worker,
    env_from_environment,
)

__all__ = [
    "DATA_BYTES", "EXIT_STOPPED", "FLAG_CHECKPOINT", "FLAG_STOP", "Error", "StepBoundary",
    "Worker", "connect", "env_from_environment", "exit_stopped", "under_orrery",
]


def under_orrery():
    """True when this process was started by orrery's node runtime as a transparent worker."""
    return bool(os.environ.get("ORRERY_PROXY"))


def connect():
    """Connects to this rank's device proxy, as the environment says (raises orrery.Error).

    After a restart from a checkpoint (ORRERY_RESTORE_STEP >= 0) the returned worker is
    `restored`: its device memory is back, and host state registered in the same order and
    sizes as before is filled with the checkpointed bytes.
    """
    if not under_orrery():
        raise Error("not started by orrery: ORRERY_PROXY is not set "
                    "(run this program as an orrery job, see docs/pytorch.md)")
    return Worker.connect_from_env()


def exit_stopped(worker=None):
    """Ends the process as a worker stopped on request after its checkpoint (exit status 3).

    The worker says goodbye first (the proxy frees this rank's memory; the shard is on disk).
    SystemExit, not os._exit: the program's own `finally` blocks and atexit handlers run.
    """
    if worker is not None and not worker.closed:
        worker.close()
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(EXIT_STOPPED)
