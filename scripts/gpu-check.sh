#!/usr/bin/env bash
# The GPU check: one command for a GPU machine whose python3 holds a CUDA
# PyTorch (2.11 with CUDA 13), with CMake, ninja and nvcc, and nothing to
# download (only this repository's files). It builds the runtime against that
# PyTorch's LibTorch, then on the GPU:
#   wrapped   DDP with NCCL at world size 1 (ddprun --nproc-per-node 1,
#             DDP_GROUP_OF_ONE=1: a real NCCL process group, buckets,
#             SyncBatchNorm's collectives, the shape check, the broadcast)
#             against the same model trained without the wrapper (1e-5)
#   ranks     2 ranks sharing the GPU over Gloo with CUDA tensors
#             (DDP_DEVICE=cuda:0): identical on both ranks and equal to 1x2B
#   example   test/gpu/migrated/device_demo (examples/device_demo migrated by
#             ddpify beforehand: --prepare) trained on the GPU, under ddprun
#             with a group of one: its losses equal the original's
#   bench     ms per step of an MLP through ddp's wrapper and through
#             PyTorch's own DDP, world size 1, same GPU
# and prints one table; exit 0 when every check passed. See docs/libtorch.md.
#
#   scripts/gpu-check.sh [WORK_DIR]       (default /tmp/ddpify-gpu-check)
#   GPU_CHECK_DEVICE=cpu scripts/gpu-check.sh [WORK_DIR]
#       the dry run for a machine without a GPU: every step on the CPU (Gloo)
#   scripts/gpu-check.sh --prepare [OUT]  (where the tool is built)
#       migrates examples/device_demo into OUT (test/gpu/migrated/device_demo)
#       with ${DDPIFY:-build/bin/ddpify}; ctest gpu_check.migrated_current
#       fails when the committed copy is not what the tool makes today
# PYTHON (default python3) is the interpreter holding torch.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
jobs=$(nproc)

if [[ ${1:-} == --prepare ]]; then
  ddpify=${DDPIFY:-$root/build/bin/ddpify}
  out=${2:-$root/test/gpu/migrated/device_demo}
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # The compilation database of the original, against any LibTorch.
  cmake -S "$root/examples/device_demo" -B "$tmp/build" -G Ninja \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
  rm -rf "$out"
  "$ddpify" migrate --root "$root/examples/device_demo" -p "$tmp/build" \
    --out-dir "$out" --quiet "$root/examples/device_demo/main.cpp"
  echo "gpu-check: examples/device_demo migrated into $out"
  exit 0
fi

work=${1:-/tmp/ddpify-gpu-check}
mkdir -p "$work"
work=$(cd "$work" && pwd)
log=$work/logs
mkdir -p "$log"
start=$(date +%s)

# step NAME COMMAND...: runs COMMAND with its output in logs/NAME.log; on
# failure prints the log's tail and stops.
step() {
  local name=$1
  shift
  if ! "$@" >"$log/$name.log" 2>&1; then
    echo "gpu-check: $name failed ($log/$name.log):" >&2
    tail -30 "$log/$name.log" >&2
    exit 1
  fi
}

