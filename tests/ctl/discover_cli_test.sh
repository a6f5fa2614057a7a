#!/usr/bin/env bash
# pathkeeperctl discover without a network: usage and configuration errors
# (exit 1, nothing probed), and the JSON report of probes that fail before
# they send a packet (a NIC that does not exist) or at once (a closed port on
# loopback), against the captured xserve-failed sysfs tree. The real probes
# against a real target are tests/host/discover_host_test.sh.
# usage: discover_cli_test.sh PATHKEEPERCTL SOURCE_DIR
set -euo pipefail
ctl=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/../common/check.sh"
# fails_with DESCRIPTION STATUS MESSAGE ARGS...: discover exits STATUS and says MESSAGE on stderr.
fails_with() {
  local description=$1 status=$2 message=$3 rc=0
  shift 3
  "$ctl" discover "$@" >"$work/out" 2>"$work/err" || rc=$?
  if [[ $rc != "$status" ]]; then
    echo "FAIL: $description: exit $rc, expected $status; stderr:"
    cat "$work/err"
    failures=$((failures + 1))
  elif ! grep -qF -- "$message" "$work/err"; then
    echo "FAIL: $description: stderr lacks '$message':"
    cat "$work/err"
    failures=$((failures + 1))
  elif [[ -s $work/out ]]; then
    echo "FAIL: $description: printed a report although it failed"
    failures=$((failures + 1))
  else
    echo "ok: $description"
    passes=$((passes + 1))
  fi
}

none=(--config "$work/none.conf" --config-dir "$work/none.d" --sysfs-root "$work/empty-sysfs")
name=(--initiator-name iqn.2024-01.org.pathkeeper.test:cli:pathkeeper-probe)
mkdir -p "$work/empty-sysfs"

# --- usage errors: exit 1 before anything is read or probed
fails_with "portal with a bad port" 1 '--portal: expected "address", "address:port" or "[ipv6]:port", got "10.200.1.20:99999"' \
  --portal 10.200.1.20:99999 "${none[@]}"
fails_with "portal given as a host name" 1 '--portal: "san.example.com" names a host' \
  --portal san.example.com "${none[@]}"
fails_with "IPv6 portal without brackets around it and a port" 1 '--portal: expected' \
  --portal '[fd00::20' "${none[@]}"
fails_with "NIC with a slash" 1 '--nic: discovery.nics: "eth/1" is not a network interface name' \
  --nic eth/1 --portal 10.200.1.20 "${none[@]}"
fails_with "NIC longer than IFNAMSIZ" 1 '--nic: discovery.nics: "abcdefghijklmnop" is longer than 15 characters' \
  --nic abcdefghijklmnop --portal 10.200.1.20 "${none[@]}"
fails_with "one NIC twice" 1 '--nic: discovery.nics: duplicate NIC "eth1"' \
  --nic eth1 --nic eth1 --portal 10.200.1.20 "${none[@]}"
fails_with "one portal twice in two spellings" 1 '--portal: discovery.portals: duplicate portal "10.200.1.20:3260"' \
  --portal 10.200.1.20 --portal 10.200.1.20:3260 "${none[@]}"
fails_with "timeout that is no duration" 1 '--timeout: expected a duration such as "1500ms" or "5s", got '"'"'5x'"'" \
  --timeout 5x --portal 10.200.1.20 "${none[@]}"
fails_with "timeout out of range" 1 '--timeout: discovery.probe_timeout: must be between 100ms and 5m, got 10m' \
  --timeout 10m --portal 10.200.1.20 "${none[@]}"
fails_with "initiator name that is no iSCSI name" 1 '--initiator-name: discovery.initiator_name:' \
  --initiator-name host1 --portal 10.200.1.20 "${none[@]}"
fails_with "unknown option" 1 "unknown option '--portals' for discover" --portals 10.200.1.20
fails_with "option without its value" 1 "--nic needs a value" --portal 10.200.1.20 --nic
fails_with "nothing to probe" 1 "no portal to probe: give --portal, set [discovery] portals" "${none[@]}" "${name[@]}"

