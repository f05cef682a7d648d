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
# Who leads is read from each master's /metrics (kvpool_master_leader 1 or 0). A master whose
# /metrics does not answer is neither: it is asked again until the wait's deadline, and a
# verdict that rests on it is "unknown", never "none". A kill after which no master leads
# within ELECT_DEADLINE_S (or that cannot be told) is a failed failover: it is recorded
# ("elected": false, with what each master said last), the arm's faults stop there, the
# results are still written and rendered (the page flags it), and the run exits 1 naming
# every failed kill.
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
ELECT_DEADLINE_S=10      # a failover (lease 2 s, then a campaign) that takes longer has failed
ARM_FAILED=              # set by failure(): this arm had a failed failover
ninja -C build kvpool >/dev/null
KVPOOL=build/src/cli/kvpool
source scripts/processes.sh
# The faults start once the replay's warm-up (about 55 s of wall time at this pace) is over,
# and its window is long enough for every kill (one takes INTERVAL_S plus about 2 s).
WARMUP_S=60
REPLAY=(--synth 64 --sessions 16 --duration $(( (KILLS * (INTERVAL_S + 3) + 20) * 8 )) --speedup 8 --seed 3
        --prefill-cache-tokens 200000)

ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }  # wall clock, milliseconds
secs() { local d=$(($2 - $1)); printf '%d.%03d' $((d / 1000)) $((d % 1000)); }  # secs FROM_MS TO_MS
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
probe() {  # asks every master's /metrics once: STATE[I] = lead, standby, or silent (no answer, or
           # no kvpool_master_leader line: such a master cannot be told from a leader)
  local i text
  for i in 0 1 2; do
    # (not piped into grep -q: with pipefail, curl cut short by grep would count as a miss)
    text=$(curl -s --max-time 0.5 "http://${METRICS[$i]}/metrics" 2>/dev/null || true)
    if grep -qx 'kvpool_master_leader 1' <<<"$text"; then STATE[$i]=lead
    elif grep -qx 'kvpool_master_leader 0' <<<"$text"; then STATE[$i]=standby
    else STATE[$i]=silent; fi
  done
  PROBED="master0 ${STATE[0]}, master1 ${STATE[1]}, master2 ${STATE[2]}"
}
verdict() {  # verdict [EXCLUDE]: from the last probe, a leading master other than EXCLUDE; else
             # "none" when every master answered and none leads, "unknown" when one did not answer
  local i silent=0
  for i in 0 1 2; do
    [ "${STATE[$i]}" = lead ] && [ "$i" != "${1:-}" ] && { echo "$i"; return; }
    [ "${STATE[$i]}" = silent ] && silent=1
  done
  if [ "$silent" = 1 ]; then echo unknown; else echo none; fi
}
await_leader() {  # await_leader EXCLUDE SECONDS: probes until a master other than EXCLUDE leads, or
                  # SECONDS have passed (then returns 1); LEADER = the last verdict, PROBED = its probe
  local until=$(($(ms) + $2 * 1000))
  while :; do
    probe; LEADER=$(verdict "$1")
    case $LEADER in none|unknown) ;; *) return 0 ;; esac
    [ "$(ms)" -lt "$until" ] || return 1
    sleep 0.02
  done
}
failure() {  # failure MESSAGE: a failed failover; the arm's faults stop, the run exits 1 at the end
  echo "bench-master-failover: $*" | tee -a "$WORK/failures" >&2
  ARM_FAILED=1
}
objects() { $KVPOOL stat --etcd "$ETCD" --json 2>/dev/null | json_field objects; }
rejoins() { cat "$ARM"/master*.log | grep -c ' rejoined: ' || true; }

kill_leader() {  # kill_leader K: one leader kill, appended to the arm's events
  local k=$1 old before rejoined_before t0 t_elected elected=true rejoined_after=null after
  if ! await_leader "" "$ELECT_DEADLINE_S"; then
    failure "leader kill $k: no master led before the kill ($LEADER after ${ELECT_DEADLINE_S} s: $PROBED)"
    echo "{\"kill\": $k, \"killed\": \"none\", \"new_leader\": \"$LEADER\", \"elected\": false, \"probed\": \"$PROBED\", \"failure\": \"no master led before the kill\"}" >>"$ARM/events.jsonl"
    return
  fi
  old=$LEADER
  before=$(objects)
  rejoined_before=$(rejoins)
  kill -9 "${MPID[$old]}"
  t0=$(ms)
  start_master "$old"
  if await_leader "$old" "$ELECT_DEADLINE_S"; then
    t_elected=$(ms)
    for _ in $(seq 400); do [ "$(rejoins)" -ge $((rejoined_before + 2)) ] && break; sleep 0.02; done
    rejoined_after=$(secs "$t0" "$(ms)")
  else
    t_elected=$(ms); elected=false
    failure "leader kill $k (master $old killed): no other master led within ${ELECT_DEADLINE_S} s ($LEADER: $PROBED)"
  fi
  after=$(objects)
  echo "{\"kill\": $k, \"killed\": $old, \"new_leader\": \"$LEADER\", \"elected\": $elected, \"probed\": \"$PROBED\", \"elected_after_s\": $(secs "$t0" "$t_elected"), \"rejoined_after_s\": $rejoined_after, \"objects_before\": $before, \"objects_after\": $after}" >>"$ARM/events.jsonl"
}

