# D-Bus checks (issue #6, VM tests): pathkeeperd on the guest's system bus as
# busctl and pathkeeperctl see it, then Debian's multipathd 0.9.4 running
# from the multipath.conf `pathkeeperctl export multipath-conf` writes.
# Functions are prefixed dc_. Builds on daemon.sh (pd_*) and plan_checks.sh
# (pc_*).

DC_MON=$LAB_RUN/busctl-monitor.jsonl
DC_MON_PID=
DC_STATUS=$LAB_RUN/ctl-status.json

# dc_status CTL: `pathkeeperctl status --json` into $DC_STATUS.
dc_status() { "$1" status --json >"$DC_STATUS"; }

# dc_status_matches_dm MAP: the devts status lists for MAP's paths are the
# ones in MAP's dm table, and every one of them is in one of MAP's groups.
dc_status_matches_dm() {
    local st dm
    st=$(jq -r --arg m "$1" '.paths[] | select(.map == $m) | .devt' "$DC_STATUS" | sort | xargs)
    dm=$(pd_dm_states "$1" | awk '{print $1}' | sort | xargs)
    lab_log "$1: status [$st], dmsetup [$dm]"
    [[ -n $st && $st == "$dm" ]] &&
        pc_jq_true "$DC_STATUS" '.maps[] | select(.alias == $m) | ([.groups[].paths[]] | sort) == ([$all[] | select(.map == $m) | .device] | sort)' \
            --arg m "$1" --argjson all "$(jq -c .paths "$DC_STATUS")"
}

# dc_monitor_start: busctl's JSON view of every message to or from the
# daemon's name, in the background.
dc_monitor_start() {
    : >"$DC_MON"
    busctl --system monitor --json=short org.pathkeeper.PathKeeper1 >"$DC_MON" 2>"$DC_MON.err" &
    DC_MON_PID=$!
    lab_log "busctl monitor started (pid $DC_MON_PID)"
}

# dc_states DEV: the State values PropertiesChanged carried for DEV's path
# object, in order (a line still being written is skipped).
dc_states() {
    jq -rR --arg p "/org/pathkeeper/PathKeeper1/paths/$1" \
        'fromjson? | select(.member == "PropertiesChanged" and .path == $p)
         | .payload.data[1].State.data // empty' "$DC_MON"
}
dc_saw() { dc_states "$1" | grep -qx "$2"; }
# dc_note_has DEV TEXT: DEV's note in the state file contains TEXT.
dc_note_has() { [[ $(pd_path_field "$1" note) == *"$2"* ]]; }
# dc_dm_states DEV: the DmState values of DEV's PropertiesChanged signals.
dc_dm_states() {
    jq -rR --arg p "/org/pathkeeper/PathKeeper1/paths/$1" \
        'fromjson? | select(.member == "PropertiesChanged" and .path == $p)
         | .payload.data[1].DmState.data // empty' "$DC_MON"
}
# dc_saw_dm_failed_then_active DEV: DmState "failed" and, after it, "active".
dc_saw_dm_failed_then_active() { dc_dm_states "$1" | awk '$0 == "failed" { f = 1 } f && $0 == "active" { a = 1 } END { exit !a }'; }
# dc_saw_down_then_up DEV: a State "down" and, after it, a State "up".
dc_saw_down_then_up() { dc_states "$1" | awk '$0 == "down" { d = 1 } d && $0 == "up" { u = 1 } END { exit !u }'; }

# dc_dm_groups: the live multipath maps as "WWID N DEV1,DEV2" per group, the
# form of pc_pk_groups (devices by kernel name, sorted within the group).
dc_dm_groups() {
    local name uuid
    dmsetup info -c --noheadings --separator ' ' -o name,uuid 2>/dev/null |
        while read -r name uuid; do
            [[ $uuid == mpath-* ]] || continue
            dmsetup table "$name" | awk -v w="${uuid#mpath-}" '$3 == "multipath" {
                i = 4; i += $i + 1; i += $i + 1      # features, hardware handler
                npg = $i; i += 2                     # group count, initial group
                for (g = 1; g <= npg; g++) {
                    i++; i += $i + 1                 # selector and its args
                    np = $i; npa = $(i + 1); i += 2
                    for (p = 1; p <= np; p++) { print w, g, $i; i += npa + 1 }
                }
            }'
        done | while read -r w g devt; do
            echo "$w $g $(basename "$(readlink -f "/sys/dev/block/$devt")")"
        done | sort -k1,1 -k2,2n -k3,3 | pc_join
}

