# xserve: the seed's setup. An Apple Xserve RAID with two independent
# controllers, `upper` and `lower`, each owning one LUN, behind a Cisco MDS
# iSCSI gateway with two portals. The MDS names each (portal, FC target port)
# pair as its own target, so each controller shows up under two IQNs.
# The initiator has eth1 and eth2 on one /24, one iscsiadm iface per NIC:
# iface0/eth1 -> portal 10.10.1.20, iface1/eth2 -> 10.10.1.21; 4 sessions.
#
# args: routing=policy|host32|none (default policy)
#       smoke    dm-multipath by hand: I/O, cut eth1, failover, restore
#       failed   cut eth1 and leave its sessions FAILED (for a capture)
#       grammar  pathkeeper's tables in the real kernel (needs ctl= and tool=)
#       plan     pathkeeperctl plan --json vs multipath -v3 -d (needs ctl=)
#       faults   every fault helper once, each checked and undone
#       daemon   pathkeeperd owns the maps: failover, event-driven reinstatement,
#                flap damping, SIGHUP, kill -9 and adoption (needs daemon=)
#       companion  multipathd owns the maps, pathkeeperd follows (needs daemon=)
#       dbus     pathkeeperd over D-Bus (status, busctl monitor, fail-path), then
#                multipathd from `export multipath-conf` (needs daemon= and ctl=)
#       daemon-demo  the README's demo with pathkeeperd (needs daemon=)
#       dmadapter  the libdevmapper adapter on the real kernel (needs tool=)
#       netcheck pathkeeperd's network check: with routing=none an
#                unbound-egress finding, counters, the fix (needs daemon= and ctl=)
#       adaptive pathkeeperd's relative_throughput = "auto" on 40+10 Mbit/s
#                htb-shaped links under fio, then unshaped (needs daemon=)
#       bench-adaptive  issue #9's benchmark: round-robin, queue-length,
#                service-time, auto on 40+10 and 40+40 Mbit/s, reads and
#                writes (needs daemon=; runs=N, default 3; window=SECS,
#                default 20; links=40+10,40+40; selectors=a,b: a subset
#                of round-robin,queue-length,service-time,auto,auto-now;
#                load=steady|bursty)
#       systemd  the installed package under systemd as PID 1: udev starts
#                pathkeeperd.service, reload, stop (needs lab run --systemd
#                and deb=; the .deb is installed before the logins)
#       ctl=PATH pathkeeperctl; tool=PATH a check tool; daemon=PATH pathkeeperd

XS_SWITCH=mds-gw
declare -A XS_PWWN=([upper]=5000393000a1b001 [lower]=5000393000a1b002)
declare -A XS_SERIAL=([upper]=0393a1b00100 [lower]=0393a1b00200)
declare -A XS_SLOTPORT=([10.10.1.20]=02-01 [10.10.1.21]=02-02)
declare -A XS_IFACE=([10.10.1.20]=iface0 [10.10.1.21]=iface1)
XS_LUN_MB=256

# xs_iqn CONTROLLER PORTAL: the MDS dynamic-mapping target name.
xs_iqn() { echo "iqn.1987-05.com.cisco:05.$XS_SWITCH.${XS_SLOTPORT[$2]}.${XS_PWWN[$1]}"; }

# The array and the gateway, in the target namespace.
xs_target() {
    tgt_init
    local c p
    for c in upper lower; do
        tgt_backstore "xserve_$c" "$XS_LUN_MB" "${XS_SERIAL[$c]}" APPLE "Xserve RAID" 1.50
        for p in "${NET_PORTALS[@]}"; do
            tgt_target "$(xs_iqn "$c" "$p")" "$p"
            tgt_lun "$(xs_iqn "$c" "$p")" 0 "xserve_$c"
            tgt_enable "$(xs_iqn "$c" "$p")"
        done
    done
    tgt_show
}

