# pathkeeperd in the guest (issue #5): the daemon owns the maps, fails and
# reinstates paths, damps flapping, survives kill -9 and bad configs.
# Functions are prefixed pd_. The daemon's published state is read from its
# state file (schema 1, see pathkeeperd(8)) with jq.

PD_STATE=$LAB_RUN/pathkeeperd-state.json
PD_LOG=$LAB_RUN/pathkeeperd.log
PD_CONF=$LAB_RUN/pathkeeper.conf
PD_PID=

# pd_write_config SELECTOR [EXTRA_TOML [DEFAULTS_TOML]]: the xserve controller
# rules plus the health settings the daemon tests rely on. Polling is made
# slow on purpose (checker_interval 60s, failed_checker_interval 30s): a
# reinstatement that comes within a few seconds of the login can then only be
# event-driven. EXTRA_TOML goes at the end (whole tables); DEFAULTS_TOML are
# key lines added inside [defaults] (TOML allows a table only once).
pd_write_config() {
    local selector=$1 extra=${2:-} defaults=${3:-}
    {
        cat "${LAB_DIR%/tests/lab}/tests/data/config/xserve.conf"
        printf '\n[defaults]\nselector = "%s"\nbindings_file = "%s"\n' "$selector" "$LAB_RUN/bindings"
        [[ -z $defaults ]] || printf '%s\n' "$defaults"
        printf '\n[health]\nchecker_interval = "60s"\nfailed_checker_interval = "30s"\n'
        printf 'flap_threshold = 3\nflap_window = "5m"\nflap_recovery = "20s"\nflap_recovery_max = "2m"\n'
        printf '%s\n' "$extra"
    } >"$PD_CONF.new"
    mv "$PD_CONF.new" "$PD_CONF"
}

# pd_start DAEMON [ARGS...]: starts pathkeeperd in the background.
pd_start() {
    local daemon=$1; shift
    "$daemon" --config "$PD_CONF" --config-dir /nonexistent --state-file "$PD_STATE" \
        --log-target stderr --log-level debug "$@" >>"$PD_LOG" 2>&1 &
    PD_PID=$!
    lab_log "pathkeeperd started (pid $PD_PID)"
}

# pd_bus_objects PATTERN: object paths below the root matching PATTERN.
pd_bus_objects() {
    busctl --system --list tree org.pathkeeper.PathKeeper1 2>/dev/null | grep -c -- "$1"
}

pd_alive() { kill -0 "$PD_PID" 2>/dev/null; }

# pd_stop: SIGTERM, and the daemon must exit by itself.
pd_stop() {
    kill -TERM "$PD_PID"
    local i
    for ((i = 0; i < 100; i++)); do pd_alive || break; sleep 0.2; done
    ! pd_alive && wait "$PD_PID"
}

pd_ready() { [[ -s $PD_STATE ]] && jq -e '.ready == true' "$PD_STATE" >/dev/null; }

# pd_map_paths MAP: "maj:min state" lines from dmsetup status.
pd_dm_states() {
    dmsetup status "$1" 2>/dev/null |
        awk '{ for (i = 1; i < NF; i++) if ($i ~ /^[0-9]+:[0-9]+$/ && ($(i + 1) == "A" || $(i + 1) == "F")) print $i, $(i + 1) }'
}
pd_dm_state() { pd_dm_states "$1" | awk -v d="$2" '$1 == d {print $2}'; }
pd_dm_is() { [[ $(pd_dm_state "$1" "$2") == "$3" ]]; }
pd_map_has_paths() { [[ $(pd_dm_states "$1" | wc -l) -eq $2 ]]; }
pd_maps_present() { pd_map_has_paths xserve-upper 2 && pd_map_has_paths xserve-lower 2; }
# pd_fail_counts MAP: the kernel's per-path fail counts, "8:16=1 8:32=0".
pd_fail_counts() {
    dmsetup status "$1" | awk '{ for (i = 1; i < NF - 1; i++) if ($i ~ /^[0-9]+:[0-9]+$/ && ($(i + 1) == "A" || $(i + 1) == "F")) printf "%s=%s ", $i, $(i + 2) }'
}
pd_event_nr() { dmsetup info -c --noheadings -o events "$1" | tr -d ' '; }
pd_suspended_maps() { dmsetup info -c --noheadings --separator ' ' -o name,suspended 2>/dev/null | awk '$2 == "Suspended" {print $1}'; }
pd_no_map_suspended() { [[ -z $(pd_suspended_maps) ]]; }

# pd_path_field DEV FIELD: a path's field in the daemon's state file.
pd_path_field() { jq -r --arg d "$1" --arg f "$2" '.paths[] | select(.device == $d) | .[$f]' "$PD_STATE"; }
pd_path_state_is() { [[ $(pd_path_field "$1" state) == "$2" ]]; }
pd_log_has() { grep -q -- "$1" "$PD_LOG"; }

pd_devt() { cat "/sys/block/$1/dev"; }
pd_session_logged_in() { [[ $(<"/sys/class/iscsi_session/$(ini_sdev_session "$1")/state") == LOGGED_IN ]]; }

pd_ms() { echo $(($(date +%s%N) / 1000000)); }

# pd_io_roundtrip MAP OFFSET_MB: 8 MiB pattern written and read back.
pd_io_roundtrip() {
    local map=$1 off=$2 pat=$LAB_RUN/pd-pattern-$1
    dd if=/dev/urandom of="$pat" bs=1M count=8 status=none
    dd if="$pat" of="/dev/mapper/$map" bs=1M seek="$off" oflag=direct conv=fsync status=none || return 1
    cmp -n $((8 << 20)) "$pat" <(dd if="/dev/mapper/$map" bs=1M skip="$off" count=8 iflag=direct status=none)
}

pd_show() {
    dmsetup table | grep multipath || true
    dmsetup status | grep multipath || true
    [[ -s $PD_STATE ]] && jq -c '.paths[] | {device, state, dm_state, checker, failures, shaky}' "$PD_STATE"
    return 0
}

# The eth1 path of a map, from the daemon's view.
pd_eth1_path() { jq -r --arg m "$1" '.paths[] | select(.map == $m and .netdev == "eth1") | .device' "$PD_STATE"; }

