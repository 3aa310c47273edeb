#!/usr/bin/env bash
# ctest operator_up_<scenario> (tests/operator/up.cmake): `orrery up` as a supervisor (issue 19,
# item 4; docs/runtime.md, "### orrery up"), with real processes on a free loopback port (`--listen
# 127.0.0.1:0`) and a folder of its own, so that it may run beside any other test.
#   busy_port      a second `orrery up` on the port of a running one (or of another program, or as
#                  its --metrics) exits non-zero before it prints the banner or the export line,
#                  names the port and what holds it (another orrery: its core's pid and data, and
#                  its `orrery up`), and creates no data folder; the first cluster is untouched;
#                  `orrery up --help` tells of --foreground, port 0 and the kept --data folder
#   start_failure  a core that fails at start: exit 2, no banner, the core log's last lines
#                  printed, and the temporary data folder kept with that log in it
#   kill_node      kill -9 of the node agent that runs a job: the restart is said, the agent's
#                  group is gone, the node is Up again, the job completes with the uninterrupted
#                  run's digest; killed again at once: the delay doubles; a job submitted
#                  afterwards completes; SIGINT stops everything (exit 0)
#   kill_core      kill -9 of the core while a job runs: restarted on the same port and data, the
#                  journal recovered, the job completes with the uninterrupted digest; killed again
#                  at once: the delay doubles; a job submitted afterwards completes
#   data_restart   a cluster stopped (SIGINT) with a completed job and a running one; `orrery up
#                  --data DIR` with another shape is refused; with the same, the same secret, both
#                  jobs under their ids, the completed one's result, and the running one completes
#                  from its checkpoint with the uninterrupted digest
#   up_test.sh SCENARIO ORRERY ORRERY_TRAIN_MLP SOURCE_DIR
set -euo pipefail
SCENARIO=$1
ORRERY=$2
MLP=$3
SRC=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/orrery-op-up-XXXXXX")
UP_PID=
PY_PID=
cleanup() {
  if [ -n "$UP_PID" ] && kill -0 "$UP_PID" 2>/dev/null; then
    kill -TERM "$UP_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$UP_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$UP_PID" 2>/dev/null || true
  fi
  [ -z "$PY_PID" ] || kill -KILL "$PY_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL ($SCENARIO): $*"
  for f in "$WORK"/*.log "$WORK"/*/logs/core.log "$WORK"/*/logs/node*.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -25 "$f"; }
  done
  exit 1
}
say() { echo "== $*"; }

# `orrery up ARGS...` in the background, its output in $WORK/$1.log; waits for its export line and
# sets UP_PID, ORRERY_CORE and ORRERY_SECRET_FILE from what it printed.
start_up() {
  local log=$WORK/$1.log
  shift
  "$ORRERY" up --nodes 2 --devices 4 --listen 127.0.0.1:0 "$@" >"$log" 2>&1 &
  UP_PID=$!
  for _ in $(seq 150); do
    grep -q "export ORRERY_CORE" "$log" && break
    kill -0 "$UP_PID" 2>/dev/null || fail "orrery up $* exited early"
    sleep 0.1
  done
  local line
  line=$(grep "export ORRERY_CORE" "$log") || fail "orrery up $* did not come up"
  eval "export ${line#*export }"
  [ -n "$ORRERY_CORE" ] && [ -f "$ORRERY_SECRET_FILE" ] || fail "bad export line: $line"
}
stop_up() {
  kill -INT "$UP_PID"
  local rc=0
  wait "$UP_PID" || rc=$?
  local pid=$UP_PID
  UP_PID=
  [ "$rc" = 0 ] || fail "orrery up (pid $pid) exited $rc after SIGINT"
}
o() { "$ORRERY" "$@"; }
# A child of `orrery up`: core, or a node's name.
up_child() {
  ps -o pid=,args= --ppid "$UP_PID" | awk -v n="$1" '
    n == "core" && / serve / { print $1 } n != "core" && $0 ~ ("--name " n " ") { print $1 }'
}
wait_nodes_up() {
  for _ in $(seq 150); do
    [ "$(o nodes 2>/dev/null | grep -c ' Up ')" = 2 ] && return 0
    sleep 0.1
  done
  o nodes || true
  fail "not 2 nodes Up"
}
job_line() { o ls 2>/dev/null | awk -v n="$1" '$2 == n'; }
job_step() { job_line "$1" | grep -oE '\b[0-9]+/[0-9]+\b' | head -1 | cut -d/ -f1; }
# The CKPT column (the one after STEP/STEPS): the last committed checkpoint's step, or -.
job_ckpt() { job_line "$1" | awk '{ for (i = 1; i < NF; ++i) if ($i ~ /^[0-9]+\/[0-9]+$/) { print $(i + 1); exit } }'; }
wait_step() {  # NAME STEP: Running at STEP or later
  for _ in $(seq 300); do
    local s
    s=$(job_step "$1")
    if [ -n "$s" ] && [ "$s" -ge "$2" ] && job_line "$1" | grep -q ' Running '; then return 0; fi
    sleep 0.1
  done
  o ls || true
  fail "job $1 not Running at step $2"
}
wait_completed() {  # NAME SECONDS
  local end=$(($(date +%s) + $2))
  while [ "$(date +%s)" -lt "$end" ]; do
    local l
    l=$(job_line "$1")
    case "$l" in
      *" Completed "*) return 0 ;;
      *" Failed "* | *" Cancelled "*) fail "job $1 ended: $l" ;;
    esac
    sleep 0.2
  done
  o ls || true
  fail "job $1 not Completed after $2 s"
}
digest() { job_line "$1" | grep -oE 'digest=[0-9a-f]+' | head -1; }
reference() { "$MLP" --reference --world=2 --steps="$1" | grep -oE 'digest=[0-9a-f]+'; }
wait_said() {  # LOG TEXT SECONDS
  for _ in $(seq $(($3 * 10))); do
    grep -qF -- "$2" "$1" && return 0
    sleep 0.1
  done
  fail "orrery up did not say: $2"
}
# A job of 2 ranks that runs long enough to act on: STEPS steps of at least 15 ms each.
slow_job() {  # NAME STEPS
  cat >"$WORK/$1.toml" <<EOF
name = "$1"
world = 2
steps = $2
checkpoint_every = 50
args = ["--step-delay-us=15000"]
EOF
  o submit "$WORK/$1.toml" >/dev/null || fail "submit $1"
}
# The shipped examples/jobs/basic.toml made quick: 150 steps, without the step delay that makes it
# last a minute for a person (README, "Run a local cluster").
quick_basic() {
  sed -e 's/"--step-delay-us=[0-9]*"//' -e 's/^steps = .*/steps = 150/' "$SRC/examples/jobs/basic.toml" \
    >"$WORK/basic.toml"
  echo "$WORK/basic.toml"
}
# Every process of the process groups led by PIDS is gone.
groups_gone() {
  for g in "$@"; do
    for _ in $(seq 50); do pgrep -g "$g" >/dev/null || break; sleep 0.1; done
    if pgrep -g "$g" >/dev/null; then ps -o pid,pgid,args -g "$g"; fail "processes left in group $g"; fi
  done
}

