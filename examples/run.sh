#!/usr/bin/env bash
# Runs one example by name, building Braid first when no build is there:
#   examples/run.sh data_parallel_sgd
# Names: data_parallel_sgd parameter_server_sgd pipeline_parallel tensor_parallel hybrid_parallel
#        elastic_shrink_sgd nccl_allreduce
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
name=${1:?usage: examples/run.sh NAME (data_parallel_sgd, parameter_server_sgd, pipeline_parallel, tensor_parallel, hybrid_parallel, elastic_shrink_sgd, nccl_allreduce)}
shift
build=${BRAID_BUILD_DIR:-$root/build}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
if [ ! -e "$build/libbraid.so.0" ] || { [ "$name" = nccl_allreduce ] && [ ! -x "$build/examples/nccl_allreduce" ]; }; then
  BRAID_BUILD_DIR="$build" "$root/braid.sh" build
fi
if [ "$name" = nccl_allreduce ]; then
  exec "$build/examples/nccl_allreduce" "$@"
fi
[ -f "$here/$name.py" ] || { echo "run.sh: no example named $name" >&2; exit 2; }
python=""
for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$candidate" ] && command -v "$candidate" >/dev/null &&
     "$candidate" -c 'import numpy' 2>/dev/null; then
    python=$candidate
    break
  fi
done
if [ -z "$python" ]; then
  echo "run.sh: no Python with NumPy found (Debian: apt-get install python3-numpy)" >&2
  exit 1
fi
export BRAID_LIBRARY=${BRAID_LIBRARY:-$build/libbraid.so.0}
exec "$python" "$here/$name.py" "$@"
