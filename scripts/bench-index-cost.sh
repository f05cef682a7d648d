#!/usr/bin/env bash
# What the stores' copy of the index costs a put (docs/architecture.md, invariant 8): two pools
# side by side in one run, each a real `kvpool master` + `kvpool store` — one store keeping its
# index (the default), one with --no-index — and `kvpool bench` against each, interleaved.
# Raw results: docs/results/index-cost.json; rendered into docs/reliability.md.
#
# usage: scripts/bench-index-cost.sh [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${1:-5}
ninja -C build kvpool >/dev/null
KVPOOL=build/src/cli/kvpool
source scripts/processes.sh

declare -A MASTER
for arm in index no-index; do
  MASTER[$arm]=127.0.0.1:$(free_port)
  $KVPOOL master --listen "${MASTER[$arm]}" --metrics-listen "" >"$WORK/master-$arm.log" 2>&1 & PIDS+=($!)
  flag=""; [ "$arm" = no-index ] && flag=--no-index
  $KVPOOL store --master "${MASTER[$arm]}" --memory 1GiB --listen 127.0.0.1:0 --shm-dir "$WORK" $flag \
    >"$WORK/store-$arm.log" 2>&1 & PIDS+=($!)
  for _ in $(seq 150); do $KVPOOL stat --master "${MASTER[$arm]}" --timeout-ms 200 2>/dev/null | grep -q segment && break; sleep 0.2; done
done

OUT=$WORK/runs.jsonl
for rep in $(seq "$REPEAT"); do
  for shape in "64KiB 8" "64KiB 128" "1MiB 8"; do
    set -- $shape
    for arm in index no-index; do
      $KVPOOL bench --json --master "${MASTER[$arm]}" --value-size "$1" --batch "$2" --bytes 256MiB --repeat 1 \
        | /usr/bin/python3 -c "import json,sys; r=json.load(sys.stdin); r['arm']='$arm'; r['rep']=$rep; print(json.dumps(r))" >>"$OUT"
    done
  done
done
/usr/bin/python3 - "$OUT" <<'PY' > docs/results/index-cost.json
import json, subprocess, sys, datetime
runs = [json.loads(l) for l in open(sys.argv[1])]
print(json.dumps({
    "command": "scripts/bench-index-cost.sh",
    "date": datetime.date.today().isoformat(),
    "machine": subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
               + f", {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores",
    "runs": runs}, indent=1))
PY
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/index-cost.json  # the commit measured
/usr/bin/python3 scripts/render_reliability.py
echo "== wrote docs/results/index-cost.json and docs/reliability.md"
