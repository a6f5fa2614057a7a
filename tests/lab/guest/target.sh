# LIO target through raw configfs writes. Backstores are fileio files on
# tmpfs; listening portals are created inside the target namespace.

TGT_CFS=/sys/kernel/config/target
TGT_STORE=/run/lab/luns

tgt_init() {
    mkdir -p /etc/target "$TGT_STORE"
    [[ -d $TGT_CFS ]] || lab_die "no $TGT_CFS (target_core_mod not loaded?)"
    mkdir -p "$TGT_CFS/iscsi"
    # Don't let LIO hold a dead connection for long after a fault.
    [[ -d $TGT_CFS/iscsi/discovery_auth ]] && echo 0 >"$TGT_CFS/iscsi/discovery_auth/enforce_discovery_auth"
    return 0
}

# tgt_backstore NAME SIZE_MB SERIAL [VENDOR [PRODUCT [REVISION]]]
# LIO derives the NAA WWID from the hex digits of SERIAL: keep them distinct.
tgt_backstore() {
    local name=$1 size=$2 serial=$3 vendor=${4:-} product=${5:-} rev=${6:-}
    local d=$TGT_CFS/core/fileio_0/$name img=$TGT_STORE/$name.img
    truncate -s "${size}M" "$img"
    mkdir -p "$d"
    echo "fd_dev_name=$img,fd_dev_size=$((size * 1024 * 1024))" >"$d/control"
    echo "$serial" >"$d/wwn/vpd_unit_serial"
    [[ -z $vendor ]] || echo "$vendor" >"$d/wwn/vendor_id"
    [[ -z $product ]] || echo "$product" >"$d/wwn/product_id"
    [[ -z $rev ]] || echo "$rev" >"$d/wwn/revision"
    echo 1 >"$d/enable"
    # Write-through keeps the data checks honest.
    echo 0 >"$d/attrib/emulate_write_cache"
}

# tgt_alua_group BACKSTORE GROUP ID STATE(0=AO,1=ANO,2=standby,3=unavailable)
tgt_alua_group() {
    local bs=$1 grp=$2 id=$3 state=$4
    local g=$TGT_CFS/core/fileio_0/$bs/alua/$grp
    mkdir -p "$g"
    echo "$id" >"$g/tg_pt_gp_id"
    echo 3 >"$g/alua_access_type"
    echo 0 >"$g/nonop_delay_msecs"
    echo "$state" >"$g/alua_access_state"
}

# tgt_target IQN PORTAL: a target with one TPG listening on one portal.
tgt_target() {
    local iqn=$1 portal=$2
    local t=$TGT_CFS/iscsi/$iqn/tpgt_1
    mkdir -p "$t"
    echo 1 >"$t/attrib/generate_node_acls"
    echo 1 >"$t/attrib/cache_dynamic_acls"
    echo 0 >"$t/attrib/demo_mode_write_protect"
    echo 0 >"$t/attrib/authentication"
    nsenter --net="/run/netns/$NET_NS" mkdir "$t/np/$portal:3260"
}

# tgt_lun IQN LUN BACKSTORE [ALUA_GROUP]
tgt_lun() {
    local iqn=$1 lun=$2 bs=$3 grp=${4:-}
    local l=$TGT_CFS/iscsi/$iqn/tpgt_1/lun/lun_$lun
    mkdir -p "$l"
    ln -s "$TGT_CFS/core/fileio_0/$bs" "$l/$bs"
    [[ -z $grp ]] || echo "$grp" >"$l/alua_tg_pt_gp"
}

tgt_enable() { echo 1 >"$TGT_CFS/iscsi/$1/tpgt_1/enable"; }

# Lists target IQN, portal and LUN -> backstore.
tgt_show() {
    local t l
    for t in "$TGT_CFS"/iscsi/iqn.*; do
        echo "target $(basename "$t") portal $(ls "$t/tpgt_1/np") enable $(cat "$t/tpgt_1/enable")"
        for l in "$t"/tpgt_1/lun/lun_*; do
            [[ -d $l ]] || continue
            echo "  $(basename "$l") -> $(find "$l" -maxdepth 1 -type l -printf '%f\n' | head -n1)" \
                "alua: $(head -n1 "$l/alua_tg_pt_gp" 2>/dev/null)"
        done
    done
}
