#!/usr/bin/env bash
# GPU proof for the connector, the handoff and the replay, on a machine with NVIDIA GPUs (H200,
# sm_90). Runs the GPU tests and benchmarks and a `kvpool replay --gpu` sweep, writes logs and
# results to $OUT (default ./out/gpu-check) and prints a short table last. Exits non-zero on any
# mismatch or failed test. Back here, `scripts/collect_gpu_results.py OUT DATE COMMAND >
# docs/results/gpu-check.json` keeps the run's raw results (the table is also OUT/summary.txt,
# the machine OUT/gpu.txt and OUT/host.txt) and scripts/render_gpu_benchmarks.py draws the GPU
# section of docs/benchmarks.md from them.
#
# CHECKS picks what runs (default all): tests (GPU gtests), benches (kernel, restore and handoff
# benchmarks, the handoff between processes, torch baselines), torch (the PyTorch transformer restore tests: a
# tiny model over paged caches, and kvpool_transformers with a transformers Llama), replay (the replay
# sweep: REPLAY_SESSIONS, default 56,96; REPLAY_DURATION emulated seconds, default 600).
#
# Where the programs come from, first that works:
#   bundle  — .gpu-bundle/ made on a Debian machine by scripts/gpu-bundle.sh (for GPU images
#             without gRPC/protobuf development files); the two-file Python module is compiled
#             here against this machine's Python (PyTorch) and the bundled core.
#   full    — a full CMake build here with -DKVPOOL_CUDA=ON.
#   kernels — tests/gpu/standalone (CUDA + fmt + spdlog + GTest only): kernels and their
#             benches; the pool-backed checks it cannot build fail the run as "not built"
#             (ask for fewer with CHECKS).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-check}
mkdir -p "$OUT"
JOBS=${JOBS:-$(nproc)}
PY=${PYTHON:-python3}
export PATH=/usr/local/cuda/bin:$PATH
status=0
CHECKS=${CHECKS:-"tests benches torch replay"}
want() { [[ " $CHECKS " == *" $1 "* ]]; }
declare -a table
row() { table+=("$(printf '%-46s %s' "$1" "$2")"); }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1 || true
echo "== GPU: $(cat "$OUT/gpu.txt")"
{ nproc; lscpu | grep "Model name"; "$PY" -c "import torch; print('torch', torch.__version__)"
  grep PRETTY_NAME /etc/os-release; } > "$OUT/host.txt" 2>/dev/null
# The commit measured (collect_gpu_results.py records it): the bundle's, else this checkout's.
if [ -d .gpu-bundle/bin ] && [ -f .gpu-bundle/commit.txt ]; then cp .gpu-bundle/commit.txt "$OUT/commit.txt"
else "$PY" scripts/bench_machine.py commit > "$OUT/commit.txt" 2>/dev/null || rm -f "$OUT/commit.txt"; fi

PYMOD=""  # folder holding the kvpool Python module, when there is one
if [ -d .gpu-bundle/bin ]; then
  mode=bundle
  BIN=.gpu-bundle/bin
  export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  mkdir -p build-py
  ext=$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
  if c++ -O2 -std=c++20 -shared -fPIC -Isrc -Ipython $("$PY" -m pybind11 --includes) \
       python/kvpool_module.cc python/py_buffer.cc -L.gpu-bundle/lib -lkvpool_python_core \
       -Wl,-rpath,"$PWD/.gpu-bundle/lib" -o "build-py/kvpool$ext" > "$OUT/python-module.log" 2>&1; then
    PYMOD=build-py
    row "python module (built here, bundled core)" "ok"
  else
    row "python module" "FAIL (see python-module.log)"; status=1; tail -20 "$OUT/python-module.log"
  fi
elif cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVPOOL_CUDA=ON -DKVPOOL_BENCH=ON \
     -DPython_EXECUTABLE="$(command -v "$PY")" > "$OUT/configure.log" 2>&1; then
  mode=full
  BIN=build-gpu
  targets="gpu_chunk_packing_test gpu_checksum_test gpu_handoff_test gpu_handoff_network_test gpu_replay_test connector_bench restore_bench handoff_bench kvpool_handoff_network_bench kvpool"
  if grep -q kvpool_python build-gpu/build.ninja 2>/dev/null; then targets="$targets kvpool_python"; PYMOD=build-gpu/python; fi
  ninja -C build-gpu -j "$JOBS" $targets > "$OUT/build.log" 2>&1 || { echo "FAIL: build"; tail -30 "$OUT/build.log"; exit 1; }
else
  mode=kernels
  echo "== full configure failed (see $OUT/configure.log); building tests/gpu/standalone"
  cmake -S tests/gpu/standalone -B build-gpu-kernels -G Ninja -DCMAKE_BUILD_TYPE=Release \
      > "$OUT/configure-standalone.log" 2>&1 || { echo "FAIL: standalone configure"; tail -20 "$OUT/configure-standalone.log"; exit 1; }
  BIN=build-gpu-kernels
  ninja -C "$BIN" -j "$JOBS" > "$OUT/build.log" 2>&1 || { echo "FAIL: build"; tail -30 "$OUT/build.log"; exit 1; }
fi
row "programs ($mode)" "ok"
program() { find "$BIN" -name "$1" -type f -perm -u+x 2>/dev/null | head -1; }
# A check that was asked for (CHECKS) but whose program is missing fails the run: a green
# table must mean every requested check ran.
not_built() { row "$1" "FAIL (not built in $mode mode)"; status=1; }

