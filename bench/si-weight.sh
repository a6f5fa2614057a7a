# A scale-iscsi guest script (lab run scale-iscsi ... -- script
# script=$PWD/bench/si-weight.sh daemon=PATH [runs=3] [steady=1]
# [until=EPOCH]): the cold start at 1000 paths with udevd running when
# each daemon's cgroup has the CPUWeight= of its unit, as under systemd
# (bench_si_weight): pathkeeperd's unit sets 1000, Debian 12's multipathd
# unit nothing (100); upstream's newer multipathd unit sets 1000 too. Per
# round, alternately (so that the host's noise falls on all of them):
#   pkd       pathkeeperd, weight 1000 (its unit);
#   mpd       multipathd, weight 100 (Debian 12's unit);
#   pkd-100   pathkeeperd, weight 100 (what it had before the unit set it);
#   mpd-1000  multipathd, weight 1000 (upstream's unit).
# With steady=1 the boot first runs bench/si-steady.sh (no udevd yet),
# with the same daemon= and its own arguments. See bench/README.md, "The
# daemon's CPU weight".
source "$LAB_DIR/guest/bench_scale_iscsi.sh"
SW_D=$(si_arg daemon "" "$@")
SW_RUNS=$(si_arg runs 3 "$@")
bench_si_limits 0 "$(si_arg until 0 "$@")"
lab_check "pathkeeperd binary given (daemon=PATH)" test -x "$SW_D"

if [[ $(si_arg steady 1 "$@") == 1 ]]; then
    source "$(dirname "$(si_arg script "" "$@")")/si-steady.sh" "$@" || lab_log "si-steady failed; going on"
fi

((BENCH_SI_CGROUPS)) || bench_si_cgroups || { lab_log "si-weight: no cgroup v2 cpu controller: nothing to compare"; return 1; }
bench_note "si-weight: $SI_LUNS LUNs x $SI_SESSIONS sessions = $SI_PATHS paths; $(nproc) vCPUs; units: pathkeeperd CPUWeight=$(bench_si_unit_weight "$LAB_DIR/../../packaging/pathkeeperd.service"), multipathd $(bench_si_unit_weight /lib/systemd/system/multipathd.service)"
bench_pkd_conf
bench_mpd_conf
bench_si_remove_maps || true

bench_si_coldplug si-weight

for ((run = 1; run <= SW_RUNS; run++)); do
    for kind in pkd mpd pkd-100 mpd-1000; do
        bench_si_budget_ok || { bench_note "si-weight $kind run $run skipped: time limit reached"; continue; }
        unset BENCH_SI_PKD_WEIGHT BENCH_SI_MPD_WEIGHT
        case $kind in
        pkd) bench_si_cold "scale-iscsi$SI_PATHS" pkd "$run" 900 "$SW_D" --log-level info ;;
        mpd) bench_si_cold "scale-iscsi$SI_PATHS" mpd "$run" 900 "$SW_D" ;;
        pkd-100) BENCH_SI_PKD_WEIGHT=100 bench_si_cold "scale-iscsi$SI_PATHS-w100" pkd "$run" 900 "$SW_D" --log-level info ;;
        mpd-1000) BENCH_SI_MPD_WEIGHT=1000 bench_si_cold "scale-iscsi$SI_PATHS-w1000" mpd "$run" 900 "$SW_D" ;;
        esac
    done
done
lab_save bench-multipathd.log "$BENCH_MPD_LOG" 2>/dev/null || true
lab_save bench-pathkeeperd.log "$PD_LOG"
grep RESULT "$BENCH_OUT"
