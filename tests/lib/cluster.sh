# Shared by the shell tests that drive a real cluster through the `orrery` CLI
# (tests/pytorch/pytorch_cluster_test.sh, tests/operator/operator_cluster_test.sh). Sourced; the
# caller sets ORRERY (the CLI), SCENARIO, T0 (start time, seconds), LOGS (the daemons' log folder),
# and exports ORRERY_CORE and ORRERY_SECRET_FILE.

# Messages go to stderr: helpers run inside $(...) too.
say() { echo "[$(($(date +%s) - T0))s] $*" >&2; }
# The failure, the jobs as `orrery ls` shows them, and the end of every daemon's log.
fail() {
  {
    echo "FAIL ($SCENARIO): $*"
    echo "--- orrery ls"; "$ORRERY" ls 2>&1 || true
    for f in "$LOGS"/*.log; do [ -f "$f" ] && { echo "--- $f (last 15 lines)"; tail -15 "$f"; }; done
  } >&2
  exit 1
}
o() { "$ORRERY" "$@"; }
# grep -q on a pipe would end it early: its writer's SIGPIPE fails the pipeline (pipefail).
contains() { grep -c -- "$1" >/dev/null; }

wait_nodes_up() {  # N
  for _ in $(seq 150); do
    [ "$(o nodes 2>/dev/null | grep -c ' Up ')" = "$1" ] && return 0
    sleep 0.2
  done
  o nodes || true
  fail "not $1 nodes Up"
}

submit() {  # TOML -> job id
  local out
  out=$(o submit "$1" 2>&1) || fail "orrery submit $1: $out"
  sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out"
}
# `orrery ls` columns: 1 JOB 2 NAME 3 TIER 4 STATE 5 EPOCH 6 DEV 7 SPLICE 8 STEP/STEPS 9 CKPT 10 NODES
# 11 AGE 12 TENANT 13 TYPE 14... NOTE
field() { o ls | awk -v id="$1" -v f="$2" '$1 == id { print $f }'; }
# NOTE: what follows the 13th column, "" when the job has none (every other column is never
# empty: "-" stands for nothing).
note() {
  o ls | awk -v id="$1" '$1 == id { if (NF <= 13) { print ""; next } s = $0; for (i = 0; i < 13; ++i) sub(/^[^ ]+ +/, "", s); print s }'
}
step() { local s; s=$(field "$1" 8); s=${s%%/*}; echo "${s:-0}"; }
# Waits until job ID is in STATE (a regex on the STATE column); Failed or Cancelled otherwise fail.
wait_state() {  # ID STATE SECONDS
  local end=$(($(date +%s) + $3)) s=
  while [ "$(date +%s)" -lt "$end" ]; do
    s=$(field "$1" 4 2>/dev/null || true)
    [[ "$s" =~ ^($2)$ ]] && return 0
    if [[ "$s" =~ ^(Failed|Cancelled)$ ]] && ! [[ "$2" =~ $s ]]; then fail "job $1 is $s, waiting for $2: $(note "$1")"; fi
    sleep 0.2
  done
  fail "job $1 not $2 after $3 s (it is ${s:-unknown}: $(note "$1"))"
}