# gtest binary: name, what the row says.
gtest() {
  local bin; bin=$(program "$1")
  if [ -z "$bin" ]; then not_built "$2"; return; fi
  echo "== $1"
  if timeout 180 "$bin" --gtest_output=json:"$OUT/$1.json" > "$OUT/$1.log" 2>&1; then
    if grep -q "\[  SKIPPED \]" "$OUT/$1.log"; then row "$2" "SKIPPED (no GPU?)"; status=1
    else row "$2" "PASS ($(grep -oE '[0-9]+ tests? from [0-9]+ test suites? ran' "$OUT/$1.log" | cut -d' ' -f1) tests)"; fi
  else
    row "$2" "FAIL"; status=1; tail -30 "$OUT/$1.log"
  fi
}
# benchmark binary: name, what the row says, extra arguments.
bench() {
  local bin; bin=$(program "$1")
  if [ -z "$bin" ]; then not_built "$2"; return; fi
  echo "== $1"
  if timeout 300 "$bin" --json "$OUT/$1.json" "${@:3}" > "$OUT/$1.log" 2>&1; then
    row "$2" "PASS"
  else
    row "$2" "FAIL (mismatch or error)"; status=1; tail -20 "$OUT/$1.log"
  fi
}

if want tests; then
  gtest gpu_chunk_packing_test "pack/unpack kernels vs CPU reference"
  gtest gpu_checksum_test "xxh3 on the GPU vs the library's"
  gtest gpu_handoff_test "handoff gather/scatter vs CPU reference"
  gtest gpu_handoff_network_test "handoff receiver into GPU decode caches"
  gtest gpu_replay_test "replay: device KV == CPU, tiny --gpu replay"
fi
if want benches; then
  bench connector_bench "connector kernels: bytes check"
  bench restore_bench "restore from a storage service: bytes check"
  bench handoff_bench "handoff 94 MB example: bytes check" --sweep
  bench kvpool_handoff_network_bench "handoff between processes (host memory): bytes check" --reps 5
fi

if want replay; then
  kvpool=$(program kvpool)
  if [ -z "$kvpool" ]; then
    not_built "replay --gpu sweep"
  else
    echo "== kvpool replay --gpu"
    if timeout 540 "$kvpool" --log-level warn replay --gpu --synth 393 --sessions "${REPLAY_SESSIONS:-56,96}"          --duration "${REPLAY_DURATION:-600}" --mode both --json "$OUT/replay-gpu.json" > "$OUT/replay-gpu.txt" 2>&1; then
      row "replay --gpu sweep: 0 errors, 0 failed" "PASS"
    else
      row "replay --gpu sweep" "FAIL (exit $?; see replay-gpu.txt)"; status=1; tail -30 "$OUT/replay-gpu.txt"
    fi
  fi
fi

if ! want benches; then
  :
elif "$PY" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "== torch index_select baseline"
  timeout 120 "$PY" bench/gpu/index_select_bench.py > "$OUT/index_select_bench.jsonl" 2> "$OUT/index_select_bench.err" \
    || { row "torch index_select baseline" "FAIL"; status=1; }
else
  row "torch baselines" "SKIPPED (no torch with CUDA)"
fi

# A GPU pytest file: its name under tests/gpu, what the row says. python/ holds kvpool_transformers.
pytest_gpu() {
  local log="$OUT/${1%.py}.log"
  echo "== $1"
  if PYTHONPATH="$PYMOD:$PWD/python" timeout 240 "$PY" -m pytest -q -p no:cacheprovider "tests/gpu/$1" > "$log" 2>&1; then
    if grep -qE "passed" "$log" && ! grep -qE "skipped" "$log"; then row "$2" "PASS ($(grep -oE '[0-9]+ passed' "$log"))"
    else row "$2" "SKIPPED (see ${log##*/})"; status=1; fi
  else
    row "$2" "FAIL"; status=1; tail -30 "$log"
  fi
}
if ! want torch; then
  :
elif [ -n "$PYMOD" ]; then
  pytest_gpu test_transformer_restore.py "transformer: restored logits == full prefill"
  pytest_gpu test_transformers_pool.py "transformers cache: saved, restored, continued"
else
  not_built "transformer restore tests (no Python module)"
fi

echo
echo "================ kvpool GPU check ($(cut -d, -f1 "$OUT/gpu.txt" | head -1), $(nvidia-smi -L 2>/dev/null | wc -l) GPUs) ================"
for b in connector_bench restore_bench handoff_bench kvpool_handoff_network_bench; do
  [ -f "$OUT/$b.log" ] && { echo "-- $b"; sed -n '/^what /,$p' "$OUT/$b.log"; }
done
[ -f "$OUT/replay-gpu.txt" ] && { echo "-- replay --gpu"; grep -E "^replay|throughput|prompt tokens|restore |handoff |errors" "$OUT/replay-gpu.txt"; }
[ -s "$OUT/index_select_bench.jsonl" ] && "$PY" -c "
import json,sys
for l in open('$OUT/index_select_bench.jsonl'):
    r=json.loads(l); print(f\"{r['what']:<40} {r['gbps']:>10.1f} GB/s\")"
{ for r in "${table[@]}"; do echo "$r"; done
  echo "results in $OUT; exit $status"; } | tee "$OUT/summary.txt"
exit $status
