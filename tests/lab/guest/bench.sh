# Benchmarks (issue #5): pathkeeperd against Debian's multipathd 0.9.4 in the
# same guest and scenario. They measure and print; they never assert on times.
# Functions are prefixed bench_. Every figure becomes one line
#   RESULT <scenario> <daemon> <metric> <run> <value>
# in $BENCH_OUT (saved as files/bench-results.txt after every line), which
# bench/run on the host turns into medians and ratios. Daemons: mpd
# (multipathd -d -s) and pkd (pathkeeperd). A value of "none" means the
# figure could not be taken; the guest log says why.

BENCH_OUT=$LAB_RUN/bench-results.txt
BENCH_MPD_LOG=$LAB_RUN/bench-multipathd.log
BENCH_MPD_PID=

# Sleeping and timing without a fork (each costs ~0.1 s under TCG): read with
# a timeout on a pipe nobody writes to, and bash's own clock.
bench_sleep() {
    [[ -n ${BENCH_SLEEP_FD:-} ]] || exec {BENCH_SLEEP_FD}<> <(:)
    read -r -t "$1" -u "$BENCH_SLEEP_FD" || true
}
# bench_now: milliseconds since the epoch into BENCH_T.
bench_now() { local t=${EPOCHREALTIME/./}; BENCH_T=$((t / 1000)); }

# bench_result SCENARIO DAEMON METRIC RUN VALUE
bench_result() {
    printf 'RESULT %s %s %s %s %s\n' "$@" >>"$BENCH_OUT"
    lab_log "RESULT $*"
    lab_save bench-results.txt "$BENCH_OUT"
}

# bench_note TEXT: a free-text line for the report (same file, not parsed).
bench_note() {
    printf 'NOTE %s\n' "$*" >>"$BENCH_OUT"
    lab_log "NOTE $*"
    lab_save bench-results.txt "$BENCH_OUT"
}

# --- the kernel's view ---------------------------------------------------------

