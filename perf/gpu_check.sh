#!/usr/bin/env bash
# The GPU check: builds Braid with CUDA from a clean tree, runs the gpu test suite, the kernel
# micro-benchmarks and braid-perf on device buffers (2 and 4 rank processes sharing GPU 0), and
# prints a summary. Meant for a machine with one NVIDIA GPU (sm_80 or sm_90) and nvcc in
# /usr/local/cuda/bin; finishes in under 8 minutes. Logs go to build-gpu-check-logs; when $OUT is
# set, the summary is written there as it grows and all logs are packed there at the end
# (summary.txt, gpu_check_logs.tar.gz). Exit status 0 only when every step passed.
#
#   perf/gpu_check.sh                 run the check (BRAID_GPU_CHECK_REUSE=1: keep an existing
#                                     build-gpu-check; BRAID_GPU_CHECK_BUDGET: seconds, default 470;
#                                     BRAID_GPU_CHECK_PARTS: the parts to run, "base" (one host)
#                                     and/or "staged" (device buffers across two BRAID_HOSTIDs over
#                                     RDMA or TCP) and/or "speed" (small calls in stream and graph
#                                     mode, the low-latency protocol, the host cost of a call: not in
#                                     the default), default "base,staged" - with a 10-minute limit per
#                                     command, run each part on its own, the second with
#                                     BRAID_GPU_CHECK_REUSE=1;
#                                     BRAID_GPU_CHECK_PREBUILT=DIR: run the programs of a build
#                                     made elsewhere with the same options, building only when
#                                     they cannot start here)
#   perf/gpu_check.sh --fetch-deps    (on a Debian/Ubuntu machine with network access) downloads
#                                     the .deb files of the build dependencies (GoogleTest, Google
#                                     Benchmark, OpenSSL headers, pkg-config) into build-gpu-deps/
#                                     for a GPU machine that lacks them and cannot download: carry
#                                     that folder along; the check unpacks what is missing there,
#                                     never overwriting a file that exists
set -uo pipefail
cd "$(dirname "$0")/.."

DEPS_PACKAGES=(libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian libssl-dev
               pkgconf pkgconf-bin libpkgconf3)

if [ "${1:-}" = "--fetch-deps" ]; then
  dir=build-gpu-deps
  mkdir -p "$dir" && cd "$dir" || exit 2
  apt-get download "${DEPS_PACKAGES[@]}" || exit 2
  echo "gpu_check: $(ls ./*.deb | wc -l) packages in $dir"
  exit 0
fi

START=$(date +%s)
PARTS=${BRAID_GPU_CHECK_PARTS:-base,staged}
part() { [[ ",$PARTS," == *",$1,"* ]]; }
# Seconds for everything, so that the whole check ends within 8 minutes.
BUDGET=${BRAID_GPU_CHECK_BUDGET:-470}
BUILD=build-gpu-check
LOGS=build-gpu-check-logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
SUMMARY="${OUT:-$LOGS}/summary.txt"
: >"$SUMMARY"
FAILED=0

say() { echo "$*" | tee -a "$SUMMARY"; }
# finish: the verdict, the logs packed into $OUT when set, and the exit status.
finish() {
  say "== $( [ $FAILED -eq 0 ] && echo PASSED || echo FAILED ) in $(elapsed)s; logs in $LOGS"
  if [ -n "${OUT:-}" ]; then
    cp "$SUMMARY" "$LOGS/" 2>/dev/null
    tar czf "$OUT/gpu_check_logs.tar.gz" --exclude=./mps -C "$LOGS" .
  fi
  exit $FAILED
}
elapsed() { echo $(( $(date +%s) - START )); }
# step NAME SECONDS COMMAND...: runs with a time limit (cut to what is left of the budget), log
# in $LOGS/NAME.log, result in the summary.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$(( BUDGET - $(elapsed) ))
  if [ "$left" -lt 15 ]; then
    say "SKIP  $name: out of time"
    FAILED=1
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  local took=$(( $(date +%s) - t0 ))
  if [ $rc -eq 0 ]; then
    say "PASS  $name (${took}s)"
  else
    [ $rc -eq 124 ] && say "FAIL  $name: timed out after ${limit}s" || say "FAIL  $name: exit $rc (${took}s)"
    FAILED=1
    tail -n 25 "$LOGS/$name.log" | sed 's/^/      /' | tee -a "$SUMMARY"
  fi
  return $rc
}

export PATH="$PATH:/usr/local/cuda/bin"
say "== Braid GPU check ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  | sed 's/^/   GPU: /' | tee -a "$SUMMARY"
nvcc --version 2>/dev/null | tail -n 2 | head -n 1 | sed 's/^/   nvcc: /' | tee -a "$SUMMARY"

