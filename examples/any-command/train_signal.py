#!/usr/bin/env python3
"""Any program as an orrery job, without orrery's libraries: preemption by signal.

orrery sends SIGTERM when it preempts the job (and SIGKILL after the grace period). This program
then saves its state to $ORRERY_CHECKPOINT_DIR and exits; when orrery restarts it (maybe on
other machines: the folder follows the job), it resumes from that file. A toy computation
stands for the training: a running hash chain over the step indices.

Environment used: ORRERY_CHECKPOINT_DIR (where to save; created by orrery), RANK,
ORRERY_RESTART_COUNT (how many times the job was restarted; for the log only).
"""
import argparse
import hashlib
import json
import os
import signal
import sys
import time

stop_requested = False


def on_sigterm(signum, frame):
    global stop_requested
    stop_requested = True  # finish the current step, then save: a consistent state


def save(path, state):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # atomic: a kill during the save leaves the previous file


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--step-seconds", type=float, default=0.05)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_sigterm)
    rank = int(os.environ.get("RANK", "0"))
    ckpt_dir = os.environ.get("ORRERY_CHECKPOINT_DIR", ".")
    path = os.path.join(ckpt_dir, "rank-%d.json" % rank)
    state = {"step": 0, "value": hashlib.sha256(b"seed").hexdigest()}
    if os.path.exists(path):
        with open(path) as f:
            state = json.load(f)
        print("rank %d: resumed at step %d (restart %s)" % (
            rank, state["step"], os.environ.get("ORRERY_RESTART_COUNT", "?")), flush=True)
    while state["step"] < args.steps:
        state["value"] = hashlib.sha256((state["value"] + str(state["step"])).encode()).hexdigest()
        state["step"] += 1
        time.sleep(args.step_seconds)
        if stop_requested:
            save(path, state)
            print("rank %d: saved at step %d on SIGTERM" % (rank, state["step"]), flush=True)
            sys.exit(0)
    print("digest %s" % state["value"], flush=True)


if __name__ == "__main__":
    main()
