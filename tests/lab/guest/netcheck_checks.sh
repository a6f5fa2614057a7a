# Network check in the daemon (issue #8, VM tests vm_xserve_netcheck and
# vm_bonded_netcheck). Functions are prefixed nc_. Builds on daemon.sh (pd_*).
#
# xserve with routing=none is the seed's mistake: both NICs on one /24 and no
# per-NIC routes. open-iscsi binds each session's socket to its NIC
# (SO_BINDTODEVICE; software iSCSI cannot bind by address alone), so the
# sessions' own segments leave by their NIC, but everything else that
# carries eth2's address (ARP, discovery or tools bound by address, replies
# outside the socket) leaves by eth1. pathkeeperd must say so, on D-Bus and
# in the paths' notes, and notice by itself (netlink) when the admin applies
# the fix; then each NIC carries its own traffic.

# nc_finding_count ID: findings of kind ID in the daemon's state file.
nc_finding_count() { jq --arg id "$1" '[.findings[] | select(.id == $id)] | length' "$PD_STATE"; }
nc_has_finding() { [[ -s $PD_STATE && $(nc_finding_count "$1") -ge 1 ]]; }
nc_no_findings() { [[ -s $PD_STATE && $(jq '.findings | length' "$PD_STATE") -eq 0 ]]; }
nc_no_finding_objects() { [[ $(busctl --system --list tree org.pathkeeper.PathKeeper1) != */findings/* ]]; }
nc_tx() { cat "/sys/class/net/$1/statistics/tx_bytes"; }

# nc_ping_leaves_by SOURCE NIC: 200 pings of 1400 bytes to the eth2 portal,
# bound to SOURCE by address only (as a tool or discovery without an iface
# is), leave by NIC; the other NIC sends less than a tenth of that.
nc_ping_leaves_by() {
    local a1 a2 d1 d2 want=$((200 * 1400))
    a1=$(nc_tx eth1)
    a2=$(nc_tx eth2)
    busybox ping -q -c 200 -s 1400 -i 0.01 -W 5 -I "$1" 10.10.1.21 >/dev/null || return 1
    d1=$(($(nc_tx eth1) - a1))
    d2=$(($(nc_tx eth2) - a2))
    lab_log "pings from $1: eth1 sent $d1 bytes, eth2 sent $d2 bytes"
    if [[ $2 == eth1 ]]; then ((d1 >= want && d2 < want / 10)); else ((d2 >= want && d1 < want / 10)); fi
}

# nc_write_via SD MB: direct writes to SD near its end (away from anything
# the maps' other tests use); prints "eth1_delta eth2_delta" in bytes.
nc_write_via() {
    local sd=$1 mb=$2 a1 a2 seek
    seek=$(($(blockdev --getsize64 "/dev/$sd") / 1048576 - mb - 8))
    a1=$(nc_tx eth1)
    a2=$(nc_tx eth2)
    dd if=/dev/urandom of="/dev/$sd" bs=1M count="$mb" seek="$seek" oflag=direct status=none
    echo "$(($(nc_tx eth1) - a1)) $(($(nc_tx eth2) - a2))"
}

# nc_leaves_by SD NIC MB: MB written through SD went out of NIC (at least
# MB of its TX), and the other NIC carried less than a tenth of it.
nc_leaves_by() {
    local sd=$1 nic=$2 mb=$3 d1 d2 want=$(($3 * 1048576))
    read -r d1 d2 < <(nc_write_via "$sd" "$mb")
    lab_log "$mb MiB written to $sd: eth1 sent $d1 bytes, eth2 sent $d2 bytes"
    if [[ $nic == eth1 ]]; then
        ((d1 >= want && d2 < want / 10))
    else
        ((d2 >= want && d1 < want / 10))
    fi
}

nc_session_sd() {  # nc_session_sd PORTAL CONTROLLER: the sd through that portal
    ini_sdev_for "${XS_PWWN[$2]}" "$1"
}

nc_xserve() {
    local daemon=$1 ctl=$2 sd1 sd2 note
    pk_mask_multipath_uevent_check
    pd_write_config service-time
    lab_step "netcheck 1: the seed's routing mistake, seen by pathkeeperd"
    ip route show
    ip rule show
    pd_start "$daemon"
    lab_wait 60 "pathkeeperd ready" pd_ready
    lab_wait 30 "xserve-upper and xserve-lower, 2 paths each" pd_maps_present
    lab_wait 30 "an unbound-egress finding in the daemon's state" nc_has_finding unbound-egress
    jq '.findings[] | {key, id, severity, summary, nics, portals, paths}' "$PD_STATE"
    lab_check "the finding names eth2 as bound and eth1 as where it leaves" \
        test "$(jq -r '.findings[] | select(.id == "unbound-egress") | .nics | join(">")' "$PD_STATE")" = "eth2>eth1"
    lab_check "and the shared subnet without policy routing" nc_has_finding shared-subnet
    lab_check "the daemon logged the finding with its fix" pd_log_has "network check: traffic bound to eth2 leaves via eth1"
    sd1=$(nc_session_sd 10.10.1.20 upper)
    sd2=$(nc_session_sd 10.10.1.21 upper)
    lab_log "upper: $sd1 via 10.10.1.20 (eth1's address), $sd2 via 10.10.1.21 (eth2's address)"
    note=$(pd_path_field "$sd2" note)
    lab_log "$sd2's note: $note"
    lab_check "$sd2's note: its traffic leaves via eth1 although bound to eth2" \
        test "${note%% (*}" = "its traffic leaves via eth1 although bound to eth2"
    lab_log "$sd1's note: $(pd_path_field "$sd1" note)"
    lab_check "$sd1's note does not blame its egress (its traffic is where it belongs)" \
        not grep -q "leaves via" <<<"$(pd_path_field "$sd1" note)"

    lab_step "netcheck 2: on D-Bus"
    busctl --system tree org.pathkeeper.PathKeeper1 | grep findings || true
    local obj
    obj=$(busctl --system --list tree org.pathkeeper.PathKeeper1 | grep '/findings/unbound_2degress' | head -1)
    lab_check "a Finding object for unbound-egress ($obj)" test -n "$obj"
    lab_check "its Summary over busctl" test "$(busctl --system get-property org.pathkeeper.PathKeeper1 "$obj" \
        org.pathkeeper.PathKeeper1.Finding Summary)" = 's "traffic bound to eth2 leaves via eth1"'
    lab_check "its Fix has commands" test "$(busctl --system --json=short get-property org.pathkeeper.PathKeeper1 "$obj" \
        org.pathkeeper.PathKeeper1.Finding Fix | jq '.data | length')" -ge 1
    lab_check "$sd2's Note over busctl" grep -q "leaves via eth1 although bound to eth2" \
        <(busctl --system get-property org.pathkeeper.PathKeeper1 "/org/pathkeeper/PathKeeper1/paths/$sd2" \
            org.pathkeeper.PathKeeper1.Path Note)

    lab_step "netcheck 3: the interface counters agree"
    lab_check "traffic with eth2's address (10.10.1.11) leaves by eth1" nc_ping_leaves_by 10.10.1.11 eth1

    lab_step "netcheck 4: the admin applies doctor's fix; the daemon notices by itself"
    dc_monitor_start
    "$ctl" doctor --fix-script >"$LAB_RUN/fix.sh" || true
    lab_save fix.sh "$LAB_RUN/fix.sh"
    lab_check "the fix script runs" sh "$LAB_RUN/fix.sh"
    ip rule show
    lab_wait 30 "the unbound-egress finding is gone from the daemon's state" \
        not nc_has_finding unbound-egress
    lab_wait 30 "no finding left" nc_no_findings
    lab_check "the daemon logged the resolution" pd_log_has "network check: resolved"
    lab_wait 10 "InterfacesRemoved for the Finding object on the bus" \
        grep -q '"member":"InterfacesRemoved".*findings' "$DC_MON"
    kill "$DC_MON_PID" 2>/dev/null || true
    lab_check "the Finding objects left the bus" nc_no_finding_objects
    lab_check "$sd2's note is empty again" test -z "$(pd_path_field "$sd2" note)"
    lab_check "traffic with eth2's address now leaves by eth2" nc_ping_leaves_by 10.10.1.11 eth2
    lab_check "16 MiB written through $sd2 (eth2's session) leave by eth2" nc_leaves_by "$sd2" eth2 16
    lab_check "16 MiB written through $sd1 (eth1's session) leave by eth1" nc_leaves_by "$sd1" eth1 16
    lab_check "4 sessions LOGGED_IN" test "$(ini_sessions_in_state LOGGED_IN)" -eq 4
    lab_check "pathkeeperd exits on SIGTERM" pd_stop
    lab_save pathkeeperd.log "$PD_LOG"
}

# In `bonded`, the seed's final setup: one address on a balance-alb bond.
nc_bonded() {
    local daemon=$1 ctl=$2
    pk_mask_multipath_uevent_check
    pd_write_config service-time
    lab_step "netcheck: the bonded setup"
    pd_start "$daemon"
    lab_wait 60 "pathkeeperd ready" pd_ready
    lab_wait 30 "xserve-upper and xserve-lower, 2 paths each" pd_maps_present
    lab_wait 30 "the daemon ran its network check on the sessions' bindings" \
        pd_log_has "network check #[0-9]*: [1-9][0-9]* binding(s)"
    grep "network check" "$PD_LOG" || true
    lab_check "the daemon has no network finding" nc_no_findings
    "$ctl" doctor --json >"$LAB_RUN/doctor.json" || true
    lab_save doctor.json "$LAB_RUN/doctor.json"
    lab_check "doctor recognises bond0 as balance-alb" \
        test "$(jq -r '.nics[] | select(.name == "bond0") | .bond.mode' "$LAB_RUN/doctor.json")" = balance-alb
    lab_check "doctor lists eth1 and eth2 as its slaves" \
        test "$(jq -r '.nics[] | select(.name == "bond0") | .bond.slaves | sort | join(" ")' "$LAB_RUN/doctor.json")" = "eth1 eth2"
    lab_check "doctor has no finding (exit 0)" "$ctl" doctor
    lab_check "pathkeeperd exits on SIGTERM" pd_stop
    lab_save pathkeeperd.log "$PD_LOG"
}
