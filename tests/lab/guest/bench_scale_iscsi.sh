# Issue #5's cold start and RSS at scale, on iSCSI paths (the scale-iscsi
# scenario: SI_LUNS LUNs x SI_SESSIONS sessions = SI_PATHS paths). Sourced by
# that scenario; uses bench.sh's RESULT/NOTE lines, daemons and configs.
#
# Phases, in one guest:
#  1. udevd stopped (as the scenario leaves it): pathkeeperd --no-udev-sync,
#     RUNS times (scenario name scale-iscsi<PATHS>-noudev). multipathd 0.9.4
#     is not run without udevd: it only enumerates udev-initialized devices
#     (see bench/README.md, scale), so it would find no path.
#  2. (udev=1) udevd started, multipath-tools' 56-dm-mpath.rules masked, a
#     coldplug of every block device, settled: timed, outside every figure.
#  3. (udev=1) multipathd (BASELINE.md's config) and pathkeeperd, alternating,
#     RUNS times each (scenario name scale-iscsi<PATHS>). The path count is
#     in the name, so that bench/run --report never pools two sizes.
# A run starts with no multipath map in the kernel; between runs every map
# is removed. With budget=SECS, no new run (except phase 1's first) and no
# coldplug starts once SECS have passed since the benchmark began; with
# until=EPOCH_SECONDS (the guest's clock is the host's), none starts after
# that time. The coldplug starts only if it is likely to leave time for a
# run (0.75 s per sd device left before the limit); what was skipped is in
# a NOTE.
#
# CPU sharing (cgroups=1, the default): as systemd runs them, udevd and the
# daemon under test each get a cgroup of their own (cgroup v2, cpu
# controller), and the lab's own processes (this script, its polls,
# iscsid) a third, so that the guest's 2 vCPUs are shared per service and
# not per process. udevd and the lab have the default weight 100; the
# daemon's group has the CPUWeight= of that daemon's unit
# (bench_si_weight): 1000 for pathkeeperd, 100 for Debian 12's
# multipathd. With cgroups=0 every
# process shares one flat run queue, as before 2026-12-05: there udevd's
# workers, busy with the new maps' events, leave a daemon's one table
# thread about 1/20 of the CPU. See bench/README.md (scale-iscsi).
#
# Figures per run: coldstart_maps_ms (all SI_LUNS maps exist), coldstart_ms
# (all SI_PATHS paths in maps), coldstart_active_ms (all active), for
# pathkeeperd ready_ms (its state file says ready: the first pass is done,
# udev's processing of the new maps included), and 10 s after that (after
# all active for multipathd) rss_kb (VmRSS), hwm_kb (VmHWM) and cpu_ms
# (utime + stime).

BENCH_SI_POLL=0.5
BENCH_SI_CG=/sys/fs/cgroup
BENCH_SI_CGROUPS=0 # set by bench_si_cgroups once the groups exist

# bench_si_cgroups: the three groups (udevd, daemon, lab), with every
# process there is now in lab. Kernel threads stay in the root group, as
# under systemd. Returns 1 (and the run stays flat) when cgroup v2 or its
# cpu controller is missing.
bench_si_cgroups() {
    local p
    mountpoint -q "$BENCH_SI_CG" || mount -t cgroup2 cgroup2 "$BENCH_SI_CG" || return 1
    grep -qw cpu "$BENCH_SI_CG/cgroup.controllers" || return 1
    echo +cpu >"$BENCH_SI_CG/cgroup.subtree_control" || return 1
    mkdir -p "$BENCH_SI_CG/udevd" "$BENCH_SI_CG/daemon" "$BENCH_SI_CG/lab" || return 1
    for p in $(<"$BENCH_SI_CG/cgroup.procs"); do
        echo "$p" >"$BENCH_SI_CG/lab/cgroup.procs" 2>/dev/null || true # kernel threads refuse
    done
    BENCH_SI_CGROUPS=1
    lab_log "cgroups: udevd, daemon and lab, cpu.weight $(<"$BENCH_SI_CG/daemon/cpu.weight") each"
}

