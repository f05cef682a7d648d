#!/usr/bin/env bash
# Fault-injection soak (issue 16): a replay against real processes while a seeded fault
# injector breaks them, then the checks a cache must pass whatever happened:
#   0 wrong bytes served       the replay verifies every restored byte (verification_errors)
#   no hang                    the replay ends within twice its time plus 2 min, and every request
#                              completed (restored, or computed where the pool failed it)
#   capacity never exceeded    every sample of `kvpool stat`: each segment's used <= its size
#   memory bounded             every process's peak RSS (VmRSS) stays under its bound
#
# The pool: a real etcd and 2 `kvpool master --etcd` (HA) in network namespace kvsoak-c with the
# replay, and STORES `kvpool store --etcd` each in its own namespace (kvsoak-s1, ...), all on
# one bridge; every process has its own host id, so bytes move through the veths. By default
# every store has an SSD tier under its segment (SSD_MIB; a restarted store brings back what its
# file holds), the stores serve UCX over tcp besides kvpool's tcp and the replay moves its
# bytes over it (TRANSPORT=ucx; tcp for kvpool's own), and the replay's router sends retention
# hints (RETENTION=session; lru for none).
# Faults, one every FAULT_INTERVAL_S, chosen by a RANDOM seeded with SEED and logged:
#   store-kill     kill -9 a store, start it again (a new segment; its objects are gone)
#   store-stop     SIGSTOP a store for longer than the heartbeat TTL, then SIGCONT
#   master-kill    kill -9 the leading master, start it again as a standby
#   link-down      set a store's link down (its switch port) for LINK_DOWN_S, then up
#   throttle       cap a store's traffic at 8 Mbit/s each way for THROTTLE_S, then lift it: a tc
#                  tbf on both ends of its veth (the store's eth0 shapes what it sends, the
#                  bridge's end what it receives)
#   corrupt        SIGUSR2 a store: flips a bit in up to 16 randomly picked objects of its segment
#                  (none when the segment holds no complete object; a build with
#                  -DKVPOOL_FAULT_HOOKS=ON, made here in $BUILD; never a serving build). How many it
#                  flipped is read from the store's log; a signal that flipped none injected nothing.
# Raw results: docs/results/soak.json (rendered into docs/reliability.md). Exit 1 when a check
# fails.
#
# usage: sudo scripts/soak.sh [MINUTES]     (default 10; SEED=1 STORES=3 FAULT_INTERVAL_S=6)
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-10}
SEED=${SEED:-1}
STORES=${STORES:-3}
FAULT_INTERVAL_S=${FAULT_INTERVAL_S:-6}
STORE_MEMORY_MIB=${STORE_MEMORY_MIB:-64}
SSD_MIB=${SSD_MIB:-128}
# Below the master's default (0.9): the replay's working set fills about two thirds of the pool,
# so the stores demote to their SSD tiers (the soak fails when no SSD tier ever held an object).
HIGH_WATERMARK=${HIGH_WATERMARK:-0.5}
TRANSPORT=${TRANSPORT:-ucx}
RETENTION=${RETENTION:-session}
# UCX over tcp only, so its bytes cross the veths the faults break (its shared-memory transports
# would reach a store of this host around them).
TRANSPORT_FLAGS=(--transport "$TRANSPORT")
[ "$TRANSPORT" = ucx ] && TRANSPORT_FLAGS+=(--ucx-tls tcp)
HEARTBEAT_TTL_MS=2000
LINK_DOWN_S=4
THROTTLE_S=5
SPEEDUP=8
WARMUP_S=30   # the first fault comes after the pool has filled a little
BUILD=${BUILD:-build-soak}
[ "$(id -u)" -eq 0 ] || { echo "soak.sh: needs root (network namespaces)" >&2; exit 2; }

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVPOOL_FAULT_HOOKS=ON -DKVPOOL_TESTS=OFF \
  -DKVPOOL_BENCH=OFF -DPython_EXECUTABLE=/usr/bin/python3 >/dev/null
ninja -C "$BUILD" kvpool >/dev/null
KVPOOL=$PWD/$BUILD/src/cli/kvpool
source scripts/processes.sh

