# Guest basics: logging and checks, mounts, modules, udev and D-Bus, and the
# scenario runner.

: "${RESULTS:=/lab/results}"
LAB_RUN=/run/lab

lab_ts() { date '+%H:%M:%S.%3N'; }
lab_log() { printf '[%s] %s\n' "$(lab_ts)" "$*"; }
lab_step() { printf '\n[%s] ==== %s\n' "$(lab_ts)" "$*"; }

# Appends a line to the summary the host prints.
lab_summary() { printf '%s\n' "$*" >>"$RESULTS/summary"; }

lab_fail() {
    lab_log "FAIL: $*"
    lab_summary "FAIL $*"
    return 1
}

# lab_check DESCRIPTION COMMAND...: runs the command; PASS or FAIL goes to the
# summary. Returns the command's status, so under set -e a failure ends the run.
lab_check() {
    local desc=$1; shift
    local rc=0
    "$@" || rc=$?
    if ((rc == 0)); then
        lab_log "PASS: $desc"
        lab_summary "PASS $desc"
    else
        lab_fail "$desc (exit $rc from: $*)"
    fi
    return $rc
}

# lab_wait SECS DESCRIPTION COMMAND...: polls every 0.5 s until the command
# succeeds; fails with the description when time runs out. The command is run
# on every poll, so pass a function, never a "$(...)" (expanded only once).
lab_wait() {
    local secs=$1 desc=$2; shift 2
    local deadline=$((SECONDS + secs)) start=$SECONDS
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            lab_fail "timed out after ${secs}s waiting for: $desc"
            return 1
        fi
        sleep 0.5
    done
    lab_log "ok after $((SECONDS - start))s: $desc"
}

# lab_no_slab_reports: the kernel reported no slab corruption. The lab boots
# with slub_debug=F on kmalloc-1k (tests/lab/lab), where Linux's dm-ima keeps
# its records: a double free there is reported and not done.
lab_no_slab_reports() {
    local log
    log=$(dmesg) && [[ -n $log ]] || { lab_log "the kernel log cannot be read"; return 1; }
    if grep -E 'BUG kmalloc|Object already free|kernel BUG at' <<<"$log"; then
        return 1
    fi
}

# lab_poll SECS COMMAND...: like lab_wait without a check: polls every second
# until COMMAND succeeds; returns 1, quietly, when time runs out.
lab_poll() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 1
    done
}

