# Benchmark for issue #9 (prints figures, asserts nothing): fixed
# round-robin, queue-length and service-time (equal weights) against
# pathkeeperd's "auto" (selector and relative_throughput) on xserve-upper,
# with its links htb-shaped in both directions (ad_shape) to 40+10 Mbit/s and
# then to 40+40 Mbit/s, for random reads and then random writes, under the VM
# test's load (fio, 128 KiB direct, QD 8; see ad_io_start for why not 1 MiB at
# QD 16). Functions are prefixed bench_ad_; figures go through bench_result as
#   RESULT xserve-<links>-<read|write> <selector> <metric> <run> <value>
# Sourced on demand by scenarios/xserve.sh (arg bench-adaptive).
#
# Per link set and direction, runs x (round-robin, queue-length,
# service-time, auto), each with pathkeeperd restarted on that config and a
# window of BENCH_AD_WINDOW seconds of /sys/block/sdX/stat:
#   link_sum_permille    bytes x 8 / window / the links' sum
#   fast_share_permille  eth1's path's share of the bytes (0.8 ideal on
#                        40+10, 0.5 on 40+40)
#   adaptive_reloads     the daemon's count at the end of the window
# and for auto only:
#   settle_ms            fio start to the end of the first adaptive reload
#                        (its log line; "none" when the daemon kept its table)
#   steady_reloads       adaptive reloads during the window, which starts
#                        5 s after that; reloads_per_min (run
#                        "all") is their sum over the runs' windows per minute
#   reload_pause_ms      the longest gap between consecutive fio completions
#                        that overlaps [start - 1 s, end + 1 s] of a reload of
#                        the map, start = the log line's time - its "in N ms";
#                        the longest over the run's reloads (fio's per-I/O log,
#                        Unix-epoch milliseconds, against the daemon's log
#                        times, milliseconds, same guest clock)
#   reload_lat_ms        the longest latency (submit to completion) of an
#                        I/O in flight during those same intervals
#   baseline_gap_ms, baseline_lat_ms: the same two away from any reload
#                        (from 3 s after fio's start, the TCP ramp excluded)
#   daemon_reload_ms     the daemon's own "reload ... in N ms" (load + suspend
#                        + resume including its udev wait), the longest
#   reloads_logged       reload lines of the map logged while fio ran
#   kernel_suspends, kernel_pause_ms, kernel_suspended_ms, kernel_drain_ms:
#                        from kprobes (see "the kernel's side" below), the
#                        longest of the run
# and NOTEs per reload with its times, the daemon's figure, and fio's gap
# and latency over both the daemon's and the kernel's interval.
#
# Selector "auto-now" is auto with reload_hold_wait = "0s": a due reload
# loads at once instead of waiting for a lull (the daemon before the lull
# wait), for an A/B of the kernel's pause. BENCH_AD_LOAD=bursty (load=) runs
# fio in bursts (BENCH_AD_BURST 128 KiB requests at QD 8, then
# BENCH_AD_THINK of no I/O) instead of the steady load: the workload with
# lulls for a reload to wait for. Its link sums measure the load, not the
# selectors.

BENCH_AD_WINDOW=20
BENCH_AD_MIDNIGHT_MS=
BENCH_AD_STEADY=0
BENCH_AD_LINES0=0
BENCH_AD_SELECTORS="round-robin queue-length service-time auto"
BENCH_AD_LOAD=steady
BENCH_AD_BURST=48
BENCH_AD_THINK=1s

# bench_ad_load_args: fio's options for BENCH_AD_LOAD.
bench_ad_load_args() {
    [[ $BENCH_AD_LOAD == bursty ]] || return 0
    # fio completes a burst's I/O in flight before it thinks (io_u_quiesce)
    echo "--thinktime=$BENCH_AD_THINK --thinktime_blocks=$BENCH_AD_BURST"
}

# bench_ad_selector_is SEL: the kernel's table for the map uses SEL.
bench_ad_selector_is() { [[ $(dmsetup table "$AD_MAP" 2>/dev/null) == *" $1 "* ]]; }

# bench_ad_poll SECS COMMAND...: like lab_wait, but a timeout is a figure
# ("none" and a note), not a failed run.
bench_ad_poll() { lab_poll "$@"; }

