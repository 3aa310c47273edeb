#!/usr/bin/env bash
# ctest pytorch_cluster_*: examples/pytorch/train_orrery.py and users' own commands under the real
# daemons (orrery-core serve, orrery-node agents with their proxies and workers), driven by the
# `orrery` CLI as a user would. One scenario per run:
#
#   reference      the uninterrupted job (W=4 on 4 devices): every rank's digest, written to REF
#   preempt        `orrery preempt JOB --for BIG` (a waiting 8-device job), resumed when BIG is done
#   migrate        `orrery migrate JOB --to <the other node>`
#   resize         `orrery resize JOB 2 --for WIDE` (2 ranks spliced per device), then back to 4
#   kill-node      kill -9 of the whole machine running JOB (agent, proxies, workers), kept down
#                  (`orrery up` paused meanwhile): the core declares it lost and JOB fails over
#                  from its last checkpoint to the other node
#   kill-core      kill -9 of orrery-core serve while JOB runs, and a restart on the same data
#                  directory and address (the daemons are started by hand, as `orrery up` would)
#   signal-requeue examples/any-command: a signal job preempted saves itself on SIGTERM and resumes
#                  from its own checkpoint; a requeue job preempted restarts from scratch; both
#                  complete with the result of an uninterrupted run (computed here, in Python)
#   failures       a missing command, a crashing command and a bad workdir each end in Failed
#                  after the spec's retries, saying why in `orrery ls` and `orrery logs`
#
# Every PyTorch scenario checks the final digest ON EVERY RANK (`orrery logs JOB --rank R`) and in
# the completion note against the uninterrupted run's: REF when the reference scenario wrote it in
# this ctest run (a fixture), else the reference job is run first in the same cluster. The PyTorch
# scenarios skip (exit 77) when /usr/bin/python3 cannot import torch.
#
#   pytorch_cluster_test.sh ORRERY ORRERY_CORE ORRERY_NODE SOURCE_DIR SCENARIO [REF]
# Environment: PYTORCH_CLUSTER_STEPS (default 2500) and PYTORCH_CLUSTER_MODEL (default
# "--width 8 --hidden 64 --batch 4") size the PyTorch job; PYTORCH_CLUSTER_KEEP=1 keeps the work
# directory; PYTORCH_CLUSTER_BREAK=1 compares against a wrong digest (to see the test fail).
set -euo pipefail
ORRERY=$1
CORE_BIN=$2
NODE_BIN=$3
SRC=$4
SCENARIO=$5
REF=${6:-}
STEPS=${PYTORCH_CLUSTER_STEPS:-2500}
MODEL=${PYTORCH_CLUSTER_MODEL:---width 8 --hidden 64 --batch 4}
EVERY=$((STEPS / 10))
PY=/usr/bin/python3
T0=$(date +%s)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/orrery-pytorch-cluster-XXXXXX")
UP_PID=
declare -A GROUPS_BY_NAME=()  # by hand (kill-core): name -> process group
cleanup() {
  local rc=$?
  if [ -n "$UP_PID" ] && kill -0 "$UP_PID" 2>/dev/null; then
    local kids
    kids=$(ps -o pid= --ppid "$UP_PID" | tr -d ' ' | tr '\n' ' ')
    kill -KILL "$UP_PID" 2>/dev/null || true
    for g in $kids; do kill -KILL -- "-$g" 2>/dev/null || true; done
  fi
  for g in "${GROUPS_BY_NAME[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  if [ "${PYTORCH_CLUSTER_KEEP:-0}" = 1 ] || { [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ -n "${PYTORCH_CLUSTER_KEEP_ON_FAIL:-}" ]; }; then
    echo "kept $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

LOGS=$WORK/data/logs
# shellcheck source=../lib/cluster.sh
. "$(dirname "$0")/../lib/cluster.sh"  # say, fail, o, submit, field, note, step, wait_state ...

case "$SCENARIO" in
  reference|preempt|migrate|resize|kill-node|kill-core)
    if ! "$PY" -c "import torch" 2>/dev/null; then
      echo "SKIP: $PY cannot import torch"
      exit 77
    fi ;;
  signal-requeue|failures) ;;
  *) echo "unknown scenario '$SCENARIO'"; exit 2 ;;
