# A scale-iscsi guest script (lab run scale-iscsi ... -- script
# script=$PWD/bench/si-backoff.sh daemon=PATH [runs=3] [steady=60]
# [mpd=1] [until=EPOCH]): what the checker's backoff of working paths
# ([health] max_checker_interval, 0275396) changes at 1000 paths. One
# binary, two configurations, alternately in one boot with udevd running
# and the CPU shared per service (as bench_scale_iscsi does):
#   fixed    max_checker_interval = checker_interval (5 s): the behaviour
#            before 0275396, every working path checked every 5 s;
#   backoff  the default (max 4 x 5 s = 20 s).
# Per run, the usual cold start figures (bench_si_cold), and after the
# 10 s reading the daemon's CPU over STEADY more seconds
# (steady_cpu_ms_per_min) with the TEST UNIT READY commands it sent then
# (steady_tur_per_s, from the sd devices' iodone_cnt, which counts every
# completed SCSI command: the checker's TURs, the lab's idle maps send no
# I/O). mpd=1 adds one multipathd run with the same steady figures at the
# end, as a reference. See bench/README.md, "The checker's backoff".
source "$LAB_DIR/guest/bench_scale_iscsi.sh"
SB_D=$(si_arg daemon "" "$@")
SB_RUNS=$(si_arg runs 3 "$@")
SB_STEADY=$(si_arg steady 60 "$@")
SB_MPD=$(si_arg mpd 1 "$@")
bench_si_limits 0 "$(si_arg until 0 "$@")"
lab_check "pathkeeperd binary given (daemon=PATH)" test -x "$SB_D"

# Every sd device's completed SCSI commands, summed (hex counters; one cat,
# printf converts).
sb_iodone() {
    # shellcheck disable=SC2046
    printf '%d\n' $(cat /sys/block/sd*/device/iodone_cnt) | awk '{ s += $1 } END { print s + 0 }'
}
sb_cpu_ms() {
    local st f
    st=$(<"/proc/$1/stat")
    read -ra f <<<"${st##*) }"
    echo $(((f[11] + f[12]) * 1000 / $(getconf CLK_TCK)))
}

# The 10 s reading as bench_si_settled makes it, then the steady figures.
eval "sb_settled_10s () $(declare -f bench_si_settled | tail -n +2)"
bench_si_settled() {
    local pid=$4 c0 c1 i0 i1 t0 t1
    sb_settled_10s "$@" || return 1
    c0=$(sb_cpu_ms "$pid")
    i0=$(sb_iodone)
    t0=$(si_ms)
    sleep "$SB_STEADY"
    kill -0 "$pid" 2>/dev/null || { bench_note "$1 $2 run $3: the daemon exited in the steady window"; return 1; }
    c1=$(sb_cpu_ms "$pid")
    i1=$(sb_iodone)
    t1=$(si_ms)
    bench_result "$1" "$2" steady_cpu_ms_per_min "$3" $(((c1 - c0) * 60000 / (t1 - t0)))
    bench_result "$1" "$2" steady_tur_per_s "$3" $(((i1 - i0) * 1000 / (t1 - t0)))
}

sb_conf() { # fixed|backoff
    bench_pkd_conf
    [[ $1 == backoff ]] || printf 'max_checker_interval = "5s"\n' >>"$PD_CONF"
    lab_log "config $1: $(grep -c . "$PD_CONF") lines, $(grep max_checker_interval "$PD_CONF" || echo 'max_checker_interval unset')"
}

bench_si_cgroups || lab_log "WARNING: no cgroup v2 cpu controller; every process shares one run queue"
bench_note "si-backoff: CPU shared $( ((BENCH_SI_CGROUPS)) && echo "per service" || echo "per process"); $SI_LUNS LUNs x $SI_SESSIONS sessions = $SI_PATHS paths; $(nproc) vCPUs; steady window $SB_STEADY s"
bench_mpd_conf
bench_si_remove_maps || true

bench_si_coldplug si-backoff

for ((run = 1; run <= SB_RUNS; run++)); do
    for conf in fixed backoff; do
        bench_si_budget_ok || { bench_note "si-backoff $conf run $run skipped: time limit reached"; continue; }
        sb_conf "$conf"
        bench_si_cold "scale-iscsi$SI_PATHS-$conf" pkd "$run" 900 "$SB_D" --log-level info
    done
done
if [[ $SB_MPD == 1 ]] && bench_si_budget_ok; then
    bench_si_cold "scale-iscsi$SI_PATHS-mpd" mpd 1 900 "$SB_D"
fi
lab_save bench-pathkeeperd.log "$PD_LOG"
grep RESULT "$BENCH_OUT"