# xs_login IFACE_FOR_PORTAL...: 2 controllers x 2 portals.
xs_login_all() {
    local c p
    for c in upper lower; do
        for p in "${NET_PORTALS[@]}"; do
            ini_login "$(xs_iqn "$c" "$p")" "$p" "${1:-${XS_IFACE[$p]}}"
        done
    done
}

xs_arg() {  # xs_arg NAME DEFAULT ARGS...: value of NAME=... in the args
    local name=$1 def=$2 a; shift 2
    for a; do [[ $a == "$name="* ]] && { echo "${a#*=}"; return; }; done
    echo "$def"
}

scenario_setup() {
    net_setup_two_nics "$(xs_arg routing policy "$@")"
    lab_check "both portals answer ping" net_ping_portals
    xs_target
    ini_setup
    ini_iface iface0 eth1
    # iface1 by eth2's hardware address, as many installations bind: the
    # daemon must find eth2 itself (its probes, its network check).
    ini_iface_by_mac iface1 eth2
    local deb
    deb=$(xs_arg deb "" "$@")
    [[ -z $deb ]] || sy_install_deb "$deb"
    xs_login_all
    ini_wait_paths 4
}

# xs_bound_by_mac: iface1's two sessions are bound by eth2's hardware
# address, and their iscsi_hosts do not name eth2 (the daemon must).
xs_bound_by_mac() {
    local mac host n=0
    mac=$(</sys/class/net/eth2/address)
    for host in /sys/class/iscsi_host/host*; do
        [[ $(<"$host/hwaddress") == "$mac" ]] || continue
        lab_log "$(basename "$host"): hwaddress $mac, netdev '$(<"$host/netdev")'"
        [[ $(<"$host/netdev") != eth2 ]] || return 1
        n=$((n + 1))
    done
    ((n == 2))
}

# The basic checks every xserve boot makes.
xs_check_basics() {
    local paths
    paths=$(ini_paths)
    printf '%s\n' "$paths" | lab_save xserve-paths.txt
    lab_check "4 iSCSI sessions" test "$(ini_session_count)" -eq 4
    lab_check "4 sessions LOGGED_IN" test "$(ini_sessions_in_state LOGGED_IN)" -eq 4
    lab_check "4 sd devices" test "$(printf '%s\n' "$paths" | grep -c '^sd')" -eq 4
    lab_check "2 distinct WWIDs" test "$(printf '%s\n' "$paths" | awk '{print $7}' | sort -u | wc -l)" -eq 2
    lab_check "4 distinct target names" test "$(printf '%s\n' "$paths" | awk '{print $4}' | sort -u | wc -l)" -eq 4
    local sd
    for sd in $(printf '%s\n' "$paths" | awk '{print $1}'); do
        lab_check "$sd is APPLE Xserve RAID" \
            test "$(xargs </sys/block/$sd/device/vendor)/$(xargs </sys/block/$sd/device/model)" = "APPLE/Xserve RAID"
    done
    # Each controller's LUN: one WWID, reached through both portals.
    local c
    for c in upper lower; do
        lab_check "$c: one WWID through both portals" \
            test "$(printf '%s\n' "$paths" | awk -v w="${XS_PWWN[$c]}" 'index($4, w) {print $7}' | sort -u | wc -l)" -eq 1
    done
}

