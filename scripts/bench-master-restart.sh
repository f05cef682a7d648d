#!/usr/bin/env bash
# The lone-master restart, tried as an operator would (issue 15's first measurement): a real
# `kvpool master` and 2 `kvpool store` processes, a 16-session `kvpool replay --master ...
# --speedup 8`, and `kill -9` of the master 70 s in, restarted at once on the same address.
# Beside it, in the same run, the same replay (same seed) against an undisturbed pool.
# Raw results: docs/results/master-restart.json; rendered into docs/reliability.md.
#
# usage: scripts/bench-master-restart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ninja -C build kvpool >/dev/null
KVPOOL=build/src/cli/kvpool
source scripts/processes.sh
REPLAY=(--synth 64 --sessions 16 --duration 320 --speedup 8 --seed 3 --prefill-cache-tokens 200000)
KILL_AFTER_S=70  # after the replay's warm-up (about 55 s at this pace): inside its window

objects() { $KVPOOL stat --master "$1" --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["objects"])' 2>/dev/null || echo 0; }

run_arm() {  # run_arm NAME KILL(0|1)
  local name=$1 kill=$2 master=127.0.0.1:$(free_port) mpid spids=()
  $KVPOOL master --listen "$master" --metrics-listen "" >"$WORK/$name-master0.log" 2>&1 & mpid=$!
  for s in 0 1; do
    $KVPOOL store --master "$master" --memory 1GiB --listen 127.0.0.1:0 --shm-dir "$WORK" \
      --heartbeat-interval-ms 200 >"$WORK/$name-store$s.log" 2>&1 & spids+=($!)
  done
  PIDS+=("$mpid" "${spids[@]}")
  for _ in $(seq 150); do [ "$($KVPOOL stat --master "$master" --timeout-ms 200 2>/dev/null | grep -c 'segment')" -ge 2 ] && break; sleep 0.2; done
  $KVPOOL replay --master "$master" "${REPLAY[@]}" --json "$WORK/$name.json" >"$WORK/$name-replay.log" 2>&1 & local rpid=$!
  local before=0 after=0 back_s=0
  if [ "$kill" = 1 ]; then
    sleep "$KILL_AFTER_S"
    before=$(objects "$master")
    kill -9 "$mpid"
    local t0; t0=$(date +%s.%N)
    $KVPOOL master --listen "$master" --metrics-listen "" >"$WORK/$name-master1.log" 2>&1 & PIDS+=($!)
    # The restarted master knows nothing until the stores rejoin with their indexes.
    for _ in $(seq 300); do [ "$(grep -c rejoined "$WORK/$name-master1.log" || true)" -ge 2 ] && break; sleep 0.05; done
    back_s=$(/usr/bin/python3 -c "import time; print(round(time.time() - $t0, 2))")
    after=$(objects "$master")
  fi
  wait "$rpid"
  /usr/bin/python3 - "$WORK/$name.json" "$name" "$before" "$after" "$back_s" "$WORK/$name-master1.log" <<'PY' >>"$WORK/arms.jsonl"
import json, re, sys
run = json.load(open(sys.argv[1]))["runs"][0]
log = open(sys.argv[6]).read() if sys.argv[2] == "killed" else ""
rejoins = [(int(a), float(b)) for a, b in re.findall(r"rejoined: (\d+) objects back.*in ([0-9.]+) s", log)]
print(json.dumps({"arm": sys.argv[2], "objects_before_kill": int(sys.argv[3]),
                  "objects_after_rejoin": int(sys.argv[4]), "back_after_s": float(sys.argv[5]),
                  "rejoins": rejoins, "token_sources": run["token_sources"],
                  "failed_requests": run["failed_requests"], "verification_errors": run["verification_errors"],
                  "save_failures": run["deployment"]["save_failures"], "requests": run["requests"]}))
PY
  kill "${spids[@]}" 2>/dev/null || true
  pkill -f -- "--listen $master" 2>/dev/null || true
}

run_arm undisturbed 0
run_arm killed 1
/usr/bin/python3 - "$WORK/arms.jsonl" "${REPLAY[*]}" "$KILL_AFTER_S" <<'PY' > docs/results/master-restart.json
import datetime, json, subprocess, sys
arms = [json.loads(l) for l in open(sys.argv[1])]
print(json.dumps({"command": "scripts/bench-master-restart.sh", "date": datetime.date.today().isoformat(),
                  "machine": subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
                  + f", {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores",
                  "replay": "kvpool replay --master M " + sys.argv[2], "kill_after_s": int(sys.argv[3]),
                  "arms": arms}, indent=1))
PY
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/master-restart.json  # the commit measured
/usr/bin/python3 scripts/render_reliability.py
cat docs/results/master-restart.json