# --- configuration errors: file:line:column: key: reason, exit 1
printf '[discovery]\nportals = ["10.10.1.20"]\nprobe_timout = "2s"\n' >"$work/typo.conf"
fails_with "unknown [discovery] key names file, line and column" 1 \
  "$work/typo.conf:3:1: discovery.probe_timout: unknown key in [discovery]" \
  --config "$work/typo.conf" --config-dir "$work/none.d" --sysfs-root "$work/empty-sysfs"
printf '[discovery]\nnics = ["eth1", "eth 2"]\n' >"$work/nic.conf"
fails_with "bad NIC in the config names the element" 1 \
  "$work/nic.conf:2:17: discovery.nics[2]: \"eth 2\" is not a network interface name" \
  --config "$work/nic.conf" --config-dir "$work/none.d" --sysfs-root "$work/empty-sysfs"
printf '[discovery]\nprobe_interval = "2s"\nprobe_timeout = "3s"\n' >"$work/cross.conf"
fails_with "probe_timeout longer than probe_interval" 1 \
  "$work/cross.conf:3:17: discovery.probe_timeout: 3s exceeds discovery.probe_interval (2s)" \
  --config "$work/cross.conf" --config-dir "$work/none.d" --sysfs-root "$work/empty-sysfs" --timeout 1s
mkdir -p "$work/conf.d"
printf '[discovery]\nportals = ["[fe80::1]:3260", "fe80::1"]\n' >"$work/conf.d/50-dup.conf"
fails_with "duplicate portal in a drop-in names the drop-in" 1 \
  "$work/conf.d/50-dup.conf:2:30: discovery.portals[2]: duplicate portal \"[fe80::1]:3260\" (already element 1)" \
  --config "$work/none.conf" --config-dir "$work/conf.d" --sysfs-root "$work/empty-sysfs"

# --- probes that fail without touching a network. A NIC that does not exist
# fails each probe before it connects; the sessions' portals of the capture
# are probed although no --portal names them.
rc=0
"$ctl" discover --json --nic pk-no-such-nic --sysfs-root "$src/tests/data/sysfs/xserve-failed" \
  --config "$work/none.conf" --config-dir "$work/none.d" "${name[@]}" --timeout 2s \
  >"$work/failed.json" 2>"$work/failed.err" || rc=$?
j() { jq -r "$1" "$work/failed.json"; }
check "failed probes exit 2" test "$rc" = 2
check "schema is 1" test "$(j .schema)" = 1
check "the sessions' portals are probed" test "$(j '.portals | join(",")')" = "10.10.1.20:3260,10.10.1.21:3260"
check "from the given NIC" test "$(j '.nics | join(",")'),$(j .nic_source)" = "pk-no-such-nic,--nic"
check "timeout and initiator name as given" \
  test "$(j .timeout_ms),$(j .initiator_name)" = "2000,iqn.2024-01.org.pathkeeper.test:cli:pathkeeper-probe"
check "two probes, both failed" test "$(j '[.probes[].ok] | join(",")')" = "false,false"
check "error kind no-nic" test "$(j '[.probes[].error_kind] | unique | join(",")')" = "no-nic"
check "error names portal and NIC" \
  test "$(j '.probes[0].error')" = 'portal 10.10.1.20:3260 via pk-no-such-nic: network interface "pk-no-such-nic" does not exist'
check "nothing found, so nothing missing" test "$(j '.missing_paths | length')" = 0
# eth1's two sessions are FAILED in the capture: they exist, so their paths
# are not missing, but they are down.
check "eth1's sessions are not logged in" \
  test "$(j '[.sessions_not_logged_in[] | "\(.session) \(.state) \(.nic) \(.portal)"] | join(";")')" = \
  "session1 FAILED eth1 10.10.1.20:3260,1;session3 FAILED eth1 10.10.1.20:3260,1"
