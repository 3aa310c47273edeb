#!/usr/bin/env bash
# The operator_cli_* tests (tests/operator/cli.cmake): the `orrery` binary as an operator meets it
# (issue 19, items 6 and 7; docs/runtime.md, "The orrery CLI").
#   cli_test.sh CASE ORRERY ORRERY_CORE
# CASE:
#   deadline  a TCP listener that accepts and never answers: every command exits 2 within
#             --timeout (or ORRERY_TIMEOUT) and a little, naming the address and the timeout
#   watch     `watch` and `logs --follow` exit 2 when the core is killed (at once) or stops
#             answering (within a heartbeat or a poll, and --timeout); `watch --count 0` prints
#             nothing
#   messages  no core needed: 64-byte quoting, a directory, a FIFO and a device as the job file,
#             an unknown command, range messages, `watch --after -5`, a bad --timeout
#   restart   after a core restart `ls` shows a recovered job's real AGE and `watch` wall-clock
#             (UTC) times
set -euo pipefail
CASE=$1
ORRERY=$2
CORE_BIN=$3
PY=/usr/bin/python3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/orrery-operator-cli-XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL ($CASE): $*"
  for f in "$WORK"/*.log "$WORK"/*.err; do [ -f "$f" ] && { echo "--- $f"; tail -c 2000 "$f"; echo; }; done
  exit 1
}
now() { date +%s.%N; }
# elapsed START: seconds since START, as an integer number of tenths.
tenths_since() { $PY -c "import sys, time; print(int((time.time() - float(sys.argv[1])) * 10))" "$1"; }
# expect_rc CODE CMD...: runs CMD (stdout to $WORK/out, stderr to $WORK/cmd.err) and checks its exit.
expect_rc() {
  local want=$1 rc=0
  shift
  "$@" >"$WORK/out" 2>"$WORK/cmd.err" || rc=$?
  [ "$rc" = "$want" ] || fail "$(printf '%.200s' "$*"): exit $rc, expected $want; stderr: $(head -c 600 "$WORK/cmd.err")"
}
# err_has TEXT: the last command's stderr contains TEXT (fixed string).
err_has() { grep -qF -- "$1" "$WORK/cmd.err" || fail "stderr lacks '$1': $(head -c 600 "$WORK/cmd.err")"; }

# A core on a free port, no node agents: start_core (sets CORE_PID, export ORRERY_CORE).
echo "0123456789abcdef0123456789abcdef" >"$WORK/secret"
chmod 600 "$WORK/secret"
printf 'premium_reserve 0\nregion local\ncluster local\nnode node1 host_mem_mib=65536\ndevices host count=2 mem_mib=1024\n' >"$WORK/fleet.txt"
export ORRERY_SECRET_FILE=$WORK/secret
unset ORRERY_TIMEOUT
start_core() {
  : >"$WORK/core.log"
  "$CORE_BIN" serve --listen "${ORRERY_CORE:-127.0.0.1:0}" --data "$WORK/core" --secret "$WORK/secret" \
    --fleet "$WORK/fleet.txt" >>"$WORK/core.log" 2>&1 &
  CORE_PID=$!
  PIDS+=("$CORE_PID")
  for _ in $(seq 100); do
    grep -q "listening on" "$WORK/core.log" && break
    kill -0 "$CORE_PID" 2>/dev/null || fail "orrery-core exited"
    sleep 0.05
  done
  export ORRERY_CORE
  ORRERY_CORE=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$WORK/core.log" | head -1)
  [ -n "$ORRERY_CORE" ] || fail "orrery-core did not say where it listens"
}
# wait_exit PID SECONDS: waits for PID (a child) to end within SECONDS; sets RC.
wait_exit() {
  local pid=$1 limit=$(( $2 * 10 ))
  for _ in $(seq "$limit"); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "process $pid still running after $2 s"
  RC=0
  wait "$pid" || RC=$?
}

case "$CASE" in
deadline)
  "$PY" -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
held = []
while True:  # accepts, reads nothing, answers nothing
    held.append(s.accept()[0])
' >"$WORK/port" &
  PIDS+=($!)
  for _ in $(seq 50); do [ -s "$WORK/port" ] && break; sleep 0.1; done
  ADDR=127.0.0.1:$(cat "$WORK/port")
  t=$(now)
  expect_rc 2 "$ORRERY" --core "$ADDR" --timeout 2 ls
  e=$(tenths_since "$t")
  err_has "orrery ls: $ADDR did not answer within 2 s"
  [ "$e" -ge 19 ] && [ "$e" -le 50 ] || fail "ls took $e tenths of a second with --timeout 2"
  t=$(now)
  ORRERY_TIMEOUT=1 expect_rc 2 "$ORRERY" --core "$ADDR" cancel 0
  e=$(tenths_since "$t")
  err_has "orrery cancel: $ADDR did not answer within 1 s"
  [ "$e" -le 40 ] || fail "cancel took $e tenths of a second with ORRERY_TIMEOUT=1"
  # watch and logs --follow have no overall deadline, but connecting has one.
  t=$(now)
  expect_rc 2 "$ORRERY" --core "$ADDR" --timeout 1 watch
  err_has "did not answer within 1 s"
  expect_rc 2 "$ORRERY" --core "$ADDR" --timeout 1 logs 0 --follow
  err_has "did not answer within 1 s"
  [ "$(tenths_since "$t")" -le 80 ] || fail "watch and logs --follow against a silent listener took too long"
  echo "PASS: a silent listener: exit 2 within the timeout, naming $ADDR and the timeout"
  ;;

watch)
  start_core
  printf 'name = "q"\nworld = 2\nsteps = 1000\n' >"$WORK/q.toml"
  expect_rc 0 "$ORRERY" submit "$WORK/q.toml"  # no node: it waits
  # --count 0: nothing printed, exit 0 (it printed one event).
  expect_rc 0 "$ORRERY" watch --count 0
  [ ! -s "$WORK/out" ] || fail "watch --count 0 printed: $(cat "$WORK/out")"
  expect_rc 0 "$ORRERY" watch --count 1
  [ "$(wc -l <"$WORK/out")" = 1 ] || fail "watch --count 1 printed $(wc -l <"$WORK/out") lines"
  # The core killed: watch and logs --follow notice the closed connection at once, exit 2.
  "$ORRERY" watch >"$WORK/watch.log" 2>&1 &
  W=$!
  PIDS+=("$W")
  "$ORRERY" logs q --rank 0 --follow >"$WORK/follow.log" 2>&1 &
  F=$!
  PIDS+=("$F")
  sleep 1
  kill -0 "$W" 2>/dev/null || fail "watch ended before the core did"
  kill -0 "$F" 2>/dev/null || fail "logs --follow ended before the core did"
  kill -KILL "$CORE_PID"
  wait_exit "$W" 5
  [ "$RC" = 2 ] || fail "watch exited $RC when the core was killed, expected 2"
  grep -q "orrery watch: connection to $ORRERY_CORE lost" "$WORK/watch.log" || fail "watch did not say the connection was lost"
  grep -q "PromiseFulfiller" "$WORK/watch.log" && fail "KJ's message leaked"
  wait_exit "$F" 5
  [ "$RC" = 2 ] || fail "logs --follow exited $RC when the core was killed, expected 2"
  grep -q "orrery logs: connection to $ORRERY_CORE lost" "$WORK/follow.log" || fail "logs --follow did not say the connection was lost"
  # The core stopped (SIGSTOP), its connection open: watch's heartbeat (2 s) and logs --follow's
  # polls (0.5 s), each under --timeout 1, notice within about 3 s.
  start_core
  "$ORRERY" --timeout 1 watch >"$WORK/watch.log" 2>&1 &
  W=$!
  PIDS+=("$W")
  "$ORRERY" --timeout 1 logs q --rank 0 --follow >"$WORK/follow.log" 2>&1 &
  F=$!
  PIDS+=("$F")
  sleep 0.5
  kill -0 "$W" 2>/dev/null || fail "watch ended early"
  kill -0 "$F" 2>/dev/null || fail "logs --follow ended early"
  kill -STOP "$CORE_PID"
  t=$(now)
  wait_exit "$W" 8
  [ "$RC" = 2 ] || fail "watch exited $RC when the core stopped answering, expected 2"
  [ "$(tenths_since "$t")" -ge 9 ] || fail "watch gave up on a stopped core before its timeout"
  wait_exit "$F" 8
  [ "$RC" = 2 ] || fail "logs --follow exited $RC when the core stopped answering, expected 2"
  kill -CONT "$CORE_PID"
  grep -q "orrery watch: $ORRERY_CORE did not answer within 1 s" "$WORK/watch.log" || fail "watch did not name the deadline"
  grep -q "orrery logs: $ORRERY_CORE did not answer within 1 s" "$WORK/follow.log" || fail "logs --follow did not name the deadline"
  echo "PASS: watch --count 0 silent; watch and logs --follow exit 2 on a killed core and on a stopped one"
  ;;

messages)
  big=$($PY -c 'print("a" * 10386)')
  cut="$($PY -c 'print("a" * 64)')..."
  printf 'name = "%s"\nworld = 1\n' "$big" >"$WORK/big.toml"
  expect_rc 1 "$ORRERY" submit --dry-run "$WORK/big.toml"
  err_has "got \"$cut\" (10386 bytes)"
  [ "$(wc -c <"$WORK/cmd.err")" -lt 400 ] || fail "the 10 KB name echoed: $(wc -c <"$WORK/cmd.err") bytes of stderr"
  expect_rc 4 "$ORRERY" drain "$big"
  [ "$(cat "$WORK/cmd.err")" = "orrery drain: unknown node \"$cut\" (10386 bytes)" ] || fail "drain: $(head -c 300 "$WORK/cmd.err")"
  expect_rc 1 "$ORRERY" ls "$big"
  err_has "$cut (10386 bytes)"
  [ "$(wc -c <"$WORK/cmd.err")" -lt 400 ] || fail "ls echoed the 10 KB argument"
  # A directory and a FIFO (no writer) as the job file: refused at once.
  expect_rc 1 "$ORRERY" submit "$WORK"
  [ "$(cat "$WORK/cmd.err")" = "orrery submit: $WORK is a directory, not a job file" ] || fail "directory: $(cat "$WORK/cmd.err")"
  mkfifo "$WORK/fifo.toml"
  expect_rc 1 timeout 10 "$ORRERY" submit "$WORK/fifo.toml"
  [ "$(cat "$WORK/cmd.err")" = "orrery submit: $WORK/fifo.toml is a FIFO, not a job file" ] || fail "FIFO: $(cat "$WORK/cmd.err")"
  expect_rc 1 "$ORRERY" submit --dry-run /dev/null
  err_has "orrery submit: /dev/null is a character device, not a job file"
  expect_rc 1 "$ORRERY" bogus
  err_has 'orrery: unknown command "bogus" (commands: submit, ls, nodes, preempt, suspend, resume, migrate, resize, cancel, drain, undrain, watch, logs, up)'
  expect_rc 1 "$ORRERY" resize J 0
  err_has "orrery: N: 0 is out of range 1..4096"
  grep -q "0.000000\|179769" "$WORK/cmd.err" && fail "a double in the range message: $(cat "$WORK/cmd.err")"
  expect_rc 1 "$ORRERY" up --devices 0
  err_has "orrery: --devices: 0 is out of range 1..64"
  expect_rc 1 "$ORRERY" watch --after -5
  err_has "orrery: --after: -5 is out of range (at least 0)"
  expect_rc 1 "$ORRERY" watch --count -1
  err_has "orrery: --count: -1 is out of range (at least 0)"
  expect_rc 1 "$ORRERY" --timeout 0 ls
  err_has "orrery: --timeout: 0 is out of range 1..86400"
  ORRERY_TIMEOUT=soon expect_rc 1 "$ORRERY" ls
  err_has 'orrery: --timeout: "soon" is not an integer'
  expect_rc 1 "$ORRERY" logs 0 -n 0
  err_has "orrery: --lines: 0 is out of range 1..1000000"
  echo "PASS: 64-byte quoting, directory and FIFO job files, unknown command, range messages"
  ;;

restart)
  start_core
  printf 'name = "aged"\nworld = 2\nsteps = 1000\n' >"$WORK/aged.toml"
  day_before=$(date -u +%Y-%m-%d)
  expect_rc 0 "$ORRERY" submit "$WORK/aged.toml"
  sleep 2.2
  kill -TERM "$CORE_PID"
  wait_exit "$CORE_PID" 10
  start_core  # same data: the job is recovered from the journal
  expect_rc 0 "$ORRERY" ls
  age=$(awk '$2 == "aged" { print $11 }' "$WORK/out")
  case "$age" in
    2s|3s|4s|5s) ;;
    *) fail "AGE of the recovered job is '$age', expected 2s..5s: $(cat "$WORK/out")" ;;
  esac
  expect_rc 0 "$ORRERY" watch --count 1
  day_after=$(date -u +%Y-%m-%d)
  stamp=$(cut -d' ' -f1 "$WORK/out")
  [[ "$stamp" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$ ]] || fail "not an ISO 8601 UTC time: $stamp"
  [ "${stamp%%T*}" = "$day_before" ] || [ "${stamp%%T*}" = "$day_after" ] || fail "watch's time $stamp is not today ($day_after, UTC)"
  echo "PASS: a recovered job's AGE is $age; watch says $stamp"
  ;;

*)
  fail "unknown case $CASE"
  ;;
esac