# pd_owner DAEMON: issue #5's owner-mode checks.
pd_owner() {
    local daemon=$1 t0 ms sd_u sd_l dev_u dev_l
    pk_mask_multipath_uevent_check
    pd_write_config service-time

    lab_step "daemon 1: pathkeeperd builds both maps by itself"
    t0=$(pd_ms)
    pd_start "$daemon"
    lab_wait 60 "pathkeeperd ready" pd_ready
    lab_wait 30 "xserve-upper and xserve-lower, 2 paths each" pd_maps_present
    lab_log "maps present $(($(pd_ms) - t0)) ms after the daemon started"
    pd_show
    local m
    for m in xserve-upper xserve-lower; do
        lab_check "$m uses service-time" grep -q ' service-time ' <(dmsetup table "$m")
        lab_check "$m has DM UUID mpath-<wwid>" grep -q '^mpath-3' <(dmsetup info -c --noheadings -o uuid "$m")
        lab_check "$m: both paths A" test "$(pd_dm_states "$m" | awk '$2 == "A"' | wc -l)" -eq 2
    done
    lab_check "the state file says 2 maps, 4 paths" \
        test "$(jq '.maps | length' "$PD_STATE")/$(jq '.paths | length' "$PD_STATE")" = 2/4
    lab_check "iface1's paths (bound by eth2's hardware address) are on eth2" \
        test "$(jq -r '[.paths[] | select(.portal | startswith("10.10.1.21:")) | .netdev] | join(",")' "$PD_STATE")" = eth2,eth2
    busctl --system tree org.pathkeeper.PathKeeper1 || true
    lab_check "D-Bus: 2 map objects and 4 path objects on the system bus" \
        test "$(pd_bus_objects /maps/)/$(pd_bus_objects /paths/)" = 2/4
    lab_check "D-Bus: the Manager's Status matches the state file" \
        test "$(busctl --system get-property org.pathkeeper.PathKeeper1 /org/pathkeeper/PathKeeper1 \
            org.pathkeeper.PathKeeper1.Manager Status | sed 's/^s "\(.*\)"$/\1/')" = "$(jq -r .status "$PD_STATE")"

    lab_step "daemon 2: checksummed I/O through both maps"
    lab_check "xserve-upper: 8 MiB round trip" pd_io_roundtrip xserve-upper 0
    lab_check "xserve-lower: 8 MiB round trip" pd_io_roundtrip xserve-lower 0

    lab_step "daemon 3: cut eth1 under I/O"
    sd_u=$(pd_eth1_path xserve-upper)
    sd_l=$(pd_eth1_path xserve-lower)
    dev_u=$(pd_devt "$sd_u")
    dev_l=$(pd_devt "$sd_l")
    lab_log "eth1 paths: upper $sd_u ($dev_u), lower $sd_l ($dev_l)"
    dd if=/dev/urandom of="$LAB_RUN/pd-cut" bs=1M count=32 status=none
    dd if="$LAB_RUN/pd-cut" of=/dev/mapper/xserve-upper bs=64k seek=512 oflag=direct conv=fsync status=none &
    local io=$! rc=0
    sleep 1
    fault_link_cut eth1
    lab_wait 60 "$sd_u failed in dm" pd_dm_is xserve-upper "$dev_u" F
    lab_wait 60 "$sd_l failed in dm" pd_dm_is xserve-lower "$dev_l" F
    wait "$io" || rc=$?
    lab_check "the write across the cut completed (dd exit $rc)" test "$rc" -eq 0
    lab_check "data written across the cut reads back intact" \
        cmp -n $((32 << 20)) "$LAB_RUN/pd-cut" <(dd if=/dev/mapper/xserve-upper bs=64k skip=512 count=512 iflag=direct status=none)
    lab_wait 30 "the daemon reports $sd_u down" pd_path_state_is "$sd_u" down
    lab_check "the daemon logged $sd_u failing" pd_log_has "PATH=$sd_u"

    lab_step "daemon 4: restore eth1; reinstatement follows the login"
    fault_link_restore eth1
    lab_wait 120 "$sd_u's session LOGGED_IN" pd_session_logged_in "$sd_u"
    local t_login t_up
    t_login=$(pd_ms)
    lab_wait 25 "$sd_u active in dm again" pd_dm_is xserve-upper "$dev_u" A
    t_up=$(pd_ms)
    lab_log "MEASURE reinstate_after_login_ms=$((t_up - t_login)) (failed paths polled every 30 s)"
    echo "reinstate_after_login_ms $((t_up - t_login))" | lab_save reinstate-latency.txt
    lab_wait 60 "$sd_l active in dm again" pd_dm_is xserve-lower "$dev_l" A
    lab_check "the reinstatement was driven by the login, not by polling" \
        pd_log_has "reinstate.*PATH=$sd_u"
    pd_show

    pd_flapping "$sd_u" "$dev_u"
    pd_sighup_bad_config
    pd_alias_rename
    pd_kill9_adoption "$daemon"
    pd_udev_stalled "$sd_u" "$dev_u" "$sd_l" "$dev_l"
    pd_no_path_retry
    lab_check "pathkeeperd exits on SIGTERM" pd_stop
    lab_check "the maps stay after the daemon exits" pd_maps_present
    lab_check "the kernel reported no slab corruption (renames, reloads, kill -9)" lab_no_slab_reports
    lab_save pathkeeperd.log "$PD_LOG"
}

# pd_flap_settled SD DEV: the daemon called SD shaky, or put it back in
# service (active in dm and up in the daemon's state).
pd_flap_settled() {
    [[ $(pd_path_field "$1" shaky) == true ]] ||
        { pd_dm_is xserve-upper "$2" A && [[ $(pd_path_field "$1" state) == up ]]; }
}

# pd_flapping SD DEV: flap eth1 until the daemon calls the path shaky; it
# must then stay failed while the link is stable, until the hold-down ends.
pd_flapping() {
    local sd=$1 dev=$2 i
    lab_step "daemon 5: flap eth1 (up to 10 times)"
    for ((i = 1; i <= 10; i++)); do
        fault_link_cut eth1
        lab_wait 60 "flap $i: $sd failed in dm" pd_dm_is xserve-upper "$dev" F
        fault_link_restore eth1
        lab_wait 120 "flap $i: $sd's session LOGGED_IN" pd_session_logged_in "$sd"
        # A flap is down *and back up*: cutting again before the daemon has
        # reinstated the path would only lengthen one outage, which rightly
        # does not count as another failure.
        lab_wait 30 "flap $i: $sd back in service or shaky" pd_flap_settled "$sd" "$dev"
        if [[ $(pd_path_field "$sd" shaky) == true ]]; then
            lab_log "$sd shaky after $i flaps"
            break
        fi
    done
    lab_check "$sd is shaky after flapping" test "$(pd_path_field "$sd" shaky)" = true
    lab_check "the daemon logged why $sd is shaky" pd_log_has "shaky.*PATH=$sd"
    sleep 5
    lab_check "$sd stays failed in dm although its session is up" pd_dm_is xserve-upper "$dev" F
    pd_last_resort "$sd" "$dev"
    lab_wait 90 "$sd back in service after a stable hold-down" pd_dm_is xserve-upper "$dev" A
    # The state file follows dm by the publication's debounce.
    lab_wait 10 "$sd is up and no longer shaky" \
        eval '[[ $(pd_path_field "$sd" state)/$(pd_path_field "$sd" shaky) == up/false ]]'
}