esac

PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export ORRERY_CORE=127.0.0.1:$PORT ORRERY_SECRET_FILE=$WORK/data/secret

# ---- the cluster ----------------------------------------------------------------------------
up() {  # NODES DEVICES
  # Not through o(): UP_PID must be orrery up itself (SIGINT, its children), not a subshell.
  "$ORRERY" up --nodes "$1" --devices "$2" --data "$WORK/data" --listen "$ORRERY_CORE" \
    --core-bin "$CORE_BIN" --node-bin "$NODE_BIN" >"$WORK/up.log" 2>&1 &
  UP_PID=$!
  for _ in $(seq 150); do
    grep -q "export ORRERY_CORE" "$WORK/up.log" && break
    kill -0 "$UP_PID" 2>/dev/null || { cat "$WORK/up.log"; fail "orrery up exited early"; }
    sleep 0.1
  done
  grep -q "export ORRERY_CORE" "$WORK/up.log" || { cat "$WORK/up.log"; fail "orrery up did not come up"; }
  wait_nodes_up "$1"
}
down() {
  [ -n "$UP_PID" ] || return 0
  kill -INT "$UP_PID"
  # Running (not yet a zombie) for at most 30 s.
  for _ in $(seq 300); do ps -o stat= -p "$UP_PID" | grep -qv Z || break; sleep 0.1; done
  ps -o stat= -p "$UP_PID" | grep -qv Z && fail "orrery up still runs 30 s after SIGINT"
  local rc=0
  wait "$UP_PID" || rc=$?
  UP_PID=
  [ "$rc" = 0 ] || fail "orrery up exited $rc after SIGINT"
}
# The process group `orrery up` started for NAME (core, node1, ...): each child leads its own.
up_child() {
  ps -o pid=,args= --ppid "$UP_PID" | awk -v n="$1" '
    n == "core" && / serve / { print $1 } n != "core" && $0 ~ ("--name " n " ") { print $1 }'
}
# By hand (kill-core): the same files and arguments as `orrery up`, each daemon in its own group.
start_core_by_hand() {
  setsid "$CORE_BIN" serve --listen "$ORRERY_CORE" --data "$WORK/data/core" --secret "$WORK/data/secret" \
    --fleet "$WORK/data/fleet.txt" >>"$WORK/data/logs/core.log" 2>&1 &
  GROUPS_BY_NAME[core]=$!
  for _ in $(seq 150); do
    o ls >/dev/null 2>&1 && return 0
    kill -0 "${GROUPS_BY_NAME[core]}" 2>/dev/null || fail "orrery-core serve exited: $(tail -5 "$WORK/data/logs/core.log")"
    sleep 0.1
  done
  fail "orrery-core serve does not answer on $ORRERY_CORE"
}
up_by_hand() {  # NODES DEVICES
  mkdir -p "$WORK/data/logs" "$WORK/data/core"
  (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$WORK/data/secret"; echo >>"$WORK/data/secret")
  {
    echo "premium_reserve $2"; echo "region local"; echo "cluster local"
    for i in $(seq "$1"); do echo "node node$i host_mem_mib=65536"; echo "devices host count=$2 mem_mib=1024"; done
  } >"$WORK/data/fleet.txt"
  start_core_by_hand
  for i in $(seq "$1"); do
    setsid "$NODE_BIN" --core "$ORRERY_CORE" --name "node$i" --secret "$WORK/data/secret" \
      --data "$WORK/data/node$i" --devices "$2" --device-mem-mib 1024 >"$WORK/data/logs/node$i.log" 2>&1 &
    GROUPS_BY_NAME[node$i]=$!
  done
  wait_nodes_up "$1"
}
down_by_hand() {
  for n in "${!GROUPS_BY_NAME[@]}"; do [ "$n" = core ] || kill -TERM -- "-${GROUPS_BY_NAME[$n]}" 2>/dev/null || true; done
  sleep 1
  kill -TERM -- "-${GROUPS_BY_NAME[core]}" 2>/dev/null || true
  for _ in $(seq 50); do
    local alive=
    for g in "${GROUPS_BY_NAME[@]}"; do pgrep -g "$g" >/dev/null && alive=1; done
    [ -z "$alive" ] && break
    sleep 0.1
  done
}

# ---- jobs -----------------------------------------------------------------------------------
# Waits until job ID runs at step >= N (so it has made progress, and checkpoints, to lose).
wait_step() {  # ID N SECONDS
  local end=$(($(date +%s) + $3)) s
  while [ "$(date +%s)" -lt "$end" ]; do
    s=$(step "$1" 2>/dev/null || echo 0)
    [ "$(field "$1" 4)" = Running ] && [ "${s:-0}" -ge "$2" ] && return 0
    [ "$(field "$1" 4)" = Completed ] && fail "job $1 completed before step $2: too fast to disrupt (raise PYTORCH_CLUSTER_STEPS)"
    sleep 0.2
  done
  fail "job $1 not at step $2 after $3 s (step ${s:-?}, $(field "$1" 4))"
}
pytorch_toml() {  # NAME [EXTRA TOML LINES] -> the path of a PyTorch job spec: W=4 on 2..4 devices
  local args="" a
  for a in --steps "$STEPS" $MODEL --log-every 100; do args+=", \"$a\""; done
  cat >"$WORK/$1.toml" <<EOF
name = "$1"
world = 4
min_devices = 2
max_devices = 4
mem_mib = 64
command = ["$PY", "$SRC/examples/pytorch/train_orrery.py"$args]
workdir = "$SRC/examples/pytorch"
preemption = "transparent"
steps = $STEPS
checkpoint_every = $EVERY
${2:-}
[env]
ORRERY_TORCH_LOG = "1"
EOF
  echo "$WORK/$1.toml"
}
mlp_toml() {  # NAME WORLD STEPS [TIER] -> a job of the built-in workload needing WORLD devices
  cat >"$WORK/$1.toml" <<EOF
name = "$1"
tier = "${4:-standard}"
world = $2
mem_mib = 16
workload = "mlp"
args = ["--step-delay-us=2000"]
steps = $3
EOF
  echo "$WORK/$1.toml"
}
rank_out() { o logs "$1" --rank "$2" -n 1000000; }
# Every rank's last "digest" line and the completion note's digest: each must equal $2.
check_digests() {  # ID DIGEST
  local want=$2 r got
  [ "${PYTORCH_CLUSTER_BREAK:-0}" = 1 ] && want=${want%?}0
  for r in 0 1 2 3; do
    got=$(rank_out "$1" "$r" | sed -n 's/^digest \([0-9a-f]*\)$/\1/p' | tail -1)
    [ "$got" = "$want" ] || { rank_out "$1" "$r" | tail -20; fail "job $1 rank $r: digest '${got}', uninterrupted run: $want"; }
  done
  got=$(note "$1" | sed -n 's/.*digest=\([0-9a-f]*\).*/\1/p')
  [ "$got" = "$want" ] || fail "job $1 completion note digest '$got', uninterrupted run: $want ($(note "$1"))"
  say "job $1: digest $want on ranks 0-3 and in the completion note"
}
# Each rank of job ID restored its state from a checkpoint at a step > 0 (orrery.torch's log).
check_restored() {  # ID
  local r s
  for r in 0 1 2 3; do
    s=$(rank_out "$1" "$r" | sed -n 's/^orrery\.torch: rank [0-9]*: restored step \([0-9]*\) .*/\1/p' | tail -1)
    [ -n "$s" ] && [ "$s" -gt 0 ] || { rank_out "$1" "$r" | tail -20; fail "job $1 rank $r did not resume from a checkpoint"; }
  done
  say "job $1: every rank resumed at step $s"
}
# The uninterrupted run's digest: from REF (this ctest run's reference fixture), else run here.
reference_digest() {
  local want_args="steps=$STEPS model=$MODEL" line
  if [ -n "$REF" ] && [ -f "$REF" ]; then
    line=$(cat "$REF")
    if [ "${line#* }" = "$want_args" ]; then echo "${line%% *}"; return; fi
    echo "reference $REF is for '${line#* }', not '$want_args': running it here" >&2
  fi
  run_reference
}
run_reference() {
  local id r d all=""
  id=$(submit "$(pytorch_toml reference)")
  wait_state "$id" Completed 240 >&2
  [ "$(field "$id" 5)" = 1 ] || fail "the reference job was interrupted (epoch $(field "$id" 5))"
  for r in 0 1 2 3; do
    d=$(rank_out "$id" "$r" | sed -n 's/^digest \([0-9a-f]*\)$/\1/p')
    [ -n "$d" ] || fail "reference rank $r printed no digest"
    all+="$d "
  done
  [ "$(tr ' ' '\n' <<<"$all" | sort -u | grep -c .)" = 1 ] || fail "the reference's ranks disagree: $all"
  echo "${all%% *}"
}

# ---- scenarios ------------------------------------------------------------------------------
case "$SCENARIO" in
reference)
  [ -n "$REF" ] || fail "reference needs REF, the file to write"
  rm -f "$REF"
  up 1 4
  D=$(run_reference)
  echo "$D steps=$STEPS model=$MODEL" >"$REF"
  down
  say "PASS: uninterrupted digest $D (every rank) -> $REF"
  ;;
