#!/bin/sh
# Builds and runs the DDP benchmark (not part of the tests).
#   bench/runtime/run.sh [BUILD_DIR] [REPS]
# BUILD_DIR: a build tree of this project (default: build); its ddp_runtime is
# built if needed, the benchmark goes into BUILD_DIR/bench-runtime.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
reps=${2:-5}
cmake --build "$build" --target ddp_runtime -j 2
cmake -S "$root/bench/runtime" -B "$build/bench-runtime" -G Ninja \
  -DDDP_BUILD_DIR="$build" >/dev/null
cmake --build "$build/bench-runtime" -j 2
exec /usr/bin/python3 "$root/bench/runtime/bench.py" \
  --bench "$build/bench-runtime/ddp_bench" --reps "$reps"