case "$SCENARIO" in
busy_port)
  help=$("$ORRERY" up --help)
  for want in --foreground "port 0: a free one" "an earlier cluster's is started again" "restarting what dies"; do
    grep -qF -- "$want" <<<"$help" || fail "orrery up --help lacks '$want': $help"
  done
  start_up a --foreground --data "$WORK/a"
  wait_nodes_up
  port=${ORRERY_CORE##*:}
  core=$(up_child core)
  say "cluster a on port $port (orrery up $UP_PID, core $core); a second orrery up on it"
  rc=0
  timeout 30 "$ORRERY" up --listen "127.0.0.1:$port" --data "$WORK/b" >"$WORK/b.out" 2>"$WORK/b.err" || rc=$?
  cat "$WORK/b.out" "$WORK/b.err"
  [ "$rc" = 2 ] || fail "the second orrery up exited $rc, expected 2"
  [ ! -s "$WORK/b.out" ] || fail "the second orrery up printed on stdout: $(cat "$WORK/b.out")"
  grep -q "export ORRERY_CORE\|core on" "$WORK/b.err" && fail "the second orrery up printed its banner"
  grep -qF "orrery up: --listen 127.0.0.1:$port is in use by another orrery: orrery-core serve (pid $core, data $WORK/a/core), started by orrery up (pid $UP_PID)" "$WORK/b.err" ||
    fail "the message does not name the port and the other orrery"
  [ ! -e "$WORK/b" ] || fail "the second orrery up created its data folder before checking its port"
  # Its --metrics on the busy port: the same, naming the flag.
  rc=0
  timeout 30 "$ORRERY" up --listen 127.0.0.1:0 --metrics "127.0.0.1:$port" --data "$WORK/c" >"$WORK/c.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "orrery up with a busy --metrics exited $rc, expected 2: $(cat "$WORK/c.out")"
  grep -qF "orrery up: --metrics 127.0.0.1:$port is in use by another orrery" "$WORK/c.out" || fail "metrics message: $(cat "$WORK/c.out")"
  grep -q "export ORRERY_CORE" "$WORK/c.out" && fail "orrery up with a busy --metrics printed its export line"
  # A port held by another program: named, and not as an orrery.
  /usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$WORK/py.port" &
  PY_PID=$!
  for _ in $(seq 50); do [ -s "$WORK/py.port" ] && break; sleep 0.1; done
  pyport=$(cat "$WORK/py.port")
  rc=0
  timeout 30 "$ORRERY" up --listen "127.0.0.1:$pyport" --data "$WORK/d" >"$WORK/d.out" 2>&1 || rc=$?
  cat "$WORK/d.out"
  [ "$rc" = 2 ] || fail "orrery up on python's port exited $rc, expected 2"
  grep -qF "127.0.0.1:$pyport is in use by python3" "$WORK/d.out" || fail "python's port: $(cat "$WORK/d.out")"
  grep -q "another orrery\|export ORRERY_CORE" "$WORK/d.out" && fail "python's port: $(cat "$WORK/d.out")"
  kill -KILL "$PY_PID"
  wait "$PY_PID" 2>/dev/null || true
  PY_PID=
  # The first cluster is untouched.
  [ "$(up_child core)" = "$core" ] || fail "cluster a's core changed"
  o nodes | grep -c ' Up ' | grep -qx 2 || fail "cluster a's nodes are not Up"
  stop_up
  [ -f "$WORK/a/core/journal" ] || fail "--data folder not kept after SIGINT"
  echo "PASS: a busy port is refused before the banner (exit 2), naming the port and its holder"
  ;;

start_failure)
  printf '#!/bin/sh\necho "fake-core: cannot open the journal: Input/output error"\nexit 1\n' >"$WORK/fake-core"
  chmod +x "$WORK/fake-core"
  mkdir "$WORK/tmp"
  rc=0
  TMPDIR=$WORK/tmp timeout 30 "$ORRERY" up --listen 127.0.0.1:0 --core-bin "$WORK/fake-core" >"$WORK/out" 2>"$WORK/err" || rc=$?
  cat "$WORK/out" "$WORK/err"
  [ "$rc" = 2 ] || fail "orrery up with a failing core exited $rc, expected 2"
  [ ! -s "$WORK/out" ] || fail "orrery up printed on stdout"
  grep -q "orrery up: orrery-core serve exited (exit status 1) before it listened on 127.0.0.1:[0-9]*; .*/logs/core.log ends:" "$WORK/err" || fail "no failure message"
  grep -q "^    fake-core: cannot open the journal: Input/output error$" "$WORK/err" || fail "the core log's tail is not printed"
  kept=$(sed -n 's/^orrery up: kept \([^ ]*\) (logs in .*/\1/p' "$WORK/err")
  [ -n "$kept" ] || fail "no 'kept' line"
  case "$kept" in "$WORK/tmp/orrery-up-"*) ;; *) fail "kept $kept, not a temporary folder under TMPDIR" ;; esac
  grep -q "fake-core: cannot open the journal" "$kept/logs/core.log" || fail "$kept/logs/core.log does not hold the core's output"
  grep -q "$kept/logs/core.log" "$WORK/err" || fail "the log named is not the kept one"
  echo "PASS: a core that fails at start: exit 2, no banner, its log's tail printed and kept in $kept"
  ;;