# pd_last_resort SD DEV: SD is shaky and held failed (its hold-down has
# 20 s to run). With the map's other path failed by the admin, SD is the
# map's last path: reinstated at once, still shaky, and it carries I/O.
# Once the other path is back, SD is held failed again.
pd_last_resort() {
    local sd=$1 dev=$2 other other_dev
    other=$(jq -r --arg sd "$sd" '.paths[] | select(.map == "xserve-upper" and .device != $sd) | .device' "$PD_STATE")
    other_dev=$(pd_devt "$other")
    lab_step "daemon 5b: the shaky $sd is xserve-upper's last resort while the admin fails $other"
    lab_check "the admin fails $other (D-Bus FailPath)" \
        busctl --system call org.pathkeeper.PathKeeper1 /org/pathkeeper/PathKeeper1 \
        org.pathkeeper.PathKeeper1.Manager FailPath s "$other"
    lab_wait 10 "$other failed in dm" pd_dm_is xserve-upper "$other_dev" F
    lab_wait 5 "$sd active in dm: the map's last path" pd_dm_is xserve-upper "$dev" A
    lab_check "$sd is still shaky" test "$(pd_path_field "$sd" shaky)" = true
    lab_check "the daemon logged why $sd carries the I/O" pd_log_has "no other path of its map is usable.*PATH=$sd"
    lab_check "xserve-upper: 1 MiB read through $sd alone" \
        dd if=/dev/mapper/xserve-upper of=/dev/null bs=1M count=1 iflag=direct status=none
    lab_check "the admin reinstates $other (D-Bus ReinstatePath)" \
        busctl --system call org.pathkeeper.PathKeeper1 /org/pathkeeper/PathKeeper1 \
        org.pathkeeper.PathKeeper1.Manager ReinstatePath s "$other"
    lab_wait 10 "$other active in dm" pd_dm_is xserve-upper "$other_dev" A
    lab_wait 5 "$sd held failed again while shaky" pd_dm_is xserve-upper "$dev" F
}

# A broken config on SIGHUP is refused and the old one keeps running.
pd_sighup_bad_config() {
    lab_step "daemon 6: SIGHUP with a broken config"
    local ev_before
    ev_before="$(pd_event_nr xserve-upper) $(pd_fail_counts xserve-upper)"
    cp "$PD_CONF" "$PD_CONF.good"
    printf '[defaults]\nselector = "no-such-selector"\n' >>"$PD_CONF"
    kill -HUP "$PD_PID"
    lab_wait 10 "the daemon rejected the config" pd_log_has "config rejected"
    lab_check "the daemon is still running" pd_alive
    lab_check "xserve-upper was not touched (event and fail counts $ev_before)" \
        test "$(pd_event_nr xserve-upper) $(pd_fail_counts xserve-upper)" = "$ev_before"
    cp "$PD_CONF.good" "$PD_CONF"
}

# pd_dm_identity MAP: "major minor uuid" of a device-mapper device.
pd_dm_identity() { dmsetup info -c --noheadings --separator ' ' -o major,minor,uuid "$1"; }
pd_identity_is() { [[ $(pd_dm_identity "$1" 2>/dev/null) == "$2" ]]; }
# pd_node_is MAP IDENTITY: /dev/mapper/MAP is the device IDENTITY names.
pd_node_is() {
    local maj min
    read -r maj min _ <<<"$2"
    [[ -b /dev/mapper/$1 && $(stat -L -c '%t %T' "/dev/mapper/$1") == "$(printf '%x %x' "$maj" "$min")" ]]
}

