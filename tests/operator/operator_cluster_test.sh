#!/usr/bin/env bash
# ctest operator_cluster_*: what the person who runs the cluster meets (docs/operations.md), under
# the real daemons started by hand (orrery-core serve, two orrery-node agents of 4 host devices
# each, their proxies and workers), driven by the `orrery` CLI. One scenario per run:
#
#   faults        10 kill -9 of the core (restarted on its data), 10 of the job's proxy and 10 of
#                 its whole node (agent, proxies, workers; the agent restarted at once): none
#                 spends the job's 3 retries, the proxies' and nodes' are platform faults named in
#                 its timeline; it completes with the digest of an uninterrupted run
#   own-failure   a program that exits 7 with a message on stderr: relaunched 3 times (its
#                 retries), then Failed with the exit status and the message as the reason
#   duplicate     a second agent under a live node's name is refused (exits 1, "already
#                 registered"); the node stays Up and its job completes untouched (same epoch),
#                 with a periodic checkpoint at every multiple of its checkpoint_every
#   on-demand     orrery suspend / resume (held while suspended: nothing restarts it), resize
#                 4 -> 2 -> 4 with no waiting job, migrate --to the other node, and the refusals
#                 of actions that cannot happen; the digest of an uninterrupted run
#   admission     specs no placement on the fleet could satisfy are refused at submit, naming the
#                 limit; one that fits the fleet but not now (both nodes drained) waits Queued
#                 with the reason in `orrery ls`, and runs once a node is back
#
#   operator_cluster_test.sh ORRERY ORRERY_CORE ORRERY_NODE ORRERY_TRAIN_MLP SCENARIO
# OPERATOR_KEEP=1 keeps the work directory.
set -euo pipefail
ORRERY=$1
CORE_BIN=$2
NODE_BIN=$3
TRAIN_BIN=$4
SCENARIO=$5
PY=/usr/bin/python3
T0=$(date +%s)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/orrery-operator-XXXXXX")
declare -A GROUP=()  # daemon name (core, node1, ...) -> its process group
cleanup() {
  local rc=$?
  for g in "${GROUP[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  if [ "${OPERATOR_KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

LOGS=$WORK/logs
# shellcheck source=../lib/cluster.sh
. "$(dirname "$0")/../lib/cluster.sh"  # say, fail, o, submit, field, note, step, wait_state ...

PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export ORRERY_CORE=127.0.0.1:$PORT ORRERY_SECRET_FILE=$WORK/secret

# ---- the cluster, by hand: each daemon the leader of its own process group --------------------
start_core() {
  setsid "$CORE_BIN" serve --listen "$ORRERY_CORE" --data "$WORK/core" --secret "$WORK/secret" \
    --fleet "$WORK/fleet.txt" >>"$WORK/logs/core.log" 2>&1 &
  GROUP[core]=$!
  for _ in $(seq 150); do
    o ls >/dev/null 2>&1 && return 0
    kill -0 "${GROUP[core]}" 2>/dev/null || fail "orrery-core serve exited: $(tail -5 "$WORK/logs/core.log")"
    sleep 0.1
  done
  fail "orrery-core serve does not answer on $ORRERY_CORE"
}
start_node() {  # NAME [LOG]
  setsid "$NODE_BIN" --core "$ORRERY_CORE" --name "$1" --secret "$WORK/secret" \
    --data "$WORK/$1" --devices 4 --device-mem-mib 1024 >>"${2:-$WORK/logs/$1.log}" 2>&1 &
  GROUP[$1]=$!
}
kill_group() { kill -KILL -- "-${GROUP[$1]}" 2>/dev/null || true; }
cluster() {  # two nodes of 4 host devices
  mkdir -p "$WORK/logs" "$WORK/core"
  (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$WORK/secret"; echo >>"$WORK/secret")
  {
    echo "premium_reserve 4"; echo "region local"; echo "cluster local"
    for i in 1 2; do echo "node node$i host_mem_mib=65536"; echo "devices host count=4 mem_mib=1024"; done
  } >"$WORK/fleet.txt"
  start_core
  start_node node1
  start_node node2
  wait_nodes_up 2
}

# ---- jobs -------------------------------------------------------------------------------------
# Running at a step past N: it has work (and checkpoints) to lose.
wait_running_past() {  # ID N SECONDS
  local end=$(($(date +%s) + $3))
  while [ "$(date +%s)" -lt "$end" ]; do
    if [ "$(field "$1" 4)" = Running ] && [ "$(step "$1")" -gt "$2" ]; then return 0; fi
    [ "$(field "$1" 4)" = Completed ] && fail "job $1 completed before step $2: too fast to disrupt"
    sleep 0.1
  done
  fail "job $1 not Running past step $2 after $3 s ($(field "$1" 4) at step $(step "$1"): $(note "$1"))"
}
ARGS='"--step-delay-us=4000", "--hidden=32"'
mlp_toml() {  # NAME STEPS [EXTRA LINES] -> W=4 on 2..4 devices, the built-in workload
  cat >"$WORK/$1.toml" <<EOF
name = "$1"
world = 4
min_devices = 2
max_devices = 4
mem_mib = 16
workload = "mlp"
args = [$ARGS]
steps = $2
checkpoint_every = 200
${3:-}
EOF
  echo "$WORK/$1.toml"
}
reference() {  # STEPS -> the uninterrupted run's digest (all ranks in one process)
  "$TRAIN_BIN" --reference --world=4 --hidden=32 --steps="$1" | sed -n 's/.*digest=\([0-9a-f]*\).*/\1/p'
}
check_digest() {  # ID DIGEST
  local got
  got=$(note "$1" | sed -n 's/.*digest=\([0-9a-f]*\).*/\1/p')
  [ -n "$2" ] || fail "no reference digest"
  [ "$got" = "$2" ] || fail "job $1 digest '$got', uninterrupted run: $2 ($(note "$1"))"
  say "job $1: digest $2 = the uninterrupted run's"
}
# `orrery CMD...` must fail with a message matching REGEX.
refused() {  # REGEX CMD...
  local re=$1 out rc=0
  shift
  out=$(o "$@" 2>&1) || rc=$?
  [ "$rc" != 0 ] || fail "orrery $* succeeded, expected a refusal: $out"
  grep -Eq -- "$re" <<<"$out" || fail "orrery $* said '$out', expected /$re/"
  say "refused as expected: orrery $*: $out"
}

case "$SCENARIO" in
faults)
  cluster
  STEPS=20000
  D=$(reference "$STEPS")
  id=$(submit "$(mlp_toml faulty "$STEPS")")
  last=0
  for kind in core proxy node; do  # core first: notes (not journaled) of the others stay
    for i in $(seq 10); do
      # Each read is its own `orrery ls`: the job may leave its node between them (a fault's
      # recovery still under way), and then shows "-" there. Wait for it to run again.
      while :; do
        wait_running_past "$id" $((last + 30)) 90
        last=$(step "$id")
        node=$(field "$id" 10)
        node=${node%%,*}
        [ -n "$node" ] && [ -n "${GROUP[$node]+x}" ] && break
        say "job $id is on no node we started ('$node', $(field "$id" 4)) right after Running: waiting again"
      done
      case $kind in
        proxy)
          pid=$(pgrep -g "${GROUP[$node]}" -f orrery-proxy | head -1)
          [ -n "$pid" ] || fail "no orrery-proxy in $node's process group"
          kill -KILL "$pid" ;;
        node)
          kill_group "$node"
          start_node "$node" ;;
        core)
          kill_group core
          start_core ;;
      esac
      say "$kind fault $i: kill -9 at step $last on $node"
    done
  done
  wait_state "$id" Completed 240
  check_digest "$id" "$D"
  timeline=$(o logs "$id" -n 100000)
  faults=$(grep -c "NodeLoss" <<<"$timeline" || true)
  [ "$faults" -ge 20 ] || fail "job $id's timeline has $faults NodeLoss (platform faults), expected >= 20 (10 proxies, 10 nodes)"
  if grep -q "WorkerCrash" <<<"$timeline"; then fail "a platform fault was counted as the job's own failure (WorkerCrash)"; fi
  grep -q "the proxy of device [0-9]* killed by signal 9.*(platform fault [0-9]* of 100" <<<"$timeline" ||
    fail "the timeline does not name a killed proxy as a platform fault: $(grep -i "proxy\|platform" <<<"$timeline" | head -5)"
  grep -q "registered without its workers (platform fault" <<<"$timeline" ||
    fail "the timeline does not name a restarted node as a platform fault"
  say "PASS: 30 faults (10 core, 10 proxy, 10 node), $faults relaunches (epoch $(field "$id" 5)), no retry spent, digest $D"
  ;;