# dc_same_groups_live PLAN_JSON: the live maps have the plan's groups.
dc_same_groups_live() {
    local pk dm
    pk=$(pc_pk_groups "$1" | sort)
    dm=$(dc_dm_groups | sort)
    lab_log "groups: plan [$(echo $pk)], live [$(echo $dm)]"
    [[ -n $pk && $pk == "$dm" ]]
}

# dc_same_aliases_live PLAN_JSON: the live multipath maps are named as the
# plan names them, with DM UUID mpath-<the plan's WWID>, and there are no others.
dc_same_aliases_live() {
    local pk dm
    pk=$(jq -r '.maps[] | "\(.alias) mpath-\(.wwid)"' "$1" | sort | xargs)
    dm=$(dc_map_names | while read -r n; do
        echo "$n $(dmsetup info -c --noheadings -o uuid "$n")"; done | sort | xargs)
    lab_log "aliases: plan [$pk], live [$dm]"
    [[ -n $pk && $pk == "$dm" ]]
}

# dc_selector_handler_live PLAN_JSON: each live table has the plan's
# selector and hardware handler.
dc_selector_handler_live() {
    local alias sel hw table bad=0
    while read -r alias sel hw; do
        table=$(dmsetup table "$alias") || return 1
        [[ $table == *" $sel 0 "* ]] || { lab_log "$alias: no $sel in: $table"; bad=1; }
        [[ $table == *" 1 $hw "* ]] || { lab_log "$alias: no handler $hw in: $table"; bad=1; }
    done < <(jq -r '.maps[] | "\(.alias) \(.selector) \(.hw_handler)"' "$1")
    return $bad
}

# dc_map_names: the multipath maps' names ("No devices found" is not one).
dc_map_names() { dmsetup ls --target multipath 2>/dev/null | awk '$2 ~ /^\(/ {print $1}'; }
dc_mpd_has_maps() { [[ $(dc_map_names | grep -c .) -eq $1 ]]; }
dc_no_maps() { [[ -z $(dc_map_names) ]]; }
# dc_conf_errors LOG: the lines where multipath-tools 0.9.4 complained about
# /etc/multipath.conf: its parser and keyword handlers name the file and the
# line ("FILE line N, ..." or "... on line N of FILE").
dc_conf_errors() {
    grep -E "multipath\.conf line [0-9]+|line [0-9]+ of [^ ]*multipath\.conf|invalid keyword|parse error|missing value" "$1"
}

