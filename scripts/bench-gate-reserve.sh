#!/usr/bin/env bash
# What the KV admission gate's oracle is worth (issue 44): `kvpool replay` at each load of
# SESSIONS, in three arms, on the same corpus, window and seeds: the published AgentX harness
# (each request asks for exactly its recorded output, --max-output 0, so the gate's reservation
# is exact by construction); a client asking for max_tokens 32000, as the production replay does,
# with the gate reserving it (--max-output 32000, the default --gate-reserve max-tokens: what a
# real gate knows); and the same client with the gate reserving the recorded output
# (--gate-reserve oracle: only the trace knows it). The oracle's worth is the third arm against
# the second, seed by seed. Raw results: docs/results/gate-reserve.json, rendered into
# docs/benchmarks.md by scripts/render_gate_reserve.py.
#
# usage: [SESSIONS="112 128"] [DURATION=600] [SEEDS="1 2 3"] [JOBS=N] [BUILD=build] scripts/bench-gate-reserve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-112 128}
DURATION=${DURATION:-600}
SEEDS=${SEEDS:-1 2 3}
source scripts/bench_build.sh
bench_build kvpool
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
common=(--synth 393 --duration "$DURATION" --mode pool)
declare -A ARMS=([harness]="--max-output 0" [max_tokens]="--max-output 32000 --gate-reserve max-tokens"
                 [oracle]="--max-output 32000 --gate-reserve oracle")
for n in $SESSIONS; do
  for seed in $SEEDS; do
    for arm in harness max_tokens oracle; do
      read -ra flags <<< "${ARMS[$arm]}"
      echo "== $n sessions, $arm, seed $seed: kvpool replay ${common[*]} --seed $seed --sessions $n ${flags[*]}"
      bench_job "$BUILD"/src/cli/kvpool replay "${common[@]}" --seed "$seed" --sessions "$n" "${flags[@]}" \
        --json "$OUT/$n-$arm-$seed.json" >"$OUT/$n-$arm-$seed.log" 2>&1
    done
  done
done
bench_jobs_wait
for f in "$OUT"/*.log; do [ -s "${f%.log}.json" ] || { echo "a replay failed: $f" >&2; tail -5 "$f" >&2; exit 1; }; done
/usr/bin/python3 - "$OUT" "$SESSIONS" "$SEEDS" "${common[*]}" <<'PY'
import json, os, sys
out, sessions, seeds, common = sys.argv[1:]
sys.path.insert(0, "scripts")
from bench_machine import with_run  # noqa: E402
def run(n, arm, seed):
    r = json.load(open(os.path.join(out, f"{n}-{arm}-{seed}.json")))["runs"][0]
    return {"seed": int(seed), "requests": r["requests"], "reuse": r["token_sources"]["reuse"],
            "throughput_tok_s_per_gpu": r["throughput_tok_s_per_gpu"], "ttft_s": r["ttft_s"],
            "gate_wait_s": r["gate_wait_s"], "gate_reserves": r["gate_reserves"], "max_tokens": r["max_tokens"],
            "mean_decode_kv_utilisation": r["deployment"]["mean_decode_kv_utilisation"],
            "failed_requests": r["failed_requests"], "verification_errors": r["verification_errors"]}
doc = with_run({"settings": {"replay": "kvpool replay " + common, "seeds": [int(s) for s in seeds.split()]},
                "loads": [{"sessions": int(n), **{arm: [run(n, arm, s) for s in seeds.split()]
                                                  for arm in ("harness", "max_tokens", "oracle")}}
                          for n in sessions.split()]},
               command="scripts/bench-gate-reserve.sh")
json.dump(doc, open("docs/results/gate-reserve.json", "w"), indent=1)
PY
/usr/bin/python3 scripts/render_gate_reserve.py
echo "bench-gate-reserve: docs/results/gate-reserve.json and docs/benchmarks.md updated"