own-failure)
  cluster
  cat >"$WORK/bad.toml" <<EOF
name = "bad"
world = 2
mem_mib = 16
command = ["/bin/sh", "-c", "echo starting; echo 'boom: the input is bad' >&2; exit 7"]
preemption = "requeue"
EOF
  id=$(submit "$WORK/bad.toml")
  wait_state "$id" Failed 60
  n=$(note "$id")
  grep -q "status 7" <<<"$n" || fail "the reason does not give the exit status: $n"
  grep -q "boom: the input is bad" <<<"$n" || fail "the reason does not quote stderr: $n"
  grep -q "no retry left" <<<"$n" || fail "the reason does not say the retries are spent: $n"
  [ "$(field "$id" 5)" = 4 ] || fail "job $id ran $(field "$id" 5) incarnations, expected 4 (1 + 3 retries)"
  say "PASS: exit 7 relaunched 3 times, then Failed: $n"
  ;;
duplicate)
  cluster
  STEPS=4000
  D=$(reference "$STEPS")
  id=$(submit "$(mlp_toml steady "$STEPS")")
  wait_running_past "$id" 100 60
  node=$(field "$id" 10)
  node=${node%%,*}
  epoch=$(field "$id" 5)
  rc=0
  timeout 20 "$NODE_BIN" --core "$ORRERY_CORE" --name "$node" --secret "$WORK/secret" \
    --data "$WORK/impostor" --devices 4 --device-mem-mib 1024 >"$WORK/logs/impostor.log" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "a second agent named $node exited $rc, expected 1 (refused): $(cat "$WORK/logs/impostor.log")"
  grep -q "already registered" "$WORK/logs/impostor.log" || fail "the refusal does not say why: $(cat "$WORK/logs/impostor.log")"
  say "second agent refused: $(grep "already registered" "$WORK/logs/impostor.log")"
  [ "$(o nodes | awk -v n="$node" '$1 == n { print $2 }')" = Up ] || fail "$node is not Up after the impostor"
  wait_state "$id" Completed 120
  [ "$(field "$id" 5)" = "$epoch" ] || fail "job $id was restarted (epoch $epoch -> $(field "$id" 5))"
  check_digest "$id" "$D"
  # checkpoint_every = 200 means a checkpoint at every multiple of 200 (docs/operations.md).
  ckpts=$(o logs "$id" -n 100000 | sed -n 's/.*: Checkpoint job [0-9]* ckpt@\([0-9]*\).*/\1/p' | tr '\n' ' ')
  [ -n "$ckpts" ] || fail "job $id took no periodic checkpoint"
  for c in $ckpts; do [ $((c % 200)) = 0 ] || fail "a periodic checkpoint at step $c, not a multiple of 200: $ckpts"; done
  [ "$(wc -w <<<"$ckpts")" -ge 15 ] || fail "periodic checkpoints at $ckpts: multiples of 200 were skipped"
  say "periodic checkpoints at $ckpts"
  say "PASS: duplicate agent refused, job untouched (epoch $epoch), digest $D"
  ;;
