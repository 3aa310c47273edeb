#!/usr/bin/env bash
# ctest cli_e2e_local_cluster: `orrery up` in the background (2 nodes of 4 host devices, a free
# loopback port), the shipped examples/jobs/*.toml submitted (made short), `orrery ls` polled until every job is
# Completed, the workers' output (`orrery logs JOB --rank R`, then `--follow` of a new job until it
# completes), then SIGINT to `orrery up`: it must exit 0 and leave no process behind. Exit codes on
# the way (docs/runtime.md): an unknown job 4, a `watch` whose connection is lost 2, `ls` with no
# core 2.
#   cli_e2e_test.sh ORRERY_BINARY SOURCE_DIR
set -euo pipefail
ORRERY=$1
SRC=$2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/orrery-e2e-XXXXXX")
UP_PID=
WATCH_PID=
cleanup() {
  if [ -n "$UP_PID" ] && kill -0 "$UP_PID" 2>/dev/null; then kill -KILL "$UP_PID" 2>/dev/null || true; fi
  if [ -n "$WATCH_PID" ] && kill -0 "$WATCH_PID" 2>/dev/null; then kill -KILL "$WATCH_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- up.log"; cat "$WORK/up.log" || true; for f in "$WORK"/data/logs/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export ORRERY_CORE=127.0.0.1:$PORT ORRERY_SECRET_FILE=$WORK/data/secret
"$ORRERY" up --nodes 2 --devices 4 --data "$WORK/data" --listen "$ORRERY_CORE" >"$WORK/up.log" 2>&1 &
UP_PID=$!

for _ in $(seq 100); do
  grep -q "export ORRERY_CORE" "$WORK/up.log" && break
  kill -0 "$UP_PID" 2>/dev/null || fail "orrery up exited early"
  sleep 0.1
done
grep -q "export ORRERY_CORE" "$WORK/up.log" || fail "orrery up did not come up"

for _ in $(seq 100); do
  [ "$("$ORRERY" nodes | grep -c ' Up ')" = 2 ] && break
  sleep 0.1
done
"$ORRERY" nodes
[ "$("$ORRERY" nodes | grep -c ' Up ')" = 2 ] || fail "nodes not Up"

# The shipped examples, without the step delay that makes them last a minute for a person to act
# on (README, "Run a local cluster"; operator_readme_walkthrough runs them as shipped), and 150 steps.
mkdir -p "$WORK/jobs"
for spec in "$SRC"/examples/jobs/*.toml; do
  sed -e 's/"--step-delay-us=[0-9]*"//' -e 's/^steps = .*/steps = 150/' -e 's/^checkpoint_every = .*/checkpoint_every = 50/' \
    "$spec" >"$WORK/jobs/$(basename "$spec")"
done
for spec in "$WORK"/jobs/*.toml; do
  "$ORRERY" submit "$spec" || fail "submit $spec"
done
n=$(ls "$WORK"/jobs/*.toml | wc -l)

ok=
for _ in $(seq 600); do
  out=$("$ORRERY" ls) || fail "orrery ls"
  if [ "$(echo "$out" | tail -n +2 | grep -c ' Completed ')" = "$n" ]; then ok=1; break; fi
  if echo "$out" | grep -qE ' (Failed|Cancelled) '; then echo "$out"; fail "a job failed"; fi
  sleep 0.1
done
"$ORRERY" ls
[ -n "$ok" ] || fail "jobs not all Completed"
# TYPE (column 13): the device type each job ran on, over the wire from the core (`orrery up`: host).
types=$("$ORRERY" ls | tail -n +2 | awk '{ print $13 }' | sort -u)
[ "$types" = "host" ] || fail "TYPE column: expected host for every job, got: $types"
"$ORRERY" logs train-basic | tail -5
# The workers' output, kept by the core: rank 0's own lines (orrery-train-mlp's final line), behind
# the header of its incarnation; every rank's, prefixed; an unknown rank is exit 4.
out=$("$ORRERY" logs train-basic --rank 0) || fail "orrery logs train-basic --rank 0"
grep -q "^--- epoch [0-9]* on node node[12] ---$" <<<"$out" || fail "no incarnation header in rank 0's output: $out"
grep -q "done rank=0 world=2 steps=150" <<<"$out" || fail "rank 0's output lacks its final line: $out"
out=$("$ORRERY" logs train-basic -n 3) || fail "orrery logs train-basic"
grep -q "^\[rank 1\] orrery-train-mlp: done rank=1 world=2" <<<"$out" || fail "no rank 1 output in: $out"
rc=0
"$ORRERY" logs train-basic --rank 2 2>"$WORK/logs.err" || rc=$?
[ "$rc" = 4 ] || fail "logs of rank 2 of a world-2 job exited $rc, expected 4: $(cat "$WORK/logs.err")"
# --follow from the submission on: the output as it comes, and an end when the job completes.
id=$("$ORRERY" submit "$WORK/jobs/basic.toml" | sed -n 's/^submitted job \([0-9]*\) .*/\1/p')
[ -n "$id" ] || fail "no job id from orrery submit"
rc=0
timeout 60 "$ORRERY" logs "$id" --rank 1 --follow >"$WORK/follow.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat "$WORK/follow.log"; fail "orrery logs $id --rank 1 --follow exited $rc"; }
grep -q "done rank=1 world=2 steps=150" "$WORK/follow.log" || { cat "$WORK/follow.log"; fail "follow missed the final line"; }
[ "$(tail -1 "$WORK/follow.log" | cut -d: -f1)" = "job $id Completed" ] || { cat "$WORK/follow.log"; fail "follow did not end with the job's completion"; }
"$ORRERY" watch --count 3 >/dev/null || fail "orrery watch"
rc=0
"$ORRERY" cancel no-such-job 2>"$WORK/cancel.err" || rc=$?
[ "$rc" = 4 ] || fail "cancel of an unknown job exited $rc, expected 4: $(cat "$WORK/cancel.err")"
# Follows the timeline until the core goes away with the cluster below.
"$ORRERY" watch >"$WORK/watch.log" 2>&1 &
WATCH_PID=$!
sleep 0.5
kill -0 "$WATCH_PID" 2>/dev/null || { cat "$WORK/watch.log"; fail "orrery watch exited early"; }

# The processes `orrery up` started: its children's process groups.
GROUPS_=$(ps -o pid= --ppid "$UP_PID" | tr -d ' ' | tr '\n' ' ')
kill -INT "$UP_PID"
rc=0
wait "$UP_PID" || rc=$?
UP_PID=
[ "$rc" = 0 ] || fail "orrery up exited $rc after SIGINT"
for g in $GROUPS_; do
  if pgrep -g "$g" >/dev/null; then ps -o pid,pgid,cmd -g "$g"; fail "processes left in group $g"; fi
done
grep -q "SIGINT, stopping" "$WORK/up.log" || fail "no shutdown message"
for _ in $(seq 100); do kill -0 "$WATCH_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$WATCH_PID" 2>/dev/null && fail "orrery watch still running 10 s after the core went away"
rc=0
wait "$WATCH_PID" || rc=$?
WATCH_PID=
[ "$rc" = 2 ] || { tail -3 "$WORK/watch.log"; fail "orrery watch exited $rc when the core went away, expected 2"; }
grep -q "lost" "$WORK/watch.log" || { tail -3 "$WORK/watch.log"; fail "orrery watch did not say the connection was lost"; }
rc=0
"$ORRERY" ls 2>"$WORK/ls.err" || rc=$?
[ "$rc" = 2 ] || fail "orrery ls without a core exited $rc, expected 2: $(cat "$WORK/ls.err")"
echo "PASS: $n jobs completed; workers' output shown and followed to the end; orrery up stopped cleanly, no process left; exit codes 4 (unknown job, unknown rank) and 2 (connection lost, no core)"
