#!/usr/bin/env bash
# Quick start (1): the whole flow on a bundled example (examples/mnist by
# default). Installs what is missing, builds ddpify and the ddp runtime,
# writes the example's input data, exports its compilation database, shows
# `ddpify diff`, migrates it into build/demo/<example>-migrated, builds the
# migrated program against the runtime and trains it on 2 CPU processes with
# ddprun: each loss line is printed once, by rank 0.
#
#   scripts/demo.sh [mnist|resnet|dcgan|csv_regression|device_demo]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
example=${1:-mnist}
src="$root/examples/$example"
[[ -d "$src" ]] || { echo "demo: no example '$example' under examples/" >&2; exit 2; }
demo="$build/demo"
step() { printf '\n== %s ==\n' "$*" >&2; }

step "installing missing packages"
bash "$root/scripts/install-deps.sh" >&2

step "building ddpify, the ddp runtime and ddprun into $build"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$build" --target ddpify ddp_runtime ddprun >&2
ddpify="$build/bin/ddpify"
ddprun="$build/bin/ddprun"

mkdir -p "$demo"
# The program's arguments: small runs of a few seconds on CPUs.
case "$example" in
  mnist)
    data="$demo/mnist-data"
    if [[ ! -f "$data/t10k-labels-idx1-ubyte" ]]; then
      step "writing a synthetic MNIST into $data"
      # /usr/bin/python3 has numpy (a dependency of python3-torch).
      /usr/bin/python3 "$src/make_synthetic_mnist.py" "$data" >&2
    fi
    run_args=("$data" 2 50) ;;
  resnet) run_args=(3) ;;
  dcgan) run_args=(3 3) ;;
  csv_regression) run_args=("$demo/csv_regression-data.csv" 10) ;;
  *) run_args=() ;;
esac

step "exporting the compilation database of examples/$example"
db="$demo/$example-db"
cmake -S "$src" -B "$db" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null

step "ddpify diff examples/$example"
set +e
"$ddpify" diff --root "$src" -p "$db" "$src"/*.cpp
status=$?
set -e
# Exit 1 only means "changes pending".
[[ $status -le 1 ]] || exit "$status"

step "ddpify migrate into $demo/$example-migrated"
out="$demo/$example-migrated"
rm -rf "$out"
"$ddpify" migrate --root "$src" --out-dir "$out" -p "$db" "$src"/*.cpp

step "building the migrated program (find_package(ddpify) from $build)"
cmake -S "$out" -B "$out-build" -G Ninja -DCMAKE_PREFIX_PATH="$build" >/dev/null
cmake --build "$out-build" >&2

if [[ $example == csv_regression && ! -f ${run_args[0]} ]]; then
  # The example writes its own synthetic data set.
  "$out-build/csv_regression" --write-sample "${run_args[0]}"
fi

step "training on 2 CPU processes: ddprun --nproc-per-node 2 $example ${run_args[*]}"
rundir="$demo/$example-run"
mkdir -p "$rundir"
cd "$rundir"
OMP_NUM_THREADS=1 "$ddprun" --nproc-per-node 2 "$out-build/$example" "${run_args[@]}"
step "done: the migrated tree is $out, the checkpoint is in $rundir"