on-demand)
  cluster
  STEPS=8000
  D=$(reference "$STEPS")
  id=$(submit "$(mlp_toml elastic "$STEPS")")
  wait_running_past "$id" 300 60
  refused "not suspended by an operator" resume "$id"
  refused "orrery suspend $id" preempt "$id"
  o suspend "$id" >/dev/null || fail "orrery suspend $id failed"
  wait_state "$id" Suspended 30
  refused "already suspended" suspend "$id"
  sleep 3  # devices are free: a planner would resume a job that is not held
  [ "$(field "$id" 4)" = Suspended ] || fail "job $id did not stay suspended: $(field "$id" 4)"
  note "$id" | grep -q "held" || fail "orrery ls does not say job $id is held: $(note "$id")"
  say "job $id suspended at step $(step "$id") and held: $(note "$id")"
  o resume "$id" >/dev/null || fail "orrery resume $id failed"
  wait_running_past "$id" "$(step "$id")" 60
  say "resumed at step $(step "$id")"
  o resize "$id" 2 >/dev/null || fail "orrery resize $id 2 failed: $(o resize "$id" 2 2>&1)"
  # The shrink is carried out (its cut stored, a new incarnation on 2 devices, 2 ranks each); the
  # planner may grow the job again at once (devices are free), so the timeline says it, not a
  # snapshot of `orrery ls`.
  end=$(($(date +%s) + 60))
  until o logs "$id" -n 100000 | grep -q "Resizing -> Restoring: CheckpointDone"; do
    [ "$(date +%s)" -lt "$end" ] || fail "job $id's shrink not carried out 60 s after orrery resize $id 2"
    sleep 0.1
  done
  o logs "$id" -n 100000 | grep -q "Running -> Resizing: ResizeDown job $id on {[0-9]*,[0-9]*} x2" ||
    fail "no ResizeDown to 2 devices (2 ranks each) in job $id's timeline"
  say "shrunk to 2 devices (2 ranks each) at step $(step "$id"), no waiting job"
  refused "elastic range" resize "$id" 8
  # The planner grows an elastic job again when devices are free (docs/operations.md): if it has
  # not yet, the operator does.
  wait_running_past "$id" "$(( $(step "$id") + 50 ))" 60
  if [ "$(field "$id" 6)" != 4 ]; then
    o resize "$id" 4 >/dev/null || fail "orrery resize $id 4 failed: $(o resize "$id" 4 2>&1)"
  fi
  end=$(($(date +%s) + 60))
  until [ "$(field "$id" 4)" = Running ] && [ "$(field "$id" 6)" = 4 ]; do
    [ "$(date +%s)" -lt "$end" ] || fail "job $id not Running on 4 devices 60 s after orrery resize $id 4"
    sleep 0.1
  done
  say "grown back to 4 devices at step $(step "$id")"
  wait_running_past "$id" "$(( $(step "$id") + 50 ))" 60
  from=$(field "$id" 10)
  case "$from" in node1) to=node2 ;; node2) to=node1 ;; *) fail "job $id runs on '$from', expected one node" ;; esac
  o migrate "$id" --to "$to" >/dev/null || fail "orrery migrate $id --to $to failed"
  end=$(($(date +%s) + 60))
  until [ "$(field "$id" 4)" = Running ] && [ "$(field "$id" 10)" = "$to" ]; do
    [ "$(date +%s)" -lt "$end" ] || fail "job $id not Running on $to 60 s after the migration"
    sleep 0.1
  done
  say "migrated $from -> $to at step $(step "$id")"
  wait_state "$id" Completed 120
  check_digest "$id" "$D"
  say "PASS: suspend/resume, resize 4->2->4, migrate on demand, digest $D"
  ;;
