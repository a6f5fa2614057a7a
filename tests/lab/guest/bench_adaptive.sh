# Benchmark for issue #9 (prints figures, asserts nothing): fixed
# round-robin, queue-length and service-time against pathkeeperd's "auto"
# (selector and relative_throughput) on xserve-upper with its links
# htb-shaped to 40 and 10 Mbit/s in both directions (ad_shape), under the
# VM test's load (fio random reads, 128 KiB, QD 8; see ad_io_start for why
# not 1 MiB at QD 16). Functions are prefixed bench_ad_; figures go through
# bench_result as RESULT xserve-40+10 <selector> <metric> <run> <value>.
# Sourced on demand by scenarios/xserve.sh (arg bench-adaptive).

# bench_ad_selector_is SEL: the kernel's table for the map uses SEL.
bench_ad_selector_is() { [[ $(dmsetup table "$AD_MAP" 2>/dev/null) == *" $1 "* ]]; }

# bench_ad_weighted: the table's two weights differ (auto has decided).
bench_ad_weighted() {
    local w
    w=$(dmsetup table "$AD_MAP" 2>/dev/null | awk '{ for (i = 1; i < NF - 1; i++) if ($i ~ /^[0-9]+:[0-9]+$/) printf "%s ", $(i + 2) }')
    local a b
    read -r a b <<<"$w"
    [[ -n $a && -n $b && $a != "$b" ]]
}

# bench_ad_poll SECS COMMAND...: like lab_wait, but a timeout is a figure
# ("none" and a note), not a failed run.
bench_ad_poll() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 1
    done
}

# bench_ad_one NAME SELECTOR RT SECS RUN: one configuration, one window.
bench_ad_one() {
    local name=$1 sel=$2 rt=$3 secs=$4 run=$5 want=$2 sd_f sd_s share bf bs
    [[ $sel == auto ]] && want=service-time
    lab_step "bench adaptive: $name (selector $sel, relative_throughput $rt), run $run"
    bench_pkd_stop
    : >"$PD_STATE"
    pd_write_config "$sel" "$(printf '[adaptive]\nmin_reload_interval = "10s"')" \
        "relative_throughput = \"$rt\""
    bench_pkd_start "$BENCH_AD_DAEMON" --log-level info
    bench_ad_poll 60 pd_ready || { bench_note "$name run $run: pathkeeperd not ready"; return 1; }
    bench_ad_poll 60 pd_maps_present || { bench_note "$name run $run: maps not present"; return 1; }
    if [[ $sel != auto ]]; then
        bench_ad_poll 60 bench_ad_selector_is "$want" || { bench_note "$name run $run: $AD_MAP never used $want"; return 1; }
    fi
    sd_f=$(pd_eth1_path "$AD_MAP")
    sd_s=$(jq -r --arg m "$AD_MAP" '.paths[] | select(.map == $m and .netdev == "eth2") | .device' "$PD_STATE")
    ad_io_start
    if [[ $sel == auto ]]; then
        bench_ad_poll 120 bench_ad_selector_is service-time || bench_note "$name run $run: auto did not choose service-time in 120 s"
        bench_ad_poll 120 bench_ad_weighted || bench_note "$name run $run: weights still equal after 120 s"
    fi
    sleep 5 # the TCP ramp after the start (or after the reload)
    read -r share bf bs < <(ad_share "$sd_f" "$sd_s" "$secs")
    ad_io_stop
    bench_result xserve-40+10 "$name" link_sum_permille "$run" $(((bf + bs) * 8 * 1000 / secs / 50000000))
    bench_result xserve-40+10 "$name" fast_share_permille "$run" "$share"
    bench_result xserve-40+10 "$name" adaptive_reloads "$run" "$(ad_map_field adaptive_reloads)"
    bench_note "$name run $run: table $(dmsetup table "$AD_MAP" | grep -o 'round-robin.*\|queue-length.*\|service-time.*')"
}

# bench_adaptive DAEMON RUNS
bench_adaptive() {
    BENCH_AD_DAEMON=$1
    local runs=${2:-1} run
    lab_check "pathkeeperd binary given (daemon=PATH)" test -x "$BENCH_AD_DAEMON"
    pk_mask_multipath_uevent_check
    ad_shape 40mbit 10mbit
    bench_note "xserve-upper, links 40+10 Mbit/s (htb both ends), fio randread 128k QD8, windows of 20 s; kernel $(uname -r), $(nproc) vCPUs"
    for ((run = 1; run <= runs; run++)); do
        bench_ad_one round-robin round-robin equal 20 "$run" || true
        bench_ad_one queue-length queue-length equal 20 "$run" || true
        bench_ad_one service-time service-time equal 20 "$run" || true
        bench_ad_one auto auto auto 20 "$run" || true
    done
    bench_pkd_stop
    ad_unshape
    lab_save bench-adaptive-pathkeeperd.log "$PD_LOG"
    grep -e RESULT -e NOTE "$BENCH_OUT"
}
