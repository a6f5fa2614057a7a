# Adaptive selection (issue #9, VM test vm_xserve_adaptive). Functions are
# prefixed ad_. Builds on daemon.sh (pd_*) and faults.sh (fault_rate).
#
# The xserve links are shaped with htb to 40 and 10 Mbit/s, on the initiator
# veths (eth1, eth2: writes, and the initiator's ACKs) and on the target's
# (sw1, sw2: reads), so both directions are limited. pathkeeperd runs
# service-time with relative_throughput = "auto" and must measure the paths
# under sustained direct I/O, give the slow path a proportionally smaller
# weight in the kernel's table, and give it back when the shaping goes.
# Every wait is functional (lab_wait polls the kernel's table); nothing
# asserts on elapsed time.

AD_MAP=xserve-upper
AD_FIO_PID=
AD_FIO_OUT=$LAB_RUN/ad-fio.out

# ad_shape FAST SLOW: eth1's path (both veth ends) to FAST, eth2's to SLOW.
ad_shape() {
    fault_rate eth1 "$1"
    fault_rate sw1 "$1"
    fault_rate eth2 "$2"
    fault_rate sw2 "$2"
}
ad_unshape() { local d; for d in eth1 sw1 eth2 sw2; do fault_tc_clear "$d"; done; }