admission)
  cluster
  big=$(mlp_toml big 100)
  sed -i 's/^world = 4$/world = 4096/; s/^max_devices = 4$/max_devices = 4096/' "$big"
  refused "can never be placed.*at least .* devices" submit "$big"
  fat=$(mlp_toml fat 100)
  sed -i 's/^mem_mib = 16$/mem_mib = 4096/' "$fat"
  refused "can never be placed.*MiB" submit "$fat"
  vip=$(mlp_toml vip 100 'tier = "premium"')
  sed -i 's/^min_devices = 2$/min_devices = 8/; s/^world = 4$/world = 8/; s/^max_devices = 4$/max_devices = 8/' "$vip"
  # Larger than the premium reserve: admitted all the same, spare (docs/spec.md, INV-ADMIT).
  vid=$(submit "$vip")
  wait_state "$vid" "Queued|Placed|Running" 10
  n=$(note "$vid")
  [[ "$n" == *"spare: admitted beyond the premium reserve"* ]] || fail "job $vid: no spare note in orrery ls: '$n'"
  say "job $vid: $n"
  o cancel "$vid" >/dev/null
  o drain node1 >/dev/null
  o drain node2 >/dev/null
  id=$(submit "$(mlp_toml later 300)")
  wait_state "$id" Queued 10
  sleep 1
  n=$(note "$id")
  [ -n "$n" ] || fail "job $id waits with no reason in orrery ls"
  say "job $id waits: $n"
  o undrain node2 >/dev/null
  wait_state "$id" Completed 60
  say "PASS: 2 unplaceable specs refused at submit; a premium job beyond the reserve admitted spare; a spec that fits the fleet waits visibly, then runs"
  ;;
*) echo "unknown scenario '$SCENARIO'"; exit 2 ;;
esac