check "summary counts" test "$(j '[.summary.probes, .summary.failed, .summary.targets, .summary.missing, .summary.not_logged_in] | join(",")')" = "2,2,0,0,2"
check "exit_status in the document" test "$(j .exit_status)" = 2
check "JSON mode keeps stderr clean" test ! -s "$work/failed.err"

# The same in text: one line per probe, the missing paths, the sessions.
"$ctl" discover --nic pk-no-such-nic --sysfs-root "$src/tests/data/sysfs/xserve-failed" \
  --config "$work/none.conf" --config-dir "$work/none.d" "${name[@]}" >"$work/failed.txt" 2>&1 || true
check "text: a FAILED line per probe with its kind" \
  test "$(grep -c '^pk-no-such-nic -> 10\.10\.1\.2[01]:3260: FAILED (no-nic) after [0-9]* ms: portal' "$work/failed.txt")" = 2
check "text: no missing path" grep -qx 'Expected but missing paths: none' "$work/failed.txt"
check "text: session1 listed as FAILED" grep -q '^    session1 (FAILED): iqn.1987-05.com.cisco:05.mds-gw.02-01.5000393000a1b001 via 10.10.1.20:3260,1 from eth1$' "$work/failed.txt"
check "text: summary line" grep -qx 'Summary: 2 probes, 2 failed; 0 targets found; 0 missing paths; 2 sessions not logged in' "$work/failed.txt"

# [discovery] supplies portals and NICs when the command line does not; a
# configured portal that a session also uses is probed once.
printf '[discovery]\nportals = ["10.10.1.21", "[fd00::20]:3261"]\nnics = ["pk-none-a", "pk-none-b"]\nprobe_timeout = "3s"\n' >"$work/discovery.conf"
rc=0
"$ctl" discover --json --sysfs-root "$src/tests/data/sysfs/xserve-failed" --config "$work/discovery.conf" \
  --config-dir "$work/none.d" "${name[@]}" >"$work/config.json" 2>"$work/config.err" || rc=$?
g() { jq -r "$1" "$work/config.json"; }
check "config: exit 2" test "$rc" = 2
check "config: its portals first, then the sessions' others, each once" \
  test "$(g '.portals | join(",")')" = "10.10.1.21:3260,[fd00::20]:3261,10.10.1.20:3260"
check "config: its NICs" test "$(g '.nics | join(",")'),$(g .nic_source)" = "pk-none-a,pk-none-b,config"
check "config: its timeout" test "$(g .timeout_ms)" = 3000
check "config: every NIC probes every portal" test "$(g '.probes | length')" = 6
# --portal and --nic replace the configured lists.
"$ctl" discover --json --portal 10.10.1.20:3260 --nic pk-none-c --sysfs-root "$src/tests/data/sysfs/xserve-failed" \
  --config "$work/discovery.conf" --config-dir "$work/none.d" "${name[@]}" >"$work/override.json" 2>/dev/null || true
check "--portal and --nic replace the config's lists" \
  test "$(jq -r '"\(.portals | join(",")) \(.nics | join(",")) \(.nic_source)"' "$work/override.json")" = \
  "10.10.1.20:3260,10.10.1.21:3260 pk-none-c --nic"

# A closed port on loopback refuses at once; routing picks the NIC when
# neither the command line, the config nor a session names one.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rc=0
"$ctl" discover --json --portal "127.0.0.1:$port" "${none[@]}" "${name[@]}" >"$work/refused.json" || rc=$?
k() { jq -r "$1" "$work/refused.json"; }
check "refused probe exits 2" test "$rc" = 2
check "unbound probe: nic null, source routing" test "$(k '.probes[0].nic'),$(k .nic_source)" = "null,routing"
check "refused is reported as such" test "$(k '.probes[0].error_kind')" = refused

check_summary