# An alias changed in the configuration renames the kernel's map, as
# multipathd does: same device, same table, open I/O undisturbed, udev's
# /dev/mapper node moved. A dmsetup rename of a planned map is undone.
pd_alias_rename() {
    lab_step "daemon 6b: an alias changed in the configuration renames the map"
    local ident table mark reader rc=0
    ident=$(pd_dm_identity xserve-upper)
    table=$(dmsetup table xserve-upper)
    # A partition map on it, as kpartx makes them: it goes with its map.
    local puuid
    puuid=part1-$(dmsetup info -c --noheadings -o uuid xserve-upper)
    lab_check "a partition map xserve-upper-part1" dmsetup create xserve-upper-part1 --uuid "$puuid" \
        --table "0 1024 linear $(dmsetup info -c --noheadings --separator : -o major,minor xserve-upper) 2048"
    udevadm settle
    mark=$(wc -l <"$PD_LOG")
    # A reader that has the map open across the rename.
    dd if=/dev/mapper/xserve-upper of=/dev/null bs=64k count=2048 iflag=direct status=none \
        2>"$LAB_RUN/dd-rename.err" &
    reader=$!
    cp "$PD_CONF" "$PD_CONF.good"
    sed -i 's/^alias = "xserve-upper"$/alias = "xserve-top"/' "$PD_CONF"
    lab_check "the configuration names the upper map xserve-top" grep -q '^alias = "xserve-top"$' "$PD_CONF"
    kill -HUP "$PD_PID"
    lab_wait 30 "udev made /dev/mapper/xserve-top" test -b /dev/mapper/xserve-top
    lab_wait 30 "/dev/mapper/xserve-upper is gone" not test -e /dev/mapper/xserve-upper
    lab_check "xserve-top is the same kernel device ($ident)" test "$(pd_dm_identity xserve-top)" = "$ident"
    lab_check "xserve-top has the same table" test "$(dmsetup table xserve-top)" = "$table"
    lab_check "its partition map is xserve-top-part1" \
        test "$(dmsetup info -c --noheadings -o uuid xserve-top-part1)" = "$puuid"
    lab_wait 30 "udev made /dev/mapper/xserve-top-part1" test -b /dev/mapper/xserve-top-part1
    lab_wait 10 "pathkeeperd logged the rename" \
        pd_log_after_has "$mark" "map xserve-upper renamed to xserve-top, the name the configuration gives it"
    lab_check "pathkeeperd neither created nor reloaded a map for it" \
        not pd_log_after_has "$mark" "create xserve-top\|reload xserve-top\|map xserve-top created"
    lab_wait 30 "the published state: xserve-top, ok" \
        jq -e '.maps[] | select(.alias == "xserve-top") | .state == "ok"' "$PD_STATE"
    wait "$reader" || rc=$?
    lab_log "the reader exited $rc: $(tr '\n' ' ' <"$LAB_RUN/dd-rename.err")"
    lab_check "the read across the rename completed" test "$rc" -eq 0

    # dmsetup rename with the configuration unchanged: its uevent starts a
    # pass, which names the map as configured again.
    mark=$(wc -l <"$PD_LOG")
    udevadm settle
    lab_check "dmsetup rename xserve-top xserve-by-hand" dmsetup rename xserve-top xserve-by-hand
    lab_wait 30 "pathkeeperd renamed it back" \
        pd_log_after_has "$mark" "map xserve-by-hand renamed to xserve-top, the name the configuration gives it"
    lab_wait 30 "udev made /dev/mapper/xserve-top again" test -b /dev/mapper/xserve-top
    lab_wait 30 "/dev/mapper/xserve-by-hand is gone" not test -e /dev/mapper/xserve-by-hand
    lab_check "the same kernel device still" test "$(pd_dm_identity xserve-top)" = "$ident"
    lab_wait 10 "pathkeeperd saw the admin's rename" \
        pd_log_after_has "$mark" "map xserve-top: renamed to xserve-by-hand in the kernel"

    # The two aliases swapped: each name is the other map's, so one map
    # steps aside to a temporary name.
    local lower_ident
    lower_ident=$(pd_dm_identity xserve-lower)
    mark=$(wc -l <"$PD_LOG")
    sed -i -e 's/^alias = "xserve-top"$/alias = "@upper@"/' -e 's/^alias = "xserve-lower"$/alias = "xserve-top"/' \
        -e 's/^alias = "@upper@"$/alias = "xserve-lower"/' "$PD_CONF"
    kill -HUP "$PD_PID"
    lab_wait 30 "the upper LUN's map is xserve-lower" pd_identity_is xserve-lower "$ident"
    lab_wait 30 "the lower LUN's map is xserve-top" pd_identity_is xserve-top "$lower_ident"
    lab_wait 10 "one stepped aside through a temporary name" pd_log_after_has "$mark" "for a moment: another map's alias"
    lab_check "no temporary name is left" not bash -c 'dmsetup ls | grep -q pathkeeper-swap'
    lab_wait 30 "udev's /dev/mapper/xserve-lower is the upper LUN's map" pd_node_is xserve-lower "$ident"
    lab_wait 30 "udev's /dev/mapper/xserve-top is the lower LUN's map" pd_node_is xserve-top "$lower_ident"

    cp "$PD_CONF.good" "$PD_CONF"
    kill -HUP "$PD_PID"
    lab_wait 30 "back to /dev/mapper/xserve-upper" test -b /dev/mapper/xserve-upper
    lab_wait 30 "the lower LUN's map is xserve-lower again" pd_identity_is xserve-lower "$lower_ident"
    lab_check "xserve-upper is the same kernel device" test "$(pd_dm_identity xserve-upper)" = "$ident"
    lab_wait 30 "the published state: xserve-upper and xserve-lower only" \
        jq -e '[.maps[].alias] | sort == ["xserve-lower", "xserve-upper"]' "$PD_STATE"
    lab_check "its partition map is xserve-upper-part1 again" \
        test "$(dmsetup info -c --noheadings -o uuid xserve-upper-part1)" = "$puuid"
    lab_check "no partition map under another name" \
        test "$(dmsetup info -c --noheadings -o name,uuid | grep -c "$puuid")" -eq 1

    # A name another kind of device holds: the rename waits, and runs as
    # soon as that device goes (its remove uevent starts a pass).
    mark=$(wc -l <"$PD_LOG")
    lab_check "a zero device holds the name xserve-held" dmsetup create xserve-held --table "0 2048 zero"
    udevadm settle
    sed -i 's/^alias = "xserve-upper"$/alias = "xserve-held"/' "$PD_CONF"
    kill -HUP "$PD_PID"
    lab_wait 30 "pathkeeperd logged that the name is taken" \
        pd_log_after_has "$mark" "rename xserve-upper to xserve-held: the name xserve-held is taken by another device"
    lab_check "the upper LUN's map is still xserve-upper" pd_identity_is xserve-upper "$ident"
    udevadm settle
    lab_check "dmsetup remove xserve-held (the zero device)" dmsetup remove --retry xserve-held
    lab_wait 30 "the upper LUN's map took the freed name" pd_identity_is xserve-held "$ident"
    lab_wait 10 "pathkeeperd logged the rename" \
        pd_log_after_has "$mark" "map xserve-upper renamed to xserve-held, the name the configuration gives it"
    cp "$PD_CONF.good" "$PD_CONF"
    kill -HUP "$PD_PID"
    lab_wait 30 "back to xserve-upper" pd_identity_is xserve-upper "$ident"
    lab_wait 30 "its partition map is xserve-upper-part1 again" \
        test "$(dmsetup info -c --noheadings -o uuid xserve-upper-part1 2>/dev/null)" = "$puuid"

    udevadm settle
    lab_check "dmsetup remove xserve-upper-part1" dmsetup remove --retry xserve-upper-part1
}

# kill -9 during a burst of reloads: nothing is left suspended, and a new
# daemon adopts the maps as they are.
pd_kill9_adoption() {
    local daemon=$1 i sel
    lab_step "daemon 7: kill -9 during a burst of reloads, then adoption"
    for ((i = 0; i < 6; i++)); do
        if ((i % 2)); then sel=service-time; else sel=queue-length; fi
        pd_write_config "$sel"
        kill -HUP "$PD_PID"
        sleep 0.3
    done
    kill -9 "$PD_PID"
    wait "$PD_PID" 2>/dev/null || true
    lab_check "no map is left suspended after kill -9" pd_no_map_suspended
    dmsetup info -c -o name,suspended,events | grep -e xserve -e Name
    # Restart with the selectors the kernel has now, so nothing needs changing.
    # The kill can land between the two maps' reloads, leaving them with
    # different selectors: name the lower map's own with a [[map]] entry.
    local sel_l wwid_l
    sel=$(dmsetup table xserve-upper | grep -o -e service-time -e queue-length | head -1)
    sel_l=$(dmsetup table xserve-lower | grep -o -e service-time -e queue-length | head -1)
    wwid_l=$(dmsetup info -c --noheadings -o uuid xserve-lower | sed 's/^mpath-//')
    lab_log "selectors after the kill: upper $sel, lower $sel_l"
    pd_write_config "$sel" "$(printf '[[map]]\nwwid = "%s"\nselector = "%s"' "$wwid_l" "$sel_l")"
    # A table swap does not move the kernel's event counter, but it resets
    # every path's fail count: give each path a fail count first (fail and
    # reinstate it by hand), so that a reload would show.
    local m d
    for m in xserve-upper xserve-lower; do
        for d in $(pd_dm_states "$m" | awk '{print $1}'); do
            dmsetup message "$m" 0 fail_path "$d"
            dmsetup message "$m" 0 reinstate_path "$d"
        done
    done
    local before_u before_l
    before_u="$(pd_event_nr xserve-upper) $(pd_fail_counts xserve-upper)"
    before_l="$(pd_event_nr xserve-lower) $(pd_fail_counts xserve-lower)"
    lab_log "before restart: upper $before_u, lower $before_l (event, fail counts)"
    : >"$PD_STATE"
    local log_lines
    log_lines=$(wc -l <"$PD_LOG")
    pd_start "$daemon"
    lab_wait 60 "the restarted daemon is ready" pd_ready
    sleep 3
    lab_check "xserve-upper adopted as it is (event and fail counts $before_u)" \
        test "$(pd_event_nr xserve-upper) $(pd_fail_counts xserve-upper)" = "$before_u"
    lab_check "xserve-lower adopted as it is (event and fail counts $before_l)" \
        test "$(pd_event_nr xserve-lower) $(pd_fail_counts xserve-lower)" = "$before_l"
    lab_check "the restarted daemon loaded no table" \
        not grep -q -e "created" -e "reload" <(tail -n +"$((log_lines + 1))" "$PD_LOG")
    lab_check "the restarted daemon logged the adoption" pd_log_has "adopted"
}