# ---- Build dependencies: unpack carried packages for whatever is missing.
missing=()
[ -f /usr/include/gtest/gtest.h ] || missing+=(gtest)
[ -f /usr/include/benchmark/benchmark.h ] || missing+=(benchmark)
[ -f /usr/include/openssl/evp.h ] || missing+=(openssl)
command -v pkg-config >/dev/null || missing+=(pkg-config)
if [ ${#missing[@]} -gt 0 ]; then
  if ls build-gpu-deps/*.deb >/dev/null 2>&1; then
    say "   unpacking carried packages for: ${missing[*]}"
    tmp=$(mktemp -d)
    for deb in build-gpu-deps/*.deb; do dpkg -x "$deb" "$tmp"; done
    cp -rn "$tmp"/. / && ldconfig
    rm -rf "$tmp"
  else
    say "   missing build dependencies: ${missing[*]} (carry packages: perf/gpu_check.sh --fetch-deps)"
  fi
fi

# ---- Build: only what the check runs.
options=(-Dcuda=enabled -Dhwloc=disabled -Dibverbs=disabled -Dbuildtype=release -Dtests=true
         -Dbenchmarks=true)
for opt in nccl_compat:true python:disabled docs:disabled peers:false fuzz:false; do
  grep -q "option('${opt%%:*}'" meson_options.txt && options+=("-D${opt%%:*}=${opt#*:}")
done
# BRAID_GPU_CHECK_REUSE=1 keeps an existing build (a rerun after a timeout, say).
TARGETS=(tests/gpu/braid_gpu_tests tests/gpu/braid_gpu_kernel_tests tests/gpu/gpu_benchmark
         tests/gpu/device_call_benchmark perf/braid-perf compat/nccl/libnccl.so.2.28.3
         compat/nccl/nccl_conformance_device)
prebuilt_runs() {
  for target in "${TARGETS[@]}"; do [ -f "$1/$target" ] || return 1; done
  "$1/tests/gpu/braid_gpu_kernel_tests" --gtest_list_tests >/dev/null 2>&1 &&
    "$1/perf/braid-perf" --help >/dev/null 2>&1
}
if [ -n "${BRAID_GPU_CHECK_PREBUILT:-}" ] && prebuilt_runs "$BRAID_GPU_CHECK_PREBUILT"; then
  BUILD=$BRAID_GPU_CHECK_PREBUILT
  say "   using the programs built in $BUILD"
else
  [ -n "${BRAID_GPU_CHECK_PREBUILT:-}" ] && say "   $BRAID_GPU_CHECK_PREBUILT does not run here: building"
  # BRAID_GPU_CHECK_REUSE=1 keeps an existing build (a rerun after a timeout, say).
  if [ -z "${BRAID_GPU_CHECK_REUSE:-}" ] || [ ! -f "$BUILD/build.ninja" ]; then
    rm -rf "$BUILD"
    step configure 90 meson setup "$BUILD" "${options[@]}" || finish
  fi
  step build 270 ninja -C "$BUILD" "${TARGETS[@]}" || finish
fi

# counts XML: one line of test counts; fails when a test that needs a GPU was skipped (only the
# GpuAbsent tests skip on a machine that has one).
counts() {
  [ -f "$1" ] || { say "      no test report"; FAILED=1; return; }
  python3 - "$1" <<'EOF' | tee -a "$SUMMARY"
import sys, xml.etree.ElementTree as ET
ran = failed = skipped = 0
unexpected = []
for c in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    ran += 1
    if c.find("failure") is not None:
        failed += 1
    elif c.find("skipped") is not None or c.get("result") == "skipped":
        skipped += 1
        if not c.get("classname", "").startswith("GpuAbsent"):
            unexpected.append(c.get("classname") + "." + c.get("name"))
print(f"      {ran} tests: {ran - failed - skipped} passed, {failed} failed, {skipped} skipped")
if unexpected:
    print(f"      skipped although they need the GPU (no GPU visible?): {', '.join(unexpected[:4])}"
          + (" ..." if len(unexpected) > 4 else ""))
sys.exit(1 if unexpected else 0)
EOF
  [ "${PIPESTATUS[0]}" -eq 0 ] || FAILED=1
}

# ---- Several rank processes share GPU 0: without MPS the GPU time-slices their kernels, and
# every hand-off between ranks waits for a slice (about 2.5 ms per step on an H200). Start an MPS
# daemon of our own when the driver has one (BRAID_GPU_CHECK_MPS=0: leave it off).
MPS_CONTROL=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null)
if [ "${BRAID_GPU_CHECK_MPS:-1}" != 0 ] && [ -n "$MPS_CONTROL" ]; then
  export CUDA_MPS_PIPE_DIRECTORY=$PWD/$LOGS/mps CUDA_MPS_LOG_DIRECTORY=$PWD/$LOGS/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if "$MPS_CONTROL" -d; then
    say "   MPS daemon started: rank processes share the GPU"
    trap 'echo quit | "$MPS_CONTROL" >/dev/null 2>&1' EXIT
  else
    say "   MPS did not start: rank processes time-slice the GPU"
  fi
else
  say "   no MPS: rank processes time-slice the GPU"
fi

# ---- Tests. The kernel tests use CUDA in-process; the collective tests fork rank processes.
if part base; then
step kernel_tests 60 "$BUILD/tests/gpu/braid_gpu_kernel_tests" \
  --gtest_output="xml:$LOGS/kernel_tests.xml"
counts "$LOGS/kernel_tests.xml"
step stream_graph_failure_tests 100 "$BUILD/tests/gpu/braid_gpu_tests" \
  --gtest_filter='GpuStream.*:GpuFailure.*:GpuAbsent.*' --gtest_output="xml:$LOGS/stream_tests.xml"
counts "$LOGS/stream_tests.xml"
# Two ranks with the defaults first, so that a hang further on still leaves a verdict on them.
step collective_tests_n2 45 "$BUILD/tests/gpu/braid_gpu_tests" \
  --gtest_filter='Ranks/GpuCollectiveTest.*/n2_defaults' \
  --gtest_output="xml:$LOGS/collective_tests_n2.xml"
counts "$LOGS/collective_tests_n2.xml"
step collective_tests 120 "$BUILD/tests/gpu/braid_gpu_tests" \
  --gtest_filter='Ranks/GpuCollectiveTest.*-*/n2_defaults' \
  --gtest_output="xml:$LOGS/collective_tests.xml"
counts "$LOGS/collective_tests.xml"

# The outside conformance program (nccl.h and the CUDA runtime only) on device buffers, 4 ranks.
step conformance_device 60 "$BUILD/compat/nccl/nccl_conformance_device" 4
grep -E "all checks passed|skipped" "$LOGS/conformance_device.log" | sed 's/^/      /' \
  | tee -a "$SUMMARY"

# ---- Kernel bandwidth against cudaMemcpy.
step gpu_benchmark 60 "$BUILD/tests/gpu/gpu_benchmark" --benchmark_min_time=0.1 \
  --benchmark_out="$LOGS/gpu_benchmark.json" --benchmark_out_format=json
if [ -f "$LOGS/gpu_benchmark.json" ]; then
  python3 - "$LOGS/gpu_benchmark.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
errors = [r for r in runs if r.get("error_occurred")]
if errors:
    print(f"   {len(errors)} benchmark(s) failed, e.g. {errors[0]['name']}: {errors[0].get('error_message')}")
    sys.exit(1)
rate = {r["name"].replace("/manual_time", ""): r.get("bytes_per_second", 0) / 1e12 for r in runs}
sizes = sorted({int(n.rsplit("/", 1)[1]) for n in rate})
for size in sizes:
    d2d = rate.get(f"MemcpyD2D/{size}", 0)
    print(f"   {size >> 20:4d} MiB: cudaMemcpy D2D {d2d:.2f} TB/s (read+write)")
    for name in sorted(n for n in rate if n.endswith(f"/{size}") and not n.startswith("MemcpyD2D")):
        tbs = rate[name]
        print(f"            {name.rsplit('/', 1)[0]:24s} {tbs:.2f} TB/s = {100 * tbs / d2d if d2d else 0:5.1f}% of D2D")
big = sizes[-1] if sizes else 0
d2d = rate.get(f"MemcpyD2D/{big}", 0)
red = rate.get(f"Reduce/float/sum/{big}", 0)
if d2d:
    verdict = "meets" if red >= 0.9 * d2d else "misses"
    print(f"   float sum reduce at {big >> 20} MiB: {100 * red / d2d:.1f}% of D2D ({verdict} the 90% goal)")
EOF
  [ "${PIPESTATUS[0]}" -eq 0 ] || FAILED=1
fi

# ---- braid-perf on device buffers, ranks as processes sharing GPU 0.
for np in 2 4; do
  step "braid_perf_allreduce_np$np" 45 "$BUILD/perf/braid-perf" allreduce --np "$np" --device \
    -b 8 -e 256M -f 8 -n 5 -w 2 -c 1 -T 30
  grep -E "^ +[0-9]+ " "$LOGS/braid_perf_allreduce_np$np.log" | tail -n 3 | sed 's/^/      /' \
    | tee -a "$SUMMARY"
  grep -iE "bus bandwidth|wrong" "$LOGS/braid_perf_allreduce_np$np.log" | tail -n 2 \
    | sed 's/^/      /' | tee -a "$SUMMARY"
done

for coll in broadcast reduce allgather reducescatter alltoall; do
  step "braid_perf_${coll}_np2" 30 "$BUILD/perf/braid-perf" "$coll" --np 2 --device \
    -b 1K -e 64M -f 64 -n 5 -w 2 -c 1 -T 20
  grep -E "^ +[0-9]+ " "$LOGS/braid_perf_${coll}_np2.log" | tail -n 1 | sed "s/^/      $coll /" \
    | tee -a "$SUMMARY"
done

fi  # part base

# ---- Speed on one host: what the GPU check must confirm before BRAID_DEVICE_PROTO=auto may
# choose the low-latency protocol (docs/performance-notes.md#device-call-speed): the collectives
# exact with it (every algorithm, n = 2, 3, 4, lines written by one 16-byte store never seen torn),
# small all-reduces in stream and graph mode with each protocol against the goals (8 B: at most
# 10 us at 2 ranks, 15 us at 4), 128 MiB against the HBM bound, and the host side of a call
# against an empty launch.
if part speed; then
  step ll_collective_tests 200 env BRAID_DEVICE_PROTO=ll "$BUILD/tests/gpu/braid_gpu_tests" \
    --gtest_filter='Ranks/GpuCollectiveTest.*:GpuStream.*' --gtest_output="xml:$LOGS/ll_tests.xml"
  counts "$LOGS/ll_tests.xml"
  step device_call_benchmark 40 "$BUILD/tests/gpu/device_call_benchmark" \
    --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
  grep -E "_median|_mean" "$LOGS/device_call_benchmark.log" | sed 's/^/      /' | tee -a "$SUMMARY"
  for np in 2 4; do
    for proto in simple ll; do
      for mode in "" "-G 1" "--sync-each-call"; do
        name="small_np${np}_${proto}_$(echo "${mode:-stream}" | tr -dc 'a-zG1')"
        # shellcheck disable=SC2086
        step "$name" 40 env BRAID_DEVICE_PROTO=$proto "$BUILD/perf/braid-perf" allreduce \
          --np "$np" --device -b 8 -e 64K -f 8 -n 200 -w 20 -c 1 -T 30 $mode
        grep -E "^# Device calls|^ +8 " "$LOGS/$name.log" | sed "s/^/      $name /" \
          | tee -a "$SUMMARY"
      done
    done
  done
  step large_np2 60 "$BUILD/perf/braid-perf" allreduce --np 2 --device -b 128M -e 128M -n 20 \
    -w 3 -c 1 -T 30
  grep -E "^ +134217728 " "$LOGS/large_np2.log" | sed 's/^/      large_np2 /' | tee -a "$SUMMARY"
fi

# ---- Device buffers across hosts (staged through pinned host memory, over RDMA where this
# machine has a port, and over TCP): ranks sharing GPU 0 split into two BRAID_HOSTIDs, every
# collective x algorithm at n = 2, 3, 4, a graph replayed over staged FIFOs, the error when ib
# and socket are excluded; the outside conformance program on device buffers across the two
# "hosts" over TCP; then braid-perf on device buffers over sockets beside the same sweep on host
# memory (goal: device busbw at least 80% of host busbw from 16 MiB up).
if part staged; then
  step staged_tests_n2 120 "$BUILD/tests/gpu/braid_gpu_tests" \
    --gtest_filter='Staged/GpuStagedCollectiveTest.*/n2_*:GpuStaged.*' \
    --gtest_output="xml:$LOGS/staged_tests_n2.xml"
  counts "$LOGS/staged_tests_n2.xml"
  step staged_tests 200 "$BUILD/tests/gpu/braid_gpu_tests" \
    --gtest_filter='Staged/GpuStagedCollectiveTest.*-*/n2_*' \
    --gtest_output="xml:$LOGS/staged_tests.xml"
  counts "$LOGS/staged_tests.xml"
  # Ranks 0-1 and 2-3 two "hosts": all-reduce from 1 MiB is hierarchical over the staged hops.
  step conformance_device_two_hosts 90 env BRAID_TRANSPORT=shm,p2p,socket BRAID_DEBUG=INFO \
    BRAID_DEBUG_SUBSYS=TUNE "$BUILD/compat/nccl/nccl_conformance_device" --hosts 2 4
  grep -E "all checks passed|skipped|device calls span" "$LOGS/conformance_device_two_hosts.log" \
    | head -n 2 | sed 's/^/      /' | tee -a "$SUMMARY"
  for np in 2 4; do
    step "braid_perf_staged_device_np$np" 60 env BRAID_TRANSPORT=socket "$BUILD/perf/braid-perf" \
      allreduce --np "$np" --device -b 8 -e 256M -f 8 -n 5 -w 2 -c 1 -T 30
    step "braid_perf_staged_host_np$np" 60 env BRAID_TRANSPORT=socket "$BUILD/perf/braid-perf" \
      allreduce --np "$np" -b 8 -e 256M -f 8 -n 5 -w 2 -c 1 -T 30
    python3 - "$LOGS/braid_perf_staged_device_np$np.log" "$LOGS/braid_perf_staged_host_np$np.log" \
      "$np" <<'EOF' | tee -a "$SUMMARY"
import sys
def busbw(path):
    rows = {}
    try:
        for line in open(path):
            f = line.split()
            if len(f) > 7 and f[0].isdigit():
                rows[int(f[0])] = float(f[7])  # size, out-of-place busbw
    except (OSError, ValueError):
        pass
    return rows
dev, host = busbw(sys.argv[1]), busbw(sys.argv[2])
np_ = sys.argv[3]
for size in sorted(s for s in dev if s in host and s >= 16 << 20):
    ratio = dev[size] / host[size] if host[size] else 0
    verdict = "meets" if ratio >= 0.8 else "misses"
    print(f"   np{np_} {size >> 20:4d} MiB over TCP: device {dev[size]:.2f} GB/s, host "
          f"{host[size]:.2f} GB/s = {100 * ratio:.0f}% ({verdict} the 80% goal)")
EOF
  done
fi

# ---- PyTorch's nccl backend on the shim (where this python3 has torch with CUDA): on one host
# (base), and across two BRAID_HOSTIDs over the staged path (staged).
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  torch_lib=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))")
  # The NCCL functions PyTorch imports that the shim does not export (informational).
  nm -D --undefined-only "$torch_lib"/libtorch_cuda.so 2>/dev/null | awk '{print $2}' \
    | grep -E '^(nccl|pnccl)' | sort -u >"$LOGS/torch_nccl_imports.txt"
  nm -D --defined-only "$BUILD/compat/nccl/libnccl.so.2.28.3" | awk '{print $3}' | sort -u \
    >"$LOGS/shim_exports.txt"
  say "   PyTorch imports $(wc -l <"$LOGS/torch_nccl_imports.txt") NCCL symbols; not in the shim:" \
    "$(comm -23 "$LOGS/torch_nccl_imports.txt" "$LOGS/shim_exports.txt" | tr '\n' ' ')"
  if part base; then
    # The braid backend's own tests on CUDA tensors (bindings/python/torch_tests/ranks.py).
    if python3 -c "import pytest" 2>/dev/null; then
      step torch_backend_cuda 150 env PYTHONUNBUFFERED=1 PYTHONPATH=bindings/python \
        BRAID_LIBRARY="$BUILD/libbraid.so.0" BRAID_TORCH_TEST_DEVICE=cuda \
        python3 -m pytest -q -p no:cacheprovider bindings/python/torch_tests/test_collectives.py
      tail -n 3 "$LOGS/torch_backend_cuda.log" | sed 's/^/      /' | tee -a "$SUMMARY"
    else
      say "SKIP  torch_backend_cuda: no pytest for this python3"
    fi
    step torch_ddp 150 env PYTHONUNBUFFERED=1 python3 compat/nccl/tests/torch_ddp.py \
      "$BUILD/compat/nccl/libnccl.so.2.28.3"
    grep -E "^torch |^DDP |FAILED|exit codes" "$LOGS/torch_ddp.log" | head -n 8 \
      | sed 's/^/      /' | tee -a "$SUMMARY"
  fi
  if part staged; then
    step torch_ddp_two_hosts 150 env PYTHONUNBUFFERED=1 python3 compat/nccl/tests/torch_ddp.py \
      --two-hosts "$BUILD/compat/nccl/libnccl.so.2.28.3"
    grep -E "^torch |^DDP |FAILED|exit codes" "$LOGS/torch_ddp_two_hosts.log" | head -n 8 \
      | sed 's/^/      /' | tee -a "$SUMMARY"
  fi
else
  say "SKIP  torch_ddp: no python3 with CUDA-enabled torch"
fi

finish