kill_etcd() {  # kill_etcd K: etcd down for ETCD_DOWN_S, then back; appended to the arm's events
  local k=$1 before t0 t_back t_lead led_before during elected=true
  if ! await_leader "" "$ELECT_DEADLINE_S"; then
    failure "etcd kill $k: no master led before the kill ($LEADER after ${ELECT_DEADLINE_S} s: $PROBED)"
    echo "{\"kill\": $k, \"leader_before\": \"$LEADER\", \"leader_after\": \"$LEADER\", \"elected\": false, \"probed\": \"$PROBED\", \"failure\": \"no master led before the kill\"}" >>"$ARM/events.jsonl"
    return
  fi
  led_before=$LEADER
  before=$(objects)
  kill -9 "$ETCD_PID"; wait "$ETCD_PID" 2>/dev/null || true
  t0=$(ms)
  sleep "$ETCD_DOWN_S"
  # The lease has run out: nobody may lead now. A master that does not answer cannot be told
  # from one that leads: it is asked again for up to a second, else the probe is "unknown".
  probe; during=$(verdict)
  for _ in $(seq 10); do [ "$during" = unknown ] || break; sleep 0.1; probe; during=$(verdict); done
  local probed_down=$PROBED
  [ "$during" != unknown ] || failure "etcd kill $k: a master's /metrics did not answer while etcd was down ($probed_down)"
  start_etcd
  t_back=$(ms)
  if ! await_leader "" "$ELECT_DEADLINE_S"; then
    elected=false
    failure "etcd kill $k: no master led within ${ELECT_DEADLINE_S} s of etcd's return ($LEADER: $PROBED)"
  fi
  t_lead=$(ms)
  for _ in $(seq 100); do [ "$(objects)" -gt 0 ] && break; sleep 0.05; done
  echo "{\"kill\": $k, \"down_s\": $(secs "$t0" "$t_back"), \"leader_while_down\": \"$during\", \"probed_while_down\": \"$probed_down\", \"leader_before\": \"$led_before\", \"leader_after\": \"$LEADER\", \"elected\": $elected, \"probed\": \"$PROBED\", \"leads_after_back_s\": $(secs "$t_back" "$t_lead"), \"objects_before\": $before, \"objects_after\": $(objects)}" >>"$ARM/events.jsonl"
}

run_arm() {  # run_arm NAME: a fresh etcd, masters and stores; the replay; the arm's faults
  local name=$1
  ARM=$WORK/$name; mkdir -p "$ARM"; : >"$ARM/events.jsonl"
  ETCD=127.0.0.1:$(free_port) PEER=127.0.0.1:$(free_port)
  start_etcd
  ADDR=() METRICS=() MPID=()
  for i in 0 1 2; do ADDR[$i]=127.0.0.1:$(free_port); METRICS[$i]=127.0.0.1:$(free_port); start_master "$i"; done
  await_leader "" 20 || { echo "bench-master-failover: arm $name: no master led 20 s after the start ($PROBED)" >&2; exit 1; }
  ARM_FAILED=
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
    leader-kills) for k in $(seq "$KILLS"); do
                    kill_leader "$k"; tail -1 "$ARM/events.jsonl"; [ -z "$ARM_FAILED" ] || break; sleep "$INTERVAL_S"
                  done ;;
    etcd-kills) for k in $(seq "$ETCD_KILLS"); do
                  kill_etcd "$k"; tail -1 "$ARM/events.jsonl"; [ -z "$ARM_FAILED" ] || break; sleep "$INTERVAL_S"
                done ;;
  esac
  wait "$rpid" || { echo "replay failed in arm $name:" >&2; tail -20 "$ARM/replay.log" >&2
                    cat "$WORK/failures" >&2 2>/dev/null || true; exit 1; }
  /usr/bin/python3 - "$ARM/replay.json" "$name" "$ARM/events.jsonl" <<'PY' >>"$WORK/arms.jsonl"
import json, sys
sys.path.insert(0, "scripts")
from bench_machine import machine_timings  # noqa: E402
run = json.load(open(sys.argv[1]))["runs"][0]
print(json.dumps({"arm": sys.argv[2], "events": [json.loads(l) for l in open(sys.argv[3])],
                  "token_sources": run["token_sources"], "requests": run["requests"],
                  "failed_requests": run["failed_requests"], "verification_errors": run["verification_errors"],
                  "save_failures": run["deployment"]["save_failures"], "max_lag_s": machine_timings(run)["max_lag_s"]}))
PY
  kill "${spids[@]}" "${MPID[@]}" "$ETCD_PID" 2>/dev/null || true
  wait "${spids[@]}" "${MPID[@]}" "$ETCD_PID" 2>/dev/null || true
}

: >"$WORK/arms.jsonl"; : >"$WORK/failures"
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
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/master-failover.json  # the commit measured
/usr/bin/python3 scripts/render_reliability.py
if [ -s "$WORK/failures" ]; then
  echo "bench-master-failover: FAILED: failovers that did not complete (recorded in docs/results/master-failover.json):" >&2
  cat "$WORK/failures" >&2
  exit 1
fi