kill_node)
  start_up up --data "$WORK/data"
  wait_nodes_up
  ref=$(reference 200)
  slow_job slow 200
  wait_step slow 20
  node=$(job_line slow | grep -oE '\bnode[0-9]+\b' | head -1)
  [ -n "$node" ] || fail "job slow runs on no node: $(job_line slow)"
  agent=$(up_child "$node")
  [ -n "$agent" ] || fail "no agent of $node under orrery up"
  say "kill -9 of $node's agent (pid $agent) at step $(job_step slow)"
  kill -KILL "$agent"
  wait_said "$WORK/up.log" "orrery up: node $node exited (killed by signal 9); restarting in 0.5 s (restart 1); log $WORK/data/logs/$node.log" 5
  wait_said "$WORK/up.log" "orrery up: node $node started again (pid " 5
  again=$(up_child "$node")
  [ -n "$again" ] && [ "$again" != "$agent" ] || fail "$node not running again under a new pid ($again)"
  groups_gone "$agent"  # the dead agent's proxies and workers
  wait_nodes_up
  wait_completed slow 60
  [ "$(digest slow)" = "$ref" ] || fail "job slow: $(digest slow), the uninterrupted run: $ref"
  say "job slow completed with $ref; kill -9 of $node's agent again"
  kill -KILL "$again"
  wait_said "$WORK/up.log" "orrery up: node $node exited (killed by signal 9); restarting in 1.0 s (restart 2)" 5
  wait_said "$WORK/up.log" "node $node started again" 5
  wait_nodes_up
  o submit "$(quick_basic)" >/dev/null || fail "submit basic.toml"
  wait_completed train-basic 60
  [ "$(digest train-basic)" = "$(reference 150)" ] || fail "train-basic: $(digest train-basic)"
  leaders=$(ps -o pid= --ppid "$UP_PID" | tr -d ' ' | tr '\n' ' ')
  stop_up
  groups_gone $leaders
  grep -q "restart 3" "$WORK/up.log" && fail "more restarts than kills"
  echo "PASS: a killed node agent was restarted twice (0.5 s, then 1.0 s), a job across the kill and one after it completed with the reference digests"
  ;;