# pd_reload_line_after N: the daemon's first "reload ... in X ms; I/O held
# Y ms" line after log line N.
# pd_threads: every pathkeeperd thread's name, wait channel and kernel stack.
pd_threads() {
    local t
    for t in /proc/"$PD_PID"/task/*; do
        echo "--- thread ${t##*/} $(<"$t/comm") wchan=$(<"$t/wchan") state=$(awk '/^State/ {print $2}' "$t/status")"
        cat "$t/stack" 2>/dev/null || true
    done
    dmsetup info -c -o name,suspended,live_table,inactive_table,events 2>/dev/null || true
    ipcs -s 2>/dev/null | tail -n +3 || true
}

# pd_tables_using SEL N: N multipath tables use selector SEL. Functions, not
# "<(dmsetup table)" or "$(...)" in a lab_wait: those are expanded once, and
# the poll would re-read the same (or an exhausted) answer.
pd_tables_using() { [[ $(dmsetup table | grep -c " $1 ") -eq $2 ]]; }
pd_some_table_uses() { [[ $(dmsetup table) == *" $1 "* ]]; }

pd_reload_line_after() { tail -n +"$(($1 + 1))" "$PD_LOG" | grep -m1 -o 'reload xserve-[a-z]* (.*) in [0-9.]* ms; I/O held [0-9.]* ms'; }
pd_reloaded_after() { [[ -n $(pd_reload_line_after "$1") ]]; }
pd_bus_status() {
    timeout 10 busctl --system get-property org.pathkeeper.PathKeeper1 /org/pathkeeper/PathKeeper1 \
        org.pathkeeper.PathKeeper1.Manager Status
}

# A reload whose udev wait never ends (udevd stopped) holds the table
# worker only: the loop keeps answering D-Bus, and cutting eth1 still fails
# both maps' eth1 paths in dm (the message worker). No I/O runs, so no path
# is failed by the kernel itself: the F comes from pathkeeperd's fail_path.
pd_udev_stalled() {
    local sd_u=$1 dev_u=$2 sd_l=$3 dev_l=$4 sel new lines line total held
    lab_step "daemon 8: udevd stopped; a reload waits for it, path failures do not"
    sel=$(dmsetup table xserve-upper | grep -o -e service-time -e queue-length | head -1)
    if [[ $sel == service-time ]]; then new=queue-length; else new=service-time; fi
    lines=$(wc -l <"$PD_LOG")
    # Stop udevd idle, not in the middle of an event: a worker frozen while
    # its blkid reads the map is not the situation under test.
    udevadm settle --timeout=30 || lab_log "udev did not settle in 30 s"
    pkill -STOP -x systemd-udevd
    pd_write_config "$new"
    kill -HUP "$PD_PID"
    if ! lab_poll 60 pd_some_table_uses "$new"; then
        pd_threads # where the daemon waits, for the failure's diagnosis
    fi
    lab_wait 5 "the kernel swapped in a $new table" pd_some_table_uses "$new"
    sleep 3
    lab_check "the reload is still waiting for udev (no 'reload ... in' line)" not pd_reloaded_after "$lines"
    lab_check "the event loop still answers D-Bus" pd_bus_status
    fault_link_cut eth1
    lab_wait 60 "$sd_u failed in dm while the reload waits" pd_dm_is xserve-upper "$dev_u" F
    lab_wait 60 "$sd_l failed in dm while the reload waits" pd_dm_is xserve-lower "$dev_l" F
    lab_check "still waiting for udev" not pd_reloaded_after "$lines"
    lab_check "the daemon logged $sd_u failing" pd_log_has "path $sd_u fail"
    fault_link_restore eth1
    pkill -CONT -x systemd-udevd
    lab_wait 60 "the reload finished once udevd ran again" pd_reloaded_after "$lines"
    line=$(pd_reload_line_after "$lines")
    lab_log "after the stall: $line"
    read -r total held < <(sed 's/.* in \([0-9.]*\) ms; I\/O held \([0-9.]*\) ms/\1 \2/' <<<"$line")
    lab_check "I/O was held for less than the reload took (held $held ms, total $total ms)" \
        awk -v h="$held" -v t="$total" 'BEGIN { exit !(h < t) }'
    lab_wait 120 "$sd_u active in dm again" pd_dm_is xserve-upper "$dev_u" A
    lab_wait 120 "$sd_l active in dm again" pd_dm_is xserve-lower "$dev_l" A
    lab_wait 60 "both maps use $new" pd_tables_using "$new" 2
    lab_check "no map is left suspended" pd_no_map_suspended
}

# pd_active_paths MAP: how many of MAP's paths dm has active.
pd_active_paths() { pd_dm_states "$1" | awk '$2 == "A"' | wc -l; }
pd_no_active_path() { [[ $(pd_active_paths "$1") -eq 0 ]]; }
pd_queueing() { dmsetup table "$1" | grep -q queue_if_no_path; }
pd_log_after_has() { tail -n +"$(($1 + 1))" "$PD_LOG" | grep -q -- "$2"; }
pd_gone() { ! kill -0 "$1" 2>/dev/null; }

