#!/bin/bash
# Runs udev-rules/*.rules through systemd-udevd's own rule parser and
# evaluator (udevadm test) against the VM lab's captured sysfs tree
# (tests/data/sysfs/xserve), inside a private mount namespace: the capture is
# bind-mounted over /sys, and /dev, /run/udev, /etc/udev/rules.d,
# /lib/udev/rules.d and /var/lib are private tmpfs mounts, so nothing on the
# host changes. systemd 252 has no "udevadm verify"; this is stronger, since a
# rule that does not parse also does not set what the checks look for.
#
# What it cannot show: scsi_id, 60-persistent-storage and 60-multipath do not
# run here (no real disk). A stub rule stands in for scsi_id's ID_SERIAL; the
# real interplay is the VM test's.
#
# Usage: udev_rules_test.sh SOURCE_DIR   (exit 77: skipped, with the reason)
set -euo pipefail
src=$(cd "$1" && pwd)

if [[ ${PK_UDEV_TEST_INNER:-} != 1 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "SKIPPED: needs root (mount namespace with the capture over /sys)"
    exit 77
  fi
  command -v udevadm >/dev/null || { echo "SKIPPED: udevadm is not installed"; exit 77; }
  if ! unshare -m --propagation private true 2>/dev/null; then
    echo "SKIPPED: cannot create a mount namespace here"
    exit 77
  fi
  PK_UDEV_TEST_INNER=1 exec unshare -m --propagation private "$0" "$@"
fi

# shellcheck source=../common/check.sh
source "$src/tests/common/check.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -a "$src/tests/data/sysfs/xserve" "$work/sys"
sda=devices/platform/host0/session1/target0:0:0/0:0:0:0
wwid=3$(sed 's/^naa\.//' "$work/sys/$sda/wwid")

# A partition of sda, and an sd disk that is not behind an iSCSI session
# (a SAS/USB disk, say): neither is in the capture.
mkdir -p "$work/sys/$sda/block/sda/sda1"
printf 'MAJOR=8\nMINOR=1\nDEVNAME=sda1\nDEVTYPE=partition\nPARTN=1\n' >"$work/sys/$sda/block/sda/sda1/uevent"
ln -s ../../../../../../../../../class/block "$work/sys/$sda/block/sda/sda1/subsystem"
local_disk=devices/pci0000:00/0000:00:05.0/host9/target9:0:0/9:0:0:0
mkdir -p "$work/sys/$local_disk/block/sdz"
printf 'DEVTYPE=scsi_device\nDRIVER=sd\nMODALIAS=scsi:t-0x00\n' >"$work/sys/$local_disk/uevent"
echo 0 >"$work/sys/$local_disk/type"
ln -s ../../../../../../bus/scsi "$work/sys/$local_disk/subsystem"
printf 'MAJOR=8\nMINOR=400\nDEVNAME=sdz\nDEVTYPE=disk\n' >"$work/sys/$local_disk/block/sdz/uevent"
ln -s ../../../../../../../../class/block "$work/sys/$local_disk/block/sdz/subsystem"

mkdir -p "$work/rules"
cp "$src"/udev-rules/*.rules "$work/rules/"
# Stands in for 60-persistent-storage.rules' scsi_id: the WWID it would give.
printf 'SUBSYSTEM=="block", KERNEL=="sda|sdz", ENV{DEVTYPE}=="disk", ENV{ID_SERIAL}="%s"\n' \
  "$wwid" >"$work/rules/60-stub-scsi-id.rules"

mount --bind "$work/sys" /sys
mount --bind "$work/rules" /lib/udev/rules.d
# udev may be installed and never started (a container without systemd):
# then /run/udev does not exist. A private /run gives it a mount point
# without creating anything on the host.
if [[ ! -d /run/udev ]]; then
  mount -t tmpfs pathkeeper-test /run
  mkdir /run/udev
fi
for d in /etc/udev/rules.d /run/udev /dev /var/lib; do
  mount -t tmpfs pathkeeper-test "$d"
done
: >/dev/null
mkdir -p /var/lib/pathkeeper

# Prints the properties udevadm test computes for ACTION on DEVICE; the
# parser's complaints go to $work/log.
props() {
  SYSTEMD_DEVICE_VERIFY_SYSFS=0 udevadm test --action="$1" "/sys/$2" 2>"$work/log.$$" |
    sed -n '/^[A-Z_]*=/p'
  cat "$work/log.$$" >>"$work/log"
}
has() { grep -qx -- "$2" <<<"$1"; }
lacks() { ! grep -q -- "^$2=" <<<"$1"; }

: >"$work/log"
echo "rules: $(cd "$src/udev-rules" && echo *.rules); WWID of sda: $wwid"

p=$(props add "$sda")
check "the iSCSI SCSI disk is tagged for systemd" has "$p" "TAGS=:systemd:"
check "the iSCSI SCSI disk wants pathkeeperd.service" has "$p" "SYSTEMD_WANTS=pathkeeperd.service"

p=$(props add "$local_disk")
check "a SCSI disk outside an iSCSI session starts nothing" lacks "$p" SYSTEMD_WANTS
p=$(props add "$local_disk/block/sdz")
check "its block device is not an iSCSI path" lacks "$p" PATHKEEPER_ISCSI_PATH

p=$(props add "$sda/block/sda")
check "sda is recognised as an iSCSI path" has "$p" "PATHKEEPER_ISCSI_PATH=1"
check "no owned-wwids file (companion mode): DM_MULTIPATH_DEVICE_PATH left alone" lacks "$p" DM_MULTIPATH_DEVICE_PATH
check "no owned-wwids file: ID_FS_TYPE left alone" lacks "$p" ID_FS_TYPE
check "no owned-wwids file: SYSTEMD_READY left alone" lacks "$p" SYSTEMD_READY

printf '# owned by pathkeeperd\n3600140500000000000000000000000ff\n%s0\n' "$wwid" >/var/lib/pathkeeper/owned-wwids
p=$(props add "$sda/block/sda")
check "other WWIDs owned (and a longer one with sda's as prefix): sda not marked" lacks "$p" DM_MULTIPATH_DEVICE_PATH

printf '# owned by pathkeeperd\n%s\n' "$wwid" >>/var/lib/pathkeeper/owned-wwids
p=$(props add "$sda/block/sda")
check "owner mode: sda marked DM_MULTIPATH_DEVICE_PATH=1" has "$p" "DM_MULTIPATH_DEVICE_PATH=1"
check "owner mode: sda marked ID_FS_TYPE=mpath_member" has "$p" "ID_FS_TYPE=mpath_member"
check "owner mode: sda marked SYSTEMD_READY=0" has "$p" "SYSTEMD_READY=0"
check "owner mode: sda marked PATHKEEPER_OWNED=1" has "$p" "PATHKEEPER_OWNED=1"
p=$(props change "$sda/block/sda")
check "owner mode: the marks survive a change event" has "$p" "SYSTEMD_READY=0"
p=$(props add "$sda/block/sda/sda1")
check "owner mode: the owned path's partition is hidden (ID_FS_TYPE=none)" has "$p" "ID_FS_TYPE=none"
check "owner mode: the owned path's partition is not ready" has "$p" "SYSTEMD_READY=0"
p=$(props add "$local_disk/block/sdz")
check "owner mode: a non-iSCSI disk with the same WWID is never marked" lacks "$p" DM_MULTIPATH_DEVICE_PATH

# A remove event carries what the database held for the device; start from
# an empty database so that only the rules' own work shows.
rm -rf /run/udev/data
p=$(props remove "$sda/block/sda")
check "remove: nothing is set" lacks "$p" PATHKEEPER_ISCSI_PATH
p=$(props remove "$sda")
check "remove: the SCSI device wants nothing" lacks "$p" SYSTEMD_WANTS

# udevd's rule parser logs every line it rejects or doubts; any such line
# about our files is a failure.
# (The owned-wwids lookup returning 1 is a PROGRAM that did not match.)
if grep -E 'pathkeeper.*\.rules' "$work/log" | grep -v 'Command "/bin/grep .*" returned 1' |
  grep -iE 'invalid|error|fail|ignor|unknown|warn|deprecat' >"$work/complaints"; then
  check "udev's parser does not complain about the rules" false
  cat "$work/complaints"
else
  check "udev's parser does not complain about the rules" true
fi
check "udev read the rules file" grep -q "Reading rules file: .*62-pathkeeper.rules" "$work/log"
check_summary