# bench_dm_paths: "N_ACTIVE N_ALL" over every multipath map, from one
# dmsetup call (a path is a maj:min followed by A or F in the status).
bench_dm_paths() {
    local s w prev='' a=0 n=0
    s=$(dmsetup status --target multipath 2>/dev/null) || true
    for w in $s; do
        if [[ $prev =~ ^[0-9]+:[0-9]+$ ]]; then
            [[ $w == A ]] && a=$((a + 1))
            [[ $w == A || $w == F ]] && n=$((n + 1))
        fi
        prev=$w
    done
    echo "$a $n"
}
bench_all_active() { local c; c=$(bench_dm_paths); [[ $c == "$1 $1" ]]; }
bench_all_present() { local c; c=$(bench_dm_paths); [[ ${c#* } == "$1" ]]; }

# bench_dm_is MAP MAJ:MIN A|F
bench_dm_is() {
    local s
    s=$(dmsetup status "$1" 2>/dev/null) || return 1
    [[ " $s " == *" $2 $3 "* ]]
}

# bench_map_of SDX: the dm map holding the path (sysfs holders, no fork).
bench_map_of() {
    local h n
    for h in /sys/block/"$1"/holders/dm-*; do
        [[ -e $h/dm/name ]] || continue
        read -r n <"$h/dm/name" && echo "$n" && return 0
    done
    return 1
}

bench_map_names() { dmsetup ls --target multipath 2>/dev/null | awk '$2 ~ /^\(/ {print $1}' || true; }

# bench_remove_maps: every multipath map goes, so the next daemon starts cold.
bench_remove_maps() {
    local m
    local sync=--noudevsync
    pgrep -x systemd-udevd >/dev/null && sync=
    for m in $(bench_map_names); do
        dmsetup remove --retry $sync "$m" || lab_log "could not remove $m"
    done
    [[ -n $sync ]] || udevadm settle --timeout=120 || true
    [[ -z $(bench_map_names) ]]
}

bench_rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true; }

# --- the daemons ----------------------------------------------------------------

# bench_mpd_conf [EXTRA_DEFAULTS_LINE]: BASELINE.md's multipath.conf, one
# setting per line.
bench_mpd_conf() {
    mkdir -p /etc/multipath
    {
        printf 'defaults {\n    user_friendly_names yes\n    find_multipaths off\n'
        [[ -n ${1:-} ]] && printf '    %s\n' "$1"
        printf '}\nblacklist {\n    devnode "^(ram|loop|fd|md|dm-|sr|scd|st|vd)[0-9]*"\n}\n'
    } >/etc/multipath.conf
    : >/etc/multipath/wwids
    rm -f /etc/multipath/bindings
}

bench_mpd_start() {
    printf '\n===== multipathd start %s\n' "$(date +%T)" >>"$BENCH_MPD_LOG"
    multipathd -d -s >>"$BENCH_MPD_LOG" 2>&1 &
    BENCH_MPD_PID=$!
    lab_log "multipathd started (pid $BENCH_MPD_PID)"
}

bench_mpd_stop() {
    local i
    kill -TERM "$BENCH_MPD_PID" 2>/dev/null || return 0
    for ((i = 0; i < 150; i++)); do kill -0 "$BENCH_MPD_PID" 2>/dev/null || break; bench_sleep 0.2; done
    kill -KILL "$BENCH_MPD_PID" 2>/dev/null || true
    wait "$BENCH_MPD_PID" 2>/dev/null || true
}

# bench_pkd_conf [TOML...]: pathkeeperd's defaults plus the given lines.
# Flap damping is off: multipathd has none by default (san_path_err_* and
# marginal_path_* are unset), and the benchmark cuts the same link in quick
# succession on purpose.
bench_pkd_conf() {
    {
        printf '%s\n' "$@"
        printf '\n[defaults]\nbindings_file = "%s"\n' "$LAB_RUN/bindings"
        printf '\n[health]\nflap_damping = false\n'
    } >"$PD_CONF"
}

bench_pkd_start() { printf '\n===== pathkeeperd start %s\n' "$(date +%T)" >>"$PD_LOG"; pd_start "$@"; }

bench_pkd_stop() {
    pd_alive || return 0
    pd_stop || { kill -KILL "$PD_PID" 2>/dev/null; wait "$PD_PID" 2>/dev/null || true; }
}

# bench_start KIND DAEMON [ARGS]: starts mpd or pkd; BENCH_PID is its pid.
bench_start() {
    local kind=$1; shift
    if [[ $kind == mpd ]]; then bench_mpd_start; BENCH_PID=$BENCH_MPD_PID
    else bench_pkd_start "$@"; BENCH_PID=$PD_PID; fi
}
bench_stop() { if [[ $1 == mpd ]]; then bench_mpd_stop; else bench_pkd_stop; fi; }

# bench_cold SCENARIO KIND RUN PATHS TIMEOUT DAEMON [ARGS]: starts the daemon
# with no map in the kernel and times it until PATHS paths are in multipath
# maps (metric coldstart_ms), then until they are all active. Returns 1 (and
# records "none") if that does not happen within TIMEOUT seconds.
bench_cold() {
    local scen=$1 kind=$2 run=$3 want=$4 timeout=$5 t0 tp c
    shift 5
    bench_now; t0=$BENCH_T
    bench_start "$kind" "$@"
    while :; do
        if bench_all_present "$want"; then break; fi
        bench_now
        if ((BENCH_T - t0 > timeout * 1000)) || ! kill -0 "$BENCH_PID" 2>/dev/null; then
            c=$(bench_dm_paths)
            bench_result "$scen" "$kind" coldstart_ms "$run" none
            bench_note "$scen $kind run $run: $c (active, in maps) of $want paths after $(((BENCH_T - t0) / 1000)) s; $(bench_map_names | wc -l) maps; daemon alive: $(kill -0 "$BENCH_PID" 2>/dev/null && echo yes || echo no)"
            return 1
        fi
        bench_sleep 0.1
    done
    bench_now; tp=$BENCH_T
    bench_result "$scen" "$kind" coldstart_ms "$run" $((tp - t0))
    lab_log "$kind: $want paths in $(bench_map_names | wc -l) maps $((tp - t0)) ms after start"
    local deadline=$((SECONDS + timeout))
    until bench_all_active "$want"; do
        ((SECONDS < deadline)) || { lab_log "$kind: not all $want paths active: $(bench_dm_paths)"; break; }
        bench_sleep 0.2
    done
    bench_now
    bench_result "$scen" "$kind" coldstart_active_ms "$run" $((BENCH_T - t0))
}

# bench_rss SCENARIO KIND RUN: VmRSS after the daemon has settled, and its
# two parts: RssAnon (the process's own heap, stacks and data) and RssFile
# (pages of the binary and the shared libraries, which other processes
# share: libc and libstdc++ alone are about 3 MiB of it).
bench_rss() {
    sleep 10
    local kb anon file
    kb=$(bench_rss_kb "$BENCH_PID")
    anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$BENCH_PID/status" 2>/dev/null || true)
    file=$(awk '/^RssFile:/ {print $2}' "/proc/$BENCH_PID/status" 2>/dev/null || true)
    bench_result "$1" "$2" rss_kb "$3" "${kb:-none}"
    bench_result "$1" "$2" rss_anon_kb "$3" "${anon:-none}"
    bench_result "$1" "$2" rss_file_kb "$3" "${file:-none}"
}

# --- link-cut cycles (xserve) ---------------------------------------------------

# bench_wait_session SESSION STATE TIMEOUT_S: polls sysfs with builtins only.
bench_wait_session() {
    local f=/sys/class/iscsi_session/$1/state s deadline=$((SECONDS + $3))
    while :; do
        read -r s <"$f" 2>/dev/null || s=
        [[ $s == "$2" ]] && return 0
        ((SECONDS < deadline)) || return 1
        bench_sleep 0.05
    done
}

# bench_wait_dm MAP MAJ:MIN A|F TIMEOUT_S
bench_wait_dm() {
    local deadline=$((SECONDS + $4))
    until bench_dm_is "$1" "$2" "$3"; do
        ((SECONDS < deadline)) || return 1
        bench_sleep 0.05
    done
}

# bench_fio_gap LOG: the longest gap (ms) between completed I/Os in a fio
# per-I/O latency log (first column: completion time in ms since the start),
# and the I/O count: "GAP_MS COUNT".
bench_fio_gap() {
    awk -F, '{ t = $1 + 0; if (NR > 1 && t - p > g) g = t - p; p = t } END { printf "%d %d\n", g, NR }' "$1"
}

# bench_cycle SCENARIO KIND RUN idle|io SDX: cut eth1 until the kernel shows
# SDX failed in its map, restore it, and time the session's LOGGED_IN and the
# dm path's return to active. Under io, fio writes to the map throughout.
bench_cycle() {
    local scen=$1 kind=$2 run=$3 mode=$4 sd=$5 map dev sess fio_pid='' t_cut t_fail t_restore t_login t_up tag
    map=$(bench_map_of "$sd") || { bench_note "$kind run $run $mode: $sd is in no map"; return 1; }
    dev=$(pd_devt "$sd")
    sess=$(ini_sdev_session "$sd")
    tag=$kind-$run-$mode
    bench_wait_dm "$map" "$dev" A 120 || { bench_note "$kind run $run $mode: $sd not active in $map before the cut"; return 1; }
    if [[ $mode == io ]]; then
        rm -f "$LAB_RUN/fio-${tag}"_*.log
        fio --name=stall --filename="/dev/mapper/$map" --rw=write --bs=4k --direct=1 \
            --ioengine=psync --size=64m --time_based --runtime=900 \
            --write_lat_log="$LAB_RUN/fio-$tag" --log_avg_msec=0 \
            --output="$LAB_RUN/fio-$tag.out" >/dev/null 2>&1 &
        fio_pid=$!
        sleep 5
    fi
    bench_now; t_cut=$BENCH_T
    fault_link_cut eth1
    if ! bench_wait_dm "$map" "$dev" F 120; then
        bench_note "$kind run $run $mode: $sd never failed in $map after the cut"
        fault_link_restore eth1
        [[ -n $fio_pid ]] && kill -INT "$fio_pid" && wait "$fio_pid"
        return 1
    fi
    bench_now; t_fail=$BENCH_T
    lab_log "$sd ($dev) failed in $map $((t_fail - t_cut)) ms after the cut"
    # Let the session reach recovery (FAILED/FREE) before the link returns.
    bench_sleep 2
    bench_now; t_restore=$BENCH_T
    fault_link_restore eth1
    if ! bench_wait_session "$sess" LOGGED_IN 180; then
        bench_note "$kind run $run $mode: $sess not LOGGED_IN within 180 s"
        [[ -n $fio_pid ]] && kill -INT "$fio_pid" && wait "$fio_pid"
        return 1
    fi
    bench_now; t_login=$BENCH_T
    if bench_wait_dm "$map" "$dev" A 120; then
        bench_now; t_up=$BENCH_T
        bench_result "$scen" "$kind" "reinstate_${mode}_ms" "$run" $((t_up - t_login))
    else
        bench_result "$scen" "$kind" "reinstate_${mode}_ms" "$run" none
        bench_note "$kind run $run $mode: $sd still failed in $map 120 s after LOGGED_IN"
    fi
    bench_result "$scen" "$kind" "fail_after_cut_${mode}_ms" "$run" $((t_fail - t_cut))
    bench_result "$scen" "$kind" "login_after_restore_${mode}_ms" "$run" $((t_login - t_restore))
    if [[ -n $fio_pid ]]; then
        sleep 3
        kill -INT "$fio_pid" 2>/dev/null || true
        local rc=0
        wait "$fio_pid" || rc=$?
        local lat=$LAB_RUN/fio-${tag}_clat.1.log gap
        [[ -s $lat ]] || lat=$LAB_RUN/fio-${tag}_lat.1.log
        if [[ -s $lat ]]; then
            gap=$(bench_fio_gap "$lat")
            bench_result "$scen" "$kind" io_stall_ms "$run" "${gap% *}"
            bench_note "$kind run $run: fio exit $rc, ${gap#* } I/Os logged, $(grep -o 'err= *[0-9]*' "$LAB_RUN/fio-$tag.out" | head -1)"
            lab_save "fio-$tag.out" "$LAB_RUN/fio-$tag.out"
        else
            bench_result "$scen" "$kind" io_stall_ms "$run" none
            bench_note "$kind run $run: fio (exit $rc) left no latency log"
        fi
    fi
}

# bench_xserve DAEMON RUNS: per run, multipathd then pathkeeperd, each from no
# maps: cold start, RSS, an idle link-cut cycle and one under fio.
bench_xserve() {
    local daemon=$1 runs=${2:-3} run kind sd
    lab_check "pathkeeperd binary given (daemon=PATH)" test -x "$daemon"
    pk_mask_multipath_uevent_check
    sd=$(ini_sdev_for "${XS_PWWN[upper]}" 10.10.1.20)
    lab_log "benchmark path: $sd (upper LUN via eth1 -> 10.10.1.20)"
    bench_note "xserve kernel $(uname -r), $(nproc) vCPUs, $(awk '/MemTotal/ {print $2}' /proc/meminfo) kB, $(dpkg-query -W -f='multipath-tools ${Version}' multipath-tools 2>/dev/null)"
    bench_pkd_conf "$(cat "${LAB_DIR%/tests/lab}/tests/data/config/xserve.conf")"
    bench_mpd_conf
    bench_remove_maps || lab_log "maps left before the benchmark: $(bench_map_names | xargs)"
    for ((run = 1; run <= runs; run++)); do
        for kind in mpd pkd; do
            lab_step "bench xserve: $kind run $run"
            if bench_cold xserve "$kind" "$run" 4 120 "$daemon" --log-level info; then
                bench_rss xserve "$kind" "$run"
                dmsetup table --target multipath | sed "s/^/$kind: /"
                bench_cycle xserve "$kind" "$run" idle "$sd" || true
                bench_cycle xserve "$kind" "$run" io "$sd" || true
            fi
            bench_stop "$kind"
            bench_remove_maps || lab_log "maps left after $kind: $(bench_map_names | xargs)"
            ini_sessions_are 4 LOGGED_IN || bench_wait_session "$(ini_sdev_session "$sd")" LOGGED_IN 120 || true
        done
    done
    lab_save bench-multipathd.log "$BENCH_MPD_LOG"
    lab_save bench-pathkeeperd.log "$PD_LOG"
    grep RESULT "$BENCH_OUT"
}

# --- scale: cold start to all maps -------------------------------------------------

# bench_scale DAEMON RUNS: SC_HOSTS x SC_TGTS x SC_LUNS scsi_debug paths.
# 1. pathkeeperd without udevd (--no-udev-sync), as the scenario leaves it;
# 2. multipathd without udevd, uid_attribute "" (WWIDs from sysfs VPD);
# 3. udevd started and settled, then multipathd (and pathkeeperd) with it.
bench_scale() {
    local daemon=$1 runs=${2:-3} run want t0 pkd_ok=0
    want=$((SC_HOSTS * SC_TGTS * SC_LUNS))
    lab_check "pathkeeperd binary given (daemon=PATH)" test -x "$daemon"
    bench_note "scale $SC_HOSTS hosts x $SC_TGTS tgts x $SC_LUNS luns = $want paths, $((SC_TGTS * SC_LUNS)) WWIDs; kernel $(uname -r), $(nproc) vCPUs, $(awk '/MemTotal/ {print $2}' /proc/meminfo) kB"
    bench_pkd_conf
    bench_remove_maps || true

    lab_step "bench scale 1: pathkeeperd without udevd"
    for ((run = 1; run <= runs; run++)); do
        if bench_cold scale-noudev pkd "$run" "$want" 60 "$daemon" --log-level info --no-udev-sync; then
            pkd_ok=1
            bench_rss scale-noudev pkd "$run"
        else
            bench_note "pathkeeperd state file: $(jq -c '{ready, mode, maps: (.maps | length), paths: (.paths | length)}' "$PD_STATE" 2>/dev/null || echo unreadable); its log's last line: $(tail -n 1 "$PD_LOG")"
            tail -n 30 "$PD_LOG"
            pd_alive && bench_rss_kb "$PD_PID" | sed 's/^/pathkeeperd VmRSS kB with no maps: /'
            bench_stop pkd
            bench_remove_maps || true
            break
        fi
        bench_stop pkd
        bench_remove_maps || true
    done

    lab_step "bench scale 2: multipathd without udevd, uid_attribute \"\""
    bench_mpd_conf 'uid_attribute ""'
    if bench_cold scale-noudev mpd 1 "$want" 120 "$daemon"; then
        bench_rss scale-noudev mpd 1
    fi
    bench_stop mpd
    bench_remove_maps || true

    lab_step "bench scale 3: start udevd and let it process every device"
    t0=$SECONDS
    pgrep -x systemd-udevd >/dev/null || /lib/systemd/systemd-udevd --daemon --resolve-names=never
    pk_mask_multipath_uevent_check
    udevadm trigger --action=add --subsystem-match=block || true
    udevadm settle --timeout=1500 || lab_log "udev still busy"
    bench_note "udevd coldplug of $want sd devices took $((SECONDS - t0)) s (not part of any figure)"
    bench_mpd_conf
    for ((run = 1; run <= runs; run++)); do
        lab_step "bench scale: mpd run $run (udevd running)"
        if bench_cold scale mpd "$run" "$want" 600 "$daemon"; then
            bench_rss scale mpd "$run"
        fi
        bench_stop mpd
        bench_remove_maps || lab_log "maps left: $(bench_map_names | wc -l)"
        if ((pkd_ok)); then
            lab_step "bench scale: pkd run $run (udevd running)"
            if bench_cold scale pkd "$run" "$want" 600 "$daemon" --log-level info; then
                bench_rss scale pkd "$run"
            fi
            bench_stop pkd
            bench_remove_maps || lab_log "maps left: $(bench_map_names | wc -l)"
        fi
    done
    lab_save bench-multipathd.log "$BENCH_MPD_LOG"
    lab_save bench-pathkeeperd.log "$PD_LOG"
    grep RESULT "$BENCH_OUT"
}