scenario_run() {
    xs_check_basics
    # Here, not in xs_check_basics: the bonded scenario shares those.
    lab_check "iface1's 2 sessions are bound by eth2's hardware address alone" xs_bound_by_mac
    local a
    for a; do
        case $a in
        smoke) xs_smoke ;;
        failed) xs_failed ;;
        grammar) pk_grammar_variants "$(xs_arg ctl "" "$@")" "$(xs_arg tool "" "$@")" ;;
        plan) pc_xserve_plan "$(xs_arg ctl "" "$@")" ;;
        faults) xs_faults ;;
        daemon) pd_owner "$(xs_arg daemon "" "$@")" ;;
        companion) pd_companion "$(xs_arg daemon "" "$@")" ;;
        dbus) dc_run "$(xs_arg daemon "" "$@")" "$(xs_arg ctl "" "$@")" ;;
        daemon-demo) pd_demo "$(xs_arg daemon "" "$@")" "$(xs_arg ctl "" "$@")" ;;
        dmadapter) source "$LAB_DIR/guest/dm_adapter.sh" && dma_run "$(xs_arg tool "" "$@")" ;;
        systemd) sy_run ;;
        netcheck) nc_xserve "$(xs_arg daemon "" "$@")" "$(xs_arg ctl "" "$@")" ;;
        adaptive) ad_run "$(xs_arg daemon "" "$@")" ;;
        bench-adaptive)
            source "$LAB_DIR/guest/bench_adaptive.sh"
            BENCH_AD_SELECTORS=$(xs_arg selectors "$BENCH_AD_SELECTORS" "$@" | tr , ' ')
            BENCH_AD_LOAD=$(xs_arg load steady "$@")
            [[ $BENCH_AD_LOAD == steady || $BENCH_AD_LOAD == bursty ]] ||
                lab_fail "load=$BENCH_AD_LOAD: steady or bursty"
            # The bursts' shape: burst=N requests, then think=DURATION (fio's).
            BENCH_AD_BURST=$(xs_arg burst "$BENCH_AD_BURST" "$@")
            BENCH_AD_THINK=$(xs_arg think "$BENCH_AD_THINK" "$@")
            [[ $BENCH_AD_BURST =~ ^[1-9][0-9]*$ ]] || lab_fail "burst=$BENCH_AD_BURST: a count of requests"
            [[ $BENCH_AD_THINK =~ ^[0-9]+(us|ms|s)$ ]] || lab_fail "think=$BENCH_AD_THINK: e.g. 250ms or 1s"
            # shellcheck disable=SC2046 # links=40+10,40+40: one word per set
            bench_adaptive "$(xs_arg daemon "" "$@")" "$(xs_arg runs 3 "$@")" "$(xs_arg window 20 "$@")" \
                $(xs_arg links "40+10,40+40" "$@" | tr , ' ')
            ;;
        bench) bench_xserve "$(xs_arg daemon "" "$@")" "$(xs_arg runs 3 "$@")" ;;
        # script=FILE: a guest script of your own, sourced after the setup
        # with every helper loaded (for experiments; see tests/lab/README.md).
        script) source "$(xs_arg script "" "$@")" ;;
        esac
    done
}

# Leaves eth1 down and its two sessions FAILED.
xs_failed() {
    lab_step "failed: cut eth1 until its sessions are FAILED"
    # A session stays FAILED only for recovery_tmo (replacement_timeout, 5 s
    # here) and then shows FREE while iscsid retries; give the eth1 sessions
    # a long recovery_tmo so that the capture sees FAILED.
    local p
    for p in $(ini_paths | awk '$6 == "iface0" {print $2}'); do
        echo 300 >"/sys/class/iscsi_session/$p/recovery_tmo"
    done
    fault_link_cut eth1
    ini_trace_states 30 &
    local trace=$!
    lab_wait 60 "2 sessions FAILED" ini_sessions_are 2 FAILED
    lab_check "2 sessions still LOGGED_IN" test "$(ini_sessions_in_state LOGGED_IN)" -eq 2
    ini_paths
    kill "$trace" 2>/dev/null || true
}

# --- smoke: dm-multipath by hand ------------------------------------------

XS_MAP=xs-upper

dm_path_state() {  # dm_path_state MAP MAJ:MIN -> A or F
    dmsetup status "$1" | awk -v d="$2" '{ for (i = 1; i < NF; i++) if ($i == d) { print $(i + 1); exit } }'
}

