#!/bin/bash
# Checks the man pages as man(1) renders them:
#   - each page renders with groff's warnings on and says nothing on stderr;
#   - every key of configSchema() (man_config_keys --list, straight from the
#     parser's list) appears in pathkeeper.conf(5) under its own table's
#     heading, so a key added to the parser without the page fails here;
#   - the Xserve RAID behind an MDS example is tests/data/config/xserve.conf,
#     line for line.
# Usage: man_test.sh SOURCE_DIR MAN_DIR MAN_CONFIG_KEYS   (exit 77: skipped)
set -euo pipefail
src=$(cd "$1" && pwd)
man_dir=$2
keys_tool=$3

command -v man >/dev/null || { echo "SKIPPED: man (man-db) is not installed"; exit 77; }
command -v groff >/dev/null || { echo "SKIPPED: groff (groff-base) is not installed"; exit 77; }
# shellcheck source=../common/check.sh
source "$src/tests/common/check.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

renders_quietly() {
  local page=$1 rc=0
  MANWIDTH=80 man -l --warnings=w "$page" >"$work/out" 2>"$work/err" || rc=$?
  [[ -s $work/err ]] && sed 's/^/    /' "$work/err"
  [[ $rc -eq 0 && ! -s $work/err && -s $work/out ]]
}
for page in pathkeeperd.8 pathkeeperctl.8 pathkeeper.conf.5; do
  check "$page renders without warnings" renders_quietly "$man_dir/$page"
done

# Rendered wide, so that no key or heading is wrapped: .SS headings are
# indented 3 columns, .TP tags 7.
MANWIDTH=200 man -l "$man_dir/pathkeeper.conf.5" 2>/dev/null | col -bx >"$work/conf.txt"
awk '/^   [^ ]/ { table = substr($0, 4) } /^       [a-z_]+$/ { print table "\t" substr($0, 8) }' \
  "$work/conf.txt" | sort -u >"$work/documented"
"$keys_tool" --list | sort -u >"$work/schema"
count=$(wc -l <"$work/schema")
check "the schema lists keys ($count)" test "$count" -gt 40
missing=$(comm -23 "$work/schema" "$work/documented")
if [[ -n $missing ]]; then
  echo "keys of configSchema() missing from pathkeeper.conf(5) under their table:"
  printf '    %s\n' "$missing"
fi
check "every schema key is documented under its table" test -z "$missing"
for table in '[defaults]' '[health]' '[discovery]' '[[controller]]' '[[device]]' '[[map]]'; do
  check "pathkeeper.conf(5) has the $table heading" grep -qxF "   $table" "$work/conf.txt"
done
defaults_shown() { grep -qF '(duration; default "5s")' "$work/conf.txt"; }
check "keys show their default (checker_interval's \"5s\")" defaults_shown

# The EXAMPLES section, without indentation.
sed -n '/^EXAMPLES$/,/^[A-Z]/p' "$work/conf.txt" | sed 's/^[[:space:]]*//' >"$work/examples"
example_matches() {
  local line ok=0
  while IFS= read -r line; do
    [[ -z $line || $line == \#* ]] && continue
    if ! grep -qxF -- "$line" "$work/examples"; then
      echo "    not in the example: $line"
      ok=1
    fi
  done <"$src/tests/data/config/xserve.conf"
  return $ok
}
check "the Xserve-behind-MDS example is tests/data/config/xserve.conf" example_matches
check_summary