kill_core)
  start_up up --data "$WORK/data"
  wait_nodes_up
  ref=$(reference 200)
  slow_job slow 200
  wait_step slow 20
  core=$(up_child core)
  say "kill -9 of the core (pid $core) at step $(job_step slow)"
  kill -KILL "$core"
  wait_said "$WORK/up.log" "orrery up: core exited (killed by signal 9); restarting in 0.5 s (restart 1); log $WORK/data/logs/core.log" 5
  wait_said "$WORK/up.log" "orrery up: core started again (pid " 5
  again=$(up_child core)
  [ -n "$again" ] && [ "$again" != "$core" ] || fail "the core is not running again under a new pid"
  grep -q "listening on $ORRERY_CORE .*recovered [0-9]* decisions, 1 jobs from $WORK/data/core/journal" "$WORK/data/logs/core.log" ||
    fail "the restarted core did not recover its journal on the same address"
  wait_nodes_up
  wait_completed slow 60
  [ "$(digest slow)" = "$ref" ] || fail "job slow: $(digest slow), the uninterrupted run: $ref"
  say "job slow completed with $ref; kill -9 of the core again"
  kill -KILL "$again"
  wait_said "$WORK/up.log" "orrery up: core exited (killed by signal 9); restarting in 1.0 s (restart 2)" 5
  wait_said "$WORK/up.log" "orrery up: core started again" 5
  wait_nodes_up
  o submit "$(quick_basic)" >/dev/null || fail "submit basic.toml after the core restarts"
  wait_completed train-basic 60
  [ "$(digest train-basic)" = "$(reference 150)" ] || fail "train-basic: $(digest train-basic)"
  [ "$(digest slow)" = "$ref" ] || fail "job slow's result lost across the second restart"
  leaders=$(ps -o pid= --ppid "$UP_PID" | tr -d ' ' | tr '\n' ' ')
  stop_up
  groups_gone $leaders
  echo "PASS: a killed core was restarted twice (0.5 s, then 1.0 s) on its port and journal; a job across the kill and one after it completed with the reference digests"
  ;;

