# Installed-package checks (issue #7, VM test vm_xserve_systemd): the guest
# boots the host's systemd as PID 1 (lab run --systemd), installs pathkeeper's
# .deb before any iSCSI login, and then only logs in: the package's udev rule
# must start pathkeeperd.service, which builds the maps and publishes them on
# the real system bus. Functions are prefixed sy_. Builds on daemon.sh (pd_*).

SY_UNIT=pathkeeperd.service
SY_DROPIN=/etc/pathkeeper/pathkeeper.conf.d

# sy_install_deb DEB: dpkg -i on the guest (its dependencies are the host's
# libraries, already present), plus the lab's controller rules as a drop-in.
# Runs in the setup, before the logins.
sy_install_deb() {
    local deb=$1
    lab_step "systemd 0: install $(basename "$deb") before any iSCSI login"
    lab_check "the guest runs systemd as PID 1" test "$(cat /proc/1/comm)" = systemd
    lab_check "dpkg -i $(basename "$deb")" dpkg -i "$deb"
    dpkg -L pathkeeper | grep -e sbin -e rules.d -e '\.service' -e system.d/ -e man8 || true
    mkdir -p "$SY_DROPIN"
    cp "${LAB_DIR%/tests/lab}/tests/data/config/xserve.conf" "$SY_DROPIN/10-xserve.conf"
    lab_check "the package did not start pathkeeperd (no paths yet)" \
        not systemctl is-active --quiet "$SY_UNIT"
    udevadm control --reload
}

sy_active() { systemctl is-active --quiet "$SY_UNIT"; }
sy_prop() { systemctl show -P "$2" "$1"; }
sy_selector_is() { [[ $(dmsetup table "$1" 2>/dev/null) == *" $2 "* ]]; }
sy_bus_maps() { [[ $(busctl --system --list tree org.pathkeeper.PathKeeper1 2>/dev/null | grep -c /maps/) -eq $1 ]]; }
sy_journal_has() { [[ $(journalctl -b -u "$SY_UNIT" --no-pager -o cat 2>/dev/null) == *$1* ]]; }

# sy_refused_fail_path SD: FailPath as nobody fails with an access error (the
# bus policy's or the daemon's polkit check), and SD stays active in dm.
sy_refused_fail_path() {
    local out rc=0
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
        busctl --system call org.pathkeeper.PathKeeper1 /org/pathkeeper/PathKeeper1 \
        org.pathkeeper.PathKeeper1.Manager FailPath s "$1" 2>&1) || rc=$?
    lab_log "FailPath as nobody: exit $rc: $out"
    ((rc != 0)) && [[ $out == *[Aa]ccess* || $out == *[Aa]uthori* || $out == *uthenticat* || $out == *[Pp]ermission* ]] &&
        [[ $(dmsetup status | grep -c " $(cat "/sys/block/$1/dev") F ") -eq 0 ]]
}

sy_all_paths_active() {
    local states
    states=$(pd_dm_states xserve-upper; pd_dm_states xserve-lower)
    [[ $(grep -c ' A$' <<<"$states") -eq 4 ]]
}

# sy_unmarked SD: udev ran 62-pathkeeper.rules on SD and did not mark it.
sy_unmarked() {
    local info
    info=$(udevadm info "/dev/$1")
    [[ $info == *"PATHKEEPER_ISCSI_PATH=1"* && $info != *"DM_MULTIPATH_DEVICE_PATH=1"* ]]
}

sy_journal_count() { journalctl -b -u "$SY_UNIT" --no-pager -o cat 2>/dev/null | grep -c -e "$1" || true; }

# sy_held_path_is DEV STATE DMSTATE: the installed daemon's published state.
sy_held_path_is() {
    [[ $(jq -r --arg d "$1" '.paths[] | select(.device == $d) | "\(.state) \(.dm_state)"' \
        /run/pathkeeper/state.json 2>/dev/null) == "$2 $3" ]]
}
sy_no_path_retry_is() {
    [[ $(busctl --system get-property org.pathkeeper.PathKeeper1 \
        "/org/pathkeeper/PathKeeper1/maps/${1//-/_2d}" org.pathkeeper.PathKeeper1.Map NoPathRetry 2>/dev/null) == "s \"$2\"" ]]
}