preempt)
  up 2 4
  D=$(reference_digest)
  id=$(submit "$(pytorch_toml job)")
  wait_step "$id" $((2 * EVERY)) 120
  big=$(submit "$(mlp_toml big 8 300)")  # the whole fleet: it waits for the job's devices
  wait_state "$big" Queued 20
  out=$(o preempt "$id" --for "$big" 2>&1) || fail "orrery preempt: $out"
  say "$out (at step $(step "$id"))"
  wait_state "$id" Suspended 60
  wait_state "$big" Completed 120
  wait_state "$id" Completed 240
  [ "$(field "$id" 5)" -ge 2 ] || fail "job $id was not restarted (epoch $(field "$id" 5))"
  check_restored "$id"
  check_digests "$id" "$D"
  down
  say "PASS: preempted for a waiting 8-device job, resumed, digest $D"
  ;;
migrate)
  up 2 4
  D=$(reference_digest)
  id=$(submit "$(pytorch_toml job)")
  wait_step "$id" $((2 * EVERY)) 120
  from=$(field "$id" 10)
  case "$from" in node1) to=node2 ;; node2) to=node1 ;; *) fail "job $id runs on '$from', expected one node" ;; esac
  out=$(o migrate "$id" --to "$to" 2>&1) || fail "orrery migrate: $out"
  say "$out (from $from at step $(step "$id"))"
  end=$(($(date +%s) + 60))
  until [ "$(field "$id" 4)" = Running ] && [ "$(field "$id" 10)" = "$to" ]; do
    [ "$(date +%s)" -lt "$end" ] || fail "job $id not Running on $to 60 s after the migration"
    sleep 0.2
  done
  say "job $id runs on $to at step $(step "$id")"
  wait_state "$id" Completed 240
  rank_out "$id" 0 | contains "^--- epoch [0-9]* on node $to ---$" || fail "no incarnation on $to in rank 0's output"
  check_restored "$id"
  check_digests "$id" "$D"
  down
  say "PASS: migrated $from -> $to, digest $D"
  ;;