xs_io_check() {  # xs_io_check PATTERN OFFSET_MB: read back and compare sha256
    local pat=$1 off=$2 mb want got
    mb=$(($(stat -c %s "$pat") / 1048576))
    want=$(sha256sum <"$pat" | cut -d' ' -f1)
    got=$(dd if="/dev/mapper/$XS_MAP" bs=1M skip="$off" count="$mb" iflag=direct status=none | sha256sum | cut -d' ' -f1)
    lab_log "sha256 want $want got $got"
    [[ $want == "$got" ]]
}

xs_path_is() { [[ $(dm_path_state "$XS_MAP" "$1") == "$2" ]]; }
xs_passes_above() { (($(<"$LAB_RUN/passes") >= $1)); }

# xs_writer PATTERN OFFSET_MB: rewrite the pattern until $LAB_RUN/stop exists;
# counts finished passes in $LAB_RUN/passes; exits non-zero on a failed write.
xs_writer() {
    local n=0
    while [[ ! -e $LAB_RUN/stop ]]; do
        dd if="$1" of="/dev/mapper/$XS_MAP" bs=1M seek="$2" oflag=direct conv=fsync status=none || {
            lab_log "writer: pass $((n + 1)) failed"
            return 1
        }
        n=$((n + 1))
        echo "$n" >"$LAB_RUN/passes"
    done
}