# bench_si_unit_weight UNIT-FILE: the unit's CPUWeight=, or systemd's
# default 100.
bench_si_unit_weight() {
    local w
    w=$(sed -n 's/^CPUWeight=\([0-9]*\)$/\1/p' "$1" 2>/dev/null | tail -n 1)
    echo "${w:-100}"
}

# bench_si_weight KIND: the daemon group's cpu.weight for the next run, as
# systemd would set it from that daemon's unit: pathkeeperd's shipped unit
# (packaging/pathkeeperd.service), and multipathd's as Debian installs it.
# BENCH_SI_PKD_WEIGHT and BENCH_SI_MPD_WEIGHT override them (e.g. 1000 for
# multipathd, as upstream's newer unit sets).
bench_si_weight() {
    local w
    ((BENCH_SI_CGROUPS)) || return 0
    if [[ $1 == mpd ]]; then
        w=${BENCH_SI_MPD_WEIGHT:-$(bench_si_unit_weight /lib/systemd/system/multipathd.service)}
    else
        w=${BENCH_SI_PKD_WEIGHT:-$(bench_si_unit_weight "$LAB_DIR/../../packaging/pathkeeperd.service")}
    fi
    echo "$w" >"$BENCH_SI_CG/daemon/cpu.weight"
    lab_log "cgroup daemon: cpu.weight $(<"$BENCH_SI_CG/daemon/cpu.weight") for $1"
}

# bench_si_coldplug LABEL: starts udevd in its group, masks multipath's
# uevent rule and coldplugs every block device, settled (up to 2400 s);
# the time is a NOTE, outside every figure.
bench_si_coldplug() {
    local t0=$SECONDS
    lab_step "$1: start udevd, coldplug $SI_PATHS sd devices"
    bench_si_in udevd /lib/systemd/systemd-udevd --daemon --resolve-names=never
    pk_mask_multipath_uevent_check
    udevadm trigger --action=add --subsystem-match=block || true
    if udevadm settle --timeout=2400; then
        bench_note "udevd coldplug of $SI_PATHS sd devices took $((SECONDS - t0)) s (not part of any figure)"
    else
        bench_note "udevd coldplug not settled after $((SECONDS - t0)) s"
    fi
}

# bench_si_in GROUP CMD...: runs CMD with this shell in GROUP, so that what
# CMD forks starts there (exact, unlike moving it after the fork), then
# moves the shell back to lab. Without cgroups, just CMD.
bench_si_in() {
    local group=$1 rc=0
    shift
    ((BENCH_SI_CGROUPS)) || { "$@"; return; }
    echo "$BASHPID" >"$BENCH_SI_CG/$group/cgroup.procs"
    "$@" || rc=$?
    echo "$BASHPID" >"$BENCH_SI_CG/lab/cgroup.procs"
    return "$rc"
}

# bench_si_dm: "MAPS ACTIVE PATHS" over every multipath map (2 forks: a bash
# loop over the words of 1000 paths costs seconds under TCG).
bench_si_dm() {
    dmsetup status --target multipath 2>/dev/null | awk '
        / multipath / { m++; for (i = 1; i < NF; i++) if ($i ~ /^[0-9]+:[0-9]+$/) { n++; if ($(i + 1) == "A") a++ } }
        END { print m + 0, a + 0, n + 0 }'
}

# bench_si_limits BUDGET UNTIL: from now on, stop starting runs after
# BUDGET seconds or at the epoch time UNTIL (0: no limit).
bench_si_limits() {
    BENCH_SI_BUDGET=${1:-0}
    BENCH_SI_UNTIL=${2:-0}
    BENCH_SI_T0=$SECONDS
}

# bench_si_left: seconds left before the budget or the until= time (a large
# number without either).
bench_si_left() {
    local left=999999 now=${EPOCHREALTIME%.*}
    ((BENCH_SI_BUDGET == 0)) || left=$((BENCH_SI_BUDGET - (SECONDS - BENCH_SI_T0)))
    ((BENCH_SI_UNTIL == 0 || BENCH_SI_UNTIL - now >= left)) || left=$((BENCH_SI_UNTIL - now))
    echo "$left"
}
bench_si_budget_ok() { (($(bench_si_left) > 0)); }

