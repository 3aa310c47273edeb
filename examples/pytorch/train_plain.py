#!/usr/bin/env python3
"""A plain PyTorch DistributedDataParallel training script (gloo, env:// rendezvous).

A small CNN (about 1.1M parameters) on seeded synthetic images: nothing is downloaded, and the
batch of step s on rank r is a function of (seed, s, r) alone. Run W processes with RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (torchrun sets them; so does orrery's node runtime).
Prints a loss line every --log-every steps (rank 0) and "digest <sha256 of the final
parameters>" on every rank. train_orrery.py is the same program as an orrery job: the two
differ in 5 lines (diff -u train_plain.py train_orrery.py).
"""
import argparse
import hashlib
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self, width=32, hidden=256):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.bn = nn.BatchNorm2d(2 * width)
        self.fc1 = nn.Linear(2 * width * 8 * 8, hidden)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.bn(self.conv2(x))), 2)
        return self.fc2(self.drop(F.relu(self.fc1(x.flatten(1)))))


def batch(seed, step, rank, size):
    """Step `step`'s batch on `rank`: images, and labels a fixed function of them."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 4099 + rank)
    x = torch.randn(size, 3, 32, 32, generator=g)
    proj = torch.Generator().manual_seed(seed)
    w = torch.randn(3 * 32 * 32, 10, generator=proj)
    return x, (x.flatten(1) @ w).argmax(1)


def digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().data)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)  # fixed: results must not depend on the machine
    rank = int(os.environ["RANK"])  # WORLD_SIZE is read by the process group

    dist.init_process_group("gloo")
    torch.manual_seed(args.seed)  # the same initial parameters on every rank
    model = DDP(Net(args.width, args.hidden))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    t = time.perf_counter()
    for step in range(args.steps):
        x, y = batch(args.seed, step, rank, args.batch)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and (step + 1) % args.log_every == 0:
            now = time.perf_counter()
            print(f"step {step + 1} loss {loss.item():.4f} "
                  f"step_time {(now - t) / args.log_every:.4f}", flush=True)
            t = now
    print(f"digest {digest(model)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
