#!/usr/bin/env bash
# Repeated leader failover under load (issue 15's acceptance shape): a real etcd, 3 `kvpool
# master --etcd` processes for one part, 2 `kvpool store --etcd` processes, and a 16-session
# `kvpool replay --etcd ... --speedup 8`. Every INTERVAL_S the leader is killed with kill -9
# and started again at once as a standby; for each kill: how long until another master leads,
# how long until both stores rejoined it, and the pool's objects just before and just after.
# Raw results: docs/results/master-failover.json; rendered into docs/reliability.md.
#
# usage: scripts/bench-master-failover.sh [KILLS] [INTERVAL_S]
set -euo pipefail
cd "$(dirname "$0")/.."
KILLS=${1:-20}
INTERVAL_S=${2:-6}
ninja -C build kvpool >/dev/null
KVPOOL=build/src/cli/kvpool
source scripts/processes.sh
REPLAY=(--synth 64 --sessions 16 --duration $(( (KILLS * INTERVAL_S + 20) * 8 )) --speedup 8 --seed 3)

ETCD=127.0.0.1:$(free_port)
PEER=127.0.0.1:$(free_port)
etcd --name bench --data-dir "$WORK/etcd" --listen-client-urls "http://$ETCD" --advertise-client-urls "http://$ETCD" \
  --listen-peer-urls "http://$PEER" --initial-advertise-peer-urls "http://$PEER" --initial-cluster "bench=http://$PEER" \
  >"$WORK/etcd.log" 2>&1 & PIDS+=($!)

ADDR=() METRICS=() MPID=()
start_master() {  # start_master I: (re)starts master I on its address, as a standby if another leads
  local i=$1
  $KVPOOL master --listen "${ADDR[$i]}" --metrics-listen "${METRICS[$i]}" --etcd "$ETCD" \
    >>"$WORK/master$i.log" 2>&1 & MPID[$i]=$!
  PIDS+=("${MPID[$i]}")
}
for i in 0 1 2; do ADDR[$i]=127.0.0.1:$(free_port); METRICS[$i]=127.0.0.1:$(free_port); start_master "$i"; done
leader() {  # prints the index of the master whose /metrics says it leads, or nothing
  for i in 0 1 2; do
    # (not piped into grep -q: with pipefail, curl cut short by grep would count as a miss)
    local text; text=$(curl -s --max-time 0.5 "http://${METRICS[$i]}/metrics" 2>/dev/null || true)
    grep -qx 'kvpool_master_leader 1' <<<"$text" && { echo "$i"; return; }
  done
  true
}
for _ in $(seq 100); do [ -n "$(leader)" ] && break; sleep 0.1; done
for s in 0 1; do
  $KVPOOL store --etcd "$ETCD" --memory 1GiB --listen 127.0.0.1:0 --shm-dir "$WORK" --heartbeat-interval-ms 200 \
    >"$WORK/store$s.log" 2>&1 & PIDS+=($!)
done
for _ in $(seq 150); do [ "$($KVPOOL stat --etcd "$ETCD" --timeout-ms 500 2>/dev/null | grep -c 'segment')" -ge 2 ] && break; sleep 0.2; done
objects() { $KVPOOL stat --etcd "$ETCD" --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["objects"])' 2>/dev/null || echo 0; }
now() { /usr/bin/python3 -c 'import time; print(time.time())'; }

$KVPOOL replay --etcd "$ETCD" "${REPLAY[@]}" --json "$WORK/replay.json" >"$WORK/replay.log" 2>&1 & RPID=$!
sleep 10
: >"$WORK/kills.jsonl"
for k in $(seq "$KILLS"); do
  old=$(leader)
  [ -n "$old" ] || { echo "no leader before kill $k" >&2; exit 1; }
  before=$(objects)
  rejoins_before=$(cat "$WORK"/master*.log | grep -c ' rejoined: ' || true)
  kill -9 "${MPID[$old]}"
  t0=$(now)
  start_master "$old"
  new=""
  for _ in $(seq 400); do new=$(leader); [ -n "$new" ] && [ "$new" != "$old" ] && break; new=""; sleep 0.02; done
  t_elected=$(now)
  for _ in $(seq 400); do
    [ "$(cat "$WORK"/master*.log | grep -c ' rejoined: ' || true)" -ge $((rejoins_before + 2)) ] && break
    sleep 0.02
  done
  t_rejoined=$(now)
  after=$(objects)
  /usr/bin/python3 -c "import json; print(json.dumps({'kill': $k, 'killed': $old, 'new_leader': '${new:-none}',
    'elected_after_s': round($t_elected - $t0, 3), 'rejoined_after_s': round($t_rejoined - $t0, 3),
    'objects_before': $before, 'objects_after': $after}))" >>"$WORK/kills.jsonl"
  tail -1 "$WORK/kills.jsonl"
  sleep "$INTERVAL_S"
done
wait "$RPID"
/usr/bin/python3 - "$WORK/kills.jsonl" "$WORK/replay.json" "${REPLAY[*]}" "$INTERVAL_S" <<'PY' > docs/results/master-failover.json
import datetime, json, subprocess, sys
kills = [json.loads(l) for l in open(sys.argv[1])]
run = json.load(open(sys.argv[2]))["runs"][0]
print(json.dumps({"command": "scripts/bench-master-failover.sh", "date": datetime.date.today().isoformat(),
                  "machine": subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
                  + f", {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores",
                  "replay": "kvpool replay --etcd E " + sys.argv[3], "interval_s": int(sys.argv[4]),
                  "masters": 3, "stores": 2, "leader_ttl_s": 2, "takeover_grace_ms": 1500, "kills": kills,
                  "replay_result": {"token_sources": run["token_sources"], "requests": run["requests"],
                                    "failed_requests": run["failed_requests"],
                                    "verification_errors": run["verification_errors"],
                                    "save_failures": run["deployment"]["save_failures"]}}, indent=1))
PY
/usr/bin/python3 scripts/render_reliability.py
cat docs/results/master-failover.json | head -30
