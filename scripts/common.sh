# Shared by scripts/test and scripts/demo. Sourced, not executed.

PATHKEEPER_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[%s] error: %s\n' "$(date +%H:%M:%S)" "$*" >&2; exit 1; }

# Installs whatever scripts/packages.txt lists and the machine lacks. Services
# that packages would start (iscsid, multipathd, tgtd) are kept from starting
# on the host: pathkeeper's tests start their own, in the lab or in
# namespaces.
install_packages() {
  local wanted missing=()
  mapfile -t wanted < <(grep -v '^\s*#' "$PATHKEEPER_ROOT/scripts/packages.txt" | grep -v '^\s*$')
  for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    log "all ${#wanted[@]} Debian packages present"
    return 0
  fi
  [[ $(id -u) -eq 0 ]] || die "missing packages (${missing[*]}); run as root so they can be installed"
  log "installing ${#missing[@]} Debian packages: ${missing[*]}"
  local policy=/usr/sbin/policy-rc.d created=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  local rc=0
  apt-get update -q || rc=$?
  if ((rc == 0)); then
    apt-get install -y -q --no-install-recommends "${missing[@]}" || rc=$?
  fi
  ((created)) && rm -f "$policy"
  ((rc == 0)) || die "apt-get failed (exit $rc) installing: ${missing[*]}"
}

# Configures and builds one tree. Extra args go to cmake; BUILD_TARGETS
# (space-separated) limits the build to those targets.
build_tree() {
  local dir=$1
  shift
  cmake -S "$PATHKEEPER_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; die "cmake configure of $dir failed"; }
  local targets=()
  for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build "$dir" -j"$(nproc)" "${targets[@]}" || die "build of $dir failed"
}
