#!/usr/bin/env bash
# pathkeeperctl discover against a real tgtd: the fixture of tgt-netns.sh (two
# portals on two subnets, a blackholed address, an address nobody listens on,
# one veth per subnet in the initiator namespace). pathkeeperctl runs inside
# the initiator namespace (ip netns exec), so its probes leave through the
# fixture's veths and never touch the host's own network. The kernel's
# sessions come from captured sysfs trees (--sysfs-root), since this kernel
# has no iSCSI initiator.
#
# Exits 77 (ctest: skipped) with the reason when the machine cannot run the
# fixture: not root, no tgtd, no network namespaces.
# usage: discover_host_test.sh PATHKEEPERCTL SOURCE_DIR
set -euo pipefail
ctl=$1 src=$2
fixture=$src/tests/host/tgt-netns.sh
command -v jq >/dev/null || {
  echo "SKIPPED: jq not installed" >&2
  exit 77
}
tag=d$$
work=$(mktemp -d "${TMPDIR:-/tmp}/pathkeeper-discover-XXXXXX")
cleanup() {
  "$fixture" down "$tag" "$work/fixture" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
rc=0
"$fixture" up "$tag" "$work/fixture" $$ 2>"$work/up.err" || rc=$?
if [[ $rc == 77 ]]; then
  cat "$work/up.err" >&2
  exit 77
elif [[ $rc != 0 ]]; then
  echo "FAIL: tgt-netns.sh up failed (a broken fixture is a failure, not a skip):" >&2
  cat "$work/up.err" >&2
  exit 1
fi

nicA=pkia-$tag nicB=pkib-$tag
upper=iqn.2024-01.org.pathkeeper.test:upper lower=iqn.2024-01.org.pathkeeper.test:lower
probe_name=iqn.2024-01.org.pathkeeper.test:host:pathkeeper-probe
source "$(dirname "$0")/../common/check.sh"
discover() { # discover OUT ARGS...: runs discover in the initiator namespace, returns its status
  local out=$1 status=0
  shift
  ip netns exec "pki-$tag" "$ctl" discover --config "$work/none.conf" --config-dir "$work/none.d" \
    --initiator-name "$probe_name" "$@" >"$out" 2>"$out.err" || status=$?
  return "$status"
}
ms() { date +%s%3N; }

# --- 1. every portal from both NICs, against the xserve-failed capture -----
# 4 portals given + the capture's 2 (10.10.1.20, 10.10.1.21) = 6 portals x
# 2 NICs = 12 probes, 9 of which can only time out. All run at once, so the
# whole run takes about one timeout, not nine.
started=$(ms)
rc=0
discover "$work/all.json" --json --timeout 1500ms \
  --portal 10.200.1.20 --portal 10.200.2.21:3260 --portal 10.200.1.22 --portal 10.200.1.23 \
  --nic "$nicA" --nic "$nicB" --sysfs-root "$src/tests/data/sysfs/xserve-failed" || rc=$?
took=$(($(ms) - started))
echo "measured: 12 probes (9 timeouts of 1500 ms) took $took ms"
j() { jq -r "$1" "$work/all.json"; }
# probe NIC PORTAL FILTER: the jq FILTER applied to that probe's entry.
probe() { jq -r --arg nic "$1" --arg portal "$2" ".probes[] | select(.nic == \$nic and .portal == \$portal) | $3" "$work/all.json"; }
check "exit 2: probes failed and paths are missing" test "$rc" = 2
check "stderr is empty" test ! -s "$work/all.json.err"
check "12 probes in NIC, portal order" test "$(j '[.probes[] | "\(.nic) \(.portal)"] | join(",")')" = \
  "$(for n in $nicA $nicB; do for p in 10.200.1.20 10.200.2.21 10.200.1.22 10.200.1.23 10.10.1.20 10.10.1.21; do printf '%s %s:3260,' "$n" "$p"; done; done | sed 's/,$//')"
# Run one after the other, the probes would take at least the sum of their
# own times; together, the whole run is shorter than that sum.
summed=$(j '[.probes[].elapsed_ms] | add')
echo "measured: the probes' own times add up to $summed ms"
check "the probes ran concurrently (the run took less than their summed times)" test "$took" -lt "$summed"
check "portal A from NIC A: both targets at portal A" \
  test "$(probe "$nicA" 10.200.1.20:3260 '[.ok, (.targets[] | "\(.target)=\(.portals | join("+"))")] | join(" ")')" = \
  "true $lower=10.200.1.20:3260,1 $upper=10.200.1.20:3260,1"
check "portal B from NIC B: both targets at portal B" \
  test "$(probe "$nicB" 10.200.2.21:3260 '[.ok, (.targets[] | "\(.target)=\(.portals | join("+"))")] | join(" ")')" = \
  "true $lower=10.200.2.21:3260,1 $upper=10.200.2.21:3260,1"
check "no rejected entries or warnings from tgtd" \
  test "$(j '[.probes[] | select(.ok) | (.rejected + .warnings)[]] | length')" = 0
check "blackholed portal: a timeout" test "$(probe "$nicA" 10.200.1.22:3260 .error_kind)" = timeout
check "blackholed portal: the error says so" test "$(probe "$nicA" 10.200.1.22:3260 .error)" = \
  "portal 10.200.1.22:3260 via $nicA did not answer within 1500 ms (no TCP connection)"
blackholed=$(probe "$nicA" 10.200.1.22:3260 .elapsed_ms)
echo "measured: blackholed portal reported after $blackholed ms"
check "blackholed portal: reported at the timeout, not before" test "$blackholed" -ge 1500
check "nobody listens: refused (not a timeout)" \
  test "$(probe "$nicA" 10.200.1.23:3260 .error_kind)" = refused
check "portal A from NIC B: times out (the target ignores ARP on the wrong link)" \
  test "$(probe "$nicB" 10.200.1.20:3260 .error_kind)" = timeout
check "the capture's portals are probed and time out from both NICs" \
  test "$(j '[.probes[] | select(.portal | startswith("10.10.1.")) | .error_kind] | join(",")')" = \
  "timeout,timeout,timeout,timeout"
# The capture's sessions go to other targets (the MDS IQNs), so every path
# the probes proved is missing: both targets through A from NIC A and
# through B from NIC B. The cross pairs are not, since no probe reached them.
check "missing paths: exactly the four proven ones" \
  test "$(j '[.missing_paths[] | "\(.target) \(.portal) \(.nic)"] | join(";")')" = \
  "$lower 10.200.1.20:3260,1 $nicA;$lower 10.200.2.21:3260,1 $nicB;$upper 10.200.1.20:3260,1 $nicA;$upper 10.200.2.21:3260,1 $nicB"
# eth1's sessions are FAILED in the capture: they exist, so they cover their
# (target, portal, NIC) and are never "missing", but they are reported as down.
check "eth1's FAILED sessions are reported, not counted as missing" \
  test "$(j '[.sessions_not_logged_in[] | "\(.session) \(.state) \(.nic)"] | join(";")')" = \
  "session1 FAILED eth1;session3 FAILED eth1"
check "summary: probes, failed, targets, missing, not logged in" \
  test "$(j '[.summary | .probes, .failed, .targets, .missing, .not_logged_in] | join(",")')" = "12,10,2,4,2"

# A smaller run as text, with a kernel that has no sessions at all.
mkdir -p "$work/none-sysfs"
rc=0
discover "$work/all.txt" --timeout 1500ms --portal 10.200.1.20 --portal 10.200.1.22 \
  --nic "$nicA" --sysfs-root "$work/none-sysfs" || rc=$?
check "text: exit 2" test "$rc" = 2
check "text: OK line with the target count" grep -q "^$nicA -> 10.200.1.20:3260: OK, 2 targets ([0-9]* ms)$" "$work/all.txt"
check "text: target -> advertised portals" grep -qx "    $upper -> 10.200.1.20:3260,1" "$work/all.txt"
check "text: the timeout in one line" grep -q "^$nicA -> 10.200.1.22:3260: FAILED (timeout) after 1[0-9]* ms: portal 10.200.1.22:3260 via $nicA did not answer within 1500 ms (no TCP connection)$" "$work/all.txt"
check "text: missing paths listed" grep -qx "    $lower via 10.200.1.20:3260,1 from $nicA" "$work/all.txt"
check "text: summary" grep -qx "Summary: 2 probes, 1 failed; 2 targets found; 2 missing paths; 0 sessions not logged in" "$work/all.txt"

# --- 2. a kernel whose sessions cover everything: exit 0 --------------------
# The xserve capture (4 sessions, all LOGGED_IN), rewritten so that all of
# them go to the fixture's portal A through NIC A: sessions 1 and 2 to
# "upper", 3 and 4 to "lower". No --portal and no --nic: both come from the
# sessions, so discover makes exactly one probe.
cp -a "$src/tests/data/sysfs/xserve" "$work/sysfs"
for n in 1 2 3 4; do
  session=$(readlink -f "$work/sysfs/class/iscsi_session/session$n")
  connection=$(readlink -f "$work/sysfs/class/iscsi_connection/connection$n:0")
  host=$(readlink -f "$work/sysfs/class/iscsi_host/host$((n - 1))")
  if ((n <= 2)); then echo "$upper" >"$session/targetname"; else echo "$lower" >"$session/targetname"; fi
  echo 10.200.1.20 >"$connection/persistent_address"
  echo "$nicA" >"$host/netdev"
done
rc=0
discover "$work/covered.json" --json --timeout 2s --sysfs-root "$work/sysfs" || rc=$?
c() { jq -r "$1" "$work/covered.json"; }
check "covered: exit 0" test "$rc" = 0
check "covered: NIC and portal from the sessions" \
  test "$(c '"\(.nic_source) \(.nics | join(",")) \(.portals | join(","))"')" = "sessions $nicA 10.200.1.20:3260"
check "covered: one probe, OK" test "$(c '[.probes[] | "\(.nic) \(.portal) \(.ok)"] | join(";")')" = "$nicA 10.200.1.20:3260 true"
check "covered: nothing missing, all logged in" \
  test "$(c '"\(.missing_paths | length) \(.sessions_not_logged_in | length) \(.exit_status)"')" = "0 0 0"

# --- 3. the same kernel without its "lower" sessions: exit 2, lower missing -
for n in 3 4; do
  echo iqn.2024-01.org.pathkeeper.test:gone >"$(readlink -f "$work/sysfs/class/iscsi_session/session$n")/targetname"
done
rc=0
discover "$work/lower.json" --json --timeout 2s --sysfs-root "$work/sysfs" || rc=$?
check "lower gone: exit 2" test "$rc" = 2
check "lower gone: the probe itself is fine" test "$(jq -r '.summary.failed' "$work/lower.json")" = 0
check "lower gone: exactly lower via A from NIC A is missing" \
  test "$(jq -r '[.missing_paths[] | "\(.target) \(.portal) \(.nic)"] | join(";")' "$work/lower.json")" = \
  "$lower 10.200.1.20:3260,1 $nicA"

check_summary