# bench_ad_reloads_now: the map's adaptive_reloads in the state file, 0 when
# there is none yet (a number in any case: set -u would end the run on a
# "null" in an arithmetic context).
bench_ad_reloads_now() {
    local r
    r=$(ad_map_field adaptive_reloads 2>/dev/null) || true
    [[ $r =~ ^[0-9]+$ ]] || r=0
    echo "$r"
}

# bench_ad_settled: auto has decided. Either it has reloaded (adaptive_reloads
# >= 1: service-time with weights on unequal links) and the reload has ended
# (its log line; the count goes up at the decision, seconds earlier), or
# both paths' estimates have been confident for 8 s (4 of the daemon's 2 s
# evaluations) without a reload: it keeps its table (queue-length, which
# auto starts with, on equal links).
BENCH_AD_CONFIDENT_SINCE=
bench_ad_settled() {
    if (($(bench_ad_reloads_now) >= 1)); then
        # counted at the decision; the reload ends with its log line
        [[ -n $(bench_ad_logged_reloads "$BENCH_AD_LINES0") ]] && return 0
        return 1
    fi
    local low
    low=$(jq -r --arg m "$AD_MAP" '[.paths[] | select(.map == $m) | select((.confidence // 0) < 50)] | length' "$PD_STATE" 2>/dev/null)
    if [[ $low != 0 ]]; then
        BENCH_AD_CONFIDENT_SINCE=
        return 1
    fi
    [[ -n $BENCH_AD_CONFIDENT_SINCE ]] || BENCH_AD_CONFIDENT_SINCE=$SECONDS
    ((SECONDS - BENCH_AD_CONFIDENT_SINCE >= 8))
}

# bench_ad_logged_reloads FROM_LINE: the map's reloads in the daemon's log
# after line FROM_LINE, one per line: "END_EPOCH_MS DAEMON_MS HH:MM:SS.mmm".
# The log's times are the guest's local time of day (log.cpp, localtime_r)
# at the end of the reload, to the millisecond.
bench_ad_logged_reloads() {
    [[ -n $BENCH_AD_MIDNIGHT_MS ]] || BENCH_AD_MIDNIGHT_MS=$(($(date -d 00:00 +%s) * 1000))
    tail -n +"$(($1 + 1))" "$PD_LOG" | awk -v m="$AD_MAP" -v mid="$BENCH_AD_MIDNIGHT_MS" '
        index($0, "reload " m " (") && match($0, / in [0-9.]+ ms/) {
            d = substr($0, RSTART + 4, RLENGTH - 7)
            split($1, t, ":")
            printf "%.0f %s %s\n", mid + (t[1] * 3600 + t[2] * 60 + t[3]) * 1000, d, $1
        }'
}

# bench_ad_pauses LAT_LOG FROM_MS WINDOWS: from fio's per-I/O latency log
# (--log_unix_epoch: "EPOCH_MS, LAT_NS, DIR, BS, ..." in completion order)
# and WINDOWS (lines "LO_MS HI_MS", epoch), one line per window
#   "R GAP_MS LAT_MS"
# (the longest gap between consecutive completions that overlaps the window,
# and the longest latency of an I/O in flight during it, i.e. completed at or
# after LO and submitted, completion - latency, at or before HI), then the
# baseline from FROM_MS on, away from every window: "B GAP_MS LAT_MS COUNT".
bench_ad_pauses() {
    awk -F, -v from="$2" -v windows="$3" '
        BEGIN {
            n = split(windows, line, "\n")
            for (i = 1; i <= n; i++) { split(line[i], x, " "); lo[i] = x[1]; hi[i] = x[2] }
        }
        {
            t = $1 + 0; lat = $2 / 1e6; inr = 0; near = 0
            for (i = 1; i <= n; i++) {
                if (NR > 1 && t >= lo[i] && p <= hi[i]) { near = 1; if (t - p > rg[i]) rg[i] = t - p }
                if (t >= lo[i] && t - lat <= hi[i]) { inr = 1; if (lat > rl[i]) rl[i] = lat }
            }
            if (NR > 1 && p >= from && !near && t - p > bg) bg = t - p
            if (!inr && t - lat >= from && lat > bl) bl = lat
            p = t
        }
        END {
            for (i = 1; i <= n; i++) printf "R %.0f %.0f\n", rg[i], rl[i]
            printf "B %.0f %.0f %d\n", bg, bl, NR
        }' "$1"
}