P=kvsoak
NET=10.79.0
C=$NET.1
ETCD=$C:2379
MASTER=($C:50051 $C:50052)
METRICS=($C:9464 $C:9465)
LOGS=${SOAK_LOGS:-/tmp/kvpool-soak-logs}  # every process's log and the raw samples, kept after the run
teardown() {
  rm -rf "$LOGS"; mkdir -p "$LOGS"
  cp "$WORK"/*.log "$WORK"/*.jsonl "$WORK"/*.json "$LOGS"/ 2>/dev/null || true
  cleanup
  for n in c $(seq -f 's%g' 1 "$STORES") fabric; do
    ip netns pids "$P-$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true  # anything a restart left behind
    ip netns del "$P-$n" 2>/dev/null || true
  done
}
if ip netns list | grep -q "^$P-"; then
  echo "soak.sh: namespaces $P-* exist: another soak.sh is running, or one was cut short (ip netns del them)" >&2
  exit 2
fi
trap teardown EXIT
trap "exit 130" INT TERM  # so that the EXIT trap runs

# The network: one bridge in $P-fabric, a veth from it to each namespace.
ip netns add "$P-fabric"
ip -n "$P-fabric" link add br0 type bridge
ip -n "$P-fabric" link set br0 up
host=1
for n in c $(seq -f 's%g' 1 "$STORES"); do
  ip netns add "$P-$n"
  ip -n "$P-$n" link set lo up
  ip link add "$P-$n" type veth peer name eth0 netns "$P-$n"
  ip link set "$P-$n" netns "$P-fabric"
  ip -n "$P-fabric" link set "$P-$n" master br0 up
  ip -n "$P-$n" addr add "$NET.$host/24" dev eth0
  ip -n "$P-$n" link set eth0 up
  host=$((host + 1))
done

T0=$(date +%s.%N)
elapsed() { /usr/bin/python3 -c "import time; print(round(time.time() - $T0, 2))"; }
# inns NS CMD...: runs CMD in namespace $P-NS as a host of its own.
inns() { local n=$1; shift; ip netns exec "$P-$n" env KVPOOL_HOST_ID="$P-$n" "$@"; }
# spawn NS LOG CMD...: the same in the background, appending to LOG. `ip netns exec` and `env`
# exec what they run, so $! is CMD's own PID: signals reach the process itself.
spawn() { local n=$1 log=$2; shift 2; ip netns exec "$P-$n" env KVPOOL_HOST_ID="$P-$n" "$@" >>"$log" 2>&1 & }
note_pid() { echo "$1 $2" >>"$WORK/pids"; }  # note_pid ROLE PID: the sampler follows it

start_etcd() {
  spawn c "$WORK/etcd.log" etcd --name soak --data-dir "$WORK/etcd" --listen-client-urls "http://$ETCD" \
    --advertise-client-urls "http://$ETCD" --listen-peer-urls "http://$C:2380" \
    --initial-advertise-peer-urls "http://$C:2380" --initial-cluster "soak=http://$C:2380"
  PIDS+=($!); note_pid etcd $!
}
start_master() {  # start_master I
  spawn c "$WORK/master$1.log" "$KVPOOL" master --listen "${MASTER[$1]}" --metrics-listen "${METRICS[$1]}" \
    --etcd "$ETCD" --heartbeat-ttl-ms "$HEARTBEAT_TTL_MS" --high-watermark "$HIGH_WATERMARK"
  MPID[$1]=$!; PIDS+=($!); note_pid "master$1" $!
}
start_store() {  # start_store I (1-based): its namespace, its address
  local ssd=()
  [ "$SSD_MIB" -gt 0 ] && ssd=(--ssd "$WORK/store$1.ssd" --ssd-size "${SSD_MIB}MiB")
  spawn "s$1" "$WORK/store$1.log" "$KVPOOL" store --etcd "$ETCD" --memory "${STORE_MEMORY_MIB}MiB" \
    --listen "$NET.$(($1 + 1)):0" --shm-dir "$WORK" --no-huge-pages --heartbeat-interval-ms 200 \
    "${ssd[@]}" "${TRANSPORT_FLAGS[@]}"
  SPID[$1]=$!; PIDS+=($!); note_pid "store$1" $!
}
leader() {  # the index of the master whose /metrics says it leads, or nothing
  for i in 0 1; do
    local text; text=$(inns c curl -s --max-time 0.5 "http://${METRICS[$i]}/metrics" 2>/dev/null || true)
    grep -qx 'kvpool_master_leader 1' <<<"$text" && { echo "$i"; return; }
  done
  true
}
log_fault() {  # log_fault FAULT TARGET HELD_S [MORE]: MORE is more JSON fields, e.g. '"flipped": 16'
  echo "{\"t\": $(elapsed), \"fault\": \"$1\", \"target\": \"$2\", \"held_s\": $3${4:+, $4}}" | tee -a "$WORK/faults.jsonl"
}
flips() {  # flips I: N of each "fault hook: flipped a bit in N random objects" line of store I's log, one a line
  awk '/fault hook: flipped a bit in [0-9]+ random objects/ { sub(/.*flipped a bit in /, ""); print $1 }' \
    "$WORK/store$1.log" 2>/dev/null || true
}

: >"$WORK/pids"; : >"$WORK/faults.jsonl"
MPID=() SPID=()
start_etcd
start_master 0; start_master 1
for _ in $(seq 100); do [ -n "$(leader)" ] && break; sleep 0.1; done
[ -n "$(leader)" ] || { echo "soak.sh: no master leads" >&2; tail "$WORK"/master*.log >&2; exit 1; }
for i in $(seq "$STORES"); do start_store "$i"; done
for _ in $(seq 150); do
  [ "$(inns c "$KVPOOL" stat --etcd "$ETCD" --timeout-ms 500 2>/dev/null | grep -c 'segment')" -ge "$STORES" ] && break
  sleep 0.2
done

# The sampler: every 2 s the pool's segments (used vs size) and every process's RSS.
/usr/bin/python3 - "$WORK" "$KVPOOL" "$P-c" "$ETCD" <<'PY' &
import json, os, subprocess, sys, time
work, kvpool, ns, etcd = sys.argv[1:5]
out = open(os.path.join(work, "samples.jsonl"), "a")
while not os.path.exists(os.path.join(work, "stop")):
    sample = {"t": time.time(), "rss_kib": {}, "segments": None}
    for line in open(os.path.join(work, "pids")):
        role, pid = line.split()
        try:
            for field in open(f"/proc/{pid}/status"):
                if field.startswith("VmRSS:"):
                    sample["rss_kib"][role] = max(sample["rss_kib"].get(role, 0), int(field.split()[1]))
        except OSError:
            pass  # that process is gone (killed, or replaced by a restart)
    stat = subprocess.run(["ip", "netns", "exec", ns, kvpool, "stat", "--etcd", etcd, "--json", "--timeout-ms", "1000"],
                          capture_output=True, text=True)
    if stat.returncode == 0:
        try:
            sample["segments"] = [{"store": s["store_id"], "size": s["size"], "used": s["used_bytes"],
                                   "ssd_objects": s.get("ssd_objects", 0)}
                                  for s in json.loads(stat.stdout)["segments"]]
        except (ValueError, KeyError):
            pass
    out.write(json.dumps(sample) + "\n"); out.flush()
    time.sleep(2)
PY
SAMPLER=$!; PIDS+=($SAMPLER)

DURATION_WALL_S=$((MINUTES * 60))
REPLAY=(--mode pool --synth 64 --sessions 16 --duration $((DURATION_WALL_S * SPEEDUP)) --speedup $SPEEDUP --seed "$SEED"
        --prefill-cache-tokens 200000 --retention "$RETENTION" "${TRANSPORT_FLAGS[@]}")
spawn c "$WORK/replay.log" "$KVPOOL" replay --etcd "$ETCD" "${REPLAY[@]}" --json "$WORK/replay.json"
RPID=$!; PIDS+=($RPID); note_pid replay $RPID
sleep "$WARMUP_S"

RANDOM=$SEED
FAULTS=(store-kill store-stop master-kill link-down throttle corrupt)
END=$(/usr/bin/python3 -c "print(int($T0 + $DURATION_WALL_S - 20))")
while [ "$(date +%s)" -lt "$END" ] && kill -0 "$RPID" 2>/dev/null; do
  fault=${FAULTS[$((RANDOM % ${#FAULTS[@]}))]}
  s=$((RANDOM % STORES + 1))
  case $fault in
    store-kill)
      kill -9 "${SPID[$s]}"; wait "${SPID[$s]}" 2>/dev/null || true
      log_fault "$fault" "store$s" 0; sleep 1; start_store "$s" ;;
    store-stop)
      held=$(( (HEARTBEAT_TTL_MS + 999) / 1000 + 1 ))
      kill -STOP "${SPID[$s]}"; log_fault "$fault" "store$s" "$held"; sleep "$held"; kill -CONT "${SPID[$s]}" ;;
    master-kill)
      m=$(leader)
      if [ -n "$m" ]; then
        kill -9 "${MPID[$m]}"; wait "${MPID[$m]}" 2>/dev/null || true
        log_fault "$fault" "master$m" 0; start_master "$m"
      fi ;;
    link-down)
      ip -n "$P-fabric" link set "$P-s$s" down; log_fault "$fault" "store$s" "$LINK_DOWN_S"
      sleep "$LINK_DOWN_S"; ip -n "$P-fabric" link set "$P-s$s" up ;;
    throttle)  # both ends of the store's veth: what the store sends, and what the bridge sends it
      tc -n "$P-s$s" qdisc replace dev eth0 root tbf rate 8mbit burst 32kbit latency 400ms
      tc -n "$P-fabric" qdisc replace dev "$P-s$s" root tbf rate 8mbit burst 32kbit latency 400ms
      log_fault "$fault" "store$s" "$THROTTLE_S"; sleep "$THROTTLE_S"
      tc -n "$P-s$s" qdisc del dev eth0 root; tc -n "$P-fabric" qdisc del dev "$P-s$s" root ;;
    corrupt)  # "flipped": the N of the store's next flip line (null: it did not answer within 5 s)
      answered=$(flips "$s" | wc -l)
      kill -USR2 "${SPID[$s]}"
      flipped=null
      for _ in $(seq 50); do
        [ "$(flips "$s" | wc -l)" -gt "$answered" ] && { flipped=$(flips "$s" | sed -n "$((answered + 1))p"); break; }
        sleep 0.1
      done
      log_fault "$fault" "store$s" 0 "\"flipped\": $flipped" ;;
  esac
  sleep "$FAULT_INTERVAL_S"
done

# No hang: the replay ends within twice its time plus two minutes (faults make it fall behind
# its pace: a store that stops answering holds a restore until its deadline).
HUNG=0
DEADLINE=$(/usr/bin/python3 -c "print(int($T0 + 2 * $DURATION_WALL_S + 120))")
while kill -0 "$RPID" 2>/dev/null; do
  [ "$(date +%s)" -lt "$DEADLINE" ] || { HUNG=1; kill -9 "$RPID"; break; }
  sleep 1
done
RC=0; wait "$RPID" || RC=$?
touch "$WORK/stop"; wait "$SAMPLER" 2>/dev/null || true
ANSWERED=$(for i in $(seq "$STORES"); do flips "$i"; done | wc -l)  # SIGUSR2s a store answered, 0 flips included

SSD_MIB=$SSD_MIB TRANSPORT=$TRANSPORT RETENTION=$RETENTION HIGH_WATERMARK=$HIGH_WATERMARK /usr/bin/python3 - "$WORK" "$HUNG" "$RC" "$MINUTES" "$SEED" "$STORES" "$STORE_MEMORY_MIB" "$FAULT_INTERVAL_S" \
  "${REPLAY[*]}" "$ANSWERED" <<'PY' > docs/results/soak.json
import datetime, json, os, subprocess, sys
sys.path.insert(0, "scripts")
from bench_machine import machine_timings  # noqa: E402
work, hung, rc, minutes, seed, stores, store_mib, interval, replay_args, answered = sys.argv[1:11]
faults = [json.loads(l) for l in open(os.path.join(work, "faults.jsonl"))]
corrupts = [f for f in faults if f["fault"] == "corrupt"]
samples = [json.loads(l) for l in open(os.path.join(work, "samples.jsonl"))]
run = {}
if os.path.exists(os.path.join(work, "replay.json")):
    run = json.load(open(os.path.join(work, "replay.json")))["runs"][0]
over = [(s["t"], seg) for s in samples for seg in (s["segments"] or []) if seg["used"] > seg["size"]]
fills = [seg["used"] / seg["size"] for s in samples for seg in (s["segments"] or []) if seg["size"]]
peak = {}
for s in samples:
    for role, kib in s["rss_kib"].items():
        peak[role.rstrip("0123456789")] = max(peak.get(role.rstrip("0123456789"), 0), kib)
# Bounds: a store holds its segment (shared memory, counted in its RSS once touched) and little
# more; a master and etcd hold metadata.
bounds_mib = {"store": int(store_mib) + 512, "master": 1024, "etcd": 1024}
connector = run.get("deployment", {}).get("connector", {})
# The most objects the stores' SSD tiers held together at one sample.
ssd_max = max((sum(seg.get("ssd_objects", 0) for seg in s["segments"]) for s in samples if s["segments"]), default=0)
checks = {
    "wrong_bytes_served": run.get("verification_errors", -1) == 0,
    "no_hang": hung == "0" and rc == "0",
    "every_request_completed": run.get("failed_requests", -1) == 0,
    "capacity_never_exceeded": not over and len(fills) > 0,
    # A soak with SSD tiers must have used them: a tier that never held an object tested nothing.
    "ssd_tier_used": int(os.environ["SSD_MIB"]) == 0 or ssd_max > 0,
    "memory_bounded": all(peak.get(role, 0) / 1024 <= bound for role, bound in bounds_mib.items()),
}
print(json.dumps({
    "command": f"scripts/soak.sh {minutes}", "date": datetime.date.today().isoformat(),
    "machine": subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
    + f", {os.cpu_count()} cores",
    "seed": int(seed), "stores": int(stores), "store_memory_mib": int(store_mib), "masters": 2,
    "store_ssd_mib": int(os.environ["SSD_MIB"]), "transport": os.environ["TRANSPORT"],
    "retention": os.environ["RETENTION"], "high_watermark": float(os.environ["HIGH_WATERMARK"]),
    "ssd_objects_max": ssd_max,
    "fault_interval_s": int(interval), "replay": "kvpool replay --etcd E " + replay_args,
    "faults": faults,
    "throttle": {"rate_mbit": 8, "shaped": "each direction of the store's traffic (a tc tbf on each end of its veth)"},
    # A corruption is injected only by a signal that flipped bits: one that found no complete
    # object in the segment flipped none. Each flip is one bit of a randomly picked object (an
    # object may be picked twice).
    "corrupt_signals_sent": len(corrupts), "corrupt_signals_answered": int(answered),
    "corruptions_injected": sum(1 for f in corrupts if (f.get("flipped") or 0) > 0),
    "bits_flipped": sum(f.get("flipped") or 0 for f in corrupts),
    "corrupt_signals_flipped_none": sum(1 for f in corrupts if f.get("flipped") == 0),
    "corrupt_signals_unanswered": sum(1 for f in corrupts if f.get("flipped") is None),
    "replay_result": {k: run.get(k) for k in ("requests", "failed_requests", "first_failure", "verification_errors")}
    | {k: machine_timings(run).get(k) for k in ("max_lag_s", "wall_s")}
    | {"token_sources": run.get("token_sources"),
       "restore_errors": run.get("deployment", {}).get("restore_errors"),
       "save_failures": run.get("deployment", {}).get("save_failures"),
       "restore_corrupt_objects": connector.get("kvpool_connector_restore_corrupt_objects"),
       "restore_timeouts": connector.get("kvpool_connector_restore_timeouts"),
       "restore_fallback_tokens": run.get("restore_fallback_tokens")},
    "samples": len(samples), "max_fill": max(fills, default=0), "capacity_violations": len(over),
    "peak_rss_mib": {k: round(v / 1024) for k, v in sorted(peak.items())}, "rss_bounds_mib": bounds_mib,
    "hung": hung == "1", "replay_exit_code": int(rc), "checks": checks}, indent=1))
PY
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/soak.json  # the commit measured
/usr/bin/python3 scripts/render_reliability.py
/usr/bin/python3 - <<'PY'
import json, sys
checks = json.load(open("docs/results/soak.json"))["checks"]
for name, ok in checks.items():
    print(f"{'ok  ' if ok else 'FAIL'} {name}")
sys.exit(0 if all(checks.values()) else 1)
PY
