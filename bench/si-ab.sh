# A scale-iscsi guest script (lab run scale-iscsi ... -- script
# script=$PWD/bench/si-ab.sh daemon=A daemon2=B [runs=3] [udev=1] [mpd=0]
# [until=EPOCH]): the cold start of two pathkeeperd binaries, before and
# after a change, alternately in one boot (A run 1, B run 1, A run 2, ...),
# so that the host's noise falls on both. First without udevd
# (--no-udev-sync: the daemon's own work alone), then with udev=1 after
# udevd's coldplug (the CPU shared per service, each daemon at its unit's
# weight, as bench_scale_iscsi does). With mpd=1 each round with udevd
# ends with multipathd (at its Debian unit's weight), so that the ratio
# comes from one boot. Scenarios in the RESULT lines:
# scale-iscsi<PATHS>-noudev-a and -b, scale-iscsi<PATHS>-a and -b, and
# scale-iscsi<PATHS> for multipathd.
source "$LAB_DIR/guest/bench_scale_iscsi.sh"
AB_A=$(si_arg daemon "" "$@")
AB_B=$(si_arg daemon2 "" "$@")
AB_RUNS=$(si_arg runs 3 "$@")
AB_UDEV=$(si_arg udev 1 "$@")
AB_MPD=$(si_arg mpd 0 "$@")
bench_si_limits 0 "$(si_arg until 0 "$@")"
lab_check "pathkeeperd binary A given (daemon=PATH)" test -x "$AB_A"
lab_check "pathkeeperd binary B given (daemon2=PATH)" test -x "$AB_B"

bench_si_cgroups || lab_log "WARNING: no cgroup v2 cpu controller; every process shares one run queue"
bench_note "si-ab: $SI_LUNS LUNs x $SI_SESSIONS sessions = $SI_PATHS paths; $(nproc) vCPUs; A $AB_A, B $AB_B"
bench_pkd_conf
if ((AB_MPD)); then bench_mpd_conf; fi
bench_si_remove_maps || true

# ab_rounds SUFFIX ARGS...: AB_RUNS rounds of A then B.
ab_rounds() {
    local suffix=$1 run side bin
    shift
    for ((run = 1; run <= AB_RUNS; run++)); do
        for side in a b; do
            bench_si_budget_ok || { bench_note "si-ab $side run $run$suffix skipped: time limit reached"; continue; }
            bin=$AB_A
            [[ $side == a ]] || bin=$AB_B
            bench_si_cold "scale-iscsi$SI_PATHS$suffix-$side" pkd "$run" 900 "$bin" --log-level info "$@"
        done
        if ((AB_MPD)) && [[ -z $suffix ]]; then
            bench_si_budget_ok || { bench_note "si-ab multipathd run $run skipped: time limit reached"; continue; }
            bench_si_cold "scale-iscsi$SI_PATHS" mpd "$run" 900 "$AB_A"
        fi
    done
}

# No udevd, no control socket (see si-steady.sh).
pgrep -x systemd-udevd >/dev/null || rm -f /run/udev/control
ab_rounds -noudev --no-udev-sync
if [[ $AB_UDEV == 1 ]]; then
    bench_si_coldplug si-ab
    ab_rounds ""
fi
if ((AB_MPD)); then lab_save bench-multipathd.log "$BENCH_MPD_LOG" 2>/dev/null || true; fi
lab_save bench-pathkeeperd.log "$PD_LOG"
grep RESULT "$BENCH_OUT"
