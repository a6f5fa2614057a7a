# The seed's network: two initiator NICs on one /24, veth pairs into the
# target namespace `tgt`, where a bridge (the gateway's switch) carries the
# two portals.
#
#   eth1 10.10.1.10 ──veth── sw1 ┐
#                                 br0 (ns tgt): 10.10.1.20, 10.10.1.21
#   eth2 10.10.1.11 ──veth── sw2 ┘

NET_NS=tgt
NET_PREFIX=10.10.1
NET_PORTALS=(10.10.1.20 10.10.1.21)
declare -A NET_ADDR=([eth1]=10.10.1.10 [eth2]=10.10.1.11)
declare -A NET_TABLE=([eth1]=101 [eth2]=102)
# With host32 routing, each portal is pinned to one NIC.
declare -A NET_PORTAL_NIC=([10.10.1.20]=eth1 [10.10.1.21]=eth2)

net_ns() { ip netns exec "$NET_NS" "$@"; }

# Creates the target namespace, its bridge and the two veth pairs.
net_fabric() {
    lab_log "network: namespace $NET_NS, bridge, veths"
    ip netns add "$NET_NS"
    net_ns ip link set lo up
    net_ns ip link add br0 type bridge
    net_ns ip link set br0 up
    local i
    for i in 1 2; do
        ip link add "eth$i" type veth peer name "sw$i"
        ip link set "sw$i" netns "$NET_NS"
        net_ns ip link set "sw$i" master br0
        net_ns ip link set "sw$i" up
    done
    local p
    for p in "${NET_PORTALS[@]}"; do
        net_ns ip addr add "$p/24" dev br0
    done
}

# net_setup_two_nics [policy|host32|none]: the seed's two NICs on one subnet.
# `none` reproduces the seed's bug (the kernel picks one NIC for both portals).
net_setup_two_nics() {
    local routing=${1:-policy}
    net_fabric
    local nic
    for nic in eth1 eth2; do
        ip addr add "${NET_ADDR[$nic]}/24" dev "$nic"
        ip link set "$nic" up
    done
    net_sysctls eth1 eth2
    echo "NET_ROUTING=$routing" >"$LAB_RUN/net.env"
    for nic in eth1 eth2; do
        net_routes_apply "$nic"
    done
    lab_wait 10 "eth1 and eth2 up" net_links_up eth1 eth2
    net_show
}

net_links_up() {
    local nic
    for nic; do
        [[ $(cat "/sys/class/net/$nic/operstate") == up ]] || return 1
    done
}

net_sysctls() {
    local nic
    sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 \
        net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
    for nic; do
        sysctl -qw "net.ipv4.conf.$nic.arp_ignore=1" "net.ipv4.conf.$nic.arp_announce=2" \
            "net.ipv4.conf.$nic.rp_filter=0"
    done
}

# (Re-)adds the NIC's extra routes; `ip link set down` deletes them.
net_routes_apply() {
    local nic=$1 routing=none p
    [[ -f $LAB_RUN/net.env ]] && source "$LAB_RUN/net.env" && routing=$NET_ROUTING
    case $routing in
    policy)
        local t=${NET_TABLE[$nic]}
        ip route replace "$NET_PREFIX.0/24" dev "$nic" src "${NET_ADDR[$nic]}" table "$t"
        # Not `ip rule show | grep -q`: under pipefail, grep -q closing the
        # pipe early can fail the check and re-add an existing rule.
        [[ $(ip rule show) == *"from ${NET_ADDR[$nic]} lookup $t"* ]] ||
            ip rule add from "${NET_ADDR[$nic]}" table "$t" priority "$((1000 + t))"
        ;;
    host32)
        for p in "${NET_PORTALS[@]}"; do
            [[ ${NET_PORTAL_NIC[$p]} == "$nic" ]] &&
                ip route replace "$p/32" dev "$nic" src "${NET_ADDR[$nic]}"
        done
        ;;
    none|bond) ;;
    *) lab_fail "unknown routing mode $routing"; return 1 ;;
    esac
}

# net_setup_bond: eth1 and eth2 enslaved to a balance-alb bond0 with one
# address (the seed's final setup).
net_setup_bond() {
    net_fabric
    ip link add bond0 type bond mode balance-alb miimon 100
    local nic
    for nic in eth1 eth2; do
        ip link set "$nic" down
        ip link set "$nic" master bond0
    done
    ip addr add "${NET_ADDR[eth1]}/24" dev bond0
    ip link set bond0 up
    for nic in eth1 eth2; do ip link set "$nic" up; done
    net_sysctls bond0
    echo "NET_ROUTING=bond" >"$LAB_RUN/net.env"
    lab_wait 15 "bond0 up with two slaves" net_bond_ready
    net_show
}

net_bond_ready() {
    net_links_up bond0 &&
        [[ $(grep -c '^MII Status: up' /proc/net/bonding/bond0) -ge 3 ]]
}

net_ping_portals() {
    local p
    for p in "${NET_PORTALS[@]}"; do
        busybox ping -c1 -W2 "$p" >/dev/null || return 1
    done
}

net_show() {
    ip -br addr
    ip route show table all | grep -v -e '^local' -e '^broadcast' -e 'fe80' -e '^multicast' -e 'ff00' || true
    ip rule show
}
