# pathkeeper's libdevmapper adapter and reconciler against the real kernel
# (issue #5), through tests/lab/tools/dm_adapter_check. Not part of lib.sh's
# list: a scenario's case sources it when asked. Functions are prefixed dma_.

# dma_lun_paths: "SDX SDY" for the first WWID that has two iSCSI paths.
dma_lun_paths() {
    ini_paths | awk '{ n[$7]++; if (n[$7] == 1) first[$7] = $1; else if (n[$7] == 2 && !done) { print first[$7], $1; done = 1 } }'
}

# dma_none_suspended: no device-mapper map is suspended.
dma_none_suspended() {
    local name
    for name in $(dmsetup ls --target multipath | awk '$1 != "No" {print $1}'); do
        if dmsetup info "$name" | grep -q 'SUSPENDED'; then
            lab_log "$name is suspended"
            return 1
        fi
    done
}

# dma_run TOOL: runs dm_adapter_check on two paths of one LUN, its output in
# the guest log and in files/dm_adapter_check.txt.
dma_run() {
    local tool=$1 paths rc=0
    lab_step "dm adapter: LibDevmapper and the reconciler against the kernel"
    lab_check "dm_adapter_check given with tool= ($tool)" test -x "$tool" || return 1
    pk_mask_multipath_uevent_check
    paths=$(dma_lun_paths)
    lab_check "two paths of one LUN: $paths" test "$(wc -w <<<"$paths")" -eq 2 || return 1
    # shellcheck disable=SC2086 # two words on purpose
    "$tool" $paths >"$LAB_RUN/dm_adapter_check.txt" 2>&1 || rc=$?
    cat "$LAB_RUN/dm_adapter_check.txt"
    lab_save dm_adapter_check.txt "$LAB_RUN/dm_adapter_check.txt"
    lab_check "dm_adapter_check $paths passed every check" test "$rc" -eq 0
    lab_check "no multipath map left suspended" dma_none_suspended
    lab_check "no pk-dmadapter map left behind" dma_map_gone pk-dmadapter
    lab_check "the kernel reported no slab corruption (clears, renames, removals)" lab_no_slab_reports
}

dma_map_gone() { ! dmsetup info "$1" >/dev/null 2>&1; }