xs_smoke() {
    lab_step "smoke 1: one multipath map by hand (round-robin, both paths of upper)"
    local sd_a sd_b dev_a dev_b size wwid
    sd_a=$(ini_sdev_for "${XS_PWWN[upper]}" 10.10.1.20)
    sd_b=$(ini_sdev_for "${XS_PWWN[upper]}" 10.10.1.21)
    lab_check "upper has a path via each portal ($sd_a, $sd_b)" test -n "$sd_a" -a -n "$sd_b" -a "$sd_a" != "$sd_b"
    dev_a=$(cat "/sys/block/$sd_a/dev")
    dev_b=$(cat "/sys/block/$sd_b/dev")
    wwid=$(cat "/sys/block/$sd_a/device/wwid")
    lab_check "both paths have the same WWID ($wwid)" test "$wwid" = "$(cat "/sys/block/$sd_b/device/wwid")"
    size=$(blockdev --getsz "/dev/$sd_a")
    local table="0 $size multipath 0 0 1 1 round-robin 0 2 1 $dev_a 1 $dev_b 1"
    lab_log "table: $table"
    lab_check "dmsetup create $XS_MAP" dmsetup create "$XS_MAP" --table "$table"
    udevadm settle --timeout=20 || true
    [[ -b /dev/mapper/$XS_MAP ]] || dmsetup mknodes "$XS_MAP"
    lab_check "/dev/mapper/$XS_MAP exists" test -b "/dev/mapper/$XS_MAP"
    dmsetup table "$XS_MAP"
    dmsetup status "$XS_MAP"
    lab_check "both paths active" test "$(dm_path_state "$XS_MAP" "$dev_a")$(dm_path_state "$XS_MAP" "$dev_b")" = AA

    lab_step "smoke 2: checksummed I/O through the map"
    dd if=/dev/urandom of="$LAB_RUN/pattern1" bs=1M count=32 status=none
    local t0=$SECONDS
    lab_check "write 32 MiB" dd if="$LAB_RUN/pattern1" of="/dev/mapper/$XS_MAP" bs=1M oflag=direct conv=fsync status=none
    lab_check "read back 32 MiB, sha256 matches" xs_io_check "$LAB_RUN/pattern1" 0
    lab_log "write+read of 32 MiB took $((SECONDS - t0))s"

    lab_step "smoke 3: cut eth1 while I/O runs"
    # A writer rewrites a 16 MiB pattern at 64 MiB in a loop until told to
    # stop, so the cut always lands in the middle of I/O.
    dd if=/dev/urandom of="$LAB_RUN/pattern2" bs=1M count=16 status=none
    rm -f "$LAB_RUN/stop" "$LAB_RUN/passes"
    xs_writer "$LAB_RUN/pattern2" 64 &
    local io=$!
    lab_wait 60 "the writer's first pass" test -s "$LAB_RUN/passes"
    lab_check "I/O running when eth1 is cut" kill -0 "$io"
    fault_link_cut eth1
    local t_cut=$SECONDS
    lab_wait 60 "path $sd_a ($dev_a) failed by the kernel" xs_path_is "$dev_a" F
    lab_log "path failed $((SECONDS - t_cut))s after the cut"
    local passes_at_fail
    passes_at_fail=$(<"$LAB_RUN/passes")
    lab_wait 60 "two more full write passes after the failover" \
        xs_passes_above "$((passes_at_fail + 2))"
    touch "$LAB_RUN/stop"
    local io_rc=0
    wait "$io" || io_rc=$?
    lab_check "every write pass completed despite the cut ($(<"$LAB_RUN/passes") passes, writer exit $io_rc)" test "$io_rc" -eq 0
    lab_check "data written across the cut reads back intact" xs_io_check "$LAB_RUN/pattern2" 64
    dmsetup status "$XS_MAP"
    lab_check "path $sd_a ($dev_a) shows F in dmsetup status" test "$(dm_path_state "$XS_MAP" "$dev_a")" = F
    lab_check "path $sd_b ($dev_b) is still A" test "$(dm_path_state "$XS_MAP" "$dev_b")" = A
    ini_paths
    # The kernel shows a session in recovery as FAILED, and as FREE once
    # iscsid has torn the connection down while it retries the login.
    lab_check "both iface0 (eth1) sessions are down (FAILED/FREE), iface1 up" \
        test "$(ini_paths | awk '$6 == "iface0" && $3 != "LOGGED_IN"' | wc -l)/$(ini_paths | awk '$6 == "iface1" && $3 == "LOGGED_IN"' | wc -l)" = 2/2

    lab_step "smoke 4: restore eth1, wait for LOGGED_IN, reinstate the path"
    fault_link_restore eth1
    ini_trace_states 120 &
    local trace=$!
    lab_wait 120 "4 sessions LOGGED_IN again" ini_sessions_are 4 LOGGED_IN
    kill "$trace" 2>/dev/null || true
    lab_wait 30 "$sd_a running again" grep -qx running "/sys/block/$sd_a/device/state"
    lab_check "reinstate_path $dev_a" dmsetup message "$XS_MAP" 0 reinstate_path "$dev_a"
    dmsetup status "$XS_MAP"
    lab_check "path $sd_a is A again" test "$(dm_path_state "$XS_MAP" "$dev_a")" = A
    # Read through both paths again (round-robin alternates).
    lab_check "after failback, data reads back intact" xs_io_check "$LAB_RUN/pattern1" 0
    lab_check "both paths still A after I/O" test "$(dm_path_state "$XS_MAP" "$dev_a")$(dm_path_state "$XS_MAP" "$dev_b")" = AA
    dmsetup status "$XS_MAP" | lab_save smoke-dmsetup-status.txt
    lab_check "dmsetup remove $XS_MAP" dmsetup remove "$XS_MAP"
}

# --- faults: every fault helper once, each with its undo ---------------------

xs_ms() { echo $(($(date +%s%N) / 1000000)); }

# xs_rtt_ms PORTAL NIC: one ping's round trip in whole ms, bound to NIC (two
# NICs share the subnet, so an unbound ping may leave by the other one).
xs_rtt_ms() {
    busybox ping -c1 -W5 -I "$2" "$1" 2>/dev/null | sed -n 's/.*time=\([0-9]*\).*/\1/p' | head -1
}
xs_rtt_at_least() { local r; r=$(xs_rtt_ms "$1" "$2"); [[ -n $r ]] && ((r >= $3)); }
xs_rtt_below() { local r; r=$(xs_rtt_ms "$1" "$2"); [[ -n $r ]] && ((r < $3)); }
xs_read_ok() { dd if="/dev/$1" of=/dev/null bs=4k count=1 iflag=direct status=none 2>/dev/null; }
xs_block_is() { cmp -s -n 4096 <(dd if="/dev/$1" bs=4k count=1 iflag=direct status=none) "$2"; }
not() { ! "$@"; }
xs_read_fails() { ! timeout 60 dd if="/dev/$1" of=/dev/null bs=4k count=1 iflag=direct status=none 2>/dev/null; }