resize)
  up 2 4
  D=$(reference_digest)
  id=$(submit "$(pytorch_toml job)")
  wait_step "$id" $((2 * EVERY)) 120
  wide=$(submit "$(mlp_toml wide 6 100000)")  # 4 free devices + 2 of the job's: it waits
  wait_state "$wide" Queued 20
  out=$(o resize "$id" 2 --for "$wide" 2>&1) || fail "orrery resize $id 2: $out"
  say "$out (at step $(step "$id"))"
  end=$(($(date +%s) + 60))
  until [ "$(field "$id" 4)" = Running ] && [ "$(field "$id" 6)" = 2 ] && [ "$(field "$id" 7)" = 2 ]; do
    [ "$(date +%s)" -lt "$end" ] || fail "job $id not Running on 2 devices, 2 ranks spliced on each, 60 s after the resize"
    sleep 0.2
  done
  s=$(step "$id")
  say "job $id runs on 2 devices (splice 2) from step $s"
  wait_state "$wide" Running 60
  wait_step "$id" $((s + EVERY)) 120
  [ "$(field "$id" 6)" = 2 ] || fail "job $id left 2 devices while the wide job held the rest"
  # The planner grows an elastic job into idle devices only while nothing waits: a job of the
  # whole fleet's size waits from now on, so the growth back to 4 is the operator's.
  big=$(submit "$(mlp_toml big 8 300)")
  wait_state "$big" Queued 20
  out=$(o cancel "$wide" 2>&1) || fail "orrery cancel: $out"
  wait_state "$wide" Cancelled 30
  [ "$(field "$id" 6)" = 2 ] || fail "job $id left 2 devices while a job waits"
  out=$(o resize "$id" 4 2>&1) || fail "orrery resize $id 4: $out"
  say "$out (at step $(step "$id"))"
  end=$(($(date +%s) + 60))
  until [ "$(field "$id" 4)" = Running ] && [ "$(field "$id" 6)" = 4 ]; do
    [ "$(date +%s)" -lt "$end" ] || fail "job $id not Running on 4 devices 60 s after the resize"
    sleep 0.2
  done
  say "job $id runs on 4 devices again at step $(step "$id")"
  out=$(o cancel "$big" 2>&1) || fail "orrery cancel: $out"
  wait_state "$id" Completed 240
  [ "$(field "$id" 5)" -ge 3 ] || fail "job $id had $(field "$id" 5) incarnations, expected 3 (4, 2, 4 devices)"
  check_restored "$id"
  check_digests "$id" "$D"
  down
  say "PASS: 4 -> 2 devices (splice 2) -> 4, digest $D"
  ;;
