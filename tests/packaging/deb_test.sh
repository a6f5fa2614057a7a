#!/bin/bash
# Builds the Debian package the way a maintainer would, from a clean copy of
# the source tree, and checks what comes out:
#   - dpkg-buildpackage -us -uc -b succeeds (release build, -Werror);
#   - lintian reports no error, and no warning that packaging/debian does not
#     override with a reason;
#   - the package holds every file an installed pathkeeper needs, the config
#     is a conffile, and the maintainer scripts create the tmpfiles entry;
#   - the installed unit passes unit_test.sh (systemd-analyze verify with its
#     man pages, exposure score), and the installed man pages render.
# The .deb is copied to OUT_DIR/pathkeeper.deb (a stable path for the VM
# test). The copy holds the files git knows in the working tree (tracked and
# untracked, minus .gitignore'd ones such as build/), so uncommitted changes
# are tested too. This compiles the whole project again: it takes minutes.
#
# Usage: deb_test.sh SOURCE_DIR OUT_DIR   (exit 77: skipped, with the reason)
# PK_DEB_PARALLEL sets DEB_BUILD_OPTIONS=parallel=N (default 2).
set -euo pipefail
src=$(cd "$1" && pwd)
out_dir=$2

for tool in dpkg-buildpackage dh lintian dpkg-deb fakeroot git; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool is not installed (scripts/packages.txt)"; exit 77; }
done
# shellcheck source=../common/check.sh
source "$src/tests/common/check.sh"

work=$(mktemp -d /tmp/pathkeeper-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
tree=$work/pathkeeper-0.1.0
mkdir -p "$tree"
mapfile -d '' files < <(git -C "$src" ls-files -z --cached --others --exclude-standard)
present=()
for f in "${files[@]}"; do
  [[ -e $src/$f || -L $src/$f ]] && present+=("$f")
done
printf '%s\0' "${present[@]}" | tar -C "$src" --null -T - -cf - | tar -C "$tree" -xf -
echo "source copy: ${#present[@]} files in $tree"

if ! (cd "$tree" && dpkg-checkbuilddeps) 2>"$work/builddeps"; then
  echo "SKIPPED: $(cat "$work/builddeps") (scripts/packages.txt lists them)"
  exit 77
fi

start=$(date +%s)
rc=0
(cd "$tree" && DEB_BUILD_OPTIONS="parallel=${PK_DEB_PARALLEL:-2}" dpkg-buildpackage -us -uc -b) \
  >"$work/build.log" 2>&1 || rc=$?
elapsed=$(($(date +%s) - start))
echo "dpkg-buildpackage -us -uc -b: exit $rc after ${elapsed}s (parallel=${PK_DEB_PARALLEL:-2})"
mkdir -p "$out_dir"
cp "$work/build.log" "$out_dir/dpkg-buildpackage.log"
if [[ $rc -ne 0 ]]; then
  tail -40 "$work/build.log"
  check "dpkg-buildpackage builds the package (log: $out_dir/dpkg-buildpackage.log)" false
  check_summary
  exit 1
fi
mapfile -t debs < <(find "$work" -maxdepth 1 -name 'pathkeeper_*.deb')
check "dpkg-buildpackage made one pathkeeper_*.deb" test "${#debs[@]}" -eq 1
deb=${debs[0]}
cp "$deb" "$out_dir/pathkeeper.deb"
echo "package: $(basename "$deb") -> $out_dir/pathkeeper.deb"

# lintian: the .changes covers the .deb and the .buildinfo.
lintian --tag-display-limit 0 "$work"/pathkeeper_*.changes >"$work/lintian" 2>&1 || true
sed 's/^/    lintian: /' "$work/lintian"
check "lintian reports no errors" bash -c "! grep -q '^E: ' '$work/lintian'"
check "lintian reports no warning without an override" bash -c "! grep -q '^W: ' '$work/lintian'"

dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|; s|/$||' >"$work/contents"
for f in /usr/sbin/pathkeeperd /usr/sbin/pathkeeperctl \
  /lib/systemd/system/pathkeeperd.service /lib/udev/rules.d/62-pathkeeper.rules \
  /usr/lib/tmpfiles.d/pathkeeper.conf /etc/pathkeeper/pathkeeper.conf \
  /usr/share/dbus-1/system.d/org.pathkeeper.PathKeeper1.conf \
  /usr/share/polkit-1/actions/org.pathkeeper.PathKeeper1.policy \
  /usr/share/dbus-1/interfaces/org.pathkeeper.PathKeeper1.xml \
  /usr/share/man/man8/pathkeeperd.8.gz /usr/share/man/man8/pathkeeperctl.8.gz \
  /usr/share/man/man5/pathkeeper.conf.5.gz /usr/share/doc/pathkeeper/copyright; do
  check "the package has $f" grep -qxF "$f" "$work/contents"
done
check "the test tools are not packaged" bash -c "! grep -q man_config_keys '$work/contents'"

dpkg-deb -e "$deb" "$work/control"
check "pathkeeper.conf is a conffile" grep -qx /etc/pathkeeper/pathkeeper.conf "$work/control/conffiles"
check "postinst creates the tmpfiles entry" grep -q 'systemd-tmpfiles .*--create pathkeeper.conf' "$work/control/postinst"
check "Depends has libdevmapper (shlibs)" grep -q '^Depends:.*libdevmapper' "$work/control/control"
check "Recommends open-iscsi" grep -qx 'Recommends: open-iscsi' "$work/control/control"
check "Suggests multipath-tools" grep -qx 'Suggests: multipath-tools' "$work/control/control"

root=$work/root
dpkg-deb -x "$deb" "$root"
check "the packaged pathkeeperd runs (--version)" bash -c "'$root/usr/sbin/pathkeeperd' --version | grep -qx 'pathkeeperd 0.1.0'"
echo "--- the installed unit:"
check "the installed unit passes unit_test.sh" \
  env PK_UNIT_FILE="$root/lib/systemd/system/pathkeeperd.service" \
  "$src/tests/packaging/unit_test.sh" "$src" "$root/usr/sbin/pathkeeperd" "$root/usr/share/man"
for page in "$root"/usr/share/man/man*/*.gz; do
  check "$(basename "$page") renders quietly" bash -c \
    "MANWIDTH=80 man -l --warnings=w '$page' 2>&1 >/dev/null | (! grep -q .)"
done
check_summary
