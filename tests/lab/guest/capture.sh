# Sysfs capture: copies the iSCSI and SCSI parts of /sys into a tree that
# mirrors /sys, so that code can use it as a fake sysfs root.
#
# Kept as in /sys: the symlinks class/{iscsi_session,iscsi_connection,
# iscsi_host,scsi_device,scsi_host}/* and block/sd*, and every symlink inside
# the copied directories (device, subsystem, driver, ...) even when its target
# is not copied. Copied recursively: for each link target, its SCSI host
# directory (devices/.../hostN, which holds the iSCSI session, connection,
# target, SCSI device, sd and sg nodes), or the target itself when it is not
# below a SCSI host; plus the attribute files of the parent directories up to
# devices/.
# Only readable regular attributes are copied; unreadable ones are skipped.

CAPTURE_CLASSES=(iscsi_session iscsi_connection iscsi_host scsi_device scsi_host)

# capture_sysfs [DEST]: without DEST, tars the capture to the results share.
capture_sysfs() {
    local dest=${1:-$LAB_RUN/capture}
    lab_step "capture: sysfs into ${1:-the results share}"
    rm -rf "$dest"
    mkdir -p "$dest"
    local -A dirs=()
    local link c rel target
    for c in "${CAPTURE_CLASSES[@]}"; do
        for link in /sys/class/$c/*; do
            [[ -L $link ]] || continue
            _capture_link "$link" "$dest"
            dirs[$(readlink -f "$link")]=1
        done
    done
    for link in /sys/block/sd*; do
        [[ -L $link ]] || continue
        _capture_link "$link" "$dest"
        dirs[$(readlink -f "$link")]=1
    done
    local -A trees=()
    for target in "${!dirs[@]}"; do
        trees[$(_capture_host_of "$target")]=1
    done
    for target in "${!trees[@]}"; do
        _capture_tree "$target" "$dest"
        # Parents up to /sys/devices: their own attributes, not their subtrees.
        local p=${target%/*}
        while [[ $p == /sys/devices/* ]]; do
            _capture_dir_files "$p" "$dest"
            p=${p%/*}
        done
    done
    find "$dest" -name .captured -delete
    local n
    n=$(find "$dest" -type f | wc -l)
    lab_log "captured ${#trees[@]} device trees, $n files, $(du -sh "$dest" | cut -f1)"
    if [[ -z ${1:-} ]]; then
        tar -C "$dest" -cf "$RESULTS/capture.tar" . || { lab_fail "capture tar"; return 1; }
        lab_summary "PASS capture ($n files)"
    fi
}

# The SCSI host directory above a device, or the device itself.
_capture_host_of() {
    local p=$1
    while [[ $p == /sys/devices/* ]]; do
        [[ $(basename "$p") =~ ^host[0-9]+$ ]] && { echo "$p"; return; }
        p=${p%/*}
    done
    echo "$1"
}

_capture_link() {
    local link=$1 dest=$2 rel=${1#/sys/}
    mkdir -p "$dest/$(dirname "$rel")"
    ln -sfn "$(readlink "$link")" "$dest/$rel"
}

_capture_dir_files() {
    local dir=$1 dest=$2 f rel
    rel=${dir#/sys/}
    [[ -d $dest/$rel && -f $dest/$rel/.captured ]] && return 0
    mkdir -p "$dest/$rel"
    for f in "$dir"/*; do
        _capture_entry "$f" "$dest"
    done
}

_capture_tree() {
    local dir=$1 dest=$2 f
    _capture_dir_files "$dir" "$dest"
    for f in "$dir"/*; do
        [[ -d $f && ! -L $f ]] && _capture_tree "$f" "$dest"
    done
    touch "$dest/${dir#/sys/}/.captured"
}

_capture_entry() {
    local f=$1 dest=$2 rel=${1#/sys/}
    if [[ -L $f ]]; then
        ln -sfn "$(readlink "$f")" "$dest/$rel"
    elif [[ -f $f ]]; then
        [[ -r $f ]] && [[ $(stat -c %A "$f") == -r* ]] || return 0
        # Skip attributes that fail to read (EIO, EINVAL ...).
        if ! cat "$f" >"$dest/$rel" 2>/dev/null; then
            rm -f "$dest/$rel"
        fi
    fi
}