# --- the kernel's side of a reload: kprobes in dm and dm-multipath ---------
# A reload is DM_TABLE_LOAD, DM_DEV_SUSPEND (dm_suspend: new I/O to the map is
# held from here, and it returns once the I/O in flight has completed) and
# DM_DEV_SUSPEND with resume (swap the table, dm_resume). After the swap the
# new table has no current path group; with a hardware handler attached
# (scsi_dh_alua on the lab's LIO LUNs) choosing one sets pg_init_required,
# and dm-mpath requeues every request (with a 100 ms delay) until each path
# of the group has been activated: activate_path_work per path, then its
# pg_init_done. So the map takes no new I/O from dm_suspend's entry to the
# later of dm_resume's return and the last pg_init_done. The tracer's clock
# (mono, microseconds) is tied to the epoch by a trace_marker line written
# when fio starts.

BENCH_AD_TRACE=/sys/kernel/tracing
BENCH_AD_TRACING=0

bench_ad_trace_setup() {
    local t=$BENCH_AD_TRACE e
    mountpoint -q "$t" || mount -t tracefs nodev "$t" || return 1
    echo 0 >"$t/tracing_on"
    echo mono >"$t/trace_clock"
    for e in 'p:pkb/susp dm_suspend' 'r:pkb/susp_ret dm_suspend' 'p:pkb/res dm_resume' 'r:pkb/res_ret dm_resume'; do
        echo "$e" >>"$t/kprobe_events" || return 1
    done
    for e in 'p:pkb/pgi dm_multipath:activate_path_work' 'p:pkb/pgd dm_multipath:pg_init_done'; do
        echo "$e" >>"$t/kprobe_events" || bench_note "no kprobe $e: path activation not traced"
    done
    echo 1 >"$t/events/pkb/enable" && echo 1 >"$t/tracing_on" && BENCH_AD_TRACING=1
}

# bench_ad_trace_mark: empties the trace and ties its clock to the epoch.
bench_ad_trace_mark() {
    ((BENCH_AD_TRACING)) || return 0
    : >"$BENCH_AD_TRACE/trace"
    echo "pkb_epoch_us ${EPOCHREALTIME/./}" >"$BENCH_AD_TRACE/trace_marker"
}

# bench_ad_trace_pairs: every suspend/resume since the mark, one per line:
#   "SUSPEND_EPOCH_MS DRAIN_MS RESUMED_MS ACTIVATED_MS ACTIVATIONS ACT_START_MS COMM"
# from dm_suspend's entry: its return, dm_resume's return, the last
# pg_init_done before the next suspend (within 10 s; -1 and 0 when none),
# and the first activate_path_work after the resume (-1 when none). dm-mpath
# starts the activation when the first request reaches the new table: at
# once when requests were held by the suspend, later after a lull.
bench_ad_trace_pairs() {
    ((BENCH_AD_TRACING)) || return 0
    awk '
        {
            ev = ""
            for (i = 1; i < NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) { ts = substr($i, 1, length($i) - 1) * 1000; ev = $(i + 1); break }
            if (ev == "") next
            if (ev == "tracing_mark_write:" && $(i + 2) == "pkb_epoch_us") { off = $(i + 3) / 1000 - ts; next }
            if (ev == "susp:") { n++; s[n] = ts; sr[n] = -1; r[n] = -1; pd[n] = -1; as[n] = -1; c[n] = $1 }
            else if (ev == "susp_ret:" && n) sr[n] = ts - s[n]
            else if (ev == "res_ret:" && n && r[n] < 0) r[n] = ts - s[n]
            else if (ev == "pgi:" && n && r[n] >= 0 && as[n] < 0 && ts - s[n] - r[n] <= 10000) as[n] = ts - s[n]
            else if (ev == "pgd:" && n && r[n] >= 0 && ts - s[n] - r[n] <= 10000) { pd[n] = ts - s[n]; np[n]++ }
        }
        END {
            for (k = 1; k <= n; k++) if (r[k] >= 0) printf "%.1f %.1f %.1f %.1f %d %.1f %s\n", s[k] + off, sr[k], r[k], pd[k], np[k], as[k], c[k]
        }' "$BENCH_AD_TRACE/trace"
}

