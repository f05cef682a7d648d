#!/usr/bin/env bash
# Builds here (Debian, nvcc, no GPU needed) what scripts/gpu-check.sh runs on a GPU machine
# whose image has CUDA and PyTorch but not kvpool's build dependencies (gRPC, protobuf, ...):
# the GPU tests and benchmarks, the kvpool command (for `kvpool replay --gpu`) and the Python
# module's C++ core (libkvpool_python_core.so),
# compiled with -DKVPOOL_CUDA=ON for sm_90, plus every shared library they load beyond glibc,
# libstdc++ and the CUDA driver. Output: .gpu-bundle/{bin,lib} (git-ignored). Carry that
# folder to the GPU machine and run scripts/gpu-check.sh there; it compiles the two-file
# Python module against that machine's Python and this core. .gpu-bundle/commit.txt names the
# commit built (scripts/bench_machine.py), which gpu-check.sh hands on to the results.
set -euo pipefail
cd "$(dirname "$0")/.."
COMMIT=$(/usr/bin/python3 scripts/bench_machine.py commit)
BUILD=${BUILD:-build-gpu}
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVPOOL_CUDA=ON -DKVPOOL_BENCH=ON \
  -DPython_EXECUTABLE=/usr/bin/python3 > /dev/null
programs=${PROGRAMS:-"gpu_chunk_packing_test gpu_checksum_test gpu_handoff_test gpu_handoff_network_test gpu_replay_test connector_bench restore_bench handoff_bench kvpool_handoff_network_bench kvpool"}
ninja -C "$BUILD" -j "${JOBS:-$(nproc)}" $programs kvpool_python_core

rm -rf .gpu-bundle
mkdir -p .gpu-bundle/bin .gpu-bundle/lib
echo "$COMMIT" > .gpu-bundle/commit.txt
for p in $programs; do
  f=$(find "$BUILD" -name "$p" -type f -perm -u+x | head -1)
  [ -n "$f" ] || { echo "gpu-bundle: $p was not built" >&2; exit 1; }
  strip -o ".gpu-bundle/bin/$p" "$f"
done
strip --strip-unneeded -o .gpu-bundle/lib/libkvpool_python_core.so "$BUILD/python/libkvpool_python_core.so"
# Shared libraries by soname, skipping what every Linux (or the NVIDIA driver) provides.
for f in .gpu-bundle/bin/* .gpu-bundle/lib/libkvpool_python_core.so; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  case "$soname" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*|libcuda.so*) ;;
    libkvpool_python_core.so) ;;
    *) cp -L "$path" ".gpu-bundle/lib/$soname" ;;
  esac
done
du -sh .gpu-bundle/bin .gpu-bundle/lib
