#!/usr/bin/env bash
# pathkeeperctl plan, end to end on the sample xserve inventory and on the
# captured xserve sysfs trees: the real binary, the real config loader and
# sysfs scanner, checked through its JSON interface.
# usage: plan_cli_test.sh PATHKEEPERCTL SOURCE_DIR
set -euo pipefail
ctl=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/../common/check.sh"

"$ctl" plan --inventory "$src/tests/data/inventory/xserve.toml" --config "$src/tests/data/config/xserve.conf" \
  --config-dir "$work/none" --bindings "$work/bindings" --json >"$work/plan.json"
j() { jq -r "$1" "$work/plan.json"; }
check "schema is 1" test "$(j .schema)" = 1
check "two maps" test "$(j '.maps | length')" = 2
check "aliases are the controller rules'" test "$(j '[.maps[].alias] | join(",")')" = "xserve-lower,xserve-upper"
check "controller labels despite per-portal IQNs" test "$(j '[.maps[].controller] | join(",")')" = "lower,upper"
check "one group per map (Xserve is multibus)" test "$(j '[.maps[].groups | length] | join(",")')" = "1,1"
check "each map has one path through each portal" \
  test "$(j '[.maps[1].groups[0].paths[].portal] | join(",")')" = "10.10.1.20:3260,1,10.10.1.21:3260,1"
check "exact table for xserve-upper" \
  test "$(j '.maps[1].table')" = "0 524288 multipath 1 queue_if_no_path 1 alua 1 1 service-time 0 2 2 8:0 1 1 8:16 1 1"
check "DM UUID is mpath-<wwid>" test "$(j '.maps[1].dm_uuid')" = "mpath-$(j '.maps[1].wwid')"
check "no warnings" test "$(j '.warnings | length')" = 0
check "plan does not write the bindings file" test ! -e "$work/bindings"

"$ctl" plan --inventory "$src/tests/data/inventory/xserve.toml" --config "$work/none.conf" \
  --config-dir "$work/none" --bindings "$work/bindings" >"$work/plan.txt"
check "human output lists user-friendly names without rules" grep -q '^mpatha ' "$work/plan.txt"
check "human output shows the table" grep -q '^table: 0 524288 multipath' "$work/plan.txt"

printf '[[path]]\ndevice = "sdb"\ndevt = "nope"\n' >"$work/bad.toml"
set +e
"$ctl" plan --inventory "$work/bad.toml" --config "$work/none.conf" --config-dir "$work/none" 2>"$work/err"
rc=$?
set -e
check "bad inventory exits 1" test "$rc" = 1
check "error names file, line and key" grep -q "bad.toml:3:.*path\[1\].devt" "$work/err"

# The same plan from the kernel's own layout: a sysfs tree captured in the VM
# lab's xserve scenario (tests/data/sysfs/README.md).
for scenario in xserve xserve-failed; do
  tree=$src/tests/data/sysfs/$scenario
  if [[ ! -d $tree/class/iscsi_session ]]; then
    echo "SKIP: $scenario: no capture at $tree"
    continue
  fi
  "$ctl" plan --sysfs-root "$tree" --config "$src/tests/data/config/xserve.conf" \
    --config-dir "$work/none" --bindings "$work/bindings" --json >"$work/plan.json" 2>"$work/err"
  check "$scenario: sysfs plan has two maps, xserve-lower and xserve-upper" \
    test "$(j '[.maps[].alias] | join(",")')" = "xserve-lower,xserve-upper"
  check "$scenario: controller labels despite per-portal IQNs" \
    test "$(j '[.maps[].controller] | join(",")')" = "lower,upper"
  for m in 0 1; do
    check "$scenario: map $m has one path through each portal" \
      test "$(j "[.maps[$m].groups[].paths[].portal] | sort | join(\" \")")" = "10.10.1.20:3260,1 10.10.1.21:3260,1"
  done
  check "$scenario: paths are bound to eth1 (portal .20) and eth2 (portal .21)" \
    test "$(j '[.maps[].groups[].paths[] | .portal[0:10] + "=" + .netdev] | unique | join(" ")')" = "10.10.1.20=eth1 10.10.1.21=eth2"
  check "$scenario: sysfs plan gives the inventory's table for xserve-upper" \
    test "$(j '.maps[1].table')" = "0 524288 multipath 1 queue_if_no_path 1 alua 1 1 service-time 0 2 2 8:0 1 1 8:16 1 1"
  check "$scenario: no warnings, nothing skipped, nothing on stderr" \
    test "$(j '(.warnings | length) + (.skipped | length)')" = 0 -a ! -s "$work/err"
done
if [[ -d $src/tests/data/sysfs/xserve-failed/class/iscsi_session ]]; then
  check "xserve-failed: the paths through the cut eth1 are down, the others up" \
    test "$(j '[.maps[].groups[].paths[] | .netdev + "=" + .state] | unique | join(" ")')" = "eth1=down eth2=up"
fi

set +e
"$ctl" plan --sysfs-root "$work/no-such-sysfs" --config "$work/none.conf" --config-dir "$work/none" \
  >/dev/null 2>"$work/err"
rc=$?
set -e
check "a missing sysfs root exits 1" test "$rc" = 1
check "and names it" grep -q "no-such-sysfs" "$work/err"

set +e
"$ctl" plan --sysfs-root "$work" --inventory "$src/tests/data/inventory/xserve.toml" >/dev/null 2>&1
rc=$?
set -e
check "--sysfs-root with --inventory is bad usage" test "$rc" = 2

set +e
"$ctl" plan --frobnicate >/dev/null 2>&1
rc=$?
set -e
check "bad usage exits 2" test "$rc" = 2

check_summary