# bench_ad_one SCEN LINK_SUM_BPS NAME SELECTOR RT RW RUN: one configuration,
# one window.
bench_ad_one() {
    local scen=$1 sum=$2 name=$3 sel=$4 rt=$5 rw=$6 run=$7 secs=$BENCH_AD_WINDOW
    local want=$4 sd_f sd_s share=0 bf=0 bs=0 lines0 t_io r0 r1 lat adaptive
    local -a load
    # shellcheck disable=SC2207 # the options are words without blanks
    load=($(bench_ad_load_args))
    adaptive=$(printf '[adaptive]\nmin_reload_interval = "10s"')
    if [[ $sel == auto-now ]]; then
        sel=auto
        adaptive+=$(printf '\nreload_hold_wait = "0s"')
    fi
    # selector = "auto" starts as queue-length (until measured otherwise)
    [[ $sel == auto ]] && want=queue-length
    lab_step "bench adaptive: $scen $name (selector $sel, relative_throughput $rt, $BENCH_AD_LOAD load), run $run"
    bench_pkd_stop
    : >"$PD_STATE"
    pd_write_config "$sel" "$adaptive" "relative_throughput = \"$rt\""
    bench_pkd_start "$BENCH_AD_DAEMON" --log-level info
    bench_ad_poll 60 pd_ready || { bench_note "$scen $name run $run: pathkeeperd not ready"; return 1; }
    bench_ad_poll 60 pd_maps_present || { bench_note "$scen $name run $run: maps not present"; return 1; }
    bench_ad_poll 60 bench_ad_selector_is "$want" || { bench_note "$scen $name run $run: $AD_MAP never used $want"; return 1; }
    sd_f=$(pd_eth1_path "$AD_MAP")
    sd_s=$(jq -r --arg m "$AD_MAP" '.paths[] | select(.map == $m and .netdev == "eth2") | .device' "$PD_STATE")
    if [[ $sel != auto ]]; then
        ad_io_start "rand$rw" "${load[@]}"
        sleep 5 # the TCP ramp after the start
        read -r share bf bs < <(ad_share "$sd_f" "$sd_s" "$secs")
        ad_io_stop
    else
        lat=$LAB_RUN/ad-lat-$scen-$run
        rm -f "$lat"_*.log
        lines0=$(wc -l <"$PD_LOG")
        BENCH_AD_LINES0=$lines0
        bench_ad_trace_mark
        bench_now; t_io=$BENCH_T
        ad_io_start "rand$rw" "${load[@]}" --write_lat_log="$lat" --log_avg_msec=0 --log_unix_epoch=1
        BENCH_AD_CONFIDENT_SINCE=
        if bench_ad_poll 120 bench_ad_settled; then
            bench_now
            if (($(bench_ad_reloads_now) >= 1)); then
                bench_result "$scen" "$name" settle_ms "$run" $((BENCH_T - t_io))
            else
                bench_result "$scen" "$name" settle_ms "$run" none
                bench_note "$scen $name run $run: estimates confident, no reload: kept $(dmsetup table "$AD_MAP" | grep -o 'queue-length.*\|service-time.*')"
            fi
        else
            bench_result "$scen" "$name" settle_ms "$run" none
            bench_note "$scen $name run $run: neither a reload nor confident estimates in 120 s"
        fi
        sleep 5 # the TCP ramp after the reload
        r0=$(bench_ad_reloads_now)
        read -r share bf bs < <(ad_share "$sd_f" "$sd_s" "$secs")
        r1=$(bench_ad_reloads_now)
        sleep 2 # a reload that began in the window, logged after it
        ad_io_stop
        bench_result "$scen" "$name" steady_reloads "$run" $((r1 - r0))
        BENCH_AD_STEADY=$((BENCH_AD_STEADY + r1 - r0))
        bench_ad_reload_pauses "$scen" "$name" "$run" "$lat" "$lines0" "$t_io"
    fi
    bench_result "$scen" "$name" link_sum_permille "$run" $(((bf + bs) * 8 * 1000 / secs / sum))
    bench_result "$scen" "$name" fast_share_permille "$run" "$share"
    bench_result "$scen" "$name" adaptive_reloads "$run" "$(bench_ad_reloads_now)"
    bench_note "$scen $name run $run: $sd_f $bf bytes, $sd_s $bs bytes in $secs s; table $(dmsetup table "$AD_MAP" | grep -o 'round-robin.*\|queue-length.*\|service-time.*')"
}

