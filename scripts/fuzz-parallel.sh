#!/usr/bin/env bash
# The long fuzzing run of scripts/bench-fuzz-long.sh on a machine of many cores, from the bundle
# scripts/fuzz-bundle.sh makes: each TARGET runs as WORKERS libFuzzer processes at once, side by
# side with the other targets, sharing one corpus (each worker reloads what the others add),
# with fuzz.sh's options (ASan + UBSan, leaks on, 10 s per input, 2 GiB RSS, 64 KiB inputs).
# A target stops at RUNS inputs over all its workers (default 10M) or after SECONDS.
#
# A later call continues where the last stopped: the corpus, the logs and the count live in
# STATE/<target>/ (kept on the machine) and go to $OUT/<target>.tar.gz too; a call on a fresh
# machine resumes from $BUNDLE/resume/<target>.tar.gz when that is there. A target already at
# RUNS is skipped and its workers go to the others, shared by what each still needs (from the
# rate of its earlier calls).
#
# A crash, leak, UBSan finding, hang (> 10 s) or out-of-memory stops that worker, keeps the input
# in STATE/<target>/artifacts/ (in the tarball) and marks the target failed.
# Writes $OUT/summary.jsonl (one line per target, figures over all calls so far: inputs, seconds,
# cov, corpus, ok, workers, calls) and $OUT/machine.txt; bench-fuzz-long.sh records them with
# FROM_PARALLEL=dir.
#
# usage: [OUT=dir] [RUNS=N] [STATE=dir] [BUNDLE=dir] fuzz-parallel.sh SECONDS TARGET:WORKERS...
set -uo pipefail
SECONDS_BOUND=$1; shift
RUNS=${RUNS:-10000000}
BUNDLE=${BUNDLE:-$(cd "$(dirname "$0")" && pwd)}
STATE=${STATE:-/tmp/fuzz-parallel}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT" "$STATE"
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

{ echo "nproc: $(nproc)"; echo "uname: $(uname -srm)"
  echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "date: $(date -u +%F)"; echo "commit: $(cat "$BUNDLE/commit.txt" 2>/dev/null || echo unknown)"; } >"$OUT/machine.txt"
cat "$OUT/machine.txt"
# Each call's machine goes with it into calls.jsonl: a target resumed elsewhere keeps both.
MACHINE="$(uname -srm), $(nproc) cores ($(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"

# Inputs done so far and inputs per worker-second of the earlier calls, from STATE/T/calls.jsonl.
done_of() { awk -F'"inputs": ' 'NF > 1 {split($2, a, /[,}]/); s += a[1]} END {print s + 0}' "$STATE/$1/calls.jsonl" 2>/dev/null || echo 0; }
rate_of() { awk '{match($0, /"inputs": [0-9]+/); i += substr($0, RSTART + 10, RLENGTH - 10)
                  match($0, /"worker_seconds": [0-9.]+/); w += substr($0, RSTART + 18, RLENGTH - 18)}
                 END {print (w > 0 ? i / w : 0)}' "$STATE/$1/calls.jsonl" 2>/dev/null || echo 0; }

