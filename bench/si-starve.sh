# A scale-iscsi guest script (lab run scale-iscsi ... -- script
# script=$PWD/bench/si-starve.sh daemon=PATH hogs=N): does run-queue load
# alone slow pathkeeperd's creates? No udevd. Two runs from no maps,
# `--no-udev-sync`: quiet, then beside N busy-looping shells. Saved per run
# (files/): the daemon's log, the kernel's block uevents (udevadm monitor
# --kernel) and the table thread's schedstat (ns on a CPU, ns waiting in
# the run queue, slices) with its kernel stack, every ~0.1 s.
# See bench/README.md, "Cold start with udevd: one run queue, or the CPU
# shared per service".
source "$LAB_DIR/guest/bench_scale_iscsi.sh"
CU_D=$(si_arg daemon "" "$@")
CU_HOGS=$(si_arg hogs 20 "$@")
bench_pkd_conf
bench_si_remove_maps || true

cu_stacks() { # PID OUT: the table worker's kernel stack and schedstat, every ~0.1 s
    local pid=$1 out=$2 tid t
    for ((t = 0; t < 200; t++)); do
        tid=$(grep -l pk-dm-table /proc/"$pid"/task/*/comm 2>/dev/null | head -1 || true)
        [[ -n $tid ]] && break
        sleep 0.05
    done
    tid=${tid%/comm}
    local n=0
    while kill -0 "$pid" 2>/dev/null; do
        { echo "== $(si_ms) $(<"$tid/schedstat") $(awk '/^R|^D/' /proc/loadavg)"; head -4 "$tid/stack"; } >>"$out" 2>/dev/null
        ((++n % 20)) || ! pd_ready || break
        sleep 0.1
    done
}

cu_run() { # NAME
    local name=$1 t0 pids=() i
    : >"$PD_LOG"
    udevadm monitor --kernel --subsystem-match=block >"$LAB_RUN/mon-$name.txt" 2>&1 &
    local mon=$!
    if [[ $name == hogs* ]]; then
        for ((i = 0; i < CU_HOGS; i++)); do (while :; do :; done) & pids+=($!); done
        sleep 2
    fi
    t0=$(si_ms)
    pd_start "$CU_D" --log-level debug --no-udev-sync
    cu_stacks "$PD_PID" "$LAB_RUN/stacks-$name.txt" &
    local st=$!
    for ((i = 0; i < 1200; i++)); do pd_ready && break; sleep 0.5; done
    lab_log "$name: ready $(($(si_ms) - t0)) ms after start; $(bench_si_dm); $(grep -c . "$LAB_RUN/stacks-$name.txt" || true) stack lines"
    ((${#pids[@]} == 0)) || kill "${pids[@]}"
    wait "$st" 2>/dev/null || true
    bench_pkd_stop
    kill "$mon" 2>/dev/null || true
    lab_save "pd-$name.log" "$PD_LOG"
    lab_save "mon-$name.txt" "$LAB_RUN/mon-$name.txt"
    lab_save "stacks-$name.txt" "$LAB_RUN/stacks-$name.txt"
    bench_si_remove_maps || true
}
cu_run quiet
cu_run hogs
lab_log "load done"
