# pathkeeper in the guest: plan from the guest's real iSCSI paths with
# pathkeeperctl (its own sysfs scanner on the live /sys), load exactly those
# tables into the kernel, and check what the kernel prints back. Functions
# are prefixed pk_.

# pk_plan CTL CONFIG OUT_JSON: pathkeeperctl plan on the live /sys.
pk_plan() {
    local ctl=$1 config=$2 out=$3
    "$ctl" plan --sysfs-root /sys --config "$config" --config-dir /nonexistent \
        --bindings "$LAB_RUN/bindings" --json >"$out"
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

# pk_reinstate_failed MAP: reinstate every path dm shows as F, and log it.
pk_reinstate_failed() {
    local dev
    for dev in $(dmsetup status "$1" | awk '{ for (i = 1; i < NF; i++) if ($(i + 1) == "F") print $i }'); do
        lab_log "$1: path $dev is F right after creation; reinstate_path $dev"
        dmsetup message "$1" 0 reinstate_path "$dev"
    done
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

# pk_variant_conf N: a config that makes the planner use variant N's
# selector, grouping and features for the Xserve LUNs. Each variant is one
# corner of the table grammar the kernel must accept and echo unchanged.
pk_variant_conf() {
    local device
    case $1 in
    1) device='selector = "round-robin"
no_path_retry = "fail"' ;;
    2) device='selector = "queue-length"
no_path_retry = "queue"
pg_init_retries = 5
pg_init_delay_msecs = 0' ;;
    3) device='selector = "service-time"
grouping = "failover"
hardware_handler = "alua"
retain_attached_hw_handler = true' ;;
    4) device='selector = "historical-service-time"
queue_mode = "bio"' ;;
    *) return 1 ;;
    esac
    cat "${LAB_DIR%/tests/lab}/tests/data/config/xserve.conf"
    printf '\n[[device]]\nvendor = "APPLE"\nproduct = "Xserve RAID"\n%s\n' "$device"
}

# pk_mask_multipath_uevent_check: masks multipath-tools' 56-dm-mpath.rules
# the way an admin overrides a packaged rule (/etc/udev/rules.d -> /dev/null).
# Bisected in this lab: its `multipath -U` runs on every fresh mpath- map and
# races the kernel's first scsi_dh_alua activation, and every path of the new
# map fails within a second, with no SCSI error logged. Without that one rule
# the paths stay active. multipathd reinstates such paths from its checker;
# pathkeeper's own udev rules take this rule's place in owner mode (issue #7).
pk_mask_multipath_uevent_check() {
    mkdir -p /etc/udev/rules.d
    ln -sf /dev/null /etc/udev/rules.d/56-dm-mpath.rules
    udevadm control --reload
    lab_log "masked 56-dm-mpath.rules (multipath -U) in the guest"
}

# pk_grammar_variants CTL TOOL: for each variant, plan from the live paths,
# load the upper map into the kernel, require the kernel's table echo to be
# our table word for word, parse the kernel's table and status with our
# parsers, read through the map, and remove it.
pk_grammar_variants() {
    local ctl=$1 tool=$2 v plan table alias
    pk_mask_multipath_uevent_check
    for v in 1 2 3 4; do
        lab_step "grammar variant $v"
        if ((v == 4)); then
            # Loaded, the planner sees it in /sys/module and uses it; absent,
            # the plan falls back to service-time and says so in its notes.
            modprobe dm_historical_service_time 2>/dev/null ||
                lab_log "this kernel has no dm_historical_service_time"
        fi
        pk_variant_conf "$v" >"$LAB_RUN/variant-$v.conf"
        plan=$LAB_RUN/variant-$v.json
        lab_check "variant $v: pathkeeperctl plan" pk_plan "$ctl" "$LAB_RUN/variant-$v.conf" "$plan" || return 1
        lab_save "variant-$v.json" "$plan"
        table=$(jq -r '.maps[] | select(.alias == "xserve-upper") | .table' "$plan")
        lab_log "variant $v notes: $(jq -c '.maps[] | select(.alias == "xserve-upper") | .notes' "$plan")"
        alias=pk-grammar-$v
        lab_check "variant $v: kernel loads our table: $table" \
            dmsetup create "$alias" --uuid "mpath-grammar-$v" --table "$table" || return 1
        lab_check "variant $v: kernel echoes the table word for word" pk_kernel_echo_matches "$alias" "$table"
        lab_check "variant $v: our parsers read the kernel's table and status" pk_grammar_check "$tool" "$alias"
        dmsetup mknodes "$alias" >/dev/null 2>&1 || true
        lab_check "variant $v: 1 MiB reads through the map" \
            timeout 30 dd if="/dev/mapper/$alias" of=/dev/null bs=1M count=1 iflag=direct status=none
        dmsetup message "$alias" 0 fail_if_no_path >/dev/null 2>&1 || true
        lab_check "variant $v: remove the map" dmsetup remove --retry "$alias"
    done
}
