# Sourced by benchmark scripts (from the repository root): `bench_build TARGET...` builds the
# targets in $BUILD (default: build), configuring it RelWithDebInfo when it has no build.ninja
# yet; a caller may point BUILD at a folder it built another way (e.g. build-gpu, Release).
BUILD=${BUILD:-build}
bench_build() {
  [ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C "$BUILD" "$@" >/dev/null
}
