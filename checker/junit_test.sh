#!/bin/sh
# CTest helper for orrery-check's JUnit report (checker/CMakeLists.txt registers the cases).
#   junit_test.sh CASE ORRERY_CHECK [ORRERY_CORE]
# Each case runs orrery-check with --junit, checks its exit status, that the report is well-formed
# XML (xmllint, Debian package libxml2-utils, installed by scripts/setup) and what it says.
set -u
case_name=$1
check=$2
core=${3:-}

fail() { echo "FAIL: $*" >&2; exit 1; }
command -v xmllint >/dev/null 2>&1 ||
  fail "xmllint not found (Debian package libxml2-utils; scripts/setup installs it)"
# The string value of an XPath expression on the report.
xq() { xmllint --xpath "$1" "$xml"; }
# Well-formed, and the totals on <testsuites> agree with the testcases.
check_report() {
  xmllint --noout "$xml" || fail "$xml is not well-formed XML"
  [ "$(xq 'count(/testsuites)')" = 1 ] || fail "no <testsuites> root"
  [ "$(xq 'string(/testsuites/@tests)')" = "$(xq 'count(//testcase)')" ] || fail "tests= is not the number of testcases"
  [ "$(xq 'string(/testsuites/@failures)')" = "$(xq 'count(//testcase/failure)')" ] || fail "failures= miscounted"
  [ "$(xq 'string(/testsuites/@errors)')" = "$(xq 'count(//testcase/error)')" ] || fail "errors= miscounted"
  [ "$(xq 'string(/testsuites/@skipped)')" = "$(xq 'count(//testcase/skipped)')" ] || fail "skipped= miscounted"
}
expect() {  # expect WHAT XPATH VALUE
  got=$(xq "$2")
  [ "$got" = "$3" ] || fail "$1: expected $3, got $got"
  echo "ok: $1 = $got"
}

xml=junit-$case_name.xml
rm -f "$xml"
case $case_name in
  proved)
    # The real table: one testcase per obligation (the JSON's count) plus the skipped BMC.
    "$check" --no-bmc --json --junit "$xml" > junit-proved.json
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc, expected 0"
    n=$(grep -o '"obligations": [0-9]*' junit-proved.json | grep -o '[0-9]*$')
    [ -n "$n" ] || fail "no obligation count in the JSON"
    check_report
    expect "testcases" 'count(//testcase)' $((n + 1))
    expect "proof testcases" 'count(//testsuite[@name="orrery-check.proof"]/testcase)' "$n"
    expect "failures" 'string(/testsuites/@failures)' 0
    expect "errors" 'string(/testsuites/@errors)' 0
    expect "skipped BMC" 'count(//testsuite[@name="orrery-check.bmc"]/testcase/skipped)' 1
    expect "Init obligations" 'count(//testcase[starts-with(@name, "Init :: INV-")])' \
      "$(grep '"invariants":' junit-proved.json | grep -o '"INV-' | wc -l)"
    expect "DELTA obligations" 'count(//testcase[substring-after(@name, " :: ") = "DELTA"])' \
      "$(grep -o '"delta_obligations": [0-9]*' junit-proved.json | grep -o '[0-9]*$')"
    # ORDER (job ids compared only for equality): one testcase, counted in the JSON too.
    expect "ORDER obligation" 'count(//testcase[substring-after(@name, " :: ") = "ORDER"])' 1
    expect "ORDER in the JSON" 'string(1)' \
      "$(grep -o '"order_obligations": [0-9]*' junit-proved.json | grep -o '[0-9]*$')"
    ;;
  dropped-guard)
    # Row #9 (Preempt) without its guard: exit 2, a failure for INV-TIER at #9, with the
    # counterexample (which contains '-->', so escaping is exercised).
    "$check" --no-bmc --drop-guard 9 --junit "$xml" > /dev/null 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "exit status $rc, expected 2"
    check_report
    tier9='//testcase[starts-with(@name, "#9 ") and substring-after(@name, " :: ") = "INV-TIER"]'
    expect "INV-TIER failure at #9" "count($tier9/failure)" 1
    expect "its message" \
      "starts-with($tier9/failure/@message, 'INV-TIER violated at #9 Running --Preempt--> Checkpointing')" true
    expect "counterexample text" "contains($tier9/failure, 'violates INV-TIER')" true
    ;;
  replay-unreadable)
    # A journal that does not exist: exit 1, and the report says so with one <error>.
    "$check" replay --junit "$xml" does-not-exist.journal > /dev/null 2>&1
    rc=$?
    [ $rc -eq 1 ] || fail "exit status $rc, expected 1"
    check_report
    expect "errors" 'string(/testsuites/@errors)' 1
    expect "replay testcase" 'count(//testsuite[@name="orrery-check.replay"]/testcase)' 1
    ;;
  replay-demo)
    # The demo scenario's journal replays cleanly: one passing testcase.
    "$core" demo --journal junit-demo.journal --fsync never > /dev/null || fail "orrery-core demo failed"
    "$check" replay --junit "$xml" junit-demo.journal
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc, expected 0"
    check_report
    expect "testcases" 'count(//testcase)' 1
    expect "failures" 'string(/testsuites/@failures)' 0
    expect "errors" 'string(/testsuites/@errors)' 0
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
