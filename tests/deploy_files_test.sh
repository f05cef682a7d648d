#!/usr/bin/env bash
# The deployment files in deploy/ are what an operator installs, so they are checked as such:
# every example configuration is read by the role it is for (`kvpool config print ROLE
# --config FILE`: an unknown key or a bad value fails), every systemd unit passes
# `systemd-analyze verify` with its ExecStart pointed at the built binary, and every metric the
# Grafana dashboard draws is one that a real master, a real store (with an SSD tier) or a replay
# against them (the connector's side) exports.
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

# The container's runtime stage installs the package of every shared library the real binary
# loads, but those debian:12-slim already has, CUDA's (the image is built without it) and the
# sanitizers' runtimes (a test build's).
containerfile="$SRC/deploy/container/Containerfile"
runtime=$(sed -n '/runtime-packages:begin/,/runtime-packages:end/p' "$containerfile")
[ -n "$runtime" ] || fail "$containerfile has no runtime-packages block"
libraries=0
for lib in $(ldd "$KVPOOL" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'); do
  case "$lib" in /usr/local/cuda*) continue ;; esac
  owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(realpath "$lib")" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null) ||
    fail "$lib (loaded by kvpool) belongs to no Debian package: the container could not install it"
  package=${owner%%:*}
  case "$package" in libc6 | libgcc-s1 | libstdc++6 | libasan* | libubsan* | libtsan* | liblsan*) continue ;; esac
  grep -qE "(^|[[:space:]])${package//+/\\+}([[:space:]]|$)" <<<"$runtime" ||
    fail "kvpool loads $lib from package $package, which $containerfile does not install"
  libraries=$((libraries + 1))
done

# The dashboard against what the processes export.
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$units" "$work"' EXIT
port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
grpc=$(port) master_http=$(port) store_http=$(port)
"$KVPOOL" master --listen "127.0.0.1:$grpc" --metrics-listen "127.0.0.1:$master_http" >"$work/master.log" 2>&1 &
pids+=($!)
"$KVPOOL" store --master "127.0.0.1:$grpc" --memory 32MiB --no-huge-pages --shm-dir "$work" --ssd "$work/tier" \
  --ssd-size 16MiB --ssd-max-object 1MiB --metrics-listen "127.0.0.1:$store_http" >"$work/store.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do  # until the store says it is mounted (or 20 s)
  curl -s "http://127.0.0.1:$store_http/metrics" 2>/dev/null | grep -q '^kvpool_store_mounted{.*} 1$' && break
  sleep 0.2
done
exported=$(curl -sf "http://127.0.0.1:$master_http/metrics"; curl -sf "http://127.0.0.1:$store_http/metrics") ||
  fail "cannot read /metrics: $(cat "$work/master.log" "$work/store.log")"
grep -q '^kvpool_store_mounted{.*} 1$' <<<"$exported" || fail "the store did not mount: $(cat "$work/store.log")"
# A process running the connector (a short replay against this pool) exports the rest: its
# lookups, restores per stage, handoffs and transfer sizes, written when it ends.
"$KVPOOL" --log-level warn replay --synth 4 --geometry tiny --sessions 3 --duration 0 --requests 20 --mode pool \
  --master "127.0.0.1:$grpc" --metrics-file "$work/replay.prom" >"$work/replay.log" 2>&1 ||
  fail "kvpool replay against the pool: $(cat "$work/replay.log")"
exported+=$'\n'$(cat "$work/replay.prom")
# After the replay, the master has counted its namespace's lookups.
exported+=$'\n'$(curl -sf "http://127.0.0.1:$master_http/metrics") || fail "cannot read the master's /metrics"
drawn=$(/usr/bin/python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1]))
print("\n".join(sorted({m for p in d["panels"] for t in p["targets"] for m in re.findall(r"kvpool_[a-z_]+", t["expr"])})))
' "$SRC/deploy/grafana/kvpool.json") || fail "deploy/grafana/kvpool.json is not a dashboard"
for m in $drawn; do
  grep -qE "^$m(\{| )" <<<"$exported" || fail "the dashboard draws $m, which no kvpool process exports"
done
echo "deploy files: $checked configurations read, $(ls "$units" | wc -l) units verified," \
  "$libraries libraries in the container's packages, $(wc -w <<<"$drawn") dashboard metrics exported"
