#!/bin/sh
# Socket transport latency and bandwidth between two network namespaces joined by a veth pair
# (root; iproute2). Usage: tests/net/netns_bench.sh <build dir> [extra benchmark flags]
# Optional: NETEM="delay 1ms rate 1gbit" shapes the link (needs sch_netem), TBF="rate 1gbit"
# shapes it with a token bucket where netem is missing.
set -eu
build=${1:?usage: $0 <build dir> [benchmark flags]}
shift
a=braidbench$$a
b=braidbench$$b
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add "$a"
ip netns add "$b"
ip -n "$a" link add eth0 type veth peer name eth0 netns "$b"
ip -n "$a" addr add 10.209.0.1/24 dev eth0
ip -n "$b" addr add 10.209.0.2/24 dev eth0
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  if [ -n "${NETEM:-}" ]; then ip netns exec "$ns" tc qdisc add dev eth0 root netem $NETEM; fi
  if [ -n "${TBF:-}" ]; then
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf $TBF burst 256kb latency 100ms
  fi
done
BRAID_BENCH_NETNS="$a,$b" "$build/perf/braid_benchmarks" --benchmark_filter=Socket "$@"
