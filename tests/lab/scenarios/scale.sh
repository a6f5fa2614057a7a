# scale: many paths without iSCSI. scsi_debug with several hosts and
# vpd_use_hostno=0, so the same (target, LUN) on every host has one WWID: each
# WWID has `hosts` paths. Default: 4 hosts x 2 targets x 32 LUNs = 256 paths,
# 64 WWIDs.
#
# args: hosts=N tgts=N luns=N udev=0|1
# udev is stopped by default: under TCG it needs minutes to run its rules
# (scsi_id, multipath -u, blkid) for hundreds of devices. With udev=1 it
# keeps running and the setup waits for it to settle.

sc_arg() {
    local name=$1 def=$2 a; shift 2
    for a; do [[ $a == "$name="* ]] && { echo "${a#*=}"; return; }; done
    echo "$def"
}

scenario_setup() {
    SC_HOSTS=$(sc_arg hosts 4 "$@")
    SC_TGTS=$(sc_arg tgts 2 "$@")
    SC_LUNS=$(sc_arg luns 32 "$@")
    SC_UDEV=$(sc_arg udev 0 "$@")
    lab_log "scsi_debug: $SC_HOSTS hosts x $SC_TGTS targets x $SC_LUNS LUNs, udev=$SC_UDEV"
    if [[ $SC_UDEV == 0 ]]; then
        udevadm control --exit || lab_log "udevd was not running"
    fi
    modprobe scsi_debug add_host="$SC_HOSTS" num_tgts="$SC_TGTS" max_luns="$SC_LUNS" \
        vpd_use_hostno=0 dev_size_mb=4 delay=0 ||
        lab_die "modprobe scsi_debug failed"
    local want=$((SC_HOSTS * SC_TGTS * SC_LUNS))
    lab_wait 600 "$want sd devices" sc_have_sdevs "$want"
    if [[ $SC_UDEV != 0 ]]; then
        local t0=$SECONDS
        udevadm settle --timeout=500 || lab_log "udev still busy"
        lab_log "udev settled after $((SECONDS - t0))s"
    fi
}

sc_have_sdevs() {
    local d=(/sys/block/sd*)
    [[ -e ${d[0]} && ${#d[@]} -ge $1 ]]
}

scenario_run() {
    local want=$((SC_HOSTS * SC_TGTS * SC_LUNS)) n w
    n=$(ls -1d /sys/block/sd* | wc -l)
    w=$(cat /sys/block/sd*/device/wwid | sort -u | wc -l)
    lab_log "$n sd devices, $w WWIDs"
    lab_check "$want sd devices" test "$n" -eq "$want"
    lab_check "$((SC_TGTS * SC_LUNS)) WWIDs with $SC_HOSTS paths each" \
        test "$w/$(cat /sys/block/sd*/device/wwid | sort | uniq -c | awk '{print $1}' | sort -u | xargs)" = \
        "$((SC_TGTS * SC_LUNS))/$SC_HOSTS"
    local a
    for a; do
        case $a in
        bench) bench_scale "$(sc_arg daemon "" "$@")" "$(sc_arg runs 3 "$@")" ;;
        esac
    done
}