kill-node)
  up 2 4
  D=$(reference_digest)
  id=$(submit "$(pytorch_toml job)")
  wait_step "$id" $((2 * EVERY)) 120
  wait_ckpt_end=$(($(date +%s) + 60))
  until [ "$(field "$id" 9)" != - ]; do
    [ "$(date +%s)" -lt "$wait_ckpt_end" ] || fail "job $id has no checkpoint after 60 s"
    sleep 0.2
  done
  from=$(field "$id" 10)
  case "$from" in node1) to=node2 ;; node2) to=node1 ;; *) fail "job $id runs on '$from', expected one node" ;; esac
  pid=$(up_child "$from")
  [ -n "$pid" ] || fail "no process of $from under orrery up"
  ck=$(field "$id" 9)
  say "kill -9 of $from (group $pid: agent, proxies, workers) at step $(step "$id"), checkpoint $ck"
  # A machine that stays down: `orrery up` would restart the agent within a second, so it is paused
  # (SIGSTOP) until the job has failed over, and restarts the agent then.
  kill -STOP "$UP_PID"
  kill -KILL -- "-$pid"
  end=$(($(date +%s) + 90))
  until [ "$(field "$id" 4)" = Running ] && [ "$(field "$id" 10)" = "$to" ]; do
    [ "$(date +%s)" -lt "$end" ] || fail "job $id not Running on $to 90 s after $from was killed"
    sleep 0.2
  done
  say "job $id failed over to $to"
  kill -CONT "$UP_PID"
  wait_state "$id" Completed 240
  check_restored "$id"
  check_digests "$id" "$D"
  down
  say "PASS: $from killed, failed over to $to from its last checkpoint, digest $D"
  ;;