# bench_ad_reload_pauses SCEN NAME RUN LAT_PREFIX LOG_LINE0 T_IO_MS: the
# reload figures of one auto run (see the header).
bench_ad_reload_pauses() {
    local scen=$1 name=$2 run=$3 log=$4_lat.1.log lines0=$5 t_io=$6 reloads kernel out worst_g=0 worst_d=0 i=0 g l d hms w
    local -a rl kl
    reloads=$(bench_ad_logged_reloads "$lines0")
    kernel=$(bench_ad_trace_pairs)
    bench_result "$scen" "$name" reloads_logged "$run" "$(grep -c . <<<"$reloads")"
    if ((BENCH_AD_TRACING)); then
        bench_result "$scen" "$name" kernel_suspends "$run" "$(grep -c . <<<"$kernel")"
        if [[ -n $kernel ]]; then
            # the held time: dm_suspend's entry to the later of dm_resume's
            # return and the last path activation; the longest of the run
            bench_result "$scen" "$name" kernel_pause_ms "$run" "$(awk '{ p = $4 > $3 ? $4 : $3; if (p > m) m = p } END { printf "%.1f", m }' <<<"$kernel")"
            bench_result "$scen" "$name" kernel_suspended_ms "$run" "$(awk '$3 > m { m = $3 } END { printf "%.1f", m }' <<<"$kernel")"
            bench_result "$scen" "$name" kernel_drain_ms "$run" "$(awk '$2 > m { m = $2 } END { printf "%.1f", m }' <<<"$kernel")"
            # What a request can have waited: held from dm_suspend's entry
            # to the activation's end when the activation began at the
            # resume (requests were waiting: they start it); after a lull
            # (the activation began later, with the next request) nothing
            # was held, and that next request waited for the activation only.
            bench_result "$scen" "$name" kernel_io_held_ms "$run" "$(awk '{ a = $4 > $3 ? $4 : $3; h = ($6 >= 0 && $6 - $3 > 5) ? $4 - $6 : a; if (h > m) m = h } END { printf "%.1f", m }' <<<"$kernel")"
            bench_result "$scen" "$name" kernel_activation_ms "$run" "$(awk '$6 >= 0 && $4 - $6 > m { m = $4 - $6 } END { printf "%.1f", m }' <<<"$kernel")"
        fi
    fi
    if [[ ! -s $log ]]; then
        bench_result "$scen" "$name" reload_pause_ms "$run" none
        bench_note "$scen $name run $run: fio left no latency log"
        return 0
    fi
    lab_save "${log##*/}" "$log"
    # The daemon's view: its log line's time (the reload's end) minus its
    # "in N ms", widened by 1 s on each side.
    w=$(awk '{ printf "%.0f %.0f\n", $1 - $2 - 1000, $1 + 1000 }' <<<"$reloads")
    out=$(bench_ad_pauses "$log" $((t_io + 3000)) "$w")
    mapfile -t rl <<<"$reloads"
    while read -r kind g l rest; do
        if [[ $kind == B ]]; then
            bench_result "$scen" "$name" baseline_gap_ms "$run" "$g"
            bench_result "$scen" "$name" baseline_lat_ms "$run" "$l"
            bench_note "$scen $name run $run: $rest I/Os in fio's latency log"
            continue
        fi
        read -r _ d hms <<<"${rl[i]}"
        i=$((i + 1))
        bench_note "$scen $name run $run: reload logged at $hms (daemon: in $d ms): longest completion gap within 1 s of it $g ms, longest latency of an I/O in flight then $l ms"
        if ((g > worst_g)); then worst_g=$g; fi
        d=${d%.*}
        if ((d > worst_d)); then worst_d=$d; fi
    done <<<"$out"
    # The kernel's view: exactly dm_suspend's entry to dm_resume's return.
    if [[ -n $kernel ]]; then
        w=$(awk '{ printf "%.0f %.0f\n", $1, $1 + ($4 > $3 ? $4 : $3) }' <<<"$kernel")
        mapfile -t kl <<<"$kernel"
        i=0
        while read -r kind g l rest; do
            [[ $kind == R ]] || continue
            read -r t d p a np as comm <<<"${kl[i]}"
            i=$((i + 1))
            t=${t%.*}
            bench_note "$scen $name run $run: kernel: $comm suspended a map at $(date -d "@${t%???}" +%T).${t: -3}: drained in $d ms, resumed at +$p ms, $np path activations begun at +$as ms and done at +$a ms; fio: longest completion gap overlapping that $g ms, longest latency of an I/O in flight then $l ms"
        done < <(bench_ad_pauses "$log" $((t_io + 3000)) "$w")
    fi
    if [[ -z $reloads ]]; then
        bench_result "$scen" "$name" reload_pause_ms "$run" none
        bench_result "$scen" "$name" reload_lat_ms "$run" none
        bench_result "$scen" "$name" daemon_reload_ms "$run" none
        return 0
    fi
    bench_result "$scen" "$name" reload_pause_ms "$run" "$worst_g"
    bench_result "$scen" "$name" reload_lat_ms "$run" "$(awk '$1 == "R" && $3 > m { m = $3 } END { print m + 0 }' <<<"$out")"
    bench_result "$scen" "$name" daemon_reload_ms "$run" "$worst_d"
}

