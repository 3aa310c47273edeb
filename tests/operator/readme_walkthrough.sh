#!/usr/bin/env bash
# ctest operator_readme_walkthrough: README.md's "Run a local cluster" recipe, run as a person would
# run it, in a clean environment (env -i: HOME and PATH only, PATH then set by the recipe's own
# line): the lines of the section's ```sh block, one after the other, in one shell, from the
# repository root. It fails when the README and the tools disagree.
#
# What differs from a person's terminal, and only this: the data directory and the up log are
# temporary ones, the core listens on a free port instead of 7070 (so that the test can run beside
# anything else), `$PWD/build/bin` is the build folder under test, and a command refused with exit
# 3 (the job is between two states: "retry shortly") is tried again a second later, up to 30 times,
# as its message asks. After the `orrery up ... &` line the walkthrough waits for the `export` line
# in up's log, as a person would. Every other line must exit 0.
#
#   readme_walkthrough.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1
BUILD=$(cd "$2" && pwd)
PY=/usr/bin/python3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/orrery-readme-XXXXXX")
cleanup() {
  local rc=$?
  # Whatever the recipe left running (it should have stopped it with its last line).
  pkill -KILL -f -- "--data $WORK/data" 2>/dev/null || true
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

# The recipe: the first ```sh block after the heading.
awk '/^## Run a local cluster/ { sec = 1; next } sec && /^## / { exit }
     sec && /^```sh/ { inblk = 1; next } inblk && /^```/ { exit } inblk { print }' \
  "$SRC/README.md" >"$WORK/recipe.txt"
[ -s "$WORK/recipe.txt" ] || { echo "FAIL: no \`\`\`sh block under '## Run a local cluster' in README.md"; exit 1; }
grep -q "orrery up" "$WORK/recipe.txt" || { echo "FAIL: the recipe starts no cluster (orrery up)"; exit 1; }
grep -q "^export PATH=" "$WORK/recipe.txt" || { echo "FAIL: the recipe does not put orrery on PATH"; exit 1; }

PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# The only substitutions (see above). Comments stay: they are shell comments.
sed -e "s#/tmp/orrery-local#$WORK/data#g" -e "s#/tmp/orrery-up.log#$WORK/up.log#g" \
    -e "s#127.0.0.1:7070#127.0.0.1:$PORT#g" -e "s#orrery up #orrery up --listen 127.0.0.1:$PORT #" \
    -e "s#\$PWD/build/bin#$BUILD/bin#g" "$WORK/recipe.txt" >"$WORK/lines.txt"

# The driver: each line through run_line, in one shell (background jobs and %1 work as typed).
{
  cat <<'EOF'
set -u
n=0
run_line() {
  local line=$1 rc out tries=0
  n=$((n + 1))
  echo "\$ $line"
  if [[ "$line" =~ \&[[:space:]]*(#.*)?$ ]]; then
    eval "$line"
    if [[ "$line" == *"orrery up"* ]]; then  # as a person: wait for its banner
      for _ in $(seq 300); do grep -q "export ORRERY_CORE" "$UPLOG" 2>/dev/null && break; sleep 0.1; done
      grep -q "export ORRERY_CORE" "$UPLOG" || { echo "FAIL: line $n: no banner from orrery up:"; cat "$UPLOG"; exit 1; }
      cat "$UPLOG"
    fi
    return 0
  fi
  while :; do
    rc=0
    eval "$line" >"$OUTF" 2>&1 || rc=$?  # in this shell: an export stays
    out=$(cat "$OUTF")
    if [ "$rc" = 3 ] && [ "$tries" -lt 30 ]; then tries=$((tries + 1)); sleep 1; continue; fi
    break
  done
  echo "$out"
  if [ "$rc" != 0 ]; then echo "FAIL: line $n exited $rc: $line"; exit 1; fi
  [ "$tries" = 0 ] || echo "(refused $tries time(s) with exit 3 first, as the job changed state)"
  if [[ "$line" == kill\ -INT\ %1* ]]; then  # the cluster stops: up exits 0
    local up_rc=0
    wait %1 || up_rc=$?
    [ "$up_rc" = 0 ] || { echo "FAIL: orrery up exited $up_rc after SIGINT"; cat "$UPLOG"; exit 1; }
  fi
  sleep 0.5  # a person reads the output before typing the next line
}
EOF
  while IFS= read -r line; do
    [ -n "${line// }" ] || continue
    printf 'run_line %q\n' "$line"
  done <"$WORK/lines.txt"
  echo 'echo "walkthrough: $n lines, all done"'
} >"$WORK/driver.sh"

cd "$SRC"
env -i HOME="$WORK" PATH=/usr/local/bin:/usr/bin:/bin UPLOG="$WORK/up.log" OUTF="$WORK/line.out" \
  bash "$WORK/driver.sh" 2>&1 | tee "$WORK/out.txt"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || exit 1
grep -q "train-premium .* Completed" "$WORK/out.txt" || { echo "FAIL: train-premium did not complete in the walkthrough"; exit 1; }
grep -q "digest=" "$WORK/out.txt" || { echo "FAIL: no digest in the completion notes"; exit 1; }
if pgrep -f -- "--data $WORK/data" >/dev/null; then echo "FAIL: processes of the cluster left after kill -INT %1"; exit 1; fi
echo "PASS: README's local-cluster recipe ($(wc -l <"$WORK/lines.txt") lines) works as written"
