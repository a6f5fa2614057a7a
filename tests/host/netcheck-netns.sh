#!/usr/bin/env bash
# netcheck-netns.sh up TAG WORKDIR WATCH_PID | down TAG WORKDIR
#
# The network check's host fixture: the seed's mistake, rebuilt with real
# kernel routing in two network namespaces. The initiator has two NICs with
# addresses in one /24 and no policy routing, so traffic that is not bound to
# a device leaves by whichever NIC the main table lists first:
#
#   pkn-TAG (initiator)                      pknp-TAG (peers, no addresses)
#   pkna-TAG 10.201.1.10/24  <--veth-->  pknpa-TAG
#   pknb-TAG 10.201.1.11/24  <--veth-->  pknpb-TAG
#
# The portal 10.201.1.20 exists only as an address to route to: the check
# asks the kernel which way traffic would go and sends nothing. rp_filter,
# arp_ignore and arp_announce start at 0 everywhere in the initiator, so
# every test begins from the same state whatever the host's defaults are.
#
# "up" leaves a guardian that runs "down" once WATCH_PID is gone, so a
# crashed test still cleans up. Exits 77 with a reason when the machine
# cannot run the fixture.
set -euo pipefail

cmd=${1:?usage: $0 up|down TAG WORKDIR [WATCH_PID]}
tag=${2:?tag}
work=${3:?workdir}
ini=pkn-$tag peer=pknp-$tag

skip() {
  echo "SKIPPED: $*" >&2
  exit 77
}

down() {
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
  ip netns delete "$peer" 2>/dev/null || true
}

up() {
  local watch=${1:?watch pid}
  [[ $(id -u) == 0 ]] || skip "needs root to create network namespaces"
  command -v ip >/dev/null || skip "ip (iproute2) not installed"
  mkdir -p "$work"
  ip netns add "$ini" 2>/dev/null || skip "cannot create network namespaces here"
  trap 'down; exit 1' ERR
  ip netns add "$peer"
  ip link add "pkna-$tag" netns "$ini" type veth peer name "pknpa-$tag" netns "$peer" ||
    { down; skip "cannot create veth pairs here"; }
  ip link add "pknb-$tag" netns "$ini" type veth peer name "pknpb-$tag" netns "$peer"
  for key in rp_filter arp_ignore arp_announce; do
    ip netns exec "$ini" sysctl -qw "net.ipv4.conf.all.$key=0" "net.ipv4.conf.default.$key=0"
    for dev in "pkna-$tag" "pknb-$tag"; do
      ip netns exec "$ini" sysctl -qw "net.ipv4.conf.$dev.$key=0"
    done
  done
  ip -n "$ini" addr add 10.201.1.10/24 dev "pkna-$tag"
  ip -n "$ini" addr add 10.201.1.11/24 dev "pknb-$tag"
  for dev in lo "pkna-$tag" "pknb-$tag"; do ip -n "$ini" link set "$dev" up; done
  for dev in "pknpa-$tag" "pknpb-$tag"; do ip -n "$peer" link set "$dev" up; done
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