# bench_ad_set LINKS RW RUNS: one link set ("40+10": eth1 40, eth2 10 Mbit/s)
# and direction (read, write), RUNS x the four selectors.
bench_ad_set() {
    local fast=${1%+*} slow=${1#*+} rw=$2 runs=$3 run scen=xserve-$1-$2 sum sel
    sum=$(((fast + slow) * 1000000))
    BENCH_AD_STEADY=0
    for ((run = 1; run <= runs; run++)); do
        for sel in $BENCH_AD_SELECTORS; do
            if [[ $sel == auto || $sel == auto-now ]]; then
                bench_ad_one "$scen" "$sum" "$sel" "$sel" auto "$rw" "$run" || true
            else
                bench_ad_one "$scen" "$sum" "$sel" "$sel" equal "$rw" "$run" || true
            fi
        done
    done
    local autos
    autos=$(tr ' ' '\n' <<<"$BENCH_AD_SELECTORS" | grep -c '^auto' || true)
    ((autos)) || return 0
    bench_result "$scen" auto reloads_per_min all \
        "$(awk -v n="$BENCH_AD_STEADY" -v s=$((runs * autos * BENCH_AD_WINDOW)) 'BEGIN { printf "%.2f", n * 60 / s }')"
    bench_note "$scen auto: $BENCH_AD_STEADY adaptive reloads in $((runs * autos)) steady windows of $BENCH_AD_WINDOW s (auto and auto-now together)"
}

# bench_adaptive DAEMON [RUNS [WINDOW_S [LINKS...]]]: RUNS default to 3,
# WINDOW_S to 20, LINKS to 40+10 and 40+40.
bench_adaptive() {
    BENCH_AD_DAEMON=$1
    local runs=${2:-3} links rw
    BENCH_AD_WINDOW=${3:-20}
    shift $(($# < 3 ? $# : 3))
    (($#)) || set -- 40+10 40+40
    lab_check "pathkeeperd binary given (daemon=PATH)" test -x "$BENCH_AD_DAEMON"
    lab_check "fio is installed" command -v fio
    pk_mask_multipath_uevent_check
    if [[ " $BENCH_AD_SELECTORS " == *" auto"* ]]; then
        bench_ad_trace_setup || bench_note "no kprobes on dm_suspend/dm_resume: kernel_* figures not taken"
    fi
    bench_note "selectors: $BENCH_AD_SELECTORS; xserve-upper, htb both ends, fio rand{read,write} 128k direct QD8, $BENCH_AD_LOAD load $(bench_ad_load_args), windows of $BENCH_AD_WINDOW s, $runs runs, auto with min_reload_interval 10s (auto-now: and reload_hold_wait 0s); kernel $(uname -r), $(nproc) vCPUs"
    for links in "$@"; do
        # htb cannot change a root qdisc in place ("tc qdisc replace" fails
        # on the second link set): clear it first
        ad_unshape
        ad_shape "${links%+*}mbit" "${links#*+}mbit"
        for rw in read write; do
            bench_ad_set "$links" "$rw" "$runs"
        done
    done
    bench_pkd_stop
    ad_unshape
    lab_save bench-adaptive-pathkeeperd.log "$PD_LOG"
    grep -e RESULT -e NOTE "$BENCH_OUT"
}
