#!/usr/bin/env bash
# Repeated failover under load (issue 15's acceptance): a real etcd, 3 `kvpool master --etcd`
# processes for one part, 2 `kvpool store --etcd` processes, and a 16-session `kvpool replay
# --etcd ... --speedup 8` whose GPU prefix caches are small enough that the pool carries the
# reuse. Three arms, each on a fresh deployment, same replay and seed:
#   undisturbed   nothing is killed
#   leader-kills  every INTERVAL_S the leader is killed with kill -9 and started again at once
#                 as a standby; per kill: how long until another master leads, until both stores
#                 rejoined it, and the pool's objects just before and just after
#   etcd-kills    every INTERVAL_S etcd itself is killed with kill -9 for ETCD_DOWN_S (longer
#                 than the leader's lease) and started again on its data; per kill: how long
#                 until a master leads again after etcd is back
# Raw results: docs/results/master-failover.json; rendered into docs/reliability.md.
#
# usage: scripts/bench-master-failover.sh [KILLS] [INTERVAL_S] [ETCD_KILLS]
set -euo pipefail
cd "$(dirname "$0")/.."
KILLS=${1:-20}
INTERVAL_S=${2:-6}
ETCD_KILLS=${3:-5}
ETCD_DOWN_S=3
TAKEOVER_GRACE_MS=10000  # the masters' bound on waiting for registered stores (their default)
ninja -C build kvpool >/dev/null
KVPOOL=build/src/cli/kvpool
source scripts/processes.sh
# The faults start once the replay's warm-up (about 55 s of wall time at this pace) is over,
# and its window is long enough for every kill (one takes INTERVAL_S plus about 2 s).
WARMUP_S=60
REPLAY=(--synth 64 --sessions 16 --duration $(( (KILLS * (INTERVAL_S + 3) + 20) * 8 )) --speedup 8 --seed 3
        --prefill-cache-tokens 200000)

now() { /usr/bin/python3 -c 'import time; print(time.time())'; }
json_field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)[\"$1\"])" 2>/dev/null || echo 0; }

start_etcd() {  # (re)starts the arm's etcd on its ports and data folder
  etcd --name bench --data-dir "$ARM/etcd" --listen-client-urls "http://$ETCD" --advertise-client-urls "http://$ETCD" \
    --listen-peer-urls "http://$PEER" --initial-advertise-peer-urls "http://$PEER" \
    --initial-cluster "bench=http://$PEER" >>"$ARM/etcd.log" 2>&1 & ETCD_PID=$!
  PIDS+=("$ETCD_PID")
}
start_master() {  # start_master I: (re)starts master I on its address, as a standby if another leads
  local i=$1
  $KVPOOL master --listen "${ADDR[$i]}" --metrics-listen "${METRICS[$i]}" --etcd "$ETCD" \
    --takeover-grace-ms "$TAKEOVER_GRACE_MS" >>"$ARM/master$i.log" 2>&1 & MPID[$i]=$!
  PIDS+=("${MPID[$i]}")
}
leader() {  # prints the index of the master whose /metrics says it leads, or nothing
  for i in 0 1 2; do
    # (not piped into grep -q: with pipefail, curl cut short by grep would count as a miss)
    local text; text=$(curl -s --max-time 0.5 "http://${METRICS[$i]}/metrics" 2>/dev/null || true)
    grep -qx 'kvpool_master_leader 1' <<<"$text" && { echo "$i"; return; }
  done
  true
}
objects() { $KVPOOL stat --etcd "$ETCD" --json 2>/dev/null | json_field objects; }
rejoins() { cat "$ARM"/master*.log | grep -c ' rejoined: ' || true; }

kill_leader() {  # kill_leader K: one leader kill, appended to the arm's events
  local k=$1 old before rejoined_before t0 new="" t_elected t_rejoined after
  old=$(leader)
  [ -n "$old" ] || { echo "no leader before kill $k" >&2; exit 1; }
  before=$(objects)
  rejoined_before=$(rejoins)
  kill -9 "${MPID[$old]}"
  t0=$(now)
  start_master "$old"
  for _ in $(seq 400); do new=$(leader); [ -n "$new" ] && [ "$new" != "$old" ] && break; new=""; sleep 0.02; done
  t_elected=$(now)
  for _ in $(seq 400); do [ "$(rejoins)" -ge $((rejoined_before + 2)) ] && break; sleep 0.02; done
  t_rejoined=$(now)
  after=$(objects)
  echo "{\"kill\": $k, \"killed\": $old, \"new_leader\": \"${new:-none}\", \"elected_after_s\": $(/usr/bin/python3 -c "print(round($t_elected - $t0, 3))"), \"rejoined_after_s\": $(/usr/bin/python3 -c "print(round($t_rejoined - $t0, 3))"), \"objects_before\": $before, \"objects_after\": $after}" >>"$ARM/events.jsonl"
}

