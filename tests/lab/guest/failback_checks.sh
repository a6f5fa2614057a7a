# Failback policies and proactive failover of pathkeeperd (issue #5) on the
# alua scenario: LUN 0 is active/optimized on controller A, so its map's
# preferred group holds A's two paths, and B's group is the fallback.
# Sourced by scenarios/alua.sh for its `failback` arg. Functions are
# prefixed fb_; the pd_* helpers (daemon.sh) start and read the daemon.
#
# What fails controller A's paths: `offline` on the two sd devices of LUN 0
# behind A (fault_sdev_offline). It is an initiator-side fault, not a
# controller outage, but it fails exactly A's paths of that map (I/O to them
# errors out at once, the TUR fails), leaves B's paths and the other map
# alone, and is undone deterministically; a link cut or a portal blackhole
# would take B's paths through the same portal with it. The daemon sees the
# device state change and fails the paths in dm; `running` brings them back
# through the same event-driven check as a session login.

FB_MAP=        # the map of LUN 0 (a user-friendly name from the bindings file)
FB_GA=         # its group holding controller A's paths (the optimized one)
FB_GB=         # its group holding controller B's paths
FB_A=()        # LUN 0's sd devices behind controller A
FB_B=()        # ... behind controller B
FB_OFF=0       # next free MiB offset for I/O round trips
FB_N0=0        # the daemon's log lines once the maps were built

# fb_status_groups MAP: the map's `dmsetup status` as lines: "next N" (the
# group the kernel will use next), then "N STATE DEV..." per group (STATE is
# A active, E enabled, D disabled). Grammar: selector/dm_status.hpp.
fb_status_groups() {
    dmsetup status "$1" | awk '{
        i = 4; i += $i + 1          # features
        i += $i + 1                 # hardware handler
        ng = $i; print "next", $(i + 1); i += 2
        for (g = 1; g <= ng; g++) {
            line = g " " $i; i += 1
            i += $i + 1             # selector status args
            np = $i; na = $(i + 1); i += 2
            for (p = 0; p < np; p++) { line = line " " $i; i += 3 + na }
            print line
        }
    }'
}

fb_next_group() { fb_status_groups "$1" | awk '$1 == "next" {print $2}'; }
fb_active_group() { fb_status_groups "$1" | awk '$1 != "next" && $2 == "A" {print $1}'; }
fb_group_of() { fb_status_groups "$1" | awk -v d="$2" '$1 != "next" { for (i = 3; i <= NF; i++) if ($i == d) print $1 }'; }
fb_group_count() { fb_status_groups "$1" | awk '$1 != "next"' | wc -l; }
fb_next_is() { [[ $(fb_next_group "$1") == "$2" ]]; }
fb_active_is() { [[ $(fb_active_group "$1") == "$2" ]]; }

# fb_map_of DEVT: the multipath map whose table holds DEVT.
fb_map_of() { dmsetup table --target multipath | awk -v d="$1" '{ for (i = 2; i <= NF; i++) if ($i == d) { sub(":$", "", $1); print $1; exit } }'; }

fb_maps_ready() {
    local m n=0
    for m in $(dmsetup ls --target multipath | awk '{print $1}'); do
        [[ $(pd_dm_states "$m" | wc -l) -eq 4 ]] && n=$((n + 1))
    done
    ((n == 2))
}

