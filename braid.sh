#!/usr/bin/env bash
# Braid's front door on a fresh Debian 12 machine: installs what is missing, builds, then
#   ./braid.sh perf [braid-perf args]   runs the perf sweep (default: allreduce, 4 local ranks,
#                                       host memory, 8 B to 256 MB, results checked)
#   ./braid.sh test                     runs the test suites
#   ./braid.sh build                    only builds
set -euo pipefail
cd "$(dirname "$0")"

BUILD_DIR=${BRAID_BUILD_DIR:-build}
PACKAGES=(meson ninja-build pkg-config g++ libgtest-dev libgmock-dev libbenchmark-dev
          libhwloc-dev libibverbs-dev libssl-dev python3-numpy python3-pytest doxygen
          python3-torch libtorch-dev)

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  echo "braid.sh: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

build() {
  install_packages
  # nvcc lives outside PATH in the standard CUDA install; the cuda feature finds it there.
  if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    meson setup "$BUILD_DIR" --buildtype=release
  fi
  ninja -C "$BUILD_DIR"
}

case "${1:-}" in
  perf)
    shift
    build
    if [ $# -eq 0 ]; then set -- allreduce --np 4 -b 8 -e 256M -f 2 -c 1; fi
    exec "$BUILD_DIR/perf/braid-perf" "$@"
    ;;
  test)
    shift
    build
    meson test -C "$BUILD_DIR" --print-errorlogs --num-processes 1 "$@" && exit 0
    rc=$?
    # The failing suites' logs above can be long (expected-failure warnings): end with just the
    # failed cases and their messages, so the reason is the last thing on the screen.
    echo "=== braid.sh: failed test cases (full log: $BUILD_DIR/meson-logs/testlog.txt)"
    grep -E -A12 '^[^ ]*:[0-9]+: Failure$' "$BUILD_DIR/meson-logs/testlog.txt" | cut -c1-400 |
      head -150 || true
    grep -E '^\[  FAILED  \] [A-Za-z]' "$BUILD_DIR/meson-logs/testlog.txt" | sort -u || true
    exit $rc
    ;;
  build)
    build
    ;;
  *)
    echo "usage: $0 perf [braid-perf args] | test [meson test args] | build" >&2
    exit 2
    ;;
esac
