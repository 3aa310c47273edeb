#!/usr/bin/python3
"""orrery.torch's allocation log (python/orrery/_allocs.py) against a model of the proxy's replay
rule (runtime/proxy/proxy_requests.cc, kAlloc): after a restore, allocations must come in the
checkpoint's order and sizes, and each gets its old address back; past the end they are new.
Incarnations move between one machine (the worker's allreduce_host allocates at its first call)
and several (it does not), and the state area grows once; every restore must replay cleanly.
Needs the built package (PYTHONPATH=<build>/python), not torch."""
import sys
import unittest

from orrery._allocs import MINE, WORKER, WORKER_FLAG_BYTES, AllocLog


class FakeProxyRank:
    """One rank's allocations as the proxy keeps them across incarnations."""

    def __init__(self):
        self.allocs = []  # (addr, size) in allocation order (what a shard records)
        self.replay = 0
        self.next = 0x1000

    def restore(self):
        self.replay = 0

    def alloc(self, size):
        if self.replay < len(self.allocs):
            addr, old = self.allocs[self.replay]
            if old != size:
                raise RuntimeError("alloc: size differs from the checkpoint's allocation "
                                   "(%d, checkpoint %d)" % (size, old))
            self.replay += 1
            return addr
        addr = self.next
        self.next += size
        self.allocs.append((addr, size))
        self.replay = len(self.allocs)
        return addr


class FakeWorker:
    def __init__(self, rank):
        self.rank = rank
        self.flag = None

    def alloc(self, size):
        return self.rank.alloc(size)

    def allreduce_host(self):  # Worker::allreduce_host's first call allocates its buffer
        if self.flag is None:
            self.flag = self.rank.alloc(WORKER_FLAG_BYTES)


def incarnation(rank, host_reduce, checkpointed, grow=None):
    """One process: the loop starts (replays or allocates), reduces, maybe grows, checkpoints."""
    w = FakeWorker(rank)
    if checkpointed is None:
        log = AllocLog(w, host_reduce)
        log.new_area(1 << 20)
    else:
        rank.restore()
        log = AllocLog(w, host_reduce, AllocLog.decode(checkpointed))
        log.replay()
    if host_reduce:
        w.allreduce_host()
    log.after_first_reduce()
    if grow:
        log.new_area(grow)
    assert not log.pending, log.pending
    # What the log says equals what the proxy holds, in order.
    assert [s for s, _ in log.entries] == [s for _, s in rank.allocs], (log.entries, rank.allocs)
    return log.encoded(), log


class AllocLogTest(unittest.TestCase):
    def test_one_machine_restores_replay_the_workers_buffer(self):
        r = FakeProxyRank()
        ck, log = incarnation(r, True, None)
        self.assertEqual(AllocLog.decode(ck), [(1 << 20, MINE), (WORKER_FLAG_BYTES, WORKER)])
        for _ in range(3):
            ck2, _ = incarnation(r, True, ck)
            self.assertEqual(ck2, ck)  # nothing new: the worker's call replayed its buffer

    def test_moves_between_one_and_several_machines_and_growth(self):
        r = FakeProxyRank()
        ck, _ = incarnation(r, True, None)                 # one machine
        ck, _ = incarnation(r, False, ck)                  # across machines: placeholder
        ck, _ = incarnation(r, True, ck, grow=4 << 20)     # one machine again, the area grows
        ck, log = incarnation(r, False, ck)
        ck, log = incarnation(r, True, ck)
        self.assertEqual(log.areas[-1][1], 4 << 20)        # the latest area is the grown one
        self.assertLessEqual(len(ck), 4)

    def test_a_wrong_order_is_refused_by_the_proxy_model(self):
        r = FakeProxyRank()
        ck, _ = incarnation(r, True, None, grow=4 << 20)
        r.restore()
        w = FakeWorker(r)
        w.alloc(1 << 20)
        with self.assertRaises(RuntimeError):  # the grown area before the worker's buffer
            w.alloc(4 << 20)


if __name__ == "__main__":
    sys.exit(unittest.main())