kill-core)
  up_by_hand 2 4
  D=$(reference_digest)
  id=$(submit "$(pytorch_toml job)")
  wait_step "$id" $((2 * EVERY)) 120
  say "kill -9 of orrery-core serve at step $(step "$id")"
  kill -KILL -- "-${GROUPS_BY_NAME[core]}"
  sleep 2
  start_core_by_hand
  say "core restarted on the same data directory; job $id is $(field "$id" 4)"
  wait_nodes_up 2
  wait_state "$id" Completed 240
  check_digests "$id" "$D"
  grep -c "" "$WORK/data/logs/core.log" >/dev/null
  down_by_hand
  say "PASS: core killed and restarted, job completed, digest $D"
  ;;
signal-requeue)
  # What train_signal.py computes uninterrupted: a sha256 chain over the step indices.
  chain() { "$PY" -c 'import hashlib,sys
v = hashlib.sha256(b"seed").hexdigest()
for s in range(int(sys.argv[1])): v = hashlib.sha256((v + str(s)).encode()).hexdigest()
print(v)' "$1"; }
  up 1 4
  # The examples (basic tier) with min_runtime_s: the planner would preempt them on its own for
  # the standard jobs below; operators still may. Preempting them for a job of their own tier is
  # refused: the core never commits a signal or requeue job's service (see docs/pytorch.md, Tests).
  for f in signal requeue; do
    sed -e "s|^workdir = .*|workdir = \"$SRC/examples/any-command\"|" -e 's/"200"/"400"/; s/^steps = 200/steps = 400/' \
      "$SRC/examples/any-command/$f.toml" >"$WORK/$f.toml"
    echo "min_runtime_s = 600" >>"$WORK/$f.toml"
  done
  sig=$(submit "$WORK/signal.toml")    # 2 ranks, 600 steps of 0.05 s
  req=$(submit "$WORK/requeue.toml")   # 1 rank, 400 steps of 0.05 s (200 in the example: it would end before the preemption)
  wait_state "$sig" Running 60
  wait_state "$req" Running 60
  sleep 3  # both are well into their steps; one device is left free
  # Each is preempted for a waiting job of 2 devices (the free one and the requeue job's, then
  # the signal job's two), and resumes when devices free up again.
  ben_a=$(submit "$(mlp_toml ben-a 2 300)")
  wait_state "$ben_a" Queued 20
  out=$(o preempt "$req" --for "$ben_a" 2>&1) || fail "orrery preempt $req: $out"
  say "$out"
  wait_state "$ben_a" "Placed|Running|Completed" 60
  ben_b=$(submit "$(mlp_toml ben-b 2 300)")
  wait_state "$ben_b" Queued 20
  out=$(o preempt "$sig" --for "$ben_b" 2>&1) || fail "orrery preempt $sig: $out"
  say "$out"
  wait_state "$ben_a" Completed 120
  wait_state "$ben_b" Completed 120
  wait_state "$sig" Completed 180
  wait_state "$req" Completed 180
  for r in 0 1; do
    out=$(rank_out "$sig" "$r")
    saved=$(sed -n "s/^rank $r: saved at step \([0-9]*\) on SIGTERM$/\1/p" <<<"$out")
    resumed=$(sed -n "s/^rank $r: resumed at step \([0-9]*\) (restart 1)$/\1/p" <<<"$out")
    [ -n "$saved" ] && [ "$saved" -gt 0 ] || { echo "$out" | tail; fail "signal job rank $r did not save on SIGTERM"; }
    [ "$resumed" = "$saved" ] || { echo "$out" | tail; fail "signal job rank $r saved at step $saved but resumed at '$resumed'"; }
    [ "$(grep -c '^--- epoch ' <<<"$out")" = 2 ] || fail "signal job rank $r: not two incarnations"
    got=$(sed -n 's/^digest \([0-9a-f]*\)$/\1/p' <<<"$out")
    want=$(chain 600)
    [ "${PYTORCH_CLUSTER_BREAK:-0}" = 1 ] && want=${want%?}0
    [ "$got" = "$want" ] || fail "signal job rank $r digest '$got', uninterrupted: $want"
  done
  say "signal job $sig: both ranks saved at step $saved on SIGTERM, resumed there, digest $got"
  out=$(rank_out "$req" 0)
  # Killed at once, its first incarnation wrote nothing (so no header); it ran again from step 0.
  [ "$(field "$req" 5)" = 2 ] || fail "requeue job: epoch $(field "$req" 5), expected 2"
  o logs "$req" | contains " -> Suspended" || fail "requeue job: no preemption in its timeline"
  grep -q '^--- epoch 2 on node ' <<<"$out" || { echo "$out"; fail "requeue job: no output of its second incarnation"; }
  grep -q "resumed\|saved" <<<"$out" && { echo "$out"; fail "requeue job saved or resumed: it must restart from scratch"; }
  got=$(sed -n 's/^digest \([0-9a-f]*\)$/\1/p' <<<"$out")
  [ "$got" = "$(chain 400)" ] || fail "requeue job digest '$got', uninterrupted: $(chain 400)"
  [ "$(field "$req" 9)" = - ] || [ "$(field "$req" 9)" = 0 ] || fail "requeue job has a checkpoint at step $(field "$req" 9)"
  say "requeue job $req: killed, restarted from step 0, digest $got"
  down
  say "PASS: signal job resumed from its own save, requeue job restarted from scratch; both complete"
  ;;
failures)
  mkdir -p "$WORK/jobs"
  cat >"$WORK/jobs/crash.py" <<'EOF'