# bench_si_remove_maps: every multipath map goes, in one dmsetup call
# (remove_all: this guest has no other dm device).
bench_si_remove_maps() {
    local t0 m left
    t0=$(si_ms)
    dmsetup remove_all --noudevsync >/dev/null 2>&1 || true
    for m in $(bench_map_names); do
        dmsetup remove --retry --noudevsync "$m" || lab_log "could not remove $m"
    done
    pgrep -x systemd-udevd >/dev/null && { udevadm settle --timeout=600 || lab_log "udev still busy after the removal"; }
    left=$(bench_map_names | wc -l)
    lab_log "maps removed in $(($(si_ms) - t0)) ms; $left left"
    ((left == 0))
}

# bench_si_settled SCEN KIND RUN PID: 10 s later, the daemon's memory and CPU.
bench_si_settled() {
    local pid=$4 st f
    sleep 10
    kill -0 "$pid" 2>/dev/null || { bench_note "$1 $2 run $3: the daemon exited before the RSS reading"; return 1; }
    bench_result "$1" "$2" rss_kb "$3" "$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")"
    # Its parts, as bench_rss (bench.sh) explains.
    bench_result "$1" "$2" rss_anon_kb "$3" "$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status")"
    bench_result "$1" "$2" rss_file_kb "$3" "$(awk '/^RssFile:/ {print $2}' "/proc/$pid/status")"
    bench_result "$1" "$2" hwm_kb "$3" "$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")"
    # Transparent huge pages in it (khugepaged folds 2 MB of a heap at once),
    # and the whole map of a reading over the 16 MiB goal, to see where it went.
    bench_result "$1" "$2" anon_huge_kb "$3" "$(awk '/^AnonHugePages:/ {print $2}' "/proc/$pid/smaps_rollup")"
    if (($(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status") >= 16384)); then
        lab_save "smaps-$1-$2-$3" "/proc/$pid/smaps" || true
    fi
    st=$(<"/proc/$pid/stat")
    read -ra f <<<"${st##*) }"
    # Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the comm.
    bench_result "$1" "$2" cpu_ms "$3" $(((f[11] + f[12]) * 1000 / $(getconf CLK_TCK)))
}

# bench_si_cold SCEN KIND RUN TIMEOUT DAEMON [ARGS]: the daemon from no maps to
# all SI_PATHS paths active; then its settled memory and CPU; then stops it.
bench_si_cold() {
    local scen=$1 kind=$2 run=$3 timeout=$4 t0 now c maps a n t_maps='' t_in='' next
    shift 4
    lab_step "bench $scen: $kind run $run ($SI_PATHS paths, $SI_LUNS maps)"
    c=$(bench_si_dm)
    [[ $c == "0 0 0" ]] || lab_log "WARNING: maps before the start: $c"
    bench_si_weight "$kind"
    t0=$(si_ms)
    bench_si_in daemon bench_start "$kind" "$@"
    next=$((SECONDS + 30))
    # The RESULT lines are written after the loop: each costs a copy to the
    # results share, which would delay the next poll.
    local t_act='' why=''
    while :; do
        read -r maps a n <<<"$(bench_si_dm)"
        now=$(si_ms)
        [[ -n $t_maps ]] || ((maps < SI_LUNS)) || t_maps=$((now - t0))
        [[ -n $t_in ]] || ((n < SI_PATHS)) || t_in=$((now - t0))
        ((a < SI_PATHS)) || { t_act=$((now - t0)); break; }
        if ((now - t0 > timeout * 1000)) || ! kill -0 "$BENCH_PID" 2>/dev/null; then
            why="after $(((now - t0) / 1000)) s $maps maps, $n of $SI_PATHS paths in maps, $a active; daemon alive: $(kill -0 "$BENCH_PID" 2>/dev/null && echo yes || echo no)"
            break
        fi
        if ((SECONDS >= next)); then
            lab_log "$kind: $(((now - t0) / 1000)) s: $maps maps, $n paths in maps, $a active"
            next=$((SECONDS + 30))
        fi
        bench_sleep "$BENCH_SI_POLL"
    done
    bench_result "$scen" "$kind" coldstart_maps_ms "$run" "${t_maps:-none}"
    bench_result "$scen" "$kind" coldstart_ms "$run" "${t_in:-none}"
    bench_result "$scen" "$kind" coldstart_active_ms "$run" "${t_act:-none}"
    [[ -z $why ]] || bench_note "$scen $kind run $run: $why"
    lab_log "$kind run $run: maps $t_maps ms, paths in maps $t_in ms; now $(bench_si_dm) (maps active paths)"
    if [[ $kind == pkd ]]; then
        # Memory is read once the daemon is ready: with udevd busy its first
        # pass (and so its first D-Bus publication, ~11 MiB of objects at
        # 1000 paths) ends long after the maps are live; a reading before
        # that is not the daemon's steady state.
        local r
        for ((r = 0; r < 1200; r++)); do
            pd_ready && break
            kill -0 "$BENCH_PID" 2>/dev/null || break
            bench_sleep 0.5
        done
        if pd_ready; then
            bench_result "$scen" "$kind" ready_ms "$run" $(($(si_ms) - t0))
        else
            bench_result "$scen" "$kind" ready_ms "$run" none
            bench_note "$scen $kind run $run: not ready 600 s after all paths were active"
        fi
    fi
    if kill -0 "$BENCH_PID" 2>/dev/null; then
        bench_si_settled "$scen" "$kind" "$run" "$BENCH_PID" || true
    fi
    [[ $kind != pkd ]] || grep -E 'ready|error|warn' "$PD_LOG" | tail -n 5 || true
    bench_stop "$kind"
    lab_save bench-multipathd.log "$BENCH_MPD_LOG" 2>/dev/null || true
    lab_save bench-pathkeeperd.log "$PD_LOG" 2>/dev/null || true
    bench_si_remove_maps || lab_log "maps left after $kind run $run: $(bench_map_names | wc -l)"
}

# bench_scale_iscsi DAEMON RUNS UDEV BUDGET UNTIL CGROUPS
bench_scale_iscsi() {
    local daemon=$1 runs=${2:-3} udev=${3:-1} run kind t0 left
    bench_si_limits "${4:-0}" "${5:-0}"
    lab_check "pathkeeperd binary given (daemon=PATH)" test -x "$daemon"
    if [[ ${6:-1} == 1 ]]; then
        bench_si_cgroups || lab_log "WARNING: no cgroup v2 cpu controller; every process shares one run queue"
    fi
    bench_note "scale-iscsi: CPU shared $( ((BENCH_SI_CGROUPS)) && echo "per service (cgroups udevd, daemon, lab; cpu.weight 100, the daemon's as its unit sets: pathkeeperd $(bench_si_unit_weight "$LAB_DIR/../../packaging/pathkeeperd.service"), multipathd $(bench_si_unit_weight /lib/systemd/system/multipathd.service))" || echo "per process (one flat run queue)")"
    bench_note "scale-iscsi: $SI_LUNS LUNs x $SI_SESSIONS sessions = $SI_PATHS iSCSI paths (LIO fileio ${SI_MB} MiB, 2 portals), $SI_LUNS WWIDs; kernel $(uname -r), $(nproc) vCPUs, $(awk '/MemTotal/ {print $2}' /proc/meminfo) kB; $(dpkg-query -W -f='multipath-tools ${Version}' multipath-tools 2>/dev/null); setup: LIO configfs ${SI_T_TARGET:-?} ms, logins + SCSI scan ${SI_T_SCAN:-?} ms"
    bench_pkd_conf
    bench_mpd_conf
    bench_si_remove_maps || true

    lab_step "bench scale-iscsi 1: pathkeeperd without udevd (--no-udev-sync)"
    for ((run = 1; run <= runs; run++)); do
        # The first run always: it is the figure this scenario exists for.
        ((run == 1)) || bench_si_budget_ok || { bench_note "scale-iscsi$SI_PATHS-noudev pkd runs $run..$runs skipped: time limit reached"; break; }
        bench_si_cold "scale-iscsi$SI_PATHS-noudev" pkd "$run" 900 "$daemon" --log-level info --no-udev-sync
    done

    if [[ $udev == 1 ]]; then
        left=$(bench_si_left)
        if ((left < SI_PATHS * 3 / 4)); then
            bench_note "scale-iscsi (udevd running): not run, only $left s of the time limit left for a coldplug of $SI_PATHS devices and runs"
        else
            lab_step "bench scale-iscsi 2: start udevd, coldplug $SI_PATHS sd devices"
            t0=$SECONDS
            bench_si_in udevd /lib/systemd/systemd-udevd --daemon --resolve-names=never
            pk_mask_multipath_uevent_check
            udevadm trigger --action=add --subsystem-match=block || true
            ((left < 2400)) || left=2400
            if udevadm settle --timeout="$left"; then
                bench_note "udevd coldplug of $SI_PATHS sd devices took $((SECONDS - t0)) s (not part of any figure)"
            else
                bench_note "udevd coldplug of $SI_PATHS sd devices not settled after $((SECONDS - t0)) s"
            fi
            lab_log "$(find /run/udev/data -name 'b*' | wc -l) block devices in udev's database"

            lab_step "bench scale-iscsi 3: multipathd and pathkeeperd with udevd"
            for ((run = 1; run <= runs; run++)); do
                for kind in mpd pkd; do
                    bench_si_budget_ok || { bench_note "scale-iscsi $kind run $run skipped: time limit reached"; continue; }
                    if [[ $kind == mpd ]]; then
                        bench_si_cold "scale-iscsi$SI_PATHS" mpd "$run" 900 "$daemon"
                    else
                        bench_si_cold "scale-iscsi$SI_PATHS" pkd "$run" 900 "$daemon" --log-level info
                    fi
                done
            done
        fi
    fi
    lab_save bench-multipathd.log "$BENCH_MPD_LOG" 2>/dev/null || true
    lab_save bench-pathkeeperd.log "$PD_LOG"
    grep RESULT "$BENCH_OUT"
}

# bench_si_profile DAEMON SECS: where pathkeeperd's CPU goes at this scale.
# It starts (--no-udev-sync, from no maps) under perf (cpu-clock samples
# with DWARF call graphs) for SECS seconds, then reports each thread's CPU
# time. Saved: perf.data, the guest's kallsyms (for `perf report --kallsyms`
# on the host, which has the same binaries), the log and the thread table.
# Not a benchmark figure: perf's sampling slows the process under TCG.
bench_si_profile() {
    local daemon=$1 secs=${2:-45} pid='' i t st f
    command -v perf >/dev/null || { lab_log "profile: no perf on this machine (apt-get install linux-perf)"; return 1; }
    bench_pkd_conf
    bench_si_remove_maps || true
    cat /proc/kallsyms >"$LAB_RUN/kallsyms"
    printf '\n===== pathkeeperd start %s (perf)\n' "$(date +%T)" >>"$PD_LOG"
    perf record -q -F 97 --call-graph dwarf,8192 -o "$LAB_RUN/perf.data" -- \
        "$daemon" --config "$PD_CONF" --config-dir /nonexistent --state-file "$PD_STATE" \
        --log-target stderr --log-level info --no-udev-sync >>"$PD_LOG" 2>&1 &
    local perf_pid=$!
    for ((i = 0; i < 100; i++)); do
        # perf's one child, whatever the binary is called (its comm is
        # the file name, cut to 15 characters).
        pid=$(pgrep -P "$perf_pid" | head -n 1 || true)
        [[ -z $pid ]] || break
        sleep 0.1
    done
    [[ -n $pid ]] || { lab_log "profile: pathkeeperd did not start under perf"; return 1; }
    lab_log "profile: pathkeeperd pid $pid under perf for $secs s"
    local t0=$SECONDS next=$((SECONDS + 5))
    while ((SECONDS - t0 < secs)); do
        ((SECONDS < next)) || { lab_log "profile: $(bench_si_dm) (maps active paths)"; next=$((SECONDS + 5)); }
        sleep 0.5
    done
    if ! kill -0 "$pid" 2>/dev/null; then
        lab_log "profile: pathkeeperd exited: $(tail -n 5 "$PD_LOG")"
        lab_save bench-pathkeeperd.log "$PD_LOG"
        return 1
    fi
    {
        echo "thread tid utime_ms stime_ms"
        for t in /proc/$pid/task/*; do
            st=$(<"$t/stat")
            read -ra f <<<"${st##*) }"
            echo "$(<"$t/comm") ${t##*/} $((f[11] * 1000 / $(getconf CLK_TCK))) $((f[12] * 1000 / $(getconf CLK_TCK)))"
        done
    } >"$LAB_RUN/threads.txt"
    cat "$LAB_RUN/threads.txt"
    cat "/proc/$pid/smaps" >"$LAB_RUN/smaps" 2>/dev/null || true
    grep -E '^(Rss|Pss|Anonymous|Private_Dirty):' "/proc/$pid/smaps_rollup" || true
    kill -TERM "$pid"
    wait "$perf_pid" || true
    lab_save threads.txt "$LAB_RUN/threads.txt"
    lab_save smaps "$LAB_RUN/smaps"
    lab_save kallsyms "$LAB_RUN/kallsyms"
    lab_save perf.data "$LAB_RUN/perf.data"
    lab_save bench-pathkeeperd.log "$PD_LOG"
}

# bench_si_heap DAEMON SECS: what pathkeeperd's heap holds at this scale.
# It starts (--no-udev-sync, from no maps) under heaptrack, runs SECS
# seconds past ready, and is then killed with SIGKILL: nothing is freed on
# the way out, so what heaptrack reports as leaked is exactly the heap that
# was live at that moment, by allocation site (`heaptrack_print --print-leaks
# heaptrack.pathkeeperd.zst` on the host, which has the same binaries). Also
# saved: smaps_rollup and the log. Not a benchmark figure: heaptrack slows
# every allocation.
bench_si_heap() {
    local daemon=$1 secs=${2:-30} pid='' i ht_pid
    command -v heaptrack >/dev/null || { lab_log "heap: no heaptrack on this machine (apt-get install heaptrack)"; return 1; }
    bench_pkd_conf
    bench_si_remove_maps || true
    rm -f "$PD_STATE" "$LAB_RUN"/heaptrack.pathkeeperd.*
    printf '\n===== pathkeeperd start %s (heaptrack)\n' "$(date +%T)" >>"$PD_LOG"
    heaptrack -o "$LAB_RUN/heaptrack.pathkeeperd" \
        "$daemon" --config "$PD_CONF" --config-dir /nonexistent --state-file "$PD_STATE" \
        --log-target stderr --log-level info --no-udev-sync >>"$PD_LOG" 2>&1 &
    ht_pid=$!
    for ((i = 0; i < 3000; i++)); do
        pd_ready && break
        sleep 0.2
    done
    local comm=${daemon##*/}
    pid=$(pgrep -x "${comm:0:15}" || true)
    [[ -n $pid ]] && pd_ready || { lab_log "heap: pathkeeperd not ready under heaptrack: $(tail -n 5 "$PD_LOG")"; return 1; }
    lab_log "heap: pathkeeperd pid $pid ready under heaptrack: $(bench_si_dm) (maps active paths); $secs s more"
    sleep "$secs"
    grep -E '^(Rss|Pss|Anonymous|Private_Dirty):' "/proc/$pid/smaps_rollup" | tee "$LAB_RUN/smaps_rollup" || true
    kill -KILL "$pid"
    wait "$ht_pid" || true
    lab_save smaps_rollup "$LAB_RUN/smaps_rollup"
    for i in "$LAB_RUN"/heaptrack.pathkeeperd.*; do lab_save "${i##*/}" "$i"; done
    lab_save bench-pathkeeperd.log "$PD_LOG"
}
