"""gloo's side of scripts/bench-allreduce: W processes on this machine, torch.distributed with
backend "gloo" over 127.0.0.1, each doing what a training job's gradient sync does: its fresh
float32 CPU tensor in, dist.all_reduce (sum), the reduced tensor out.

  /usr/bin/python3 gloo_allreduce.py --world W --counts N[,N...] [--iters K] [--warmup M]

Prints "RESULT count=N median_us=U ok=1" per count: per rank the median time of one all_reduce, then the slowest
rank's (as allreduce_bench does for orrery). ok: the first result equals the float64 sum rounded
within a float32 tolerance (gloo's ring sums in its own order, so not bit for bit).
"""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def inputs(rank, count):
    g = torch.Generator().manual_seed(1234 + rank)
    return (torch.rand(count, generator=g) * 2 - 1) * 1000


def run(rank, world, port, counts, iters, warmup, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    for count in counts:
        out[(rank, count)] = one(rank, world, count, iters, warmup)
    dist.destroy_process_group()


def one(rank, world, count, iters, warmup):
    mine = inputs(rank, count)
    buf = torch.empty_like(mine)
    times = []
    ok = True
    for step in range(warmup + iters):
        buf.copy_(mine)  # the step's fresh gradients
        t0 = time.perf_counter()
        dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        t1 = time.perf_counter()
        if step == 0:
            want = sum(inputs(r, count).double() for r in range(world))
            ok = bool(torch.allclose(buf.double(), want, rtol=1e-5, atol=1e-2))
        if step >= warmup:
            times.append((t1 - t0) * 1e6)
    times.sort()
    return (times[len(times) // 2], ok)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--counts", required=True)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mgr = mp.Manager()
    out = mgr.dict()
    counts = [int(c) for c in a.counts.split(",")]
    mp.spawn(run, args=(a.world, port, counts, a.iters, a.warmup, out), nprocs=a.world)
    all_ok = True
    for n in counts:
        worst = max(out[(r, n)][0] for r in range(a.world))
        ok = all(out[(r, n)][1] for r in range(a.world))
        all_ok = all_ok and ok
        print(f"RESULT count={n} median_us={worst:.1f} ok={1 if ok else 0}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