read -r torch_version cuda_version gpus < <("$python" -c '
import torch
print(torch.__version__, torch.version.cuda, torch.cuda.device_count() if torch.cuda.is_available() else 0)')
prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
device=${GPU_CHECK_DEVICE:-cuda}
if [[ $device == cuda ]]; then
  if ((gpus == 0)); then
    echo "gpu-check: $python's torch $torch_version sees no GPU (GPU_CHECK_DEVICE=cpu is the dry run)" >&2
    exit 2
  fi
  backend=nccl
  gloo_env=(DDP_DEVICE=cuda:0)
  demo_args=()
else
  backend=gloo
  gloo_env=()
  demo_args=(--no-cuda)
fi
echo "gpu-check: torch $torch_version (CUDA $cuda_version), $gpus GPU(s), device $device, in $work"

# The runtime and ddprun against this PyTorch's LibTorch (no tests: GTest
# may be missing), then the check program, the original and the migrated
# example against it.
step configure-runtime cmake -S "$root" -B "$work/runtime" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DDDPIFY_BUILD_TOOL=OFF -DDDPIFY_BUILD_TESTS=OFF \
  -DDDPIFY_REGISTER_PACKAGE=OFF -DCMAKE_PREFIX_PATH="$prefix"
if [[ $device == cuda ]] && ! grep -q "NCCL backend ON" "$log/configure-runtime.log"; then
  echo "gpu-check: the runtime was configured without NCCL:" >&2
  grep "ddp runtime" "$log/configure-runtime.log" >&2
  exit 1
fi
step build-runtime cmake --build "$work/runtime" -j "$jobs"
ddprun=$work/runtime/bin/ddprun
torch_lib=$(cd "$prefix/../../lib" && pwd)
step configure-check cmake -S "$root/test/gpu" -B "$work/check" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/runtime;$prefix"
step configure-original cmake -S "$root/examples/device_demo" -B "$work/original" \
  -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_LIBRARY_PATH="$torch_lib"
step configure-migrated cmake -S "$root/test/gpu/migrated/device_demo" \
  -B "$work/migrated" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/runtime;$prefix"
step build-check cmake --build "$work/check" -j "$jobs"
step build-original cmake --build "$work/original" -j "$jobs"
step build-migrated cmake --build "$work/migrated" -j "$jobs"
build_s=$(($(date +%s) - start))
check=$work/check/ddp_gpu_check

declare -a rows
status=0
# record NAME LOGFILE: the RESULT line of LOGFILE as a row of the table.
record() {
  local name=$1 file=$2 line
  line=$(grep -m1 "^RESULT" "$file" || true)
  if [[ -z $line ]] || [[ $line == *"ok=0"* ]] || [[ ${3:-0} != 0 ]]; then
    rows+=("$(printf '| %-8s | FAIL | %s |' "$name" "${line:-no result, see $file}")")
    status=1
  else
    rows+=("$(printf '| %-8s | ok   | %s |' "$name" "${line#RESULT * ok=1 }")")
  fi
}

# run NAME COMMAND...: COMMAND's exit status and output (logs/NAME.log).
run() {
  local name=$1
  shift
  local rc=0
  timeout 300 "$@" >"$log/$name.log" 2>&1 || rc=$?
  record "$name" "$log/$name.log" "$rc"
}

run wrapped env DDP_GROUP_OF_ONE=1 "$ddprun" --nproc-per-node 1 -- \
  "$check" wrapped --backend "$backend" --steps 10
run ranks env DDP_BACKEND=gloo "${gloo_env[@]}" "$ddprun" --nproc-per-node 2 -- \
  "$check" ranks --backend gloo --steps 10

# The migrated example against the original, same device, in folders of
# their own (both write their checkpoint into the current folder).
mkdir -p "$work/run-original" "$work/run-migrated"
rc=0
(cd "$work/run-original" && timeout 300 "$work/original/device_demo" "${demo_args[@]}") \
  >"$log/example-original.log" 2>&1 || rc=$?
(cd "$work/run-migrated" && timeout 300 env DDP_GROUP_OF_ONE=1 "$ddprun" \
  --nproc-per-node 1 -- "$work/migrated/device_demo" "${demo_args[@]}") \
  >"$log/example-migrated.log" 2>&1 || rc=$?
grep "^epoch" "$log/example-original.log" >"$work/original-losses.txt" || true
grep "^epoch" "$log/example-migrated.log" >"$work/migrated-losses.txt" || true
epochs=$(wc -l <"$work/original-losses.txt")
if ((rc == 0 && epochs > 0)) && cmp -s "$work/original-losses.txt" "$work/migrated-losses.txt"; then
  last=$(tail -1 "$work/migrated-losses.txt" | tr -s ' ')
  echo "RESULT example ok=1 device=$device epochs=$epochs losses=equal last='$last'" >"$log/example.log"
else
  echo "RESULT example ok=0 device=$device exit=$rc epochs=$epochs losses=differ (see $work/*-losses.txt)" >"$log/example.log"
fi
record example "$log/example.log"

run bench env DDP_GROUP_OF_ONE=1 "$ddprun" --nproc-per-node 1 -- \
  "$check" bench --backend "$backend" --steps 50
run torch env "$python" "$root/test/gpu/torch_ddp_step.py" --device "$device" --steps 50

echo
echo "ddpify GPU check: torch $torch_version (CUDA $cuda_version), device $device," \
  "build $build_s s, total $(($(date +%s) - start)) s"
echo "| check    | ok   | result |"
echo "| -------- | ---- | ------ |"
printf '%s\n' "${rows[@]}"
exit $status