# no_path_retry = 2 with checks every 2 s: once none of a map's paths has
# been usable for 4 s, the I/O queued on it fails instead of waiting for a
# path forever, and so does new I/O; a returning path queues again.
pd_no_path_retry() {
    local sel n reader rc
    lab_step "daemon 9: no path left; once no_path_retry runs out, I/O fails instead of hanging"
    sel=$(dmsetup table xserve-upper | grep -o -e service-time -e queue-length | head -1)
    pd_write_config "$sel" "" "no_path_retry = 2"
    sed -i -e 's/^checker_interval = "60s"$/checker_interval = "2s"/' \
        -e 's/^failed_checker_interval = "30s"$/failed_checker_interval = "2s"/' "$PD_CONF"
    n=$(wc -l <"$PD_LOG")
    kill -HUP "$PD_PID"
    lab_wait 30 "the daemon reloaded its config" pd_log_after_has "$n" "configuration reloaded"
    lab_check "xserve-upper queues I/O while it has no path (queue_if_no_path)" pd_queueing xserve-upper
    n=$(wc -l <"$PD_LOG")
    fault_link_cut eth1
    fault_link_cut eth2
    lab_wait 120 "none of xserve-upper's paths is active in dm" pd_no_active_path xserve-upper
    # Issued with no path left: dm queues it (nothing reaches a blocked sd).
    dd if=/dev/mapper/xserve-upper of=/dev/null bs=4k count=1 iflag=direct status=none &
    reader=$!
    lab_wait 60 "the daemon stopped xserve-upper's queueing" \
        pd_log_after_has "$n" "map xserve-upper: queueing stopped"
    lab_log "daemon: $(tail -n +"$((n + 1))" "$PD_LOG" | grep -m1 "map xserve-upper: queueing stopped")"
    lab_check "dm no longer queues xserve-upper's I/O" not pd_queueing xserve-upper
    lab_wait 30 "the queued read returned" pd_gone "$reader"
    rc=0
    wait "$reader" || rc=$?
    lab_check "the queued read failed (dd exit $rc)" test "$rc" -ne 0
    rc=0
    timeout 60 dd if=/dev/mapper/xserve-upper of=/dev/null bs=4k count=1 iflag=direct status=none || rc=$?
    lab_check "a new read fails at once (dd exit $rc; 124 is the 60 s timeout)" test "$rc" -ne 0 -a "$rc" -ne 124
    fault_link_restore eth1
    fault_link_restore eth2
    lab_wait 120 "4 sessions LOGGED_IN" ini_sessions_are 4 LOGGED_IN
    lab_wait 60 "xserve-upper's paths active in dm again" pd_has_active_paths xserve-upper 2
    lab_wait 30 "xserve-upper queues again" pd_queueing xserve-upper
    lab_check "the daemon logged why" pd_log_after_has "$n" "map xserve-upper: queue_if_no_path again"
    lab_check "xserve-upper: 8 MiB round trip" pd_io_roundtrip xserve-upper 0
}
pd_has_active_paths() { [[ $(pd_active_paths "$1") -eq $2 ]]; }

# --- companion mode: Debian's multipathd owns the maps --------------------------

PD_MPD_LOG=$LAB_RUN/multipathd.log

# pd_mpd_start [CONF]: Debian's multipathd in the background, logging to
# $PD_MPD_LOG, with CONF as /etc/multipath.conf (default: pd_mpd_conf's).
pd_mpd_start() {
    pd_mpd_conf "$@"
    multipathd -d -s -v3 >>"$PD_MPD_LOG" 2>&1 &
    PD_MPD_PID=$!
    lab_log "multipathd started (pid $PD_MPD_PID)"
}

# pd_mpd_conf [CONF]: CONF as /etc/multipath.conf (default: the baseline
# below), and an empty wwids file.
pd_mpd_conf() {
    mkdir -p /etc/multipath
    if [[ -n ${1:-} ]]; then
        cp -- "$1" /etc/multipath.conf
    else
        cat >/etc/multipath.conf <<'CONF'
defaults {
    user_friendly_names yes
    find_multipaths off
}
blacklist {
    devnode "^(ram|loop|fd|md|dm-|sr|scd|st|vd)[0-9]*"
}
CONF
    fi
    : >/etc/multipath/wwids
}

# pd_mpd_active_paths N: multipathd shows N paths active (a function, so
# that lab_wait asks multipathd again on every poll).
pd_mpd_active_paths() { [[ $(multipathd show paths raw format '%t' 2>/dev/null | grep -c active) -eq $1 ]]; }
pd_mpd_maps() { dmsetup ls --target multipath 2>/dev/null | grep -c mpath; }
pd_mpd_has_maps() { [[ $(pd_mpd_maps) -eq $1 ]]; }
# pd_mpd_path_dm DEV: multipathd's dm state for a path ("active"/"failed").
pd_mpd_path_dm() { multipathd show paths raw format "%d %t" 2>/dev/null | awk -v d="$1" '$1 == d {print $2}'; }
pd_mpd_path_is() { [[ $(pd_mpd_path_dm "$1") == "$2" ]]; }
pd_tables() { dmsetup table | grep ' multipath ' | sort; }
# pd_dm_path_is DEVT A|F: the kernel's state of path DEVT in whichever
# multipath map holds it.
pd_dm_path_is() {
    dmsetup status --target multipath 2>/dev/null |
        awk -v d="$1" -v s="$2" '{ for (i = 1; i < NF; i++) if ($i == d && $(i + 1) == s) found = 1 } END { exit !found }'
}

# pd_states_agree: every path the daemon reports up is active in multipathd,
# every path it reports down is failed there.
pd_states_agree() {
    local dev state mstate
    while read -r dev state; do
        mstate=$(pd_mpd_path_dm "$dev")
        case $state in
        up | ghost) [[ $mstate == active ]] || return 1 ;;
        down | shaky) [[ $mstate == failed ]] || return 1 ;;
        *) return 1 ;;
        esac
    done < <(jq -r '.paths[] | "\(.device) \(.state)"' "$PD_STATE")
}

# pd_socket_only DAEMON: something listens on multipathd's socket but
# multipathd does not run, as with systemd's multipathd.socket (enabled by
# Debian's multipath-tools) after "systemctl stop multipathd". The guest has
# no systemd as PID 1; systemd-socket-activate plays multipathd.socket: the
# first connection starts multipathd. multipath -u (60-multipath.rules)
# connects for every new disk, so multipathd is as good as running: the
# "auto" mode must go companion and start it, not own maps that multipathd
# would soon manage too.
pd_socket_only() {
    local daemon=$1 activator map
    # This step's own log and state: the companion steps check theirs.
    local PD_LOG=$LAB_RUN/pathkeeperd-socket-only.log PD_STATE=$LAB_RUN/pathkeeperd-socket-only.json
    lab_step "companion 0: only a socket listens for multipathd (multipathd.socket)"
    pd_mpd_conf
    systemd-socket-activate -l @/org/kernel/linux/storage/multipathd \
        multipathd -d -s -v3 >>"$PD_MPD_LOG" 2>&1 &
    activator=$!
    lab_wait 10 "the socket listens" grep -q "@/org/kernel/linux/storage/multipathd" /proc/net/unix
    lab_check "multipathd is not running yet" not pgrep -x multipathd
    pd_write_config service-time
    pd_start "$daemon"
    lab_wait 60 "pathkeeperd ready" pd_ready
    lab_check "pathkeeperd chose companion mode" test "$(jq -r .mode "$PD_STATE")" = companion
    lab_check "pathkeeperd said why" \
        pd_log_has "multipathd's socket listens, so multipathd starts on demand"
    lab_wait 30 "multipathd runs, started through its socket" pgrep -x multipathd
    lab_wait 90 "multipathd built 2 maps" pd_mpd_has_maps 2
    lab_check "pathkeeperd loaded no table" not pd_log_has "created\|reload"
    lab_check "pathkeeperd exits on SIGTERM" pd_stop
    kill "$activator" 2>/dev/null || true # multipathd itself, after the exec
    wait "$activator" 2>/dev/null || true
    for map in $(dmsetup ls --target multipath | awk '{print $1}'); do
        lab_check "multipathd's map $map removed for the next steps" dmsetup remove "$map"
    done
    lab_save pathkeeperd-socket-only.log "$PD_LOG"
}

