#!/bin/bash
# Checks packaging/pathkeeperd.service with systemd's own tools:
#   - systemd-analyze verify prints nothing (no unknown or misspelled
#     settings, every referenced binary exists, and, when MAN_DIR is given,
#     every Documentation=man: page resolves);
#   - the offline exposure score (systemd-analyze security --offline) is at
#     most 3.0, printed next to multipathd.service's when that is installed.
# verify needs ExecStart= to exist, so it checks a copy whose ExecStart is the
# pathkeeperd just built; every other line is the shipped one.
#
# Usage: unit_test.sh SOURCE_DIR PATHKEEPERD [MAN_DIR]   (exit 77: skipped)
#   MAN_DIR holds the built pages (*.5, *.8), flat as in the build tree or
#   in man5/ and man8/ as in an install tree's share/man.
set -euo pipefail
src=$(cd "$1" && pwd)
pathkeeperd=$(realpath "$2")
man_dir=${3:-}
unit=${PK_UNIT_FILE:-$src/packaging/pathkeeperd.service}

command -v systemd-analyze >/dev/null || { echo "SKIPPED: systemd-analyze is not installed"; exit 77; }
# shellcheck source=../common/check.sh
source "$src/tests/common/check.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s|^ExecStart=/usr/sbin/pathkeeperd|ExecStart=$pathkeeperd|" "$unit" >"$work/pathkeeperd.service"
if [[ -n $man_dir ]]; then
  mkdir -p "$work/man/man5" "$work/man/man8"
  find "$man_dir" \( -name '*.5' -o -name '*.5.gz' \) -exec cp {} "$work/man/man5/" \;
  find "$man_dir" \( -name '*.8' -o -name '*.8.gz' \) -exec cp {} "$work/man/man8/" \;
  man_dir=$work/man
fi
check "the copy runs the built pathkeeperd" grep -qx "ExecStart=$pathkeeperd" "$work/pathkeeperd.service"
check "the shipped unit runs /usr/sbin/pathkeeperd" grep -qx "ExecStart=/usr/sbin/pathkeeperd" "$unit"

verify_quiet() {
  local out rc=0
  if [[ -n $man_dir ]]; then
    out=$(MANPATH="$man_dir" systemd-analyze verify --man=yes "$work/pathkeeperd.service" 2>&1) || rc=$?
  else
    out=$(systemd-analyze verify --man=no "$work/pathkeeperd.service" 2>&1) || rc=$?
  fi
  [[ -n $out ]] && printf '%s\n' "$out"
  [[ $rc -eq 0 && -z $out ]]
}
if [[ -n $man_dir ]]; then
  check "systemd-analyze verify is clean, Documentation= pages included" verify_quiet
else
  echo "note: no MAN_DIR given, so Documentation=man: pages are not resolved"
  check "systemd-analyze verify is clean" verify_quiet
fi

score_of() {
  { systemd-analyze security --offline=true "$1" 2>/dev/null || true; } |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p'
}
score=$(score_of "$work/pathkeeperd.service")
echo "exposure: pathkeeperd.service ${score:-?}"
if [[ -f /lib/systemd/system/multipathd.service ]]; then
  echo "exposure: multipathd.service $(score_of /lib/systemd/system/multipathd.service) (for comparison)"
fi
at_most_3() { [[ -n $score ]] && awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }'; }
check "exposure score ${score:-?} is at most 3.0" at_most_3
check_summary