kill_etcd() {  # kill_etcd K: etcd down for ETCD_DOWN_S, then back; appended to the arm's events
  local k=$1 before t0 t_back lead="" led_before
  before=$(objects)
  led_before=$(leader)
  kill -9 "$ETCD_PID"; wait "$ETCD_PID" 2>/dev/null || true
  t0=$(now)
  sleep "$ETCD_DOWN_S"
  local during; during=$(leader)   # the lease has run out: nobody may lead now
  start_etcd
  t_back=$(now)
  for _ in $(seq 500); do lead=$(leader); [ -n "$lead" ] && break; sleep 0.02; done
  local t_lead; t_lead=$(now)
  for _ in $(seq 100); do [ "$(objects)" -gt 0 ] && break; sleep 0.05; done
  echo "{\"kill\": $k, \"down_s\": $(/usr/bin/python3 -c "print(round($t_back - $t0, 3))"), \"leader_while_down\": \"${during:-none}\", \"leader_before\": \"${led_before:-none}\", \"leader_after\": \"${lead:-none}\", \"leads_after_back_s\": $(/usr/bin/python3 -c "print(round($t_lead - $t_back, 3))"), \"objects_before\": $before, \"objects_after\": $(objects)}" >>"$ARM/events.jsonl"
}

run_arm() {  # run_arm NAME: a fresh etcd, masters and stores; the replay; the arm's faults
  local name=$1
  ARM=$WORK/$name; mkdir -p "$ARM"; : >"$ARM/events.jsonl"
  ETCD=127.0.0.1:$(free_port) PEER=127.0.0.1:$(free_port)
  start_etcd
  ADDR=() METRICS=() MPID=()
  for i in 0 1 2; do ADDR[$i]=127.0.0.1:$(free_port); METRICS[$i]=127.0.0.1:$(free_port); start_master "$i"; done
  for _ in $(seq 100); do [ -n "$(leader)" ] && break; sleep 0.1; done
  local spids=()
  for s in 0 1; do
    $KVPOOL store --etcd "$ETCD" --memory 1GiB --listen 127.0.0.1:0 --shm-dir "$ARM" --heartbeat-interval-ms 200 \
      >"$ARM/store$s.log" 2>&1 & spids+=($!)
  done
  PIDS+=("${spids[@]}")
  for _ in $(seq 150); do [ "$($KVPOOL stat --etcd "$ETCD" --timeout-ms 500 2>/dev/null | grep -c 'segment')" -ge 2 ] && break; sleep 0.2; done
  $KVPOOL replay --etcd "$ETCD" "${REPLAY[@]}" --json "$ARM/replay.json" >"$ARM/replay.log" 2>&1 & local rpid=$!
  sleep "$WARMUP_S"
  case $name in
    leader-kills) for k in $(seq "$KILLS"); do kill_leader "$k"; tail -1 "$ARM/events.jsonl"; sleep "$INTERVAL_S"; done ;;
    etcd-kills) for k in $(seq "$ETCD_KILLS"); do kill_etcd "$k"; tail -1 "$ARM/events.jsonl"; sleep "$INTERVAL_S"; done ;;
  esac
  wait "$rpid" || { echo "replay failed in arm $name:" >&2; tail -20 "$ARM/replay.log" >&2; exit 1; }
  /usr/bin/python3 - "$ARM/replay.json" "$name" "$ARM/events.jsonl" <<'PY' >>"$WORK/arms.jsonl"
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
print(json.dumps({"arm": sys.argv[2], "events": [json.loads(l) for l in open(sys.argv[3])],
                  "token_sources": run["token_sources"], "requests": run["requests"],
                  "failed_requests": run["failed_requests"], "verification_errors": run["verification_errors"],
                  "save_failures": run["deployment"]["save_failures"], "max_lag_s": run["max_lag_s"]}))
PY
  kill "${spids[@]}" "${MPID[@]}" "$ETCD_PID" 2>/dev/null || true
  wait "${spids[@]}" "${MPID[@]}" "$ETCD_PID" 2>/dev/null || true
}

: >"$WORK/arms.jsonl"
for arm in undisturbed leader-kills etcd-kills; do run_arm "$arm"; done
/usr/bin/python3 - "$WORK/arms.jsonl" "${REPLAY[*]}" "$INTERVAL_S" "$ETCD_DOWN_S" "$TAKEOVER_GRACE_MS" <<'PY' > docs/results/master-failover.json
import datetime, json, subprocess, sys
arms = [json.loads(l) for l in open(sys.argv[1])]
print(json.dumps({"command": "scripts/bench-master-failover.sh", "date": datetime.date.today().isoformat(),
                  "machine": subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
                  + f", {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores",
                  "replay": "kvpool replay --etcd E " + sys.argv[2], "interval_s": int(sys.argv[3]),
                  "etcd_down_s": int(sys.argv[4]), "masters": 3, "stores": 2, "leader_ttl_s": 2,
                  "takeover_grace_ms": int(sys.argv[5]), "arms": arms}, indent=1))
PY
/usr/bin/python3 scripts/render_reliability.py