pd_companion() {
    local daemon=$1 tables_before
    pd_socket_only "$daemon"
    lab_step "companion 1: multipathd owns the maps"
    pd_mpd_start
    lab_wait 90 "multipathd built 2 maps" pd_mpd_has_maps 2
    multipathd show maps raw format "%n %w %d" || true
    lab_wait 60 "multipathd shows all 4 paths active" pd_mpd_active_paths 4
    tables_before=$(pd_tables)

    lab_step "companion 2: pathkeeperd finds multipathd and stays a companion"
    pd_write_config service-time
    pd_start "$daemon"
    lab_wait 60 "pathkeeperd ready" pd_ready
    lab_check "pathkeeperd chose companion mode by itself" test "$(jq -r .mode "$PD_STATE")" = companion
    lab_check "pathkeeperd sees multipathd's 2 maps and 4 paths" \
        test "$(jq '.maps | length' "$PD_STATE")/$(jq '.paths | length' "$PD_STATE")" = 2/4
    lab_wait 30 "pathkeeperd reports the same path states as multipathd" pd_states_agree
    sleep 5
    lab_check "no table was loaded: the kernel's tables are unchanged" test "$(pd_tables)" = "$tables_before"
    lab_check "pathkeeperd logged no map creation or reload" not pd_log_has "created\|reload"

    lab_step "companion 3: cut eth1"
    local sd dev
    sd=$(jq -r '.paths[] | select(.netdev == "eth1") | .device' "$PD_STATE" | head -1)
    fault_link_cut eth1
    lab_wait 60 "multipathd shows $sd failed" pd_mpd_path_is "$sd" failed
    lab_wait 30 "pathkeeperd reports $sd down" pd_path_state_is "$sd" down
    lab_wait 30 "pathkeeperd agrees with multipathd on every path" pd_states_agree

    lab_step "companion 4: restore eth1; pathkeeperd's reinstatement goes through multipathd"
    fault_link_restore eth1
    lab_wait 120 "$sd's session LOGGED_IN" pd_session_logged_in "$sd"
    lab_wait 60 "multipathd shows $sd active again" pd_mpd_path_is "$sd" active
    lab_wait 30 "pathkeeperd reports $sd up" pd_path_state_is "$sd" up
    lab_check "pathkeeperd asked multipathd to reinstate $sd" pd_log_has "multipathd: reinstate path $sd: ok"
    lab_check "pathkeeperd still logged no map creation or reload" not pd_log_has "created\|reload"

    # multipathd stops answering (SIGSTOP) while the admin holds $sd failed,
    # and dies with the command unread. The restarted multipathd's own
    # checker finds $sd fine and keeps it active: only pathkeeperd sending
    # the lost command again fails it, as the admin asked.
    lab_step "companion 5: a command multipathd never took is sent again"
    dev=$(pd_devt "$sd")
    # multipathd's own TUR checker can still report the cut (a check that
    # started before the restore) and fail $sd once more: settled first.
    lab_wait 60 "$sd is active in dm" pd_dm_path_is "$dev" A
    lab_wait 30 "pathkeeperd agrees with multipathd on every path" pd_states_agree
    kill -STOP "$PD_MPD_PID"
    lab_check "the admin's FailPath of $sd answers that multipathd did not (D-Bus)" \
        pd_bus_call_fails_with "multipathd did not answer \"fail path $sd\"" FailPath "$sd"
    lab_check "the error says that pathkeeperd sends it again" \
        grep -q "pathkeeperd sends it again until multipathd takes it" "$LAB_RUN/bus-error"
    lab_wait 30 "pathkeeperd's \"fail path $sd\" went unanswered" \
        pd_log_has "multipathd: fail path $sd: .*(try 1); sending it again"
    kill -KILL "$PD_MPD_PID"
    wait "$PD_MPD_PID" 2>/dev/null || true
    lab_check "$sd is still active in dm: the command died with multipathd" pd_dm_path_is "$dev" A
    pd_mpd_start
    lab_wait 90 "the restarted multipathd shows $sd failed" pd_mpd_path_is "$sd" failed
    lab_check "pathkeeperd's later try was the one taken" pd_log_has "multipathd: fail path $sd: ok at try "
    sleep 6 # more than one round of multipathd's checker (polling_interval 5)
    lab_check "$sd stays failed: multipathd's checker leaves it to pathkeeperd" pd_dm_path_is "$dev" F
    lab_check "the admin releases $sd (D-Bus ReinstatePath)" \
        busctl --system call org.pathkeeper.PathKeeper1 /org/pathkeeper/PathKeeper1 \
        org.pathkeeper.PathKeeper1.Manager ReinstatePath s "$sd"
    lab_wait 60 "multipathd shows $sd active again" pd_mpd_path_is "$sd" active
    lab_wait 30 "pathkeeperd agrees with multipathd on every path" pd_states_agree
    pd_takeover "$sd"
    lab_check "pathkeeperd exits on SIGTERM" pd_stop
    kill "$PD_MPD_PID" 2>/dev/null || true
    lab_save pathkeeperd.log "$PD_LOG"
    lab_save multipathd.log "$PD_MPD_LOG"
}

# pd_bus_call_fails_with TEXT METHOD ARG: the Manager method METHOD(ARG)
# fails with an error that says TEXT (kept in $LAB_RUN/bus-error).
pd_bus_call_fails_with() {
    if busctl --system call org.pathkeeper.PathKeeper1 /org/pathkeeper/PathKeeper1 \
        org.pathkeeper.PathKeeper1.Manager "$2" s "$3" 2>"$LAB_RUN/bus-error"; then
        return 1
    fi
    lab_log "$2 $3: $(cat "$LAB_RUN/bus-error")"
    grep -qF -- "$1" "$LAB_RUN/bus-error"
}

