#!/bin/sh
# Times training programs in one process against their migration on 2 ranks
# (not part of the tests; bench/programs/bench.py says what it does).
#   bench/programs/run.sh [BUILD_DIR] [REPS] [PROGRAM ...]   (--all: every
#   idiom that trains)
# BUILD_DIR: a build tree of this project (default: build); its ddpify,
# ddprun and runtime are built if needed, the programs' builds go into
# BUILD_DIR/bench-programs. Run it on a quiet machine.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
reps=${2:-3}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
cmake --build "$build" --target ddpify ddprun ddp_runtime -j 2 >/dev/null
exec /usr/bin/python3 "$root/bench/programs/bench.py" --build-dir "$build" \
  --reps "$reps" "$@"
