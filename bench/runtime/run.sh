#!/bin/sh
# Builds and runs the DDP benchmark (not part of the tests).
#   bench/runtime/run.sh [BUILD_DIR] [REPS]
#   bench/runtime/run.sh multihost [BUILD_DIR] [REPS]   (root: test hosts, a
#       rate-limited link at 1 and 10 Gbit/s; bench/runtime/multihost.py)
#   bench/runtime/run.sh sync-check [BUILD_DIR] [REPS]  (the safety nets'
#       cost: the defaults, K = 1 and 100 against every net off;
#       bench/runtime/sync_check.py; SYNC_CHECK_ARGS passes --steps and
#       --config to it)
#   bench/runtime/run.sh zero [BUILD_DIR] [REPS]  (ddp::ZeroRedundancyOptimizer
#       against the unsharded optimizer: state per rank, step time;
#       bench/runtime/zero.py)
#   bench/runtime/run.sh versus BASELINE_BUILD [BUILD_DIR] [REPS]  (the
#       runtime's step time against a build of an earlier commit's runtime,
#       pair by pair: a change's cost on the fast path; bench/runtime/versus.py)
# BUILD_DIR: a build tree of this project (default: build); its ddp_runtime is
# built if needed, the benchmark goes into BUILD_DIR/bench-runtime. PyTorch's
# DDP, the reference, is the PyTorch of BUILD_DIR's LibTorch: Debian's
# python3-torch (1.13) for build/, the wheel's own package (run with the
# interpreter it was installed for) for build-torch2/.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=local
baseline=
if [ "${1:-}" = multihost ] || [ "${1:-}" = sync-check ] ||
  [ "${1:-}" = zero ]; then
  mode=$1
  shift
elif [ "${1:-}" = versus ]; then
  mode=versus
  baseline=$(cd "$2" && pwd)
  shift 2
fi
build=$(cd "${1:-$root/build}" && pwd)
reps=${2:-5}
cmake --build "$build" --target ddp_runtime ddprun -j 2
cmake -S "$root/bench/runtime" -B "$build/bench-runtime" -G Ninja \
  -DDDP_BUILD_DIR="$build" >/dev/null
cmake --build "$build/bench-runtime" -j 2
torch_dir=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
python=/usr/bin/python3
case "$torch_dir" in
*/torch/share/cmake/Torch)
  # The wheel: Torch_DIR is <site>/torch/share/cmake/Torch.
  export PYTHONPATH="${torch_dir%/torch/share/cmake/Torch}${PYTHONPATH:+:$PYTHONPATH}"
  python=$(python3 -c 'import sys; print(sys.executable)')
  ;;
esac
echo "reference: $("$python" -c 'import torch; print("PyTorch", torch.__version__, torch.__file__)')"
if [ "$mode" = multihost ]; then
  compression=bf16
  "$python" -c 'import torch, sys; sys.exit(int(torch.__version__.split(".")[0]) < 2)' ||
    compression=fp16 # LibTorch 1.13's Gloo has no bfloat16
  exec /usr/bin/python3 "$root/bench/runtime/multihost.py" --python "$python" \
    --ddprun "$build/bin/ddprun" --bench "$build/bench-runtime/ddp_bench" \
    --reps "$reps" --compression "$compression"
fi
if [ "$mode" = sync-check ]; then
  exec "$python" "$root/bench/runtime/sync_check.py" \
    --bench "$build/bench-runtime/ddp_bench" --reps "$reps" \
    ${SYNC_CHECK_ARGS:-}
fi
if [ "$mode" = versus ]; then
  # The baseline's benchmark is its own tree's, built against its runtime.
  cmake --build "$baseline" --target ddp_runtime ddprun -j 2
  cmake -S "$root/bench/runtime" -B "$baseline/bench-runtime" -G Ninja \
    -DDDP_BUILD_DIR="$baseline" >/dev/null
  cmake --build "$baseline/bench-runtime" -j 2
  cd "$root/bench/runtime"
  exec "$python" versus.py --bench "$build/bench-runtime/ddp_bench" \
    --baseline "$baseline/bench-runtime/ddp_bench" --reps "$reps"
fi
if [ "$mode" = zero ]; then
  exec "$python" "$root/bench/runtime/zero.py" \
    --bench "$build/bench-runtime/ddp_bench" --reps "$reps"
fi
exec "$python" "$root/bench/runtime/bench.py" --python "$python" \
  --bench "$build/bench-runtime/ddp_bench" --reps "$reps"
