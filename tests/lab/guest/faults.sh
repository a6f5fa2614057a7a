# Fault helpers. Each prints what it did; each has an undo.

# Link down on an initiator NIC (the kernel drops its routes with it).
fault_link_cut() {
    lab_log "fault: link $1 down"
    ip link set "$1" down
}

# Link up again, with the NIC's policy or /32 routes re-added.
fault_link_restore() {
    lab_log "fault: link $1 up, routes re-added"
    ip link set "$1" up
    lab_wait 10 "$1 up" net_links_up "$1"
    net_routes_apply "$1"
}

# Silently drop a portal's iSCSI traffic inside the target namespace.
fault_portal_blackhole() {
    lab_log "fault: blackhole portal $1"
    net_ns iptables -w -I INPUT -d "$1" -p tcp --dport 3260 -j DROP
    net_ns iptables -w -I OUTPUT -s "$1" -p tcp --sport 3260 -j DROP
}

# The first stage of a portal's outage: it stops answering new connections
# (SYNs to port 3260), while established sessions still carry their traffic.
fault_portal_refuse_new() {
    lab_log "fault: portal $1 refuses new connections"
    net_ns iptables -w -I INPUT -d "$1" -p tcp --dport 3260 --syn -j DROP
}

fault_portal_accept_new() {
    lab_log "fault: portal $1 accepts new connections again"
    net_ns iptables -w -D INPUT -d "$1" -p tcp --dport 3260 --syn -j DROP
}

fault_portal_restore() {
    lab_log "fault: portal $1 restored"
    net_ns iptables -w -D INPUT -d "$1" -p tcp --dport 3260 -j DROP
    net_ns iptables -w -D OUTPUT -s "$1" -p tcp --sport 3260 -j DROP
}

fault_sdev_offline() {
    lab_log "fault: $1 offline"
    echo offline >"/sys/block/$1/device/state"
}

fault_sdev_online() {
    lab_log "fault: $1 running"
    echo running >"/sys/block/$1/device/state"
}

# fault_netem DEV "delay 50ms 10ms loss 1%": on an initiator NIC or a
# target-side veth (swN, in the target namespace).
fault_netem() {
    local dev=$1; shift
    lab_log "fault: netem $* on $dev"
    _fault_tc "$dev" qdisc replace dev "$dev" root netem "$@"
}

# fault_rate DEV RATE: an htb rate limit, e.g. fault_rate eth1 100mbit.
fault_rate() {
    local dev=$1 rate=$2
    lab_log "fault: rate limit $dev to $rate"
    _fault_tc "$dev" qdisc replace dev "$dev" root handle 1: htb default 10
    _fault_tc "$dev" class replace dev "$dev" parent 1: classid 1:10 htb rate "$rate" ceil "$rate"
}

fault_tc_clear() {
    lab_log "fault: tc cleared on $1"
    _fault_tc "$1" qdisc del dev "$1" root 2>/dev/null || true
}

_fault_tc() {
    local dev=$1; shift
    if [[ -e /sys/class/net/$dev ]]; then tc "$@"; else net_ns tc "$@"; fi
}

# fault_lun_remove IQN LUN: unmap a LUN from a target (the initiator sees its
# commands fail; a rescan removes the device).
fault_lun_remove() {
    local l=$TGT_CFS/iscsi/$1/tpgt_1/lun/lun_$2
    lab_log "fault: remove LUN $2 from $1"
    find "$l" -maxdepth 1 -type l -delete
    rmdir "$l"
}
