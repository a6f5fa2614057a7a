# bonded: the seed's final setup. eth1 and eth2 in a balance-alb bond0 with
# one address (10.10.1.10); the same Xserve RAID behind the same MDS portals;
# four sessions (2 portals x 2 controllers) from one iface bound to bond0.
#
# args: netcheck  pathkeeperd's network check recognises the bond and finds
#                 nothing wrong (needs daemon= and ctl=)

source "$LAB_DIR/scenarios/xserve.sh"

scenario_setup() {
    net_setup_bond
    lab_check "both portals answer ping through bond0" net_ping_portals
    xs_target
    ini_setup
    ini_iface iface0 bond0
    xs_login_all iface0
    ini_wait_paths 4
}

scenario_run() {
    lab_check "bond0 is balance-alb" grep -q 'Bonding Mode: adaptive load balancing' /proc/net/bonding/bond0
    lab_check "bond0 has eth1 and eth2 as slaves" \
        test "$(grep '^Slave Interface' /proc/net/bonding/bond0 | awk '{print $3}' | sort | xargs)" = "eth1 eth2"
    cp /proc/net/bonding/bond0 "$RESULTS/files/bond0.txt"
    xs_check_basics
    lab_check "all sessions use iface0 (bond0)" \
        test "$(ini_paths | awk '$6 != "iface0"' | wc -l)" -eq 0
    local a
    for a; do
        case $a in
        netcheck) nc_bonded "$(xs_arg daemon "" "$@")" "$(xs_arg ctl "" "$@")" ;;
        esac
    done
}