print("crash.py: started", flush=True)
raise ValueError("deliberate failure for the test")
EOF
  cat >"$WORK/jobs/missing.toml" <<'EOF'
name = "missing"
world = 2
command = ["no-such-program-orrery-test", "--x"]
EOF
  cat >"$WORK/jobs/crash.toml" <<EOF
name = "crash"
world = 2
command = ["$PY", "crash.py"]
EOF
  cat >"$WORK/jobs/badwd.toml" <<EOF
name = "badwd"
world = 1
command = ["$PY", "-c", "print('never')"]
workdir = "no-such-dir"
EOF
  up 1 4
  m=$(submit "$WORK/jobs/missing.toml")
  c=$(submit "$WORK/jobs/crash.toml")
  b=$(submit "$WORK/jobs/badwd.toml")
  for id in "$m" "$c" "$b"; do wait_state "$id" Failed 120; done
  # After the spec's retries: 1 + 3 incarnations.
  for id in "$m" "$c" "$b"; do
    [ "$(field "$id" 5)" = 4 ] || fail "job $id failed at epoch $(field "$id" 5), expected 4 (3 retries)"
    say "job $id: $(note "$id")"
  done
  note "$m" | contains 'program "no-such-program-orrery-test" not found' || fail "missing command: note says '$(note "$m")'"
  o logs "$m" | contains 'program "no-such-program-orrery-test" not found' || fail "missing command: not in orrery logs"
  note "$c" | contains 'exited with status 1:.*ValueError: deliberate failure for the test' || fail "crash: note says '$(note "$c")'"
  out=$(o logs "$c")
  grep -q 'exited with status 1' <<<"$out" || fail "crash: no exit status in orrery logs"
  grep -q '^\[rank 1\] ValueError: deliberate failure for the test$' <<<"$out" || fail "crash: rank 1's stderr not in orrery logs"
  grep -q '^\[rank 0\] crash.py: started$' <<<"$out" || fail "crash: rank 0's stdout not in orrery logs"
  note "$b" | contains "workdir $WORK/jobs/no-such-dir: No such file or directory" || fail "bad workdir: note says '$(note "$b")'"
  o logs "$b" | contains "workdir $WORK/jobs/no-such-dir: No such file or directory" || fail "bad workdir: not in orrery logs"
  down
  say "PASS: missing command, crash and bad workdir each Failed after 3 retries, with their reasons"
  ;;
esac