pd_mode_is() { [[ $(jq -r .mode "$PD_STATE") == "$1" ]]; }
pd_mpd_listens() { grep -q "@/org/kernel/linux/storage/multipathd" /proc/net/unix; }

# pd_takeover SD: auto mode follows multipathd after the start. multipathd
# stopped for good: once it has been gone for the grace (15 s), pathkeeperd
# maintains the maps itself. multipathd started again: they are its own at
# once, and pathkeeperd loads no table from then on.
pd_takeover() {
    local sd=$1 dev line
    dev=$(pd_devt "$sd")
    lab_step "companion 6: multipathd stops for good; pathkeeperd takes its maps over"
    kill -TERM "$PD_MPD_PID"
    wait "$PD_MPD_PID" 2>/dev/null || true
    lab_wait 30 "nothing listens on multipathd's socket" not pd_mpd_listens
    lab_wait 10 "pathkeeperd noticed" pd_log_has "multipathd is gone"
    lab_check "pathkeeperd waits for the grace first" pd_mode_is companion
    lab_wait 60 "pathkeeperd is in owner mode" pd_mode_is owner
    lab_check "pathkeeperd said why" pd_log_has "companion mode → owner mode: multipathd has been gone for"
    lab_wait 60 "pathkeeperd maintains both maps under its aliases, 2 paths each" pd_maps_present
    lab_wait 30 "every path is active in dm" pd_has_active_paths xserve-upper 2
    lab_wait 30 "pathkeeperd lists the WWIDs it owns" test -s /var/lib/pathkeeper/owned-wwids
    lab_check "I/O works through xserve-upper" pd_io_roundtrip xserve-upper 24
    lab_check "the admin fails $sd (D-Bus FailPath)" \
        busctl --system call org.pathkeeper.PathKeeper1 /org/pathkeeper/PathKeeper1 \
        org.pathkeeper.PathKeeper1.Manager FailPath s "$sd"
    lab_wait 10 "pathkeeperd failed $sd in dm itself" pd_dm_is xserve-upper "$dev" F
    lab_check "the admin reinstates $sd (D-Bus ReinstatePath)" \
        busctl --system call org.pathkeeper.PathKeeper1 /org/pathkeeper/PathKeeper1 \
        org.pathkeeper.PathKeeper1.Manager ReinstatePath s "$sd"
    lab_wait 10 "pathkeeperd reinstated $sd in dm itself" pd_dm_is xserve-upper "$dev" A

    lab_step "companion 7: multipathd starts again; pathkeeperd hands the maps back"
    line=$(wc -l <"$PD_LOG")
    pd_mpd_start
    lab_wait 30 "pathkeeperd is in companion mode" pd_mode_is companion
    lab_check "pathkeeperd said why" pd_log_after_has "$line" "owner mode → companion mode: multipathd"
    lab_check "pathkeeperd removed the WWID list for its udev rule" \
        not test -e /var/lib/pathkeeper/owned-wwids
    lab_wait 90 "multipathd shows all 4 paths active" pd_mpd_active_paths 4
    lab_wait 30 "pathkeeperd agrees with multipathd on every path" pd_states_agree
    sleep 6 # a round of multipathd's checker, and pathkeeperd's passes after its reloads
    lab_check "pathkeeperd loaded no table since multipathd came back" \
        not pd_log_after_has "$line" "created\|reload "
}

# --- the README's demo ---------------------------------------------------------

# pd_topology: maps, groups and paths as the daemon publishes them.
pd_topology() {
    jq -r '
      (.paths | map({key: .device, value: .}) | from_entries) as $p
      | .maps[]
      | "\(.alias)  wwid \(.wwid)  \(.selector)  usable \(.usable_paths)  active group \(.active_group)",
        (.groups[] | "  group \(.number) (priority \(.priority))",
          (.paths[] | $p[.] as $x
            | "    \(.)  \($x.devt)  \($x.state)/\($x.dm_state)  \($x.controller)  \($x.netdev) -> \($x.portal)"))' "$PD_STATE"
}

pd_demo() {
    local daemon=$1 ctl=${2:-} sd dev t_cut t_fail t_login t_up
    pk_mask_multipath_uevent_check
    pd_write_config service-time

    lab_step "demo 1: start pathkeeperd; it builds the maps from the live iSCSI paths"
    pd_start "$daemon"
    lab_wait 60 "pathkeeperd ready" pd_ready
    lab_wait 30 "both maps with 2 paths each" pd_maps_present
    echo "--- dmsetup (the kernel's view)"
    dmsetup table | grep multipath
    dmsetup status | grep multipath
    echo "--- pathkeeperd's topology ($PD_STATE)"
    pd_topology
    if [[ -n $ctl ]]; then
        echo "--- pathkeeperctl status (over D-Bus)"
        "$ctl" status || true
    fi
    echo "--- busctl --system tree org.pathkeeper.PathKeeper1"
    busctl --system tree org.pathkeeper.PathKeeper1 || true
    echo "--- pathkeeperd's log so far"
    cat "$PD_LOG"

    lab_step "demo 2: cut eth1 and watch pathkeeperd fail the paths"
    sd=$(pd_eth1_path xserve-upper)
    dev=$(pd_devt "$sd")
    t_cut=$(pd_ms)
    lab_log "eth1 cut (path $sd, $dev)"
    fault_link_cut eth1
    lab_wait 60 "$sd failed in dm" pd_dm_is xserve-upper "$dev" F
    t_fail=$(pd_ms)
    lab_log "$sd failed $((t_fail - t_cut)) ms after the cut"
    lab_wait 30 "pathkeeperd reports $sd down" pd_path_state_is "$sd" down
    pd_topology
    lab_check "I/O still works through xserve-upper" pd_io_roundtrip xserve-upper 16

    lab_step "demo 3: bring eth1 back and watch pathkeeperd reinstate the paths"
    fault_link_restore eth1
    lab_wait 120 "$sd's session LOGGED_IN" pd_session_logged_in "$sd"
    t_login=$(pd_ms)
    lab_log "session of $sd logged in"
    lab_wait 30 "$sd active in dm again" pd_dm_is xserve-upper "$dev" A
    t_up=$(pd_ms)
    lab_log "$sd reinstated $((t_up - t_login)) ms after its session logged in"
    pd_topology
    [[ -n $ctl ]] && { "$ctl" status || true; }
    echo "--- pathkeeperd's log of the fault"
    # The decisions and the dm messages, not each passing TUR or the
    # kernel's echo of our own messages.
    grep -e "PATH=$sd" "$PD_LOG" | grep -v -e " debug: TUR " -e "the echo of our" | tail -n 10
    lab_check "pathkeeperd exits on SIGTERM and leaves the maps" pd_stop
}
