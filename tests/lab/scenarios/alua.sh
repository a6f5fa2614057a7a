# alua: an ALUA array with two controllers, A and B. Both LUNs are exported
# by both controllers (target port groups 1 and 2) through both portals of
# the gateway. LUN 0 is active/optimized on A and active/non-optimized on B,
# LUN 1 the other way round, so each map has two priority groups.
# 4 sessions (2 controllers x 2 portals), 8 sd devices, 2 WWIDs.
#
# args: plan     pathkeeperctl plan --json vs multipath -v3 -d (needs ctl=)
#       failback pathkeeperd's failback policies (immediate, manual, deferred,
#                followover) on LUN 0's map (needs daemon= and ctl=), then
#                proactive failover on a blackholed portal (proactive=0
#                leaves it out)
#       ctl=PATH pathkeeperctl; daemon=PATH pathkeeperd

AL_SWITCH=mds-gw
declare -A AL_PWWN=([a]=500a098100c0de01 [b]=500a098100c0de02)
declare -A AL_TPG_ID=([a]=1 [b]=2)
declare -A AL_SLOTPORT=([10.10.1.20]=02-01 [10.10.1.21]=02-02)
declare -A AL_IFACE=([10.10.1.20]=iface0 [10.10.1.21]=iface1)
AL_LUNS=(lun0 lun1)
declare -A AL_SERIAL=([lun0]=a1a0c0de0000 [lun1]=a1a0c0de0001)
# ALUA state per LUN and controller: 0 active/optimized, 1 active/non-optimized.
declare -A AL_STATE=([lun0.a]=0 [lun0.b]=1 [lun1.a]=1 [lun1.b]=0)

al_iqn() { echo "iqn.1987-05.com.cisco:05.$AL_SWITCH.${AL_SLOTPORT[$2]}.${AL_PWWN[$1]}"; }

scenario_setup() {
    net_setup_two_nics policy
    lab_check "both portals answer ping" net_ping_portals
    tgt_init
    local l c p i
    for l in "${AL_LUNS[@]}"; do
        tgt_backstore "alua_$l" 64 "${AL_SERIAL[$l]}" PKLAB "ALUA ARRAY" 1.0
        for c in a b; do
            tgt_alua_group "alua_$l" "ctrl_$c" "${AL_TPG_ID[$c]}" "${AL_STATE[$l.$c]}"
        done
    done
    for c in a b; do
        for p in "${NET_PORTALS[@]}"; do
            tgt_target "$(al_iqn "$c" "$p")" "$p"
            i=0
            for l in "${AL_LUNS[@]}"; do
                tgt_lun "$(al_iqn "$c" "$p")" "$i" "alua_$l" "ctrl_$c"
                i=$((i + 1))
            done
            tgt_enable "$(al_iqn "$c" "$p")"
        done
    done
    tgt_show
    ini_setup
    ini_iface iface0 eth1
    ini_iface iface1 eth2
    for c in a b; do
        for p in "${NET_PORTALS[@]}"; do
            ini_login "$(al_iqn "$c" "$p")" "$p" "${AL_IFACE[$p]}"
        done
    done
    ini_wait_paths 4 8
}

# al_check_states: every sd device shows the access_state the target set.
al_check_states() {
    local sd target wwid c l want got bad=0
    while read -r sd _ _ target _ _ wwid; do
        c=a; [[ $target == *"${AL_PWWN[b]}" ]] && c=b
        # The LUN is the last field of the SCSI address (H:C:T:L).
        l=$(readlink -f "/sys/block/$sd/device")
        l=lun${l##*:}
        [[ ${AL_STATE[$l.$c]} == 0 ]] && want=active/optimized || want=active/non-optimized
        got=$(<"/sys/block/$sd/device/access_state")
        lab_log "$sd ctrl $c $l $wwid: access_state $got (want $want), dh_state $(<"/sys/block/$sd/device/dh_state")"
        [[ $got == "$want" ]] || bad=1
    done < <(ini_paths)
    return $bad
}

scenario_run() {
    local paths
    paths=$(ini_paths)
    printf '%s\n' "$paths" | lab_save alua-paths.txt
    lab_check "4 sessions LOGGED_IN" test "$(ini_sessions_in_state LOGGED_IN)" -eq 4
    lab_check "8 sd devices" test "$(printf '%s\n' "$paths" | grep -c '^sd')" -eq 8
    lab_check "2 distinct WWIDs" test "$(printf '%s\n' "$paths" | awk '{print $7}' | sort -u | wc -l)" -eq 2
    lab_check "every path has the alua device handler" \
        test "$(cat /sys/block/sd*/device/dh_state | sort -u | xargs)" = alua
    lab_check "access_state matches the target's ALUA groups" al_check_states
    lab_check "4 optimized and 4 non-optimized paths" \
        test "$(cat /sys/block/sd*/device/access_state | sort | uniq -c | awk '{print $1}' | xargs)" = "4 4"
    sg_rtpg -d "/dev/$(printf '%s\n' "$paths" | awk 'NR == 1 {print $1}')" 2>&1 | lab_save sg_rtpg.txt || true
    local a
    for a; do
        case $a in
        plan) pc_alua_plan "$(al_arg ctl "$@")" ;;
        failback) source "$LAB_DIR/guest/failback_checks.sh" && fb_run "$(al_arg daemon "$@")" "$(al_arg ctl "$@")" "$(al_arg proactive "$@")" ;;
        esac
    done
}

al_arg() {  # al_arg NAME ARGS...: value of NAME=... in the args
    local name=$1 a; shift
    for a; do [[ $a == "$name="* ]] && { echo "${a#*=}"; return; }; done
}
