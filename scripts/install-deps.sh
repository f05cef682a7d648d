#!/usr/bin/env bash
# Installs everything kvpool's build, tests and benchmarks need, from Debian 12 packages only.
# Safe to run again: apt skips what is already there.
# usage: install-deps.sh [--build]   (--build: only what building the kvpool binary needs, as
#                                      the container recipe does: deploy/container/Containerfile)
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
build=(
  build-essential g++ cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev libxxhash-dev liburing-dev zlib1g-dev libssl-dev openssl
  libcpp-httplib-dev libucx-dev
)
tests_and_benchmarks=(
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-pytest python3-pybind11 pybind11-dev python3-matplotlib
  redis-server memcached iproute2 iperf3 fio procps curl time etcd-server etcd-client systemd chromium
  clang-16 libclang-rt-16-dev
)
packages=("${build[@]}")
[ "${1:-}" = "--build" ] || packages+=("${tests_and_benchmarks[@]}")
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