xs_faults() {
    local sd_u20 sd_l20 t0 ms
    sd_u20=$(ini_sdev_for "${XS_PWWN[upper]}" 10.10.1.20)
    sd_l20=$(ini_sdev_for "${XS_PWWN[lower]}" 10.10.1.20)

    lab_step "faults 1: blackhole portal 10.10.1.20 in the target namespace"
    fault_portal_blackhole 10.10.1.20
    lab_wait 60 "the 2 sessions to 10.10.1.20 leave LOGGED_IN" ini_sessions_are 2 LOGGED_IN
    fault_portal_restore 10.10.1.20
    lab_wait 90 "4 sessions LOGGED_IN after the portal is restored" ini_sessions_are 4 LOGGED_IN
    lab_wait 30 "$sd_u20 reads again" xs_read_ok "$sd_u20"

    lab_step "faults 2: offline a SCSI device"
    fault_sdev_offline "$sd_u20"
    lab_check "$sd_u20 state is offline" grep -qx offline "/sys/block/$sd_u20/device/state"
    lab_check "I/O to the offline $sd_u20 fails" xs_read_fails "$sd_u20"
    fault_sdev_online "$sd_u20"
    lab_check "I/O to $sd_u20 works once it is running again" xs_read_ok "$sd_u20"

    lab_step "faults 3: netem delay on the target side of eth2"
    fault_netem sw2 delay 300ms
    lab_check "the round trip to 10.10.1.21 via eth2 is at least 300 ms" xs_rtt_at_least 10.10.1.21 eth2 300
    fault_tc_clear sw2
    # Retried: one ping can take 300 ms on a busy TCG host without any qdisc.
    lab_wait 10 "the delay is gone once cleared" xs_rtt_below 10.10.1.21 eth2 300

    lab_step "faults 4: htb rate limit on eth1 (8 Mbit/s)"
    fault_rate eth1 8mbit
    # A lower bound only: 4 MiB cannot cross an 8 Mbit/s link in under ~4 s,
    # however busy the machine is.
    t0=$(xs_ms)
    lab_check "write 4 MiB to $sd_u20 through the shaped eth1" \
        dd if=/dev/zero of="/dev/$sd_u20" bs=256k count=16 oflag=direct status=none
    ms=$(($(xs_ms) - t0))
    lab_log "4 MiB through 8 Mbit/s took ${ms} ms"
    lab_check "the shaped write took at least 3 s (${ms} ms)" test "$ms" -ge 3000
    fault_tc_clear eth1

    lab_step "faults 5: remove a LUN on the target"
    dd if=/dev/urandom of="$LAB_RUN/lun-block" bs=4k count=1 status=none
    lab_check "write a marker block to $sd_l20" \
        dd if="$LAB_RUN/lun-block" of="/dev/$sd_l20" bs=4k count=1 oflag=direct status=none
    lab_check "the marker reads back before the removal" xs_block_is "$sd_l20" "$LAB_RUN/lun-block"
    fault_lun_remove "$(xs_iqn lower 10.10.1.20)" 0
    # LIO answers for a missing LUN 0 with its read-only virtual LUN 0, so
    # reads still complete: the data is no longer the LUN's, and writes fail.
    lab_check "$sd_l20 no longer returns the LUN's data" not xs_block_is "$sd_l20" "$LAB_RUN/lun-block"
    lab_check "writes to $sd_l20 fail once its LUN is gone" \
        not timeout 60 dd if="$LAB_RUN/lun-block" of="/dev/$sd_l20" bs=4k count=1 oflag=direct status=none
}