# ad_io_start [RW [FIO_ARGS...]]: 128 KiB direct random I/O (RW: randread,
# the default, or randwrite; the lab's LUNs are scratch) at queue depth 8 on
# the map, until ad_io_stop. Random, so that the block layer cannot merge
# them into multi-MiB requests, and no more than 1 MiB in flight: the lab's
# fast iSCSI timers (NOP-Out every 2 s, 3 s timeout) would fail a 10 Mbit/s
# session whose pings queue behind several seconds of data (with 1 MiB
# sequential reads at queue depth 16, merged to 8 MiB, both sessions timed
# out). FIO_ARGS are added as they are (e.g. a latency log).
# shellcheck disable=SC2120 # bench_adaptive.sh passes RW and fio options
ad_io_start() {
    local rw=${1:-randread}
    (($#)) && shift
    fio --name=adaptive --filename="/dev/mapper/$AD_MAP" --rw="$rw" --bs=128k --direct=1 \
        --ioengine=libaio --iodepth=8 --time_based --runtime=3000 \
        --output="$AD_FIO_OUT" "$@" >/dev/null 2>&1 &
    AD_FIO_PID=$!
    lab_log "fio started on $AD_MAP (pid $AD_FIO_PID): $rw, 128 KiB, QD 8"
}
ad_io_running() { kill -0 "$AD_FIO_PID" 2>/dev/null; }
ad_io_stop() {
    [[ -n $AD_FIO_PID ]] || return 0
    kill -INT "$AD_FIO_PID" 2>/dev/null || true
    wait "$AD_FIO_PID" 2>/dev/null || true
    AD_FIO_PID=
}

# ad_dm_weight MAJ:MIN: the path's relative_throughput in the kernel's table
# ("service-time 0 2 2 8:16 1 100 8:32 1 25": device, repeat_count, weight).
ad_dm_weight() {
    dmsetup table "$AD_MAP" 2>/dev/null | awk -v d="$1" '{ for (i = 1; i < NF - 1; i++) if ($i == d) print $(i + 2) }'
}
ad_state_weight() { pd_path_field "$1" weight; }
ad_state_matches() { [[ -s $PD_STATE && "$(ad_state_weight "$1")/$(ad_state_weight "$2")" == "$3" ]]; }
ad_map_field() { jq -r --arg m "$AD_MAP" --arg f "$1" '.maps[] | select(.alias == $m) | .[$f]' "$PD_STATE"; }

# The tolerance for 40+10 Mbit/s: the ideal slow weight is 100 * 10/40 = 25.
# The daemon reloads only when a weight moves by more than its hysteresis
# (20%), so once a table is in, the estimate may sit up to 20% away from it
# without a reload; the estimate itself (an EWMA of htb-shaped TCP, with the
# same iSCSI/TCP overhead per byte on both links) is good to roughly another
# 20% over its half-life. 25 +- 40% gives 15..35. A table still at equal
# weights (100/100), or one that starved the slow path (1..14), or one that
# got the ratio the wrong way round, fails.
AD_SLOW_MIN=15
AD_SLOW_MAX=35

# ad_converged FAST_DEVT SLOW_DEVT: the kernel's table has the fast path at
# 100 and the slow path within the tolerance.
ad_converged() {
    local f s
    f=$(ad_dm_weight "$1")
    s=$(ad_dm_weight "$2")
    [[ $f == 100 && -n $s ]] && ((s >= AD_SLOW_MIN && s <= AD_SLOW_MAX))
}

# ad_equal_again FAST_DEVT SLOW_DEVT: both weights within 20% of each other
# again (the hysteresis), i.e. the slow path back at >= 80 of the fast's.
ad_equal_again() {
    local f s
    f=$(ad_dm_weight "$1")
    s=$(ad_dm_weight "$2")
    [[ -n $f && -n $s ]] && ((f > 0 && s > 0 && s * 100 >= f * 80 && f * 100 >= s * 80))
}

# ad_sectors SD: sectors read + written so far (/sys/block/SD/stat fields 3, 7).
ad_sectors() { awk '{print $3 + $7}' "/sys/block/$1/stat"; }

# ad_reloads_at_least N: the state file counts N or more adaptive reloads
# (a function, so that lab_wait re-reads it on every poll).
ad_reloads_at_least() { (($(ad_map_field adaptive_reloads) >= $1)); }

# ad_share FAST SLOW SECS: the fast path's share of the map's I/O over SECS,
# from the block layer's counters, as "SHARE_PERMILLE FAST_BYTES SLOW_BYTES".
ad_share() {
    local f0 s0 f1 s1 df ds
    f0=$(ad_sectors "$1")
    s0=$(ad_sectors "$2")
    sleep "$3"
    f1=$(ad_sectors "$1")
    s1=$(ad_sectors "$2")
    df=$(((f1 - f0) * 512))
    ds=$(((s1 - s0) * 512))
    if ((df + ds == 0)); then echo "0 0 0"; else echo "$((df * 1000 / (df + ds))) $df $ds"; fi
}

ad_show() {
    dmsetup table "$AD_MAP" || true
    dmsetup status "$AD_MAP" || true
    [[ -s $PD_STATE ]] || return 0
    jq -c --arg m "$AD_MAP" '.paths[] | select(.map == $m) | {device, netdev, weight, capacity_bps, throughput_bps, io_latency_us, confidence}' "$PD_STATE" || true
    jq -c --arg m "$AD_MAP" '.maps[] | select(.alias == $m) | {selector, adaptive, adaptive_reloads}' "$PD_STATE" || true
    return 0
}

ad_save_history() {
    [[ -s $PD_STATE ]] && jq --arg m "$AD_MAP" '.maps[] | select(.alias == $m) | {alias, selector, adaptive, adaptive_reloads, adaptive_decisions}' \
        "$PD_STATE" >"$LAB_RUN/adaptive-decisions-$1.json" && lab_save "adaptive-decisions-$1.json" "$LAB_RUN/adaptive-decisions-$1.json"
    lab_save pathkeeperd.log "$PD_LOG"
}

ad_run() {
    local daemon=$1 sd_f sd_s dev_f dev_s wf ws share bf bs
    lab_check "pathkeeperd binary given (daemon=PATH)" test -x "$daemon"
    lab_check "fio is installed" command -v fio
    pk_mask_multipath_uevent_check
    # A 10 s reload interval (default 60 s) and a 10 s wait for a lull
    # (default 30 s; fio leaves none) keep the run short; everything else is
    # the shipped default (half-life 10 s, hysteresis 20%, hold target 50 ms).
    pd_write_config service-time "$(printf '[adaptive]\nmin_reload_interval = "10s"\nreload_hold_wait = "10s"')" \
        'relative_throughput = "auto"'

    lab_step "adaptive 1: shape eth1's paths to 40 Mbit/s and eth2's to 10 Mbit/s, both directions"
    ad_shape 40mbit 10mbit
    tc qdisc show dev eth1
    net_ns tc qdisc show dev sw2

    lab_step "adaptive 2: pathkeeperd, service-time with relative_throughput = \"auto\""
    pd_start "$daemon"
    lab_wait 60 "pathkeeperd ready" pd_ready
    lab_wait 30 "xserve-upper and xserve-lower, 2 paths each" pd_maps_present
    sd_f=$(pd_eth1_path "$AD_MAP")
    sd_s=$(jq -r --arg m "$AD_MAP" '.paths[] | select(.map == $m and .netdev == "eth2") | .device' "$PD_STATE")
    dev_f=$(pd_devt "$sd_f")
    dev_s=$(pd_devt "$sd_s")
    lab_log "$AD_MAP: fast $sd_f ($dev_f, eth1, 40 Mbit/s), slow $sd_s ($dev_s, eth2, 10 Mbit/s)"
    ad_show
    lab_check "$AD_MAP uses service-time" grep -q ' service-time ' <(dmsetup table "$AD_MAP")
    lab_check "the state file says $AD_MAP's weights are adaptive" test "$(ad_map_field adaptive)" = weights
    lab_check "$AD_MAP starts with equal weights ($(ad_dm_weight "$dev_f")/$(ad_dm_weight "$dev_s"))" \
        test "$(ad_dm_weight "$dev_f")" = "$(ad_dm_weight "$dev_s")"

    lab_step "adaptive 3: sustained direct reads; the weights follow the links"
    ad_io_start
    lab_wait 300 "the kernel's table gives $sd_f 100 and $sd_s $AD_SLOW_MIN..$AD_SLOW_MAX" \
        ad_converged "$dev_f" "$dev_s"
    ad_show
    wf=$(ad_dm_weight "$dev_f")
    ws=$(ad_dm_weight "$dev_s")
    lab_log "MEASURE converged_weights $sd_f=$wf $sd_s=$ws (ideal 100/25)"
    lab_check "fio is still running" ad_io_running
    # The table is live before the daemon has finished its reload (it logs
    # "reload ... in N ms" and publishes after that): wait for the state file.
    lab_wait 60 "the state file's weights match the kernel's ($wf/$ws)" \
        ad_state_matches "$sd_f" "$sd_s" "$wf/$ws"
    lab_check "$AD_MAP: at least one adaptive reload in the state file" test "$(ad_map_field adaptive_reloads)" -ge 1
    lab_check "the decision history has the reload with its weights and why" \
        test "$(jq -r --arg m "$AD_MAP" --arg w "$sd_f $wf, $sd_s $ws" \
            '[.maps[] | select(.alias == $m) | .adaptive_decisions[] | select(.action == "reload" and (.reason | contains($w)) and (.reason | contains("busy capacity")))] | length' "$PD_STATE")" -ge 1
    lab_check "the daemon logged the decision with the measurements" \
        pd_log_has "$AD_MAP: weights $sd_f $wf, $sd_s $ws (measured .* busy capacity)"
    lab_check "the daemon logged the reload" pd_log_has "reload $AD_MAP (.*) in [0-9.]* ms"
    # A reload holds the map's new I/O until the I/O in flight has drained.
    # With fio keeping 8 requests of 128 KiB in flight, at least four are on
    # one path, over 100 ms of it even at 40 Mbit/s: more than the default
    # reload_hold_target (50 ms), so the due reload must first have waited
    # for a lull (for up to reload_hold_wait, 10 s here), and said so.
    lab_check "the reload first waited for a lull, with the I/O in flight it saw" \
        test "$(jq -r --arg m "$AD_MAP" \
            '[.maps[] | select(.alias == $m) | .adaptive_decisions[] | select(.action == "lull" and (.reason | test("would hold the map about [0-9]+ ms \\(sd[a-z]+\\), over the 50 ms reload_hold_target")))] | length' "$PD_STATE")" -ge 1
    lab_log "MEASURE first_reload: $(jq -r --arg m "$AD_MAP" '[.maps[] | select(.alias == $m) | .adaptive_decisions[] | select(.action == "reload")][0].reason' "$PD_STATE")"
    lab_check "the slow path's published capacity is below the fast path's" \
        test "$(pd_path_field "$sd_s" capacity_bps)" -lt "$(pd_path_field "$sd_f" capacity_bps)"

    # The split of the I/O, from the block layer. With both paths kept busy at
    # queue depth 8, service-time at 100:25 puts ~4/5 of the bytes on the
    # 40 Mbit/s path (the ideal share is 40/50 = 0.8). Round-robin (equal
    # counts, 0.5) or a table that ignored the ratio fails the lower bound of
    # 0.65 (0.8 minus htb burst and TCP ramp noise over a 20 s window); a
    # slow path that is starved instead of shrunk (weight near 1) fails the
    # upper bound of 0.95.
    lab_step "adaptive 4: the slow path carries a correspondingly smaller share"
    read -r share bf bs < <(ad_share "$sd_f" "$sd_s" 20)
    lab_log "MEASURE io_share over 20 s: $sd_f $bf bytes, $sd_s $bs bytes, fast share 0.$(printf '%03d' "$share"); link sum use $(((bf + bs) * 8 / 20 / 500000))% of 50 Mbit/s (weights now $(ad_dm_weight "$dev_f")/$(ad_dm_weight "$dev_s"))"
    lab_check "the fast path's share of the bytes ($share/1000) is in 650..950" \
        test "$share" -ge 650 -a "$share" -le 950
    ad_save_history shaped

    lab_step "adaptive 5: remove the shaping; the weights move back"
    ad_unshape
    lab_wait 300 "the weights within 20% of each other again" ad_equal_again "$dev_f" "$dev_s"
    ad_show
    lab_log "MEASURE unshaped_weights $sd_f=$(ad_dm_weight "$dev_f") $sd_s=$(ad_dm_weight "$dev_s")"
    lab_wait 60 "the state file's weights match the kernel's" \
        ad_state_matches "$sd_f" "$sd_s" "$(ad_dm_weight "$dev_f")/$(ad_dm_weight "$dev_s")"
    lab_wait 60 "$AD_MAP: a second adaptive reload in the state file" ad_reloads_at_least 2
    lab_check "fio ran throughout" ad_io_running
    ad_io_stop
    lab_save fio.out "$AD_FIO_OUT"
    ad_save_history unshaped
    lab_check "pathkeeperd exits on SIGTERM" pd_stop
    lab_save pathkeeperd.log "$PD_LOG"
}