# lab_save NAME [FILE]: copies a file (or stdin) into the results' files/.
lab_save() {
    mkdir -p "$RESULTS/files"
    if (($# > 1)); then cp -- "$2" "$RESULTS/files/$1"; else cat >"$RESULTS/files/$1"; fi
}

lab_die() { lab_log "FATAL: $*"; lab_summary "FAIL $*"; exit 1; }

LAB_MODULE_LIST=(dm_multipath dm_round_robin dm_queue_length dm_service_time
    scsi_dh_alua iscsi_tcp target_core_mod iscsi_target_mod target_core_file
    sd_mod sg veth bonding dm_flakey dm_delay sch_netem sch_htb bridge)

lab_boot() {
    lab_step "boot: mounts, modules, udev, D-Bus (kernel $(uname -r))"
    mkdir -p /dev/pts /etc/target
    mountpoint -q /dev/pts || mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
    mkdir -p /dev/shm
    mountpoint -q /dev/shm || mount -t tmpfs -o mode=1777 tmpfs /dev/shm
    # Under systemd (lab run --systemd), /run is systemd's: never hide it.
    [[ ${LAB_INIT:-} == systemd ]] || mount -t tmpfs -o mode=0755 tmpfs /run
    # No tmpfs over /tmp or /var/tmp: the overlay's tmpfs upper layer already
    # keeps the guest's writes private, and a fresh mount would hide a
    # checkout or build tree that lives there (CI clones into any folder).
    ln -sfn /proc/self/fd /dev/fd
    ln -sfn /proc/self/fd/0 /dev/stdin
    ln -sfn /proc/self/fd/1 /dev/stdout
    ln -sfn /proc/self/fd/2 /dev/stderr
    mkdir -p "$LAB_RUN" /run/lock /run/dbus
    hostname lab-guest
    ip link set lo up

    # The kernel's modules come from the lab cache, not from the host.
    mkdir -p "/lib/modules/$LAB_KVER"
    mount --bind "$LAB_MODULES" "/lib/modules/$LAB_KVER" ||
        lab_die "cannot bind the module tree $LAB_MODULES"
    modprobe -a "${LAB_MODULE_LIST[@]}" || lab_die "modprobe -a ${LAB_MODULE_LIST[*]} failed"
    mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
    mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || true
    lab_log "modules loaded: ${LAB_MODULE_LIST[*]}"

    if [[ ${LAB_INIT:-} == systemd ]]; then
        lab_boot_systemd
        return
    fi
    # udev from the host root, so /dev/mapper, /dev/disk/by-id and
    # multipath-tools behave as on a real system.
    /lib/systemd/systemd-udevd --daemon --resolve-names=never ||
        lab_die "systemd-udevd did not start"
    # No full coldplug (it costs ~15 s under TCG); the devices the lab cares
    # about (sd, dm, net) appear after udevd starts.
    udevadm trigger --action=add --subsystem-match=block >/dev/null 2>&1 || true
    udevadm settle --timeout=30 || lab_log "udevadm settle timed out (continuing)"
    lab_log "udevd running"

    # A private system bus for the guest (busctl --system works against it).
    cat >"$LAB_RUN/dbus-system.conf" <<'XML'
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=/run/dbus/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <pidfile>/run/dbus/pid</pidfile>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus"/>
  </policy>
  <policy user="root">
    <allow own="*"/>
    <allow send_type="method_call"/>
  </policy>
  <includedir>/usr/share/dbus-1/system.d</includedir>
  <includedir>/etc/dbus-1/system.d</includedir>
</busconfig>
XML
    dbus-daemon --config-file="$LAB_RUN/dbus-system.conf" --fork --nopidfile 2>/dev/null ||
        dbus-daemon --config-file="$LAB_RUN/dbus-system.conf" --fork ||
        lab_die "dbus-daemon did not start"
    lab_wait 10 "the guest's system bus" test -S /run/dbus/system_bus_socket
}

# Under systemd, udevd and the system bus are systemd's units: wait for them.
lab_boot_systemd() {
    lab_wait 60 "systemd-udevd active" systemctl is-active --quiet systemd-udevd.service
    udevadm trigger --action=add --subsystem-match=block >/dev/null 2>&1 || true
    udevadm settle --timeout=30 || lab_log "udevadm settle timed out (continuing)"
    lab_wait 60 "the system bus socket (dbus.socket)" test -S /run/dbus/system_bus_socket
    lab_log "systemd $(systemctl --version | awk 'NR == 1 {print $2}') is PID 1: $(systemctl is-system-running 2>&1)"
}

# Runs the scenario: setup, then its run function with the scenario args, then
# the sysfs capture if the host asked for one and the scenario did not take it.
lab_run_scenario() {
    set -eEuo pipefail
    trap 'lab_log "ERROR: \"$BASH_COMMAND\" exited with $? at ${BASH_SOURCE[0]}:$LINENO"' ERR
    trap 'lab_diagnostics_on_failure $?' EXIT
    source "$LAB_DIR/scenarios/$LAB_SCENARIO.sh"
    lab_step "setup: $LAB_SCENARIO"
    scenario_setup "$@"
    lab_summary "PASS setup $LAB_SCENARIO"
    lab_step "run: $LAB_SCENARIO $*"
    scenario_run "$@"
    if [[ ${LAB_CAPTURE:-0} == 1 && ! -f $RESULTS/capture.tar ]]; then
        capture_sysfs
    fi
    lab_step "done: $LAB_SCENARIO"
}

lab_diagnostics_on_failure() {
    (($1 == 0)) && return 0
    set +eE
    trap - ERR
    lab_step "diagnostics (the run failed with $1)"
    {
        echo "== ini_paths"; ini_paths
        echo "== iscsiadm -m session -P3"; iscsiadm -m session -P3
        echo "== ip addr / route / rule / neigh"
        ip -br addr; ip route show table all | grep -v -e '^local' -e '^broadcast'; ip rule; ip neigh
        echo "== ns tgt"; net_ns ip -br addr; net_ns ip neigh; net_ns bridge link
        echo "== dmsetup"; dmsetup table; dmsetup status
        echo "== dmesg (last 60)"; dmesg | tail -n 60
        local c pid t
        for c in /proc/[0-9]*/comm; do
            [[ $(<"$c") == pathkeeperd || $(<"$c") == multipathd ]] 2>/dev/null || continue
            pid=${c#/proc/}
            pid=${pid%/comm}
            echo "== $(<"$c") $pid: kernel stacks"
            for t in /proc/"$pid"/task/*; do
                echo "-- task ${t##*/} ($(<"$t/comm")) wchan $(<"$t/wchan")"
                cat "$t/stack" || true
            done
        done
        [[ -f $LAB_RUN/pathkeeperd-state.json ]] && { echo "== pathkeeperd state"; cat "$LAB_RUN/pathkeeperd-state.json"; }
    } >"$RESULTS/files/diagnostics.txt" 2>&1
    local f
    for f in "$LAB_RUN"/*.log; do
        [[ -f $f ]] && cp -- "$f" "$RESULTS/files/" 2>/dev/null
    done
    lab_log "diagnostics in files/diagnostics.txt"
}

# For `lab shell`: the scenario's setup only.
lab_run_setup() {
    set -eEuo pipefail
    trap 'lab_log "ERROR: \"$BASH_COMMAND\" exited with $? at ${BASH_SOURCE[0]}:$LINENO"' ERR
    source "$LAB_DIR/scenarios/$LAB_SCENARIO.sh"
    lab_step "setup: $LAB_SCENARIO"
    scenario_setup "${LAB_ARGS[@]}"
}

lab_help() {
    cat <<'TXT'
Lab helpers (tests/lab/guest/*.sh):
  ini_paths                       sdX, session, state, target, portal, iface, wwid
  ini_sessions_in_state STATE     count sessions in a state (LOGGED_IN, FAILED, ...)
  fault_link_cut IF / fault_link_restore IF     ip link down / up + routes again
  fault_portal_blackhole IP / fault_portal_restore IP   iptables DROP in ns tgt
  fault_sdev_offline sdX / fault_sdev_online sdX
  fault_netem DEV "delay 50ms loss 1%" / fault_rate DEV 100mbit / fault_tc_clear DEV
  fault_lun_remove IQN LUN
  capture_sysfs [DIR]             tar the iSCSI/SCSI sysfs into the results share
  Network namespace of the target: ip netns exec tgt ...
TXT
}