# dc_run DAEMON CTL: the whole issue #6 VM test on the xserve scenario.
dc_run() {
    local daemon=$1 ctl=$2 m sd dev sd2 dev2 conf plan
    pk_mask_multipath_uevent_check
    pd_write_config service-time

    lab_step "dbus 1: pathkeeperd on the system bus; pathkeeperctl status"
    pd_start "$daemon"
    lab_wait 60 "pathkeeperd ready" pd_ready
    lab_wait 30 "xserve-upper and xserve-lower, 2 paths each" pd_maps_present
    "$ctl" status || true
    lab_check "pathkeeperctl status --json" dc_status "$ctl"
    lab_save ctl-status.json "$DC_STATUS"
    lab_check "status: both maps, xserve-lower and xserve-upper" \
        pc_jq_true "$DC_STATUS" '[.maps[].alias] | sort == ["xserve-lower", "xserve-upper"]'
    lab_check "status: 4 paths, 2 per map, all up" \
        pc_jq_true "$DC_STATUS" '(.paths | length) == 4 and ([.paths[] | select(.state == "up")] | length) == 4
                                 and all(.maps[]; .total_paths == 2)'
    for m in xserve-upper xserve-lower; do
        lab_check "status: $m's paths are those of its dm table" dc_status_matches_dm "$m"
    done
    lab_check "status: the human view names both maps and the 4 devices" \
        bash -c '"$1" status >"$2" && grep -q xserve-upper "$2" && grep -q xserve-lower "$2" &&
                 for d in $(jq -r ".paths[].device" "$3"); do grep -qw "$d" "$2" || exit 1; done' \
        _ "$ctl" "$LAB_RUN/ctl-status.txt" "$DC_STATUS"

    lab_step "dbus 2: busctl monitor sees the eth1 path fail and come back"
    sd=$(pd_eth1_path xserve-upper)
    dev=$(pd_devt "$sd")
    lab_log "xserve-upper's eth1 path: $sd ($dev)"
    dc_monitor_start
    sleep 1
    fault_link_cut eth1
    lab_wait 60 "$sd failed in dm" pd_dm_is xserve-upper "$dev" F
    lab_wait 30 "busctl monitor: PropertiesChanged State=down on paths/$sd" dc_saw "$sd" down
    fault_link_restore eth1
    lab_wait 120 "$sd's session LOGGED_IN" pd_session_logged_in "$sd"
    lab_wait 60 "$sd active in dm again" pd_dm_is xserve-upper "$dev" A
    lab_wait 30 "busctl monitor: State=up on paths/$sd after the down" dc_saw_down_then_up "$sd"
    lab_log "State changes busctl saw for $sd: $(dc_states "$sd" | xargs)"

    lab_step "dbus 3: pathkeeperctl fail-path and reinstate-path"
    sd2=$(jq -r '.paths[] | select(.map == "xserve-lower" and .netdev == "eth2") | .device' "$PD_STATE")
    dev2=$(pd_devt "$sd2")
    lab_check "pathkeeperctl fail-path $sd2" "$ctl" fail-path "$sd2"
    lab_wait 15 "$sd2 ($dev2) failed in dmsetup status" pd_dm_is xserve-lower "$dev2" F
    # The kernel's PATH_FAILED for the admin's own fail_path is not a health
    # event: the path stays up for the checker (so it is not counted toward
    # flap damping), and its note says who failed it.
    lab_wait 15 "the state file notes the admin's hold on $sd2" dc_note_has "$sd2" "failed by the admin"
    lab_check "$sd2 is still up for the health checks" pd_path_state_is "$sd2" up
    lab_check "$sd2 was not called shaky" test "$(pd_path_field "$sd2" shaky)" = false
    lab_check "pathkeeperctl reinstate-path $sd2" "$ctl" reinstate-path "$sd2"
    # ReinstatePath releases the admin's hold; the path is up, so it is
    # reinstated at once (before, the kernel's PATH_FAILED echo had marked it
    # down, and it came back only at the next check of failed paths, 30 s).
    lab_wait 15 "$sd2 ($dev2) active in dmsetup status" pd_dm_is xserve-lower "$dev2" A
    # The admin's hold is not a health verdict: busctl sees DmState go
    # failed and active again, and State never down.
    lab_wait 15 "busctl monitor: $sd2's DmState went failed and active" dc_saw_dm_failed_then_active "$sd2"
    lab_check "busctl monitor: $sd2's State never went down" not dc_saw "$sd2" down
    kill "$DC_MON_PID" 2>/dev/null || true
    wait "$DC_MON_PID" 2>/dev/null || true
    lab_save busctl-monitor.jsonl "$DC_MON"

    lab_step "dbus 3b: a LUN's devices deleted: the map is stale; disable-queueing frees the I/O stuck on it and survives a rename"
    # What an admin meets after a LUN is deleted on the array and its sd
    # devices are removed: the map stays, queueing (no_path_retry 12 x 60 s
    # here), and a reader hangs in D state until queueing is disabled.
    local upper_devs pid rc
    upper_devs=$(jq -r '.paths[] | select(.map == "xserve-upper") | .device' "$PD_STATE" | xargs)
    lab_log "deleting xserve-upper's devices: $upper_devs"
    for sd in $upper_devs; do echo 1 >"/sys/block/$sd/device/delete"; done
    lab_wait 30 "pathkeeperctl status: xserve-upper is stale" \
        bash -c '"$1" status --json | jq -e ".maps[] | select(.alias == \"xserve-upper\") | .state == \"stale\"" >/dev/null' _ "$ctl"
    lab_check "xserve-upper is still in the kernel, queueing" pd_queueing xserve-upper
    "$ctl" status --no-color || true
    dd if=/dev/mapper/xserve-upper of=/dev/null bs=4096 count=1 iflag=direct 2>"$LAB_RUN/dd-stale.err" &
    pid=$!
    sleep 3
    lab_check "a read of xserve-upper is stuck (queued: no path, queue_if_no_path)" kill -0 "$pid"
    lab_check "pathkeeperctl disable-queueing xserve-upper (a stale map)" "$ctl" disable-queueing xserve-upper
    lab_wait 30 "the stuck read ended" pd_gone "$pid"
    rc=0; wait "$pid" || rc=$?
    lab_log "dd exited $rc: $(tr '\n' ' ' <"$LAB_RUN/dd-stale.err")"
    lab_check "the stuck read failed (I/O error), as disable-queueing asks" test "$rc" -ne 0
    lab_check "no queue_if_no_path in xserve-upper's table" not pd_queueing xserve-upper
    lab_check "the bus says queueing-disabled" \
        bash -c '"$1" status --json | jq -e ".maps[] | select(.alias == \"xserve-upper\") | .no_path_retry == \"disabled\"" >/dev/null' _ "$ctl"
    # dmsetup rename keeps the kernel's map, so the hold goes with it (the
    # stale line's advice after an alias change), and back.
    udevadm settle
    lab_check "dmsetup rename xserve-upper xserve-upper-old" dmsetup rename xserve-upper xserve-upper-old
    lab_wait 30 "pathkeeperctl status: xserve-upper-old, queueing still disabled" \
        bash -c '"$1" status --json | jq -e ".maps[] | select(.alias == \"xserve-upper-old\") | .no_path_retry == \"disabled\"" >/dev/null' _ "$ctl"
    lab_check "pathkeeperd: the hold went with the renamed map" \
        pd_log_has "map xserve-upper: renamed to xserve-upper-old in the kernel; .*the admin's disable-queueing"
    udevadm settle
    lab_check "dmsetup rename xserve-upper-old xserve-upper" dmsetup rename xserve-upper-old xserve-upper
    lab_wait 30 "pathkeeperctl status: xserve-upper, queueing still disabled" \
        bash -c '"$1" status --json | jq -e ".maps[] | select(.alias == \"xserve-upper\") | .no_path_retry == \"disabled\"" >/dev/null' _ "$ctl"
    lab_check "no queue_if_no_path in xserve-upper's table after the renames" not pd_queueing xserve-upper
    # The admin removes the map; its remove uevent alone ends the hold and
    # the publication. The LUN's return (a rescan) gets a fresh map that
    # queues as configured.
    udevadm settle
    lab_check "dmsetup remove xserve-upper" dmsetup remove --retry xserve-upper
    lab_wait 30 "pathkeeperctl status: xserve-upper gone, with no other event" \
        bash -c '"$1" status --json | jq -e "[.maps[] | select(.alias == \"xserve-upper\")] | length == 0" >/dev/null' _ "$ctl"
    lab_check "pathkeeperd: the hold ended with the removed map" \
        pd_log_has "map xserve-upper: gone; the admin's disable-queueing ends with it"
    iscsiadm -m session --rescan >/dev/null
    lab_wait 60 "xserve-upper made again, 2 paths" pd_maps_present
    lab_wait 30 "the new xserve-upper queues (no_path_retry 12), no hold left" pd_queueing xserve-upper

    lab_step "dbus 4: export multipath-conf; multipathd 0.9.4 builds the same maps"
    lab_check "pathkeeperd exits on SIGTERM" pd_stop
    lab_check "the kernel reported no slab corruption (renames, removals)" lab_no_slab_reports
    lab_save pathkeeperd.log "$PD_LOG"
    # udev may still be reading a map after step 3's path events (blkid).
    udevadm settle
    dmsetup remove --retry xserve-upper xserve-lower || true
    lab_wait 10 "no multipath map left" dc_no_maps
    conf=$LAB_RUN/exported-multipath.conf
    plan=$LAB_RUN/dc-plan.json
    lab_check "pathkeeperctl plan --json (same config)" pc_plan "$ctl" "$PD_CONF" "$plan"
    lab_check "pathkeeperctl export multipath-conf (same config)" \
        bash -c '"$1" export multipath-conf --sysfs-root /sys --config "$2" --config-dir /nonexistent \
                 --bindings "$3" >"$4"' _ "$ctl" "$PD_CONF" "$LAB_RUN/pc-bindings" "$conf"
    lab_save exported-multipath.conf "$conf"
    cat "$conf"
    # The error check must be able to fail: 0.9.4 on a copy with a bad keyword.
    mkdir -p /etc/multipath
    { cat "$conf"; printf 'defaults {\n\tno_such_keyword yes\n}\n'; } >/etc/multipath.conf
    multipath -t -v3 >/dev/null 2>"$LAB_RUN/multipath-t-bad.log" || true
    lab_check "control: multipath -t reports a bad keyword in a spoiled copy" \
        dc_conf_errors "$LAB_RUN/multipath-t-bad.log"
    cp "$conf" /etc/multipath.conf
    multipath -t -v3 >"$LAB_RUN/multipath-t.out" 2>"$LAB_RUN/multipath-t.log" || true
    lab_save multipath-t.out "$LAB_RUN/multipath-t.out"
    lab_check "multipath -t: no complaint about the exported config" not dc_conf_errors "$LAB_RUN/multipath-t.log"
    lab_check "multipath -t: the parsed config has both aliases" \
        bash -c 'grep -q "alias \"*xserve-upper" "$1" && grep -q "alias \"*xserve-lower" "$1"' _ "$LAB_RUN/multipath-t.out"

    pd_mpd_start "$conf"
    lab_wait 90 "multipathd built 2 maps" dc_mpd_has_maps 2
    lab_wait 60 "multipathd shows all 4 paths active" pd_mpd_active_paths 4
    multipath -ll || true
    echo "--- multipathd's tables, then pathkeeper's plan"
    pd_tables
    jq -r '.maps[] | "\(.alias): \(.table)"' "$plan"
    lab_check "multipathd: no complaint about the exported config in its log" not dc_conf_errors "$PD_MPD_LOG"
    lab_check "multipathd: the same aliases and WWIDs as the plan, no other map" dc_same_aliases_live "$plan"
    lab_check "multipathd: the same groups, with the same paths" dc_same_groups_live "$plan"
    lab_check "multipathd: the same selector and hardware handler" dc_selector_handler_live "$plan"
    lab_check "multipathd: queue_if_no_path, as no_path_retry 12 asks" \
        bash -c 'dmsetup table --target multipath | grep -c queue_if_no_path | grep -qx 2'

    lab_step "dbus 5: companion mode; disable-queueing and restore-queueing go through multipathd"
    : >"$PD_STATE"
    pd_start "$daemon"
    lab_wait 60 "pathkeeperd ready" pd_ready
    lab_check "pathkeeperd chose companion mode (multipathd runs)" test "$(jq -r .mode "$PD_STATE")" = companion
    lab_check "pathkeeperctl disable-queueing xserve-upper" "$ctl" disable-queueing xserve-upper
    lab_wait 30 "multipathd turned xserve-upper's queueing off (no queue_if_no_path in its table)" \
        not pd_queueing xserve-upper
    lab_check "xserve-lower still queues" pd_queueing xserve-lower
    lab_check "pathkeeperd logged multipathd's answer" pd_log_has "multipathd: disablequeueing map xserve-upper: ok"
    lab_check "pathkeeperctl restore-queueing xserve-upper" "$ctl" restore-queueing xserve-upper
    lab_wait 30 "multipathd turned xserve-upper's queueing on again" pd_queueing xserve-upper
    lab_check "pathkeeperd logged multipathd's answer" pd_log_has "multipathd: restorequeueing map xserve-upper: ok"
    lab_check "pathkeeperd exits on SIGTERM" pd_stop
    lab_save pathkeeperd-companion.log "$PD_LOG"
    kill "$PD_MPD_PID" 2>/dev/null || true
    wait "$PD_MPD_PID" 2>/dev/null || true
    lab_save multipathd.log "$PD_MPD_LOG"
}
