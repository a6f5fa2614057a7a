# A scale-iscsi guest script (lab run scale-iscsi ... -- script
# script=$PWD/bench/si-steady.sh daemon=PATH [warm=60] [window=60]
# [perf=60] [strace=20] [conf=TOML-LINE]...): where pathkeeperd's CPU goes
# once everything is up, at 1000 paths and with nothing happening.
# bench/si-backoff.sh measured 20.5 s of CPU a minute in that state,
# twice multipathd's, with fewer TEST UNIT READY commands; this says what
# the rest is.
#
# The daemon starts from no maps (--no-udev-sync: no udevd, so a boot is
# short; nothing arrives from udev in the steady state anyway), in its own
# cgroup as bench_scale_iscsi does. WARM seconds after it is ready (the
# checker's backoff has reached its cap by then), three windows follow, one
# after the other, each alone so that the tools do not bias the others:
#   window  WINDOW s untouched: CPU per minute, per thread, and the TURs
#           sent (iodone_cnt);
#   strace  STRACE s under `strace -c -f`: system calls by count and time
#           (strace slows every call, so only the counts are figures);
#   perf    PERF s of `perf record -p` (cpu-clock, DWARF call graphs), for
#           `perf report --kallsyms kallsyms -i perf.data` on the host,
#           which has the same binary.
# conf= lines are added to the config (e.g. conf='[adaptive]' twice with
# the setting), so two configurations can be compared in one boot.
source "$LAB_DIR/guest/bench_scale_iscsi.sh"
SS_D=$(si_arg daemon "" "$@")
SS_WARM=$(si_arg warm 60 "$@")
SS_WINDOW=$(si_arg window 60 "$@")
SS_PERF=$(si_arg perf 60 "$@")
SS_STRACE=$(si_arg strace 20 "$@")
lab_check "pathkeeperd binary given (daemon=PATH)" test -x "$SS_D"

ss_conf_lines=()
for a; do
    [[ $a != conf=* ]] || ss_conf_lines+=("${a#conf=}")
done

ss_iodone() {
    # shellcheck disable=SC2046
    printf '%d\n' $(cat /sys/block/sd*/device/iodone_cnt) | awk '{ s += $1 } END { print s + 0 }'
}
# ss_threads PID: "comm tid cpu_ms" per thread.
ss_threads() {
    local t st f
    for t in /proc/$1/task/*; do
        st=$(<"$t/stat")
        read -ra f <<<"${st##*) }"
        echo "$(<"$t/comm") ${t##*/} $(((f[11] + f[12]) * 1000 / $(getconf CLK_TCK)))"
    done
}

bench_si_cgroups || lab_log "WARNING: no cgroup v2 cpu controller; every process shares one run queue"
bench_pkd_conf "${ss_conf_lines[@]}"
lab_log "config: $(tr '\n' ' ' <"$PD_CONF")"
bench_si_remove_maps || true

# The scenario's `udevadm control --exit` leaves udevd's control socket
# behind, which pathkeeperd takes for a running udevd: it would listen to
# udev instead of the kernel and look, at every publication, for the udev
# database entries of 1000 paths that udev never processed (1000 failed
# opens each time). No udevd, no socket, as on a host without udev.
pgrep -x systemd-udevd >/dev/null || rm -f /run/udev/control
lab_step "si-steady: pathkeeperd to ready, then $SS_WARM s"
t0=$(si_ms)
bench_si_weight pkd
bench_si_in daemon bench_start pkd "$SS_D" --log-level info --no-udev-sync
pid=$BENCH_PID
for ((r = 0; r < 1200; r++)); do
    pd_ready && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
done
pd_ready || { lab_log "si-steady: not ready: $(tail -n 5 "$PD_LOG")"; lab_save bench-pathkeeperd.log "$PD_LOG"; return 1; }
bench_note "si-steady: ready $(($(si_ms) - t0)) ms after the start; $(bench_si_dm) (maps active paths)"
sleep "$SS_WARM"

lab_step "si-steady: $SS_WINDOW s untouched"
ss_threads "$pid" >"$LAB_RUN/threads0"
i0=$(ss_iodone)
w0=$(si_ms)
sleep "$SS_WINDOW"
kill -0 "$pid" 2>/dev/null || { lab_log "si-steady: the daemon exited"; lab_save bench-pathkeeperd.log "$PD_LOG"; return 1; }
ss_threads "$pid" >"$LAB_RUN/threads1"
i1=$(ss_iodone)
w1=$(si_ms)
scen="scale-iscsi$SI_PATHS-steady"
total=0
while read -r comm tid ms; do
    before=$(awk -v t="$tid" '$2 == t {print $3}' "$LAB_RUN/threads0")
    d=$((ms - ${before:-0}))
    total=$((total + d))
    bench_result "$scen" pkd "cpu_ms_per_min_$comm-$tid" 1 $((d * 60000 / (w1 - w0)))
done <"$LAB_RUN/threads1"
bench_result "$scen" pkd steady_cpu_ms_per_min 1 $((total * 60000 / (w1 - w0)))
bench_result "$scen" pkd steady_tur_per_s 1 $(((i1 - i0) * 1000 / (w1 - w0)))
bench_result "$scen" pkd rss_kb 1 "$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")"

if ((SS_STRACE > 0)) && command -v strace >/dev/null; then
    lab_step "si-steady: $SS_STRACE s under strace -c"
    timeout -s INT "$SS_STRACE" strace -c -f -q -p "$pid" -o "$LAB_RUN/strace.txt" || true
    sleep 1
    cat "$LAB_RUN/strace.txt" || true
    lab_save strace.txt "$LAB_RUN/strace.txt"
elif ((SS_STRACE > 0)); then
    lab_log "si-steady: no strace in the guest"
fi

if ((SS_PERF > 0)) && command -v perf >/dev/null; then
    lab_step "si-steady: $SS_PERF s under perf record"
    cat /proc/kallsyms >"$LAB_RUN/kallsyms"
    perf record -q -F 97 --call-graph dwarf,8192 -p "$pid" -o "$LAB_RUN/perf.data" -- sleep "$SS_PERF" || true
    lab_save kallsyms "$LAB_RUN/kallsyms"
    lab_save perf.data "$LAB_RUN/perf.data"
elif ((SS_PERF > 0)); then
    lab_log "si-steady: no perf in the guest"
fi
lab_save threads1 "$LAB_RUN/threads1"
bench_stop pkd
lab_save bench-pathkeeperd.log "$PD_LOG"
grep RESULT "$BENCH_OUT"