data_restart)
  start_up first --data "$WORK/data"
  wait_nodes_up
  secret=$(cat "$ORRERY_SECRET_FILE")
  o submit "$(quick_basic)" >/dev/null || fail "submit basic.toml"
  wait_completed train-basic 60
  done_digest=$(digest train-basic)
  slow_job slow 300
  wait_step slow 100
  for _ in $(seq 100); do
    case "$(job_ckpt slow)" in [0-9]*) break ;; esac
    sleep 0.1
  done
  case "$(job_ckpt slow)" in [0-9]*) ;; *) fail "job slow has no checkpoint: $(job_line slow)" ;; esac
  slow_id=$(job_line slow | awk '{print $1}')
  say "stopping the cluster with job slow (id $slow_id) at step $(job_step slow): $(job_line slow)"
  stop_up
  [ -f "$WORK/data/core/journal" ] || fail "no journal kept in $WORK/data/core"
  rc=0
  timeout 30 "$ORRERY" up --nodes 3 --listen 127.0.0.1:0 --data "$WORK/data" >"$WORK/shape.log" 2>&1 || rc=$?
  cat "$WORK/shape.log"
  [ "$rc" = 2 ] || fail "orrery up --data with another shape exited $rc, expected 2"
  grep -q "export ORRERY_CORE" "$WORK/shape.log" && fail "another shape printed the banner"
  grep -qF "orrery up: $WORK/data holds another cluster ($WORK/data/fleet.txt: \"# written by orrery up: 2 nodes of 4 host devices\")" "$WORK/shape.log" ||
    fail "another shape: no clear message"
  start_up second --data "$WORK/data"
  grep -qF "  started again: the core recovers its jobs from $WORK/data/core/journal" "$WORK/second.log" || fail "the banner does not say it started again"
  [ "$(cat "$ORRERY_SECRET_FILE")" = "$secret" ] || fail "the secret changed across the restart"
  wait_nodes_up
  o ls
  job_line train-basic | grep -q " Completed " || fail "the completed job is not Completed: $(job_line train-basic)"
  [ "$(digest train-basic)" = "$done_digest" ] || fail "the completed job's result: $(digest train-basic), was: $done_digest"
  [ "$(job_line slow | awk '{print $1}')" = "$slow_id" ] || fail "job slow is not job $slow_id any more"
  wait_completed slow 60
  [ "$(digest slow)" = "$(reference 300)" ] || fail "job slow: $(digest slow), the uninterrupted run: $(reference 300)"
  job_line slow | grep -q "restored_from=" || fail "job slow did not resume from a checkpoint: $(job_line slow)"
  stop_up
  echo "PASS: orrery up --data restarted the stopped cluster: the completed job kept, the running one resumed from its checkpoint and completed with the reference digest"
  ;;

*)
  fail "unknown scenario $SCENARIO"
  ;;
esac
