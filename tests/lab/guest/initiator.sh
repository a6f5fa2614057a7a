# open-iscsi initiator: iscsid in the guest, one iface per NIC, fast timers.

INI_NAME=iqn.2005-03.org.open-iscsi:lab-guest
# Fast failover timers (seconds).
INI_TIMERS=(
    node.session.timeo.replacement_timeout=5
    "node.conn[0].timeo.noop_out_interval=2"
    "node.conn[0].timeo.noop_out_timeout=3"
    "node.conn[0].timeo.login_timeout=5"
)

ini_setup() {
    mkdir -p /etc/iscsi /run/lock/iscsi
    rm -rf /etc/iscsi/nodes /etc/iscsi/send_targets /etc/iscsi/ifaces
    mkdir -p /etc/iscsi/nodes /etc/iscsi/send_targets /etc/iscsi/ifaces
    echo "InitiatorName=$INI_NAME" >/etc/iscsi/initiatorname.iscsi
    {
        echo "iscsid.startup = /bin/true"
        echo "node.startup = manual"
        echo "node.leading_login = No"
        local kv
        for kv in "${INI_TIMERS[@]}"; do echo "${kv%%=*} = ${kv#*=}"; done
        echo "node.session.initial_login_retry_max = 2"
        echo "node.session.iscsi.FastAbort = Yes"
    } >/etc/iscsi/iscsid.conf
    modprobe iscsi_tcp
    # In the foreground under our control, its log goes to the results.
    iscsid -f -d "${INI_ISCSID_DEBUG:-1}" >"$RESULTS/files/iscsid.log" 2>&1 &
    echo $! >"$LAB_RUN/iscsid.pid"
    lab_wait 10 "iscsid listening" ini_iscsid_ready
}

ini_iscsid_ready() {
    pgrep -x iscsid >/dev/null && grep -q '@ISCSIADM_ABSTRACT_NAMESPACE' /proc/net/unix
}

# ini_iface NAME NETDEV
ini_iface() {
    iscsiadm -m iface -I "$1" -o new >/dev/null
    iscsiadm -m iface -I "$1" -o update -n iface.net_ifacename -v "$2" >/dev/null
}

# ini_iface_by_mac IFACE NIC: an iface bound by NIC's hardware address
# (iface.hwaddress). iscsid binds the sessions to the NIC with it; the
# kernel's iscsi_host then shows the address and no netdev.
ini_iface_by_mac() {
    iscsiadm -m iface -I "$1" -o new >/dev/null
    iscsiadm -m iface -I "$1" -o update -n iface.hwaddress -v "$(<"/sys/class/net/$2/address")" >/dev/null
}

# ini_login TARGET_IQN PORTAL_IP IFACE: a node record and a login.
ini_login() {
    local iqn=$1 ip=$2 iface=$3 kv
    iscsiadm -m node -o new -T "$iqn" -p "$ip:3260" -I "$iface" >/dev/null
    for kv in "${INI_TIMERS[@]}"; do
        iscsiadm -m node -T "$iqn" -p "$ip:3260" -I "$iface" -o update -n "${kv%%=*}" -v "${kv#*=}"
    done
    iscsiadm -m node -T "$iqn" -p "$ip:3260" -I "$iface" --login
}

ini_session_count() { ls -1d /sys/class/iscsi_session/session* 2>/dev/null | wc -l; }

# ini_sessions_in_state STATE: how many sessions are in STATE.
ini_sessions_in_state() {
    local s n=0
    for s in /sys/class/iscsi_session/session*; do
        [[ -e $s/state ]] || continue
        [[ $(cat "$s/state") == "$1" ]] && n=$((n + 1))
    done
    echo "$n"
}

# ini_sessions_are N STATE: exactly N sessions are in STATE (for lab_wait:
# the count must be taken on every poll, not once when the call is made).
ini_sessions_are() { [[ $(ini_sessions_in_state "$2") -eq $1 ]]; }

# ini_sdev_session SDX: the iSCSI session above an sd device (bash builtins
# only: every fork costs ~0.1 s under TCG).
ini_sdev_session() {
    local p
    p=$(readlink -f "/sys/block/$1/device") || return 1
    while [[ $p == /sys/* && ${p##*/} != session* ]]; do p=${p%/*}; done
    [[ ${p##*/} == session* ]] && echo "${p##*/}"
}

# Prints one line per iSCSI sd device: sdX session state target portal iface wwid.
ini_paths() {
    local b sd s c dev
    for b in /sys/block/sd*; do
        [[ -e $b ]] || continue
        sd=${b##*/}
        dev=$(readlink -f "$b/device") || continue
        s=$dev
        while [[ $s == /sys/* && ${s##*/} != session* ]]; do s=${s%/*}; done
        [[ ${s##*/} == session* ]] || continue
        c=("$s"/connection*/iscsi_connection/connection*)
        s=/sys/class/iscsi_session/${s##*/}
        printf '%s %s %s %s %s:%s %s %s\n' "$sd" "${s##*/}" "$(<"$s/state")" \
            "$(<"$s/targetname")" "$(<"${c[0]}/persistent_address")" \
            "$(<"${c[0]}/persistent_port")" "$(<"$s/ifacename")" "$(<"$b/device/wwid")"
    done
}

# ini_sdev_for TARGET_SUBSTRING PORTAL_IP: the sd device of that session.
ini_sdev_for() {
    ini_paths | awk -v t="$1" -v p="$2:3260" 'index($4, t) && $5 == p { print $1 }'
}

# ini_wait_paths SESSIONS [SDEVS]: waits for SESSIONS sessions LOGGED_IN and
# SDEVS (default: SESSIONS) iSCSI sd devices.
ini_wait_paths() {
    local n=$1 d=${2:-$1}
    lab_wait 60 "$n sessions LOGGED_IN" ini_sessions_are "$n" LOGGED_IN
    lab_wait 60 "$d iSCSI sd devices" ini_have_sdevs "$d"
    udevadm settle --timeout=30 || true
    ini_paths
}

ini_have_sdevs() { [[ $(ini_paths | wc -l) -eq $1 ]]; }

# ini_trace_states SECS: logs every change of any session's state.
ini_trace_states() {
    local end=$((SECONDS + $1)) s line last=
    while ((SECONDS < end)); do
        line=
        for s in /sys/class/iscsi_session/session*; do
            line+="${s##*/}=$(<"$s/state") "
        done
        [[ $line != "$last" ]] && lab_log "session states: $line"
        last=$line
        sleep 0.2
    done
}
