#!/usr/bin/env bash
# The deployment files in deploy/ are what an operator installs, so they are checked as such:
# every example configuration is read by the role it is for (`kvpool config print ROLE
# --config FILE`: an unknown key or a bad value fails), and every systemd unit passes
# `systemd-analyze verify` with its ExecStart pointed at the built binary.
# usage: deploy_files_test.sh KVPOOL_BINARY SOURCE_DIR
set -euo pipefail
KVPOOL=$(realpath "$1") SRC=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
checked=0
for f in "$SRC"/deploy/*/*.toml; do
  role=$(basename "$f" .toml); role=${role%%-*}
  out=$("$KVPOOL" config print "$role" --config "$f" 2>&1) || fail "$f: kvpool config print $role: $out"
  # The effective configuration shows the file's values (the first key set in it, for one).
  key=$(grep -m1 -E '^[a-z-]+ *=' "$f" | cut -d= -f1 | tr -d ' ')
  grep -q "^$key = " <<<"$out" || fail "$f: $key is not in the effective configuration: $out"
  checked=$((checked + 1))
done
[ "$checked" -ge 4 ] || fail "only $checked configuration files under $SRC/deploy"

command -v systemd-analyze >/dev/null || fail "systemd-analyze not found (apt-get install systemd)"
units=$(mktemp -d)
trap 'rm -rf "$units"' EXIT
for u in "$SRC"/deploy/systemd/*.service; do
  sed "s#/usr/local/bin/kvpool#$KVPOOL#" "$u" >"$units/$(basename "$u")"
done
# verify's rc misses some mistakes (an unknown key is only a warning): any output is a failure.
out=$(cd "$units" && systemd-analyze verify ./*.service 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"
echo "deploy files: $checked configurations read, $(ls "$units" | wc -l) units verified"
