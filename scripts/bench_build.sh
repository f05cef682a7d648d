# Sourced by benchmark scripts (from the repository root): `bench_build TARGET...` builds the
# targets in $BUILD (default: build), configuring it RelWithDebInfo when it has no build.ninja
# yet; a caller may point BUILD at a folder it built another way (e.g. build-gpu, Release).
BUILD=${BUILD:-build}
bench_build() {
  [ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C "$BUILD" "$@" >/dev/null
}

# `bench_job CMD...` runs CMD in the background, at most JOBS at once (default: one per core);
# `bench_jobs_wait` waits for the rest. For replays, whose results do not depend on what runs
# beside them (the pool runs on the replay's clock), only their wall time does. A failed job is
# the caller's to notice (e.g. by the file it did not write).
JOBS=${JOBS:-$(nproc)}
BENCH_RUNNING=0
bench_job() {
  "$@" &
  BENCH_RUNNING=$((BENCH_RUNNING + 1))
  if [ "$BENCH_RUNNING" -ge "$JOBS" ]; then
    wait -n || true
    BENCH_RUNNING=$((BENCH_RUNNING - 1))
  fi
}
bench_jobs_wait() {
  while [ "$BENCH_RUNNING" -gt 0 ]; do
    wait -n || true
    BENCH_RUNNING=$((BENCH_RUNNING - 1))
  done
}
