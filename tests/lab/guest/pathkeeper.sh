# pathkeeper in the guest: plan from the guest's real iSCSI paths with
# pathkeeperctl, load exactly those tables into the kernel, and check what the
# kernel prints back. Functions are prefixed pk_.
#
# pk_inventory writes the inventory from sysfs with shell; it stands in for
# the daemon's own sysfs scanner (issue #4) so the selector's tables can meet
# the real kernel today.

# pk_wwid SDX: the multipath WWID ("3" + NAA hex) from the kernel's wwid
# attribute, which reads "naa.<hex>" for NAA designators.
pk_wwid() {
    local w
    w=$(<"/sys/block/$1/device/wwid")
    case $w in
    naa.*) echo "3${w#naa.}" ;;
    eui.*) echo "2${w#eui.}" ;;
    *) echo "$w" | tr -s ' ' '_' ;;
    esac
}

# pk_inventory FILE: one [[path]] per iSCSI sd device.
pk_inventory() {
    local out=$1 b sd dev s c host netdev iface
    : >"$out"
    for b in /sys/block/sd*; do
        [[ -e $b ]] || continue
        sd=${b##*/}
        dev=$(readlink -f "$b/device") || continue
        s=$dev
        while [[ $s == /sys/* && ${s##*/} != session* ]]; do s=${s%/*}; done
        [[ ${s##*/} == session* ]] || continue
        c=("$s"/connection*/iscsi_connection/connection*)
        s=/sys/class/iscsi_session/${s##*/}
        iface=$(<"$s/ifacename")
        netdev=$(iscsiadm -m iface -I "$iface" 2>/dev/null | awk -F' = ' '$1 == "iface.net_ifacename" { print $2 }')
        [[ $netdev == "<empty>" ]] && netdev=
        cat >>"$out" <<TOML
[[path]]
device = "$sd"
devt = "$(<"$b/dev")"
wwid = "$(pk_wwid "$sd")"
vendor = "$(xargs <"$b/device/vendor")"
product = "$(xargs <"$b/device/model")"
size = $(<"$b/size")
target = "$(<"$s/targetname")"
portal = "$(<"${c[0]}/persistent_address"):$(<"${c[0]}/persistent_port"),$(<"$s/tpgt")"
iface = "$iface"
netdev = "$netdev"
session = ${s##*session}
state = "$(pk_path_state "$sd" "$s")"

TOML
    done
}

# The path state a checker would report right now: up when the session is
# logged in and the SCSI device is running.
pk_path_state() {
    if [[ $(<"/sys/block/$1/device/state") == running && $(<"$2/state") == LOGGED_IN ]]; then
        echo up
    else
        echo down
    fi
}

# pk_plan CTL CONFIG OUT_JSON: pathkeeperctl plan on the live inventory.
pk_plan() {
    local ctl=$1 config=$2 out=$3
    pk_inventory "$LAB_RUN/inventory.toml"
    lab_save inventory.toml "$LAB_RUN/inventory.toml"
    "$ctl" plan --inventory "$LAB_RUN/inventory.toml" --config "$config" \
        --config-dir /nonexistent --bindings "$LAB_RUN/bindings" --json >"$out"
}

# pk_load_maps PLAN_JSON: dmsetup create every planned map, with the DM UUID
# mpath-<wwid> that udev's multipath rules and kpartx expect.
pk_load_maps() {
    local plan=$1 n i alias uuid table
    n=$(jq '.maps | length' "$plan")
    for ((i = 0; i < n; i++)); do
        alias=$(jq -r ".maps[$i].alias" "$plan")
        uuid=$(jq -r ".maps[$i].dm_uuid" "$plan")
        table=$(jq -r ".maps[$i].table" "$plan")
        lab_log "create $alias: $table"
        dmsetup create "$alias" --uuid "$uuid" --table "$table" || return 1
    done
    udevadm settle --timeout=20 || true
    dmsetup mknodes >/dev/null 2>&1 || true
}

# pk_kernel_echo_matches ALIAS TABLE: the kernel prints our table back
# word for word (it appends a trailing space).
pk_kernel_echo_matches() {
    local got
    got=$(dmsetup table "$1" | sed 's/ *$//')
    if [[ $got != "$2" ]]; then
        lab_log "kernel: $got"
        lab_log "ours:   $2"
        return 1
    fi
}

# pk_remove_maps PLAN_JSON
pk_remove_maps() {
    local alias
    for alias in $(jq -r '.maps[].alias' "$1"); do
        dmsetup remove --retry "$alias" || return 1
    done
}

# pk_grammar_check TOOL ALIAS: our parsers on the kernel's own table and
# status lines for a live map.
pk_grammar_check() {
    local tool=$1 alias=$2
    "$tool" table "$(dmsetup table "$alias")" && "$tool" status "$(dmsetup status "$alias")"
}