sy_marked() {
    local info
    info=$(udevadm info "/dev/$1")
    [[ $info == *"DM_MULTIPATH_DEVICE_PATH=1"* && $info == *"ID_FS_TYPE=mpath_member"* ]]
}

# sy_run: the checks after the logins.
sy_run() {
    lab_step "systemd 1: the udev rule started pathkeeperd"
    lab_wait 90 "$SY_UNIT active" sy_active
    local sd wanted
    sd=$(ini_paths | awk '$1 ~ /^sd/ {print $1; exit}')
    # The rule tags the SCSI device, not the block device (an owned path's
    # block device is SYSTEMD_READY=0, and systemd ignores its wants).
    udevadm info "/sys/block/$sd/device" | grep -e SYSTEMD_WANTS -e TAGS -e DEVPATH || true
    lab_check "udev asks systemd for $SY_UNIT on $sd's SCSI device" \
        grep -q "SYSTEMD_WANTS=.*$SY_UNIT" <(udevadm info "/sys/block/$sd/device")
    wanted=$(sy_prop "$SY_UNIT" WantedBy)
    lab_log "$SY_UNIT WantedBy: $wanted"
    lab_check "$SY_UNIT is wanted by the sd devices' units, not by a target" \
        grep -q '\.device' <<<"$wanted"
    lab_check "nothing but udev started it (no enablement symlink)" \
        test "$(systemctl is-enabled "$SY_UNIT" 2>&1)" != enabled
    lab_check "$SY_UNIT is Type=notify and reached READY" \
        test "$(sy_prop "$SY_UNIT" Type)/$(sy_prop "$SY_UNIT" ActiveState)" = notify/active

    lab_step "systemd 2: the maps and the real system bus"
    lab_wait 60 "xserve-upper and xserve-lower, 2 paths each" pd_maps_present
    dmsetup table | grep multipath
    # multipath-tools' 56-dm-mpath.rules is not masked here: its multipath -U
    # on each new map can race scsi_dh_alua's activation and fail every path
    # of it (README, "Known interaction"). Whatever dm failed, the health
    # loop must bring back.
    if [[ -e /lib/udev/rules.d/56-dm-mpath.rules && ! -e /etc/udev/rules.d/56-dm-mpath.rules ]]; then
        lab_log "56-dm-mpath.rules is active"
    fi
    lab_wait 60 "every path of both maps is active in dm" sy_all_paths_active
    local kernel_failed
    kernel_failed=$(journalctl -b -u "$SY_UNIT" --no-pager -o cat | grep -c 'kernel failed the path' || true)
    lab_log "path failures the kernel reported on its own so far: $kernel_failed"
    lab_wait 30 "$SY_UNIT's status text names the maps" \
        eval '[[ $(sy_prop "$SY_UNIT" StatusText) == *"2 maps"* ]]'
    lab_log "status text: $(sy_prop "$SY_UNIT" StatusText)"
    lab_wait 30 "busctl on the system bus shows 2 map objects" sy_bus_maps 2
    busctl --system tree org.pathkeeper.PathKeeper1
    lab_check "the bus name is owned by pathkeeperd's main PID" \
        test "$(busctl --system status org.pathkeeper.PathKeeper1 2>/dev/null | sed -n 's/^PID=//p')" = "$(sy_prop "$SY_UNIT" MainPID)"
    lab_check "an unprivileged user reads the Manager's Status" \
        setpriv --reuid=65534 --regid=65534 --clear-groups \
        busctl --system get-property org.pathkeeper.PathKeeper1 /org/pathkeeper/PathKeeper1 \
        org.pathkeeper.PathKeeper1.Manager Status
    lab_check "an unprivileged user is refused FailPath" sy_refused_fail_path "$sd"
    lab_check "xserve-upper: 8 MiB round trip" pd_io_roundtrip xserve-upper 0

    lab_step "systemd 2b: owner mode marks the paths it owns"
    local wwid_u
    wwid_u=$(dmsetup info -c --noheadings -o uuid xserve-upper | sed 's/^mpath-//')
    lab_wait 10 "/var/lib/pathkeeper/owned-wwids lists xserve-upper's WWID" \
        grep -qx "$wwid_u" /var/lib/pathkeeper/owned-wwids
    cat /var/lib/pathkeeper/owned-wwids
    # No manual trigger. Whether udev processed a path before or after the
    # daemon listed its WWID is a race (the daemon starts on the SCSI
    # device's event, before udev reaches the block device): either the rule
    # marks it, or the daemon hands it back (a change uevent). Step 5 makes
    # the second case certain.
    local p
    for p in $(ini_paths | awk '{print $1}'); do
        lab_wait 30 "$p is marked as a multipath member (DM_MULTIPATH_DEVICE_PATH=1, mpath_member) without a manual trigger" \
            sy_marked "$p"
    done
    journalctl -b -u "$SY_UNIT" --no-pager -o cat | grep "udev had not marked" || true
    udevadm info "/dev/$sd" | grep -e DM_MULTIPATH_DEVICE_PATH -e ID_FS_TYPE -e SYSTEMD_READY -e PATHKEEPER || true
    lab_check "the daemon logs to the journal (its map creation)" sy_journal_has "map xserve-upper created"

    lab_step "systemd 3: systemctl reload applies a config change"
    local pid
    pid=$(sy_prop "$SY_UNIT" MainPID)
    lab_check "xserve-upper uses service-time before the change" sy_selector_is xserve-upper service-time
    printf '[defaults]\nselector = "queue-length"\n' >"$SY_DROPIN/20-selector.conf"
    lab_check "systemctl reload $SY_UNIT" systemctl reload "$SY_UNIT"
    lab_wait 60 "xserve-upper reloaded with queue-length" sy_selector_is xserve-upper queue-length
    lab_wait 60 "xserve-lower reloaded with queue-length" sy_selector_is xserve-lower queue-length
    lab_check "the same process (no restart: PID $pid)" test "$(sy_prop "$SY_UNIT" MainPID)" = "$pid"

    lab_step "systemd 3b: the admin's holds survive systemctl restart"
    # As a package upgrade restarts the unit: a path failed for maintenance
    # must stay failed, and a map whose queueing the admin stopped must not
    # queue, although the new process finds the path passing its checks.
    local held held_devt
    held=$(jq -r '.paths[] | select(.map == "xserve-lower") | .device' /run/pathkeeper/state.json | head -1)
    held_devt=$(cat "/sys/block/$held/dev")
    lab_check "pathkeeperctl fail-path $held" pathkeeperctl fail-path "$held"
    lab_wait 30 "$held is failed in dm" pd_dm_is xserve-lower "$held_devt" F
    lab_check "pathkeeperctl disable-queueing xserve-upper" pathkeeperctl disable-queueing xserve-upper
    lab_wait 30 "xserve-upper no longer queues (no queue_if_no_path in its table)" not pd_queueing xserve-upper
    lab_check "xserve-lower still queues" pd_queueing xserve-lower
    cat /run/pathkeeper/admin-holds
    pid=$(sy_prop "$SY_UNIT" MainPID)
    lab_check "systemctl restart $SY_UNIT" systemctl restart "$SY_UNIT"
    lab_check "a new process (PID $pid before, $(sy_prop "$SY_UNIT" MainPID) now)" \
        test "$(sy_prop "$SY_UNIT" MainPID)" != "$pid"
    lab_wait 30 "the new process took over the hold on $held" \
        sy_journal_has "path $held: still failed by the admin"
    lab_wait 60 "$held's checks pass (state up) and it stays failed in dm" sy_held_path_is "$held" up failed
    lab_check "$held is failed in dm" pd_dm_is xserve-lower "$held_devt" F
    lab_check "xserve-upper still does not queue" not pd_queueing xserve-upper
    lab_check "D-Bus shows xserve-upper's NoPathRetry as disabled" sy_no_path_retry_is xserve-upper disabled
    lab_check "pathkeeperctl status flags it" eval '[[ $(pathkeeperctl status --no-color) == *"queueing-disabled"* ]]'
    lab_check "pathkeeperctl reinstate-path $held" pathkeeperctl reinstate-path "$held"
    lab_check "pathkeeperctl restore-queueing --all" pathkeeperctl restore-queueing --all
    lab_wait 30 "$held is active in dm again" pd_dm_is xserve-lower "$held_devt" A
    lab_wait 30 "xserve-upper queues again" pd_queueing xserve-upper
    lab_check "no hold is left in /run/pathkeeper/admin-holds" \
        not grep -q -e '^fail-path' -e '^disable-queueing' /run/pathkeeper/admin-holds

    lab_step "systemd 4: systemctl stop leaves the maps live"
    lab_check "no watchdog kill or restart so far (NRestarts 0, WatchdogUSec $(sy_prop "$SY_UNIT" WatchdogUSec))" \
        test "$(sy_prop "$SY_UNIT" NRestarts)" = 0
    lab_check "systemctl stop $SY_UNIT" systemctl stop "$SY_UNIT"
    lab_check "$SY_UNIT is inactive (not failed)" test "$(sy_prop "$SY_UNIT" ActiveState)" = inactive
    lab_check "both maps are still there, 2 paths each" pd_maps_present
    lab_check "no map is left suspended" pd_no_map_suspended
    lab_check "xserve-lower: 8 MiB round trip with the daemon stopped" pd_io_roundtrip xserve-lower 16
    lab_check "the name left the bus" not busctl --system status org.pathkeeper.PathKeeper1

    lab_step "systemd 5: a first start with paths udev has not marked"
    # As on a host where pathkeeper is installed while sessions are logged
    # in: no map yet, udev has seen every path, and none of their WWIDs is
    # listed. (While a map holds a path, multipath-tools' 60-multipath.rules
    # marks it on any uevent: multipath -u sees the dm holder.)
    # The round trip's close of xserve-lower set udev's watch going (blkid
    # opens the map): let it finish, and retry through any open.
    udevadm settle
    lab_check "remove both maps (idle, the daemon is stopped)" \
        dmsetup remove --retry xserve-upper xserve-lower
    mv /var/lib/pathkeeper/owned-wwids /var/lib/pathkeeper/owned-wwids.step4
    udevadm trigger --action=change --settle $(ini_paths | awk '{print "/dev/" $1}')
    for p in $(ini_paths | awk '{print $1}'); do
        lab_check "$p is unmarked, and the rule saw it (PATHKEEPER_ISCSI_PATH=1)" sy_unmarked "$p"
    done
    local handbacks_before
    handbacks_before=$(sy_journal_count "udev had not marked")
    lab_check "systemctl start $SY_UNIT" systemctl start "$SY_UNIT"
    lab_wait 60 "xserve-upper and xserve-lower are back, 2 paths each" pd_maps_present
    lab_wait 30 "$SY_UNIT sent change uevents to the unmarked paths" \
        eval '(( $(sy_journal_count "udev had not marked") > handbacks_before ))'
    journalctl -b -u "$SY_UNIT" --no-pager -o cat | grep "udev had not marked" | tail -n 2 || true
    for p in $(ini_paths | awk '{print $1}'); do
        lab_wait 30 "$p is marked, without a manual trigger" sy_marked "$p"
    done
    lab_check "owned-wwids lists both WWIDs again" \
        cmp <(grep -v '^#' /var/lib/pathkeeper/owned-wwids.step4 | sort) \
        <(grep -v '^#' /var/lib/pathkeeper/owned-wwids | sort)
    lab_check "systemctl stop $SY_UNIT" systemctl stop "$SY_UNIT"
    journalctl -b -u "$SY_UNIT" --no-pager -o short-monotonic | lab_save pathkeeperd-journal.txt
}
