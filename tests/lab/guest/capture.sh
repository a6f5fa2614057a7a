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
    CAPTURE_DEST=$dest
    declare -gA CAPTURE_DONE=()
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
        [[ ${p##*/} =~ ^host[0-9]+$ && -d $p/scsi_host ]] && { echo "$p"; return; }
        p=${p%/*}
    done
    echo "$1"
}

_capture_link() {
    local link=$1 dest=$2 rel=${1#/sys/}
    mkdir -p "$dest/$(dirname "$rel")"
    ln -sfn "$(readlink "$link")" "$dest/$rel"
}

# cp -a keeps symlinks as symlinks and reads sysfs files to EOF (their
# st_size is a dummy 4096). Attributes that cannot be read (write-only: EACCES;
# EIO, EINVAL) are dropped: cp reports them and may leave an empty copy.
_capture_cp() {  # _capture_cp DEST_DIR SOURCE...
    local dest=$1 err line f; shift
    err=$(cp -a -t "$dest" -- "$@" 2>&1 >/dev/null) || true
    [[ -z $err ]] && return 0
    while IFS= read -r line; do
        case $line in
        "cp: error reading '"*) f=${line#"cp: error reading '"}; f=${f%%"':"*} ;;
        *) continue ;;
        esac
        rm -f -- "$CAPTURE_DEST/${f#/sys/}"
    done <<<"$err"
}

# A parent directory: its own attributes and links, not its subdirectories.
_capture_dir_files() {
    local dir=$1 dest=$2 rel=${1#/sys/} f files=()
    [[ -n ${CAPTURE_DONE[$rel]:-} ]] && return 0
    CAPTURE_DONE[$rel]=1
    mkdir -p "$dest/$rel"
    for f in "$dir"/*; do
        [[ -L $f || -f $f ]] && files+=("$f")
    done
    ((${#files[@]})) && _capture_cp "$dest/$rel" "${files[@]}"
    return 0
}

_capture_tree() {
    local dir=$1 dest=$2 rel=${1#/sys/}
    CAPTURE_DONE[$rel]=1
    mkdir -p "$dest/${rel%/*}"
    _capture_cp "$dest/${rel%/*}" "$dir"
}