targets=() given=() total_workers=0
for tw in "$@"; do
  t=${tw%%:*} w=${tw##*:}
  targets+=("$t") given+=("$w") total_workers=$((total_workers + w))
  if [ ! -d "$STATE/$t/corpus" ]; then
    mkdir -p "$STATE/$t"
    if [ -f "$BUNDLE/resume/$t.tar.gz" ]; then
      tar -xzf "$BUNDLE/resume/$t.tar.gz" -C "$STATE/$t"
      echo "$t: resumed from $BUNDLE/resume/$t.tar.gz ($(done_of "$t") inputs before)"
    else
      mkdir -p "$STATE/$t/corpus"; cp "$BUNDLE/corpus/$t"/* "$STATE/$t/corpus/"
    fi
  fi
  mkdir -p "$STATE/$t/logs" "$STATE/$t/artifacts"
done

# Workers for this call: as given on the first call; later, every worker to the targets still
# short of RUNS, in proportion to the worker-seconds each still needs at its earlier rate.
plan=$(for i in "${!targets[@]}"; do
  t=${targets[$i]}; echo "$t ${given[$i]} $(done_of "$t") $(rate_of "$t")"
done | awk -v runs="$RUNS" -v total="$total_workers" '
  {t[NR] = $1; g[NR] = $2; left[NR] = runs - $3; r[NR] = $4; n = NR}
  END {
    for (i = 1; i <= n; i++) if (left[i] > 0) { open_++; need[i] = (r[i] > 0 ? left[i] / r[i] : g[i]); sum += need[i]; if (r[i] > 0) rated++ }
    for (i = 1; i <= n; i++) {
      if (left[i] <= 0) w = 0
      else if (!rated && open_ == n) w = g[i]
      else { w = int(total * need[i] / sum + 0.5); if (w < 1) w = 1 }
      print t[i], w, (left[i] > 0 ? left[i] : 0)
    }
  }')
echo "$plan" | while read -r t w left; do echo "plan: $t $w workers, $left inputs to go"; done

last_call=$(ls "$STATE/${targets[0]}/logs" | sed -n 's/^c\([0-9]*\)-.*/\1/p' | sort -n | tail -1)
call=$(( ${last_call:-0} + 1 ))
start=$(date +%s.%N)
declare -A started
while read -r t w left; do
  [ "$w" -gt 0 ] || continue
  per=$(( (left + w - 1) / w ))
  started[$t]=$(date +%s.%N)
  for i in $(seq 1 "$w"); do
    ( timeout -s INT $((SECONDS_BOUND + 30)) "$BUNDLE/bin/$t" -runs="$per" -max_total_time="$SECONDS_BOUND" \
        -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$STATE/$t/artifacts/" "$STATE/$t/corpus" >"$STATE/$t/logs/c$call-w$i.log" 2>&1
      echo $? >"$STATE/$t/logs/c$call-w$i.rc"
      date +%s.%N >"$STATE/$t/logs/c$call-w$i.end" ) &
  done
done <<<"$plan"
wait
echo "fuzz-parallel: fuzzing done after $(( $(date +%s) - ${start%.*} )) s"

# Coverage of each whole shared corpus, all targets at once: one pass over it with -runs=0 (what a
# single process reports as cov); if that takes over 45 s, the largest a worker reported this call.
while read -r t w left; do
  ( c=$(timeout 45 "$BUNDLE/bin/$t" -runs=0 -timeout=10 -rss_limit_mb=2048 -max_len=65536 "$STATE/$t/corpus" 2>&1 \
        | grep -oE 'cov: [0-9]+' | tail -1 | grep -oE '[0-9]+')
    [ -n "$c" ] || c=$(cat "$STATE/$t/logs/c$call"-w*.log 2>/dev/null | grep -oE 'cov: [0-9]+' | grep -oE '[0-9]+' | sort -n | tail -1)
    echo "${c:-0}" >"$STATE/$t/cov" ) &
done <<<"$plan"
wait

: >"$OUT/summary.jsonl"
while read -r t w left; do
  dir=$STATE/$t
  if [ "$w" -gt 0 ]; then
    inputs=0 worker_seconds=0 ok=true last=0
    for i in $(seq 1 "$w"); do
      log=$dir/logs/c$call-w$i.log rc=$(cat "$dir/logs/c$call-w$i.rc")
      n=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
      inputs=$((inputs + n))
      end=$(cat "$dir/logs/c$call-w$i.end")
      worker_seconds=$(awk -v a="$worker_seconds" -v s="${started[$t]}" -v e="$end" 'BEGIN {print a + e - s}')
      last=$(awk -v a="$last" -v e="$end" 'BEGIN {print (e > a ? e : a)}')
      if [ "$rc" != 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|ALARM: working on the last Unit|out-of-memory' "$log"; then
        ok=false; echo "$t worker $i: rc $rc" >&2; grep -m3 -E 'ERROR|runtime error|ALARM|out-of-memory|Test unit written' "$log" >&2
      fi
    done
    secs=$(awk -v s="${started[$t]}" -v e="$last" 'BEGIN {printf "%.1f", e - s}')
    echo "{\"call\": $call, \"workers\": $w, \"seconds\": $secs, \"worker_seconds\": $worker_seconds, \"inputs\": $inputs, \"ok\": $ok, \"bound\": $SECONDS_BOUND, \"machine\": \"$MACHINE\"}" >>"$dir/calls.jsonl"
  fi
  cov=$(cat "$dir/cov")
  ls "$dir/artifacts" | grep -q . && ok_all=false || ok_all=$(grep -q '"ok": false' "$dir/calls.jsonl" && echo false || echo true)
  /usr/bin/env python3 - "$t" "$dir" "$cov" "$ok_all" >>"$OUT/summary.jsonl" <<'PY'
import json, os, sys
t, d, cov, ok = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "true"
calls = [json.loads(l) for l in open(os.path.join(d, "calls.jsonl"))]
print(json.dumps({"target": t, "inputs": sum(c["inputs"] for c in calls), "seconds": round(sum(c["seconds"] for c in calls), 1),
                  "cov": cov, "corpus": len(os.listdir(os.path.join(d, "corpus"))), "ok": ok,
                  "workers": max(c["workers"] for c in calls), "calls": calls}))
PY
  tar -czf "$OUT/$t.tar.gz" -C "$dir" corpus logs artifacts calls.jsonl
done <<<"$plan"
cat "$OUT/summary.jsonl"
echo "fuzz-parallel: $(( $(date +%s) - ${start%.*} )) s this call"