# fb_paths LUN CONTROLLER: the sd devices of LUN (0/1) behind CONTROLLER (a/b).
fb_paths() {
    local sd target dev
    while read -r sd _ _ target _ _ _; do
        [[ $target == *".${AL_PWWN[$2]}" ]] || continue
        dev=$(readlink -f "/sys/block/$sd/device")
        if [[ ${dev##*:} == "$1" ]]; then echo "$sd"; fi
    done < <(ini_paths)
}

fb_all_are() {  # fb_all_are STATE SD...: every sd is STATE (A/F) in $FB_MAP
    local want=$1 sd; shift
    for sd; do pd_dm_is "$FB_MAP" "$(pd_devt "$sd")" "$want" || return 1; done
}
fb_all_daemon() {  # fb_all_daemon STATE SD...: the daemon reports every sd STATE
    local want=$1 sd; shift
    for sd; do pd_path_state_is "$sd" "$want" || return 1; done
}

# fb_io: an 8 MiB checksummed round trip through the map; dm picks its group
# on I/O (a switch_group only takes effect with the next request).
fb_io() {
    pd_io_roundtrip "$FB_MAP" "$FB_OFF" || return 1
    FB_OFF=$(((FB_OFF + 8) % 56))
}

fb_log_lines() { wc -l <"$PD_LOG"; }
# fb_log_after N PATTERN: the first log line after line N matching PATTERN.
fb_log_after() { tail -n +"$(($1 + 1))" "$PD_LOG" | grep -m1 -- "$2" || true; }
fb_logged_after() { [[ -n $(fb_log_after "$1" "$2") ]]; }
# fb_lineno_after N PATTERN: the absolute line number of that line.
fb_lineno_after() {
    local rel
    rel=$(tail -n +"$(($1 + 1))" "$PD_LOG" | grep -n -m1 -- "$2" | cut -d: -f1 || true)
    [[ -z $rel ]] || echo $(($1 + rel))
}
fb_not() { ! "$@"; }

# fb_config FAILBACK [HEALTH_LINES]: pd_write_config's file (its xserve
# controller rules match nothing here, so the maps get user-friendly names)
# with failback = FAILBACK. Flap damping is off: A's paths fail once per
# step, and a shaky path held failed would stall the next step's failback
# for reasons this test is not about.
# SendTargets probes run every second with a 1 s timeout from the start (800
# ms saw a spurious timeout at startup): a blackholed portal then fails its
# probe within about 2 s, while iscsid's
# NOP-out (2 s interval, 3 s timeout in the lab) takes 3 to 5 s. They are
# set at startup because a SIGHUP does not rearm the probe timer: a shorter
# probe_interval only applies after one round of the old one (30 s). Step 5
# does not rely on that margin (fb_proactive).
# Without proactive_failover a failed probe changes no path.
fb_config() {
    pd_write_config service-time "flap_damping = false${2:+$'\n'$2}
[discovery]
probe_interval = \"1s\"
probe_timeout = \"1s\"" "failback = $1"
}

# fb_reload FAILBACK [HEALTH_LINES]: fb_config, then SIGHUP; waits
# until the daemon says it took it.
fb_reload() {
    local n
    n=$(grep -c "configuration reloaded" "$PD_LOG" || true)
    fb_config "$@"
    kill -HUP "$PD_PID"
    lab_wait 30 "the daemon reloaded its config (failback = $1)" fb_reloads_above "$n"
}

# The count must be taken on every poll, not once when lab_wait is called.
fb_reloads_above() { (($(grep -c "configuration reloaded" "$PD_LOG" || true) > $1)); }

# fb_fail_a: A's paths of LUN 0 fail; I/O continues on B's group.
fb_fail_a() {
    local sd
    for sd in "${FB_A[@]}"; do fault_sdev_offline "$sd"; done
    lab_wait 60 "A's paths (${FB_A[*]}) failed in dm" fb_all_are F "${FB_A[@]}"
    lab_wait 30 "the daemon reports A's paths down" fb_all_daemon down "${FB_A[@]}"
    lab_check "I/O through $FB_MAP works without A's paths" fb_io
    fb_status_groups "$FB_MAP"
    lab_check "A's paths are still group $FB_GA (path states are no reason to regroup)" fb_groups_kept
    lab_check "dm uses B's group $FB_GB" fb_active_is "$FB_MAP" "$FB_GB"
    lab_check "B's paths are active" fb_all_are A "${FB_B[@]}"
}

# fb_restore_a: A's paths come back; waits until dm and the daemon have them.
fb_restore_a() {
    local sd
    for sd in "${FB_A[@]}"; do fault_sdev_online "$sd"; done
    lab_wait 60 "A's paths reinstated in dm" fb_all_are A "${FB_A[@]}"
    lab_wait 30 "the daemon reports A's paths up" fb_all_daemon up "${FB_A[@]}"
}

# fb_back_on_a: the kernel has been told to use A's group; one I/O makes it
# the active one.
fb_back_on_a() {
    lab_wait 30 "dm's next group is A's ($FB_GA)" fb_next_is "$FB_MAP" "$FB_GA"
    lab_check "I/O through $FB_MAP after the failback" fb_io
    fb_status_groups "$FB_MAP"
    lab_check "dm uses A's group $FB_GA again" fb_active_is "$FB_MAP" "$FB_GA"
    lab_check "$FB_MAP was never reloaded: failback is switch_group, not a new table" \
        fb_not fb_logged_after "$FB_N0" "reload $FB_MAP "
}

# fb_groups_kept: A's and B's paths are in the groups they started in.
fb_groups_kept() {
    [[ $(fb_group_of "$FB_MAP" "$(pd_devt "${FB_A[0]}")") == "$FB_GA" &&
        $(fb_group_of "$FB_MAP" "$(pd_devt "${FB_B[0]}")") == "$FB_GB" ]]
}

fb_setup() {
    local daemon=$1 a0
    lab_step "failback 0: pathkeeperd owns the alua maps (failback = \"immediate\")"
    pk_mask_multipath_uevent_check
    # scsi_dh_alua sends an explicit STPG when dm activates a non-optimized
    # group (the LUNs allow explicit ALUA), and LIO then makes B optimized as
    # well: A would no longer be "the optimized group that comes back".
    # optimize_stpg makes the handler use a non-optimized group as it is when
    # implicit ALUA is supported, as many arrays are run; the ALUA states
    # then stay as the target set them.
    if [[ -w /sys/module/scsi_dh_alua/parameters/optimize_stpg ]]; then
        echo 1 >/sys/module/scsi_dh_alua/parameters/optimize_stpg
        lab_log "scsi_dh_alua optimize_stpg=1"
    else
        lab_log "scsi_dh_alua optimize_stpg not writable; B's group may become optimized too"
    fi
    mapfile -t FB_A < <(fb_paths 0 a)
    mapfile -t FB_B < <(fb_paths 0 b)
    lab_log "LUN 0 behind A: ${FB_A[*]}; behind B: ${FB_B[*]}"
    lab_check "LUN 0 has two paths behind each controller" test "${#FB_A[@]}/${#FB_B[@]}" = 2/2
    fb_config '"immediate"'
    pd_start "$daemon"
    lab_wait 60 "pathkeeperd ready" pd_ready
    lab_wait 60 "two maps of 4 paths each" fb_maps_ready
    pd_show
    a0=$(pd_devt "${FB_A[0]}")
    FB_MAP=$(fb_map_of "$a0")
    lab_check "LUN 0 has a map ($FB_MAP)" test -n "$FB_MAP"
    fb_status_groups "$FB_MAP"
    FB_GA=$(fb_group_of "$FB_MAP" "$a0")
    FB_GB=$(fb_group_of "$FB_MAP" "$(pd_devt "${FB_B[0]}")")
    lab_log "$FB_MAP: A's group $FB_GA, B's group $FB_GB"
    lab_check "$FB_MAP has 2 groups" test "$(fb_group_count "$FB_MAP")" -eq 2
    lab_check "A's paths share one group, B's the other" test -n "$FB_GA" -a -n "$FB_GB" -a \
        "$FB_GA" != "$FB_GB" -a "$(fb_group_of "$FB_MAP" "$(pd_devt "${FB_A[1]}")")" = "$FB_GA" -a \
        "$(fb_group_of "$FB_MAP" "$(pd_devt "${FB_B[1]}")")" = "$FB_GB"
    lab_check "the daemon ranks A's group above B's" test "$(jq --arg m "$FB_MAP" --argjson a "$FB_GA" --argjson b "$FB_GB" \
        '.maps[] | select(.alias == $m) | (.groups[] | select(.number == $a) | .priority) > (.groups[] | select(.number == $b) | .priority)' "$PD_STATE")" = true
    lab_check "I/O through $FB_MAP" fb_io
    lab_check "dm uses A's (optimized) group $FB_GA" fb_active_is "$FB_MAP" "$FB_GA"
    FB_N0=$(fb_log_lines)
}

# fb_switch_back_logged SECS N POLICY: waits for the daemon's "switch to
# group A" line after log line N and checks that POLICY's failback is its
# reason; the line is left in FB_LINE.
fb_switch_back_logged() {
    local secs=$1 n=$2 policy=$3
    lab_wait "$secs" "the daemon logged the switch to group $FB_GA" \
        fb_logged_after "$n" "map $FB_MAP: switch to group $FB_GA ("
    FB_LINE=$(fb_log_after "$n" "map $FB_MAP: switch to group $FB_GA (")
    lab_log "daemon: $FB_LINE"
    lab_check "its reason is the $policy policy" grep -q "$policy failback" <<<"$FB_LINE"
}

# fb_switch_refused CTL GROUP TEXT: pathkeeperctl switch-group to GROUP
# fails and its message says TEXT.
fb_switch_refused() {
    local out
    if out=$("$1" switch-group "$FB_MAP" "$2" 2>&1); then
        lab_log "pathkeeperctl switch-group $FB_MAP $2 succeeded: $out"
        return 1
    fi
    lab_log "$out"
    grep -q -- "$3" <<<"$out"
}

# fb_reload_keeps_b CTL SELECTOR: a new selector for $FB_MAP is a new table,
# and a new table starts on its initial group; the map must stay on B's.
fb_reload_keeps_b() {
    local ctl=$1 selector=$2 n
    n=$(fb_log_lines)
    lab_check "pathkeeperctl set-selector $FB_MAP $selector" "$ctl" set-selector "$FB_MAP" "$selector"
    lab_wait 30 "the daemon reloaded $FB_MAP" fb_logged_after "$n" "reload $FB_MAP "
    lab_log "daemon: $(fb_log_after "$n" "reload $FB_MAP ")"
    lab_check "the table is $selector" grep -q " $selector " <(dmsetup table "$FB_MAP")
    fb_status_groups "$FB_MAP"
    lab_check "dm's next group is still B's ($FB_GB)" fb_next_is "$FB_MAP" "$FB_GB"
    lab_check "I/O through $FB_MAP after the reload" fb_io
    lab_check "dm uses B's group $FB_GB" fb_active_is "$FB_MAP" "$FB_GB"
    lab_check "the daemon sent no switch_group" fb_not fb_logged_after "$n" "map $FB_MAP: switch"
}

fb_immediate() {
    local ctl=$1 n
    lab_step "failback 1: immediate: A's paths fail, then come back"
    lab_check "switch-group to B's group is refused: immediate failback would undo it" \
        fb_switch_refused "$ctl" "$FB_GB" "would move map $FB_MAP back to group $FB_GA"
    fb_fail_a
    n=$(fb_log_lines)
    fb_restore_a
    fb_switch_back_logged 30 "$n" immediate
    fb_back_on_a
}

fb_manual() {
    local ctl=$1 n
    lab_step "failback 2: manual: the map stays on B until the operator switches"
    fb_reload '"manual"'
    fb_fail_a
    n=$(fb_log_lines)
    fb_restore_a
    # A bounded observation, not a proof of "never": the daemon evaluates
    # failback on every path event and A's reinstatements were the last
    # ones, so a switch would have been sent by now; the wait gives it
    # slack on a slow guest. I/O afterwards lets dm act on a switch_group.
    sleep 5
    lab_check "I/O through $FB_MAP" fb_io
    fb_status_groups "$FB_MAP"
    lab_check "dm still uses B's group $FB_GB" fb_active_is "$FB_MAP" "$FB_GB"
    lab_check "the daemon sent no switch_group" fb_not fb_logged_after "$n" "map $FB_MAP: switch"
    # Reloads (here a new selector, and back) keep the map where it is.
    fb_reload_keeps_b "$ctl" queue-length
    fb_reload_keeps_b "$ctl" service-time
    FB_N0=$(fb_log_lines) # fb_back_on_a: no reload from here on
    lab_check "pathkeeperctl switch-group $FB_MAP $FB_GA" "$ctl" switch-group "$FB_MAP" "$FB_GA"
    lab_wait 30 "the daemon logged the operator's switch" \
        fb_logged_after "$n" "map $FB_MAP: switched to group $FB_GA by the admin"
    fb_back_on_a
}

fb_deferred() {
    local n line secs l_up l_sw sd
    lab_step "failback 3: deferred (failback = 10): the switch waits for A to be stable"
    fb_reload 10
    fb_fail_a
    n=$(fb_log_lines)
    fb_restore_a
    fb_switch_back_logged 90 "$n" deferred
    line=$FB_LINE
    # The daemon's own account of the wait, not a wall-clock measurement.
    secs=$(sed -n 's/.*has been usable for \([0-9]*\)s.*/\1/p' <<<"$line")
    lab_check "the daemon waited out the deferral (usable for ${secs:-?}s >= 10s)" test "${secs:-0}" -ge 10
    l_sw=$(fb_lineno_after "$n" "map $FB_MAP: switch to group $FB_GA (")
    for sd in "${FB_A[@]}"; do
        l_up=$(fb_lineno_after "$n" "path $sd reinstate: ")
        lab_check "$sd was reinstated (log line ${l_up:-none}) before the switch (line $l_sw)" \
            test -n "$l_up" -a "${l_up:-0}" -lt "$l_sw"
    done
    fb_back_on_a
}

fb_followover() {
    local ctl=$1 n
    lab_step "failback 4: followover: an operator's switch stays; a returning group is failed back to"
    # Still manual here: move the map to B by hand, then ask for followover.
    # The reload makes the daemon re-read dm status and evaluate failback
    # with B active and A healthy: immediate would switch back now,
    # followover must not (A did not come back, it never left).
    n=$(fb_log_lines)
    fb_reload '"manual"'
    lab_check "pathkeeperctl switch-group $FB_MAP $FB_GB" "$ctl" switch-group "$FB_MAP" "$FB_GB"
    lab_wait 30 "dm's next group is B's ($FB_GB)" fb_next_is "$FB_MAP" "$FB_GB"
    lab_check "I/O through $FB_MAP" fb_io
    lab_check "dm uses B's group $FB_GB" fb_active_is "$FB_MAP" "$FB_GB"
    fb_reload '"followover"'
    # Bounded observation, as in step 2.
    sleep 5
    lab_check "I/O through $FB_MAP" fb_io
    lab_check "dm still uses B's group $FB_GB" fb_active_is "$FB_MAP" "$FB_GB"
    lab_check "the daemon did not undo the operator's switch" fb_not fb_logged_after "$n" "map $FB_MAP: switch to"
    local sd
    for sd in "${FB_A[@]}"; do fault_sdev_offline "$sd"; done
    lab_wait 60 "A's paths failed in dm" fb_all_are F "${FB_A[@]}"
    lab_wait 30 "the daemon reports A's paths down" fb_all_daemon down "${FB_A[@]}"
    n=$(fb_log_lines)
    fb_restore_a
    fb_switch_back_logged 30 "$n" followover
    fb_back_on_a
}

# fb_first_fail_reason N SD: the daemon's first "path SD fail:" line after N.
fb_first_fail() { fb_log_after "$1" "path $2 fail: "; }
fb_failed_after() { [[ -n $(fb_first_fail "$@") ]]; }

# fb_portal_paths PORTAL: every sd device (both LUNs) through PORTAL.
fb_portal_paths() { ini_paths | awk -v p="$1:3260" '$5 == p {print $1}'; }

fb_in_dm_is() {  # fb_in_dm_is STATE SD...: in whichever map holds each
    local want=$1 sd d; shift
    for sd; do
        d=$(pd_devt "$sd")
        pd_dm_is "$(fb_map_of "$d")" "$d" "$want" || return 1
    done
}

# fb_proactive PORTAL NIC ON: blackhole PORTAL with proactive_failover ON;
# checks whose word failed the paths, then restores the portal.
fb_proactive() {
    local portal=$1 nic=$2 on=$3 n sd line paths
    # Probes run every second (fb_config); the checker is kept slow (60 s)
    # so that it cannot be the first to notice.
    fb_reload '"immediate"' "proactive_failover = $on"
    lab_wait 30 "a probe of $portal from $nic passed" pd_log_has "SendTargets $portal:3260 from $nic: "
    mapfile -t paths < <(fb_portal_paths "$portal")
    lab_log "paths through $portal: ${paths[*]}"
    n=$(fb_log_lines)
    if [[ $on == true ]]; then
        # The outage begins with new connections: the portal stops answering
        # SYNs (a probe's login), while the sessions' established connections
        # still carry their NOP-outs. Only a probe can notice now, so whose
        # word fails the paths is not a race against iscsid's NOP timer (3 to
        # 5 s, against up to about 3 s for two probes: too close on a loaded
        # TCG host). Then the whole portal goes dark.
        fault_portal_refuse_new "$portal"
        lab_wait 60 "the daemon failed every path through $portal" fb_all_logged_fail "$n" "${paths[@]}"
        lab_check "the sessions through $portal were still logged in: the iSCSI layer had not noticed" \
            fb_portal_sessions_logged_in "$portal"
        fault_portal_blackhole "$portal"
    else
        fault_portal_blackhole "$portal"
        lab_wait 60 "the daemon failed every path through $portal" fb_all_logged_fail "$n" "${paths[@]}"
    fi
    lab_wait 60 "every path through $portal failed in dm" fb_in_dm_is F "${paths[@]}"
    for sd in "${paths[@]}"; do
        line=$(fb_first_fail "$n" "$sd")
        lab_log "daemon: $line"
        if [[ $on == true ]]; then
            lab_check "$sd was failed on the probe's word" \
                grep -q "probe of $portal:3260 via $nic failed" <<<"$line"
        else
            lab_check "$sd was failed without the probe (proactive_failover off)" \
                fb_not grep -q "probe of" <<<"$line"
        fi
    done
    lab_check "the daemon logged the probe failure" fb_logged_after "$n" "SendTargets $portal:3260 from $nic failed"
    if [[ $on == true ]]; then
        # One failed probe fails nothing: the daemon confirms it at once.
        lab_log "daemon: $(fb_log_after "$n" "failed probe(s) in a row")"
        lab_check "a first failed probe was confirmed by a second before any path failed" \
            fb_confirmed_before_fail "$n" "$portal" "$nic" "${paths[0]}"
    fi
    fault_portal_restore "$portal"
    [[ $on == true ]] && fault_portal_accept_new "$portal"
    lab_wait 120 "4 sessions LOGGED_IN" ini_sessions_are 4 LOGGED_IN
    lab_wait 60 "every path through $portal active in dm again" fb_in_dm_is A "${paths[@]}"
}

# fb_refused_probe PORTAL NIC: LIO enforces discovery CHAP, so the probes
# (which carry no credentials) are refused at login: the portal answers.
# With proactive_failover on, that must fail no path; three refusals of the
# pair (each would have failed its paths before) are waited for.
fb_refused_probe() {
    local portal=$1 nic=$2 n auth=/sys/kernel/config/target/iscsi/discovery_auth paths
    fb_reload '"immediate"' "proactive_failover = true"
    mapfile -t paths < <(fb_portal_paths "$portal")
    n=$(fb_log_lines)
    echo pk-probe-user >"$auth/userid"
    echo pk-probe-secret-1 >"$auth/password"
    echo 1 >"$auth/enforce_discovery_auth"
    lab_log "fault: LIO enforces discovery CHAP"
    lab_wait 60 "three probes of $portal from $nic refused" fb_refusals_after "$n" "$portal" "$nic" 3
    lab_log "daemon: $(fb_log_after "$n" "SendTargets $portal:3260 from $nic failed")"
    lab_check "the daemon said the portal answered" \
        fb_logged_after "$n" "the portal answered; no path is failed for this"
    lab_check "no path failed on a refused probe" fb_not fb_logged_after "$n" " fail: "
    lab_check "every path through $portal still active in dm" fb_in_dm_is A "${paths[@]}"
    echo 0 >"$auth/enforce_discovery_auth"
    lab_wait 60 "a probe of $portal from $nic passed again" \
        fb_logged_after "$n" "SendTargets $portal:3260 from $nic: [0-9]* target(s)"
}

# fb_transition: LIO puts A's target port group of LUN 0 into an ALUA
# transition (NOT READY, 04/0A), as an array does while it moves a LU
# between its controllers. The daemon keeps A's paths as they are: nothing
# fails in dm and no failure is counted (multipath-tools 0.9.4 fails them;
# 0.10 keeps them, as here). The check after the transition decides.
fb_transition() {
    local g=$TGT_CFS/core/fileio_0/alua_lun0/alua/ctrl_a n k failures
    k=$(grep -c "configuration reloaded" "$PD_LOG" || true)
    fb_config '"immediate"'
    sed -i -e 's/^checker_interval = "60s"$/checker_interval = "2s"/' "$PD_CONF"
    kill -HUP "$PD_PID"
    lab_wait 30 "the daemon reloaded its config (checks every 2 s)" fb_reloads_above "$k"
    failures=$(fb_failures "${FB_A[@]}")
    n=$(fb_log_lines)
    echo 1 >"$g/alua_support_transitioning"
    echo 15 >"$g/alua_access_state" # ALUA_ACCESS_STATE_TRANSITION
    lab_log "fault: LUN 0's group on A is transitioning (alua_access_state $(<"$g/alua_access_state"))"
    lab_wait 30 "the daemon's TUR of ${FB_A[0]} reports the transition" \
        fb_logged_after "$n" "TUR ${FB_A[0]}: transitioning"
    lab_log "daemon: $(fb_log_after "$n" "TUR ${FB_A[0]}: transitioning")"
    sleep 6 # rechecked every second meanwhile
    lab_check "no path failed during the transition" fb_not fb_logged_after "$n" " fail: "
    lab_check "A's paths are still active in dm" fb_all_are A "${FB_A[@]}"
    lab_check "the daemon still reports A's paths up" fb_all_daemon up "${FB_A[@]}"
    echo 0 >"$g/alua_access_state"
    lab_log "LUN 0's group on A is active/optimized again"
    lab_wait 30 "a TUR of ${FB_A[0]} passes again" fb_logged_after "$n" "TUR ${FB_A[0]}: up"
    lab_check "I/O through $FB_MAP after the transition" fb_io
    lab_check "no failure was counted for A's paths" test "$(fb_failures "${FB_A[@]}")" = "$failures"
}

# fb_failures SD...: the daemon's failure counts of SD..., "sda=0 sdb=1".
fb_failures() {
    local sd out=
    for sd; do out+="$sd=$(jq -r --arg d "$sd" '.paths[] | select(.device == $d) | .failures' "$PD_STATE") "; done
    echo "$out"
}

# fb_refusals_after N PORTAL NIC COUNT: COUNT refusals logged after line N.
fb_refusals_after() {
    local got
    got=$(tail -n +"$(($1 + 1))" "$PD_LOG" | grep -c -- "debug: SendTargets $2:3260 from $3: refused: " || true)
    ((got >= $4))
}

# fb_confirmed_before_fail N PORTAL NIC SD: after line N, the "probing again"
# line for PORTAL from NIC comes before SD's first failure, which names two
# failed probes in a row.
fb_confirmed_before_fail() {
    local again fail
    again=$(fb_lineno_after "$1" "SendTargets $2:3260 from $3: 1 of 2 failed probe(s) in a row")
    fail=$(fb_lineno_after "$1" "path $4 fail: ")
    [[ -n $again && -n $fail ]] && ((again < fail)) &&
        [[ $(fb_log_after "$1" "path $4 fail: ") == *"failed 2 times in a row"* ]]
}

# fb_portal_sessions_logged_in PORTAL: every path through PORTAL has its
# session LOGGED_IN.
fb_portal_sessions_logged_in() {
    ini_paths | awk -v p="$1:3260" '$5 == p && $3 != "LOGGED_IN" {bad = 1} END {exit bad}'
}

fb_all_logged_fail() {
    local n=$1 sd; shift
    for sd; do fb_failed_after "$n" "$sd" || return 1; done
}

# fb_run DAEMON CTL [PROACTIVE]: steps 1-4 always; 5-6 (proactive failover)
# unless PROACTIVE=0 (alua arg proactive=0). Proactive failover acts after
# two failed probes in a row (the second one at once): before that, one
# probe that timed out on a loaded TCG host failed every healthy path
# through its portal, and these steps were left out of ctest.
fb_run() {
    local daemon=$1 ctl=$2 proactive=${3:-1}
    lab_check "failback needs daemon= and ctl=" test -n "$daemon" -a -n "$ctl"
    fb_setup "$daemon"
    fb_immediate "$ctl"
    fb_manual "$ctl"
    fb_deferred
    fb_followover "$ctl"
    if [[ $proactive == 1 ]]; then
        lab_step "failback 5: proactive failover: a failing portal's paths fail on the probe's word, before the sessions notice"
        fb_proactive 10.10.1.20 eth1 true
        lab_step "failback 6: the same with proactive_failover = false: the paths fail on the session's word"
        fb_proactive 10.10.1.21 eth2 false
        lab_step "failback 7: proactive failover: a portal that refuses the probe (discovery CHAP) fails no path"
        fb_refused_probe 10.10.1.20 eth1
    fi
    lab_step "failback 8: an ALUA transition on A fails no path"
    fb_transition
    lab_check "pathkeeperd exits on SIGTERM" pd_stop
    lab_save pathkeeperd.log "$PD_LOG"
}
