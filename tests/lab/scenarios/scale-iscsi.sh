# scale-iscsi: many iSCSI paths, for issue #5's cold start and RSS at scale.
# pathkeeperd manages iSCSI paths only (scsi_debug disks are ignored), so
# this is the `scale` scenario with LIO instead of scsi_debug: in the target
# namespace (xserve's network: eth1/eth2 -> portals 10.10.1.20/.21), `luns`
# sparse fileio backstores on tmpfs, exported as LUN 0..luns-1 by each of
# `sessions` targets; target k listens on portal k % 2, and the initiator logs
# in to it from the NIC of that portal (iface0/eth1 -> .20, iface1/eth2 ->
# .21). Every LUN therefore has `sessions` iSCSI paths, half per NIC:
# luns x sessions paths, luns WWIDs. Default 64 x 4 = 256 paths.
#
# udevd is stopped before the logins (under TCG its rules need ~1 s per sd
# device); the bench starts it later and times its coldplug separately.
#
# args: luns=N (<= 255) sessions=N (even) mb=N (backstore size, default 2)
#       bench daemon=PATH runs=N udev=0|1 budget=SECS until=EPOCH_SECONDS
#       (see tests/lab/guest/bench_scale_iscsi.sh)

SI_IQN=iqn.2026-11.lab.pathkeeper:scale

si_arg() {
    local name=$1 def=$2 a; shift 2
    for a; do [[ $a == "$name="* ]] && { echo "${a#*=}"; return; }; done
    echo "$def"
}

si_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# si_serial I: a unit serial whose hex digits differ from every other LUN's
# (LIO derives the NAA WWID from them).
si_serial() { printf 'a%04xb0c0d0e0' "$1"; }

# The LIO side, written to configfs in batches: one truncate, one mkdir per
# kind of directory, one perl for all LUN symlinks; attribute writes are bash
# builtins. Forks cost ~0.1 s each under TCG.
si_target() {
    local n=$SI_LUNS s=$SI_SESSIONS i k t0 bs=() imgs=() tpgs=() luns=()
    t0=$(si_ms)
    tgt_init
    for ((i = 0; i < n; i++)); do
        bs+=("$TGT_CFS/core/fileio_0/sc$i")
        imgs+=("$TGT_STORE/sc$i.img")
    done
    truncate -s "${SI_MB}M" "${imgs[@]}"
    mkdir -p "$TGT_CFS/core/fileio_0"
    mkdir "${bs[@]}"
    for ((i = 0; i < n; i++)); do
        echo "fd_dev_name=${imgs[i]},fd_dev_size=$((SI_MB * 1048576))" >"${bs[i]}/control"
        echo "$(si_serial "$i")" >"${bs[i]}/wwn/vpd_unit_serial"
        echo 1 >"${bs[i]}/enable"
        echo 0 >"${bs[i]}/attrib/emulate_write_cache"
    done
    lab_log "LIO: $n backstores (${SI_MB} MiB sparse fileio) in $(($(si_ms) - t0)) ms"

    t0=$(si_ms)
    for ((k = 0; k < s; k++)); do tpgs+=("$TGT_CFS/iscsi/$SI_IQN.t$k/tpgt_1"); done
    mkdir -p "${tpgs[@]}"
    for ((k = 0; k < s; k++)); do
        echo 1 >"${tpgs[k]}/attrib/generate_node_acls"
        echo 1 >"${tpgs[k]}/attrib/cache_dynamic_acls"
        echo 0 >"${tpgs[k]}/attrib/demo_mode_write_protect"
        echo 0 >"${tpgs[k]}/attrib/authentication"
        nsenter --net="/run/netns/$NET_NS" mkdir "${tpgs[k]}/np/${NET_PORTALS[k % 2]}:3260"
        for ((i = 0; i < n; i++)); do luns+=("${tpgs[k]}/lun/lun_$i"); done
    done
    mkdir "${luns[@]}"
    for ((k = 0; k < s; k++)); do
        for ((i = 0; i < n; i++)); do printf '%s %s/sc%d\n' "${bs[i]}" "${tpgs[k]}/lun/lun_$i" "$i"; done
    done | perl -ne 'chomp; my ($t, $l) = split / /; symlink($t, $l) or die "symlink $l: $!\n"'
    for ((k = 0; k < s; k++)); do echo 1 >"${tpgs[k]}/enable"; done
    lab_log "LIO: $s targets x $n LUNs ($((s * n)) LUN mappings) in $(($(si_ms) - t0)) ms"
}

si_sdev_count() { local d=(/sys/block/sd*); [[ -e ${d[0]} ]] && echo "${#d[@]}" || echo 0; }

