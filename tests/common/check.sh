# Shell test helpers shared by the CLI and host test scripts:
#   check DESCRIPTION COMMAND...   runs COMMAND, prints ok/FAIL, counts it
#   check_summary                  prints the counts; fails when any check failed
passes=0 failures=0
check() {
  if "${@:2}"; then
    echo "ok: $1"
    passes=$((passes + 1))
  else
    echo "FAIL: $1"
    failures=$((failures + 1))
  fi
}
check_summary() {
  echo "$passes passed, $failures failed"
  ((failures == 0))
}
