#!/usr/bin/env bash
# tgt-netns.sh up TAG WORKDIR WATCH_PID | down TAG WORKDIR
#
# The host tests' fixture: a real tgtd in a target network namespace with two
# portals on two subnets, and an initiator namespace with one veth per
# subnet, so that per-NIC binding has something to prove:
#
#   pki-TAG (initiator)                    pkt-TAG (target, tgtd)
#   pkia-TAG 10.200.1.10/24  <--veth-->  pkta-TAG 10.200.1.20/24  portal
#                                                 10.200.1.22/24  blackholed (DROP)
#                                                 10.200.1.23/24  nobody listens
#   pkib-TAG 10.200.2.10/24  <--veth-->  pktb-TAG 10.200.2.21/24  portal
#
# The target namespace has arp_ignore=1, so pkib cannot reach 10.200.1.20.
#
# Targets: iqn.2024-01.org.pathkeeper.test:upper and :lower, one 8 MiB file
# LUN each, open to every initiator address. tgtd's IPC socket lives in
# WORKDIR, so it never meets another tgtd on the machine.
#
# "up" also leaves a guardian behind that runs "down" once WATCH_PID (the
# test process) is gone, so a crashed test still cleans up. Only addresses
# inside the namespaces created here are used. Exits 77 with a reason when
# the machine cannot run the fixture.
set -euo pipefail

cmd=${1:?usage: $0 up|down TAG WORKDIR [WATCH_PID]}
tag=${2:?tag}
work=${3:?workdir}
tns=pkt-$tag ini=pki-$tag
export TGT_IPC_SOCKET=$work/tgtd.socket
targets=(iqn.2024-01.org.pathkeeper.test:upper iqn.2024-01.org.pathkeeper.test:lower)

skip() {
  echo "SKIPPED: $*" >&2
  exit 77
}

# Orphans may linger as zombies nobody reaps, which kill -0 still finds.
alive() {
  grep -q "^State:[[:space:]]*[^Z]" "/proc/$1/status" 2>/dev/null
}

tgtadm_() {
  ip netns exec "$tns" tgtadm --lld iscsi "$@"
}

down() {
  if [[ -f $work/tgtd.pid ]]; then
    local pid
    pid=$(<"$work/tgtd.pid")
    # tgtd refuses to stop while targets have sessions; delete them first.
    for tid in 1 2; do
      tgtadm_ --op delete --force --mode target --tid "$tid" 2>/dev/null || true
    done
    # tgtd ignores SIGTERM; asking it to shut down is the orderly way out.
    tgtadm_ --op delete --mode system 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 30); do
      alive "$pid" || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$work/tgtd.pid"
  fi
  if [[ -f $work/guardian.pid ]]; then
    local guardian
    guardian=$(<"$work/guardian.pid")
    rm -f "$work/guardian.pid"
    if [[ -z ${PK_GUARDIAN:-} ]]; then
      kill "$guardian" 2>/dev/null || true
    fi
  fi
  # Deleting a namespace deletes the veths in it, and with them their peers.
  ip netns delete "$ini" 2>/dev/null || true
  ip netns delete "$tns" 2>/dev/null || true
  rm -f "$work"/*.img "$work/tgtd.socket"*
}

up() {
  local watch=${1:?watch pid}
  [[ $(id -u) == 0 ]] || skip "needs root to create network namespaces"
  command -v tgtd >/dev/null && command -v tgtadm >/dev/null ||
    skip "tgtd/tgtadm not installed (Debian package tgt)"
  command -v ip >/dev/null || skip "ip (iproute2) not installed"
  mkdir -p "$work"
  ip netns add "$tns" 2>/dev/null || skip "cannot create network namespaces here"
  trap 'down; exit 1' ERR
  ip netns add "$ini"
  ip link add "pkia-$tag" netns "$ini" type veth peer name "pkta-$tag" netns "$tns"
  ip link add "pkib-$tag" netns "$ini" type veth peer name "pktb-$tag" netns "$tns"
  # A NIC that stays down (both ends in the initiator): connect(2) bound to
  # it fails at once, as it does on a NIC whose link an admin took down.
  ip link add "pkic-$tag" netns "$ini" type veth peer name "pkid-$tag" netns "$ini"
  ip -n "$ini" addr add 10.200.1.10/24 dev "pkia-$tag"
  ip -n "$ini" addr add 10.200.2.10/24 dev "pkib-$tag"
  ip -n "$tns" addr add 10.200.1.20/24 dev "pkta-$tag"
  ip -n "$tns" addr add 10.200.1.22/24 dev "pkta-$tag"
  ip -n "$tns" addr add 10.200.1.23/24 dev "pkta-$tag"
  ip -n "$tns" addr add 10.200.2.21/24 dev "pktb-$tag"
  for dev in lo "pkia-$tag" "pkib-$tag"; do ip -n "$ini" link set "$dev" up; done
  for dev in lo "pkta-$tag" "pktb-$tag"; do ip -n "$tns" link set "$dev" up; done
  # Linux answers ARP for any of its addresses on any interface (arp_ignore=0),
  # and a socket bound to a NIC with no route to the destination ARPs for it
  # on that NIC anyway. Together they would let a probe bound to pkib reach
  # 10.200.1.20 through the wrong veth, which is the story's weak-host
  # problem. The target here is configured properly, so a NIC that cannot
  # reach a portal really cannot.
  ip netns exec "$tns" sysctl -qw net.ipv4.conf.all.arp_ignore=1
  # A portal that is down: its address is up but everything sent to it is
  # dropped, so the initiator hears nothing at all (no RST, no ICMP).
  if ! ip netns exec "$tns" iptables -A INPUT -d 10.200.1.22 -j DROP 2>/dev/null; then
    # Without netfilter, a neighbour entry pointing at a MAC nobody owns
    # drops the initiator's packets on the wire just as silently.
    ip -n "$ini" neigh replace 10.200.1.22 lladdr 02:00:5e:00:53:22 dev "pkia-$tag" nud permanent
  fi

  truncate -s 8M "$work/upper.img" "$work/lower.img"
  ip netns exec "$tns" tgtd -f --iscsi portal=10.200.1.20:3260 >"$work/tgtd.log" 2>&1 &
  echo $! >"$work/tgtd.pid"
  for _ in $(seq 50); do
    tgtadm_ --op show --mode target >/dev/null 2>&1 && break
    sleep 0.1
  done
  tgtadm_ --op new --mode portal --param portal=10.200.2.21:3260
  local tid=1
  for name in "${targets[@]}"; do
    tgtadm_ --op new --mode target --tid "$tid" --targetname "$name"
    tgtadm_ --op new --mode logicalunit --tid "$tid" --lun 1 --backing-store "$work/${name##*:}.img"
    tgtadm_ --op bind --mode target --tid "$tid" --initiator-address ALL
    tid=$((tid + 1))
  done
  trap - ERR

  PK_GUARDIAN=1 setsid bash -c '
    while grep -q "^State:[[:space:]]*[^Z]" "/proc/$1/status" 2>/dev/null; do sleep 0.5; done
    exec "$2" down "$3" "$4"' guardian "$watch" "$0" "$tag" "$work" \
    </dev/null >/dev/null 2>&1 &
  echo $! >"$work/guardian.pid"
}

case $cmd in
up) up "${4:-}" ;;
down) down ;;
*)
  echo "usage: $0 up|down TAG WORKDIR [WATCH_PID]" >&2
  exit 2
  ;;
esac