# si_wait_sdevs N SECS: waits for N sd devices, logging the count every 30 s.
si_wait_sdevs() {
    local want=$1 deadline=$((SECONDS + $2)) next=$((SECONDS + 30)) c
    while :; do
        c=$(si_sdev_count)
        ((c >= want)) && return 0
        ((SECONDS < deadline)) || { lab_fail "only $c of $want sd devices after $2 s"; return 1; }
        ((SECONDS < next)) || { lab_log "$c of $want sd devices"; next=$((SECONDS + 30)); }
        sleep 1
    done
}

scenario_setup() {
    SI_LUNS=$(si_arg luns 64 "$@")
    SI_SESSIONS=$(si_arg sessions 4 "$@")
    SI_MB=$(si_arg mb 2 "$@")
    SI_PATHS=$((SI_LUNS * SI_SESSIONS))
    ((SI_LUNS >= 1 && SI_LUNS <= 255)) || lab_die "luns=$SI_LUNS: 1..255 (LUN numbers of one target)"
    ((SI_SESSIONS >= 2 && SI_SESSIONS % 2 == 0)) || lab_die "sessions=$SI_SESSIONS: an even number >= 2"
    lab_log "scale-iscsi: $SI_LUNS LUNs x $SI_SESSIONS sessions = $SI_PATHS paths, ${SI_MB} MiB each; $(awk '/MemTotal/ {print $2}' /proc/meminfo) kB RAM"
    udevadm control --exit || lab_log "udevd was not running"
    net_setup_two_nics policy
    lab_check "both portals answer ping" net_ping_portals
    local t0
    t0=$(si_ms)
    si_target
    SI_T_TARGET=$(($(si_ms) - t0))
    ini_setup
    ini_iface iface0 eth1
    ini_iface iface1 eth2
    t0=$(si_ms)
    local k
    for ((k = 0; k < SI_SESSIONS; k++)); do
        ini_login "$SI_IQN.t$k" "${NET_PORTALS[k % 2]}" "iface$((k % 2))" >/dev/null
    done
    lab_wait 120 "$SI_SESSIONS sessions LOGGED_IN" ini_sessions_are "$SI_SESSIONS" LOGGED_IN
    lab_log "logins done $(($(si_ms) - t0)) ms after the first"
    si_wait_sdevs "$SI_PATHS" 1800
    SI_T_SCAN=$(($(si_ms) - t0))
    lab_log "setup: LIO $SI_T_TARGET ms; logins + SCSI scan of $SI_PATHS sd devices $SI_T_SCAN ms; $(awk '/MemAvailable/ {print $2}' /proc/meminfo) kB available"
}

scenario_run() {
    local n w per
    n=$(si_sdev_count)
    w=$(cat /sys/block/sd*/device/wwid | sort -u | wc -l)
    per=$(cat /sys/block/sd*/device/wwid | sort | uniq -c | awk '{print $1}' | sort -u | xargs)
    lab_log "$n sd devices, $w WWIDs, paths per WWID: $per"
    # Not fatal: a short count is still worth benchmarking, and says so.
    lab_check "$SI_PATHS sd devices" test "$n" -eq "$SI_PATHS" || true
    lab_check "$SI_LUNS WWIDs with $SI_SESSIONS paths each" test "$w/$per" = "$SI_LUNS/$SI_SESSIONS" || true
    lab_check "every sd device is behind an iSCSI session" \
        test "$(ls -d /sys/class/iscsi_session/session*/device/target*/*:*:*:*/block/sd* | wc -l)" -eq "$SI_PATHS" || true
    local a
    for a; do
        case $a in
        bench)
            source "$LAB_DIR/guest/bench_scale_iscsi.sh"
            bench_scale_iscsi "$(si_arg daemon "" "$@")" "$(si_arg runs 3 "$@")" \
                "$(si_arg udev 1 "$@")" "$(si_arg budget 0 "$@")" "$(si_arg until 0 "$@")" \
                "$(si_arg cgroups 1 "$@")"
            ;;
        profile)
            source "$LAB_DIR/guest/bench_scale_iscsi.sh"
            bench_si_profile "$(si_arg daemon "" "$@")" "$(si_arg secs 45 "$@")"
            ;;
        heap)
            source "$LAB_DIR/guest/bench_scale_iscsi.sh"
            bench_si_heap "$(si_arg daemon "" "$@")" "$(si_arg secs 30 "$@")"
            ;;
        # script=FILE: a guest script of your own (see tests/lab/README.md).
        script) source "$(si_arg script "" "$@")" ;;
        esac
    done
}
