#!/usr/bin/env bash
# Packs libFuzzer targets of fuzz/ for a machine without kvpool's build dependencies (gRPC,
# protobuf, spdlog, ...): builds them here as scripts/fuzz.sh does (clang-16, ASan + UBSan,
# build-fuzz/), then writes .fuzz-bundle/ (git-ignored: add /.fuzz-bundle/ to .git/info/exclude)
#   bin/<target>             the fuzz targets (debug info kept, so ASan stacks stay symbolized)
#   corpus/<target>/         their seed corpora from fuzz/corpus/
#   lib/                     every shared library they load, by soname, beyond glibc, libstdc++
#                            and libgcc_s (clang's ASan/UBSan/libFuzzer runtimes are static)
#   fuzz-parallel.sh         the runner (scripts/fuzz-parallel.sh)
#   resume/<target>.tar.gz   (yours, kept) the state an earlier fuzz-parallel.sh call left in its $OUT
# Run there with LD_LIBRARY_PATH=.fuzz-bundle/lib, or through .fuzz-bundle/fuzz-parallel.sh.
# The libraries are this machine's (Debian 12): they need glibc >= 2.34 and GLIBCXX_3.4.30 there.
#
# usage: [NO_BUILD=1] [JOBS=N] scripts/fuzz-bundle.sh TARGET...
#   NO_BUILD=1 packs what build-fuzz/ holds without running ninja (e.g. while src/ is being edited).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: scripts/fuzz-bundle.sh TARGET..." >&2; exit 2; }
CLANG=${CLANG:-clang-16}
if [ -z "${NO_BUILD:-}" ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=/usr/bin/python3 \
    -DCMAKE_C_COMPILER="$CLANG" -DCMAKE_CXX_COMPILER="${CLANG/clang/clang++}" -DKVPOOL_FUZZ=ON \
    -DKVPOOL_SANITIZE="address;undefined" -DKVPOOL_TESTS=OFF -DKVPOOL_BENCH=OFF >/dev/null
  ninja -C build-fuzz -j "${JOBS:-$(nproc)}" "$@"
fi

rm -rf .fuzz-bundle/bin .fuzz-bundle/lib .fuzz-bundle/corpus  # resume/ (fuzz-parallel.sh) stays
mkdir -p .fuzz-bundle/bin .fuzz-bundle/lib .fuzz-bundle/corpus
# The commit built (fuzz-parallel.sh writes it to machine.txt; bench-fuzz-long.sh records it).
/usr/bin/python3 scripts/bench_machine.py commit > .fuzz-bundle/commit.txt
for t in "$@"; do
  [ -x build-fuzz/fuzz/"$t" ] || { echo "fuzz-bundle: build-fuzz/fuzz/$t was not built" >&2; exit 1; }
  [ -d fuzz/corpus/"$t" ] || { echo "fuzz-bundle: no seed corpus fuzz/corpus/$t" >&2; exit 1; }
  cp build-fuzz/fuzz/"$t" .fuzz-bundle/bin/
  cp -r fuzz/corpus/"$t" .fuzz-bundle/corpus/
done
cp scripts/fuzz-parallel.sh .fuzz-bundle/
# Shared libraries by soname, skipping glibc's own and the C++ runtime every Linux has (this
# machine's libstdc++ would need its newer glibc).
for f in .fuzz-bundle/bin/*; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  case "$soname" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libutil.so*|ld-linux*) ;;
    libstdc++.so*|libgcc_s.so*) ;;
    *) cp -L "$path" ".fuzz-bundle/lib/$soname" ;;
  esac
done
# Stay well inside what travels to a device machine (64 MiB with the working tree).
if [ "$(du -sm .fuzz-bundle | cut -f1)" -gt 56 ]; then
  for f in .fuzz-bundle/bin/*; do strip --strip-debug "$f"; done
  echo "fuzz-bundle: binaries stripped of debug info (stacks then show addresses and functions only)" >&2
fi
du -sh .fuzz-bundle/bin .fuzz-bundle/lib .fuzz-bundle/corpus
du -sh .fuzz-bundle
