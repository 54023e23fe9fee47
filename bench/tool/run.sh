#!/usr/bin/env bash
# Times ddpify against the compiler on generated LibTorch codebases.
#
#   bench/tool/run.sh [BUILD_DIR] [SIZES] [REPS] [SLOW_REPS] [SHAPES]
#
# For each shape and size (default "1 8 32" translation units, each a copy of
# one of examples/*/main.cpp with its own name and a distinct first line),
# times in the same run, alternating, REPS times (default 3). SHAPES (default
# "torch header fine") say how the units reach LibTorch:
#   torch   #include <torch/torch.h> first, as the examples do
#   header  a project header first ("project.h", with an include guard and a
#           function of its own), which includes <torch/torch.h>
#   fine    fine-grained headers: <torch/nn.h>, <torch/optim.h>,
#           <torch/data.h>, <torch/serialize.h>, <torch/cuda.h>
# The runs:
#   clang              clang++-19 -fsyntax-only of every file, one after another
#   migrate-nocache-*  ddpify migrate --out-dir --no-cache (bodies outside the
#                      project still skipped), at -j 1 and the default -j
#   migrate-cold-j1    with an empty header cache (builds the PCH)
#   migrate-warm-*     with the cache the cold run left, -j 1 and default -j
#   lint-warm-*        ddpify lint, warm cache, -j 1 and default -j
# SLOW_REPS (default REPS) bounds the repetitions of the slow runs (clang and
# the no-cache runs): at 32 units one clang pass takes about six minutes.
# Prints the median seconds and their ratio to clang, the median CPU seconds
# (user + system) and their ratio, and the peak RSS (the
# largest single clang process; the whole ddpify process, which holds -j
# parses at once). Not part of the tests: run it on a quiet machine.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
SIZES="${2:-1 8 32}"
REPS="${3:-3}"
SLOW_REPS="${4:-$REPS}"
SHAPES="${5:-torch header fine}"
DDPIFY="$BUILD/bin/ddpify"
[ -x "$DDPIFY" ] || { echo "bench/tool: no $DDPIFY; build first" >&2; exit 2; }
WORK="$BUILD/bench-tool"
FLAGS=(-std=c++17 -I/usr/include/torch/csrc/api/include -I/usr/include)
EXAMPLES=("$ROOT"/examples/{mnist,resnet,dcgan,csv_regression,device_demo}/main.cpp)

# generate SHAPE N: a project of N translation units and its
# compile_commands.json.
generate() {
  local shape=$1 n=$2 dir="$WORK/$1-tu$2"
  rm -rf "$dir"; mkdir -p "$dir/src"
  local torch_include='#include <torch/torch.h>'
  case $shape in
    torch) ;;
    header)
      printf '%s\n' '#ifndef PROJECT_H' '#define PROJECT_H' "$torch_include" '' \
        'inline int64_t project_batch_size() { return 64; }' '' '#endif' \
        >"$dir/src/project.h"
      torch_include='#include "project.h"' ;;
    fine)
      torch_include='#include <torch/nn.h>\n#include <torch/optim.h>\n#include <torch/data.h>\n#include <torch/serialize.h>\n#include <torch/cuda.h>' ;;
    *) echo "bench/tool: unknown shape $shape" >&2; exit 2 ;;
  esac
  for ((i = 0; i < n; ++i)); do
    local src="${EXAMPLES[$((i % ${#EXAMPLES[@]}))]}"
    { echo "// bench variant $i of $(basename "$(dirname "$src")")"
      sed "s|^#include <torch/torch.h>|$torch_include|" "$src"; } \
      >"$dir/src/train_$i.cpp"
  done
  /usr/bin/python3 - "$dir" "${FLAGS[@]}" <<'PY'
import json, pathlib, sys
root, flags = pathlib.Path(sys.argv[1]), sys.argv[2:]
json.dump([{"directory": str(root), "file": str(f),
            "arguments": ["clang++-19", *flags, "-c", str(f)]}
           for f in sorted((root / "src").glob("*.cpp"))],
          open(root / "compile_commands.json", "w"), indent=1)
PY
  (cd "$dir" && git init -q . 2>/dev/null || true)
}

# measure NAME CMD...: appends "seconds peak_kb cpu_seconds" of one run to
# $WORK/NAME (cpu: user + system, which another load on the machine disturbs
# less than the wall time).
measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %M %U %S" -o "$WORK/.time" "$@" >/dev/null 2>&1 || {
    echo "bench/tool: '$*' failed" >&2; exit 1; }
  awk '{print $1, $2, $3 + $4}' "$WORK/.time" >>"$WORK/$name"
}

# clang_all DIR NAME: clang -fsyntax-only of every unit, one after another
# (peak: the largest single clang process).
clang_all() {
  local dir=$1
  measure "$2" bash -c 'for f in "$1"/src/*.cpp; do
      clang++-19 -fsyntax-only "${@:2}" "$f" || exit 1; done' _ "$dir" "${FLAGS[@]}"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

mkdir -p "$WORK"
printf "%-6s %-6s %-16s %9s %8s %9s %8s %10s\n" shape TUs run seconds ratio cpu_s cpu_ratio peak_MiB
for shape in $SHAPES; do
for n in $SIZES; do
  generate "$shape" "$n"
  dir="$WORK/$shape-tu$n"
  rm -f "$WORK"/r.*
  for ((r = 0; r < REPS; ++r)); do
    common=(-p "$dir" --quiet)
    if ((r < SLOW_REPS)); then
      clang_all "$dir" r.clang
      rm -rf "$dir.out"
      measure r.migrate-nocache-j1 "$DDPIFY" migrate "${common[@]}" --no-cache -j 1 --out-dir "$dir.out" "$dir"/src/*.cpp
      rm -rf "$dir.out"
      measure r.migrate-nocache-jN "$DDPIFY" migrate "${common[@]}" --no-cache --out-dir "$dir.out" "$dir"/src/*.cpp
    fi
    rm -rf "$dir.out" "$WORK/cache"
    measure r.migrate-cold-j1 "$DDPIFY" migrate "${common[@]}" --cache-dir "$WORK/cache" -j 1 --out-dir "$dir.out" "$dir"/src/*.cpp
    rm -rf "$dir.out"
    measure r.migrate-warm-j1 "$DDPIFY" migrate "${common[@]}" --cache-dir "$WORK/cache" -j 1 --out-dir "$dir.out" "$dir"/src/*.cpp
    rm -rf "$dir.out"
    measure r.migrate-warm-jN "$DDPIFY" migrate "${common[@]}" --cache-dir "$WORK/cache" --out-dir "$dir.out" "$dir"/src/*.cpp
    measure r.lint-warm-j1 "$DDPIFY" lint "${common[@]}" --cache-dir "$WORK/cache" -j 1 --exit-zero "$dir"/src/*.cpp
    measure r.lint-warm-jN "$DDPIFY" lint "${common[@]}" --cache-dir "$WORK/cache" --exit-zero "$dir"/src/*.cpp
  done
  base=$(cut -d' ' -f1 "$WORK/r.clang" | median)
  cpu_base=$(cut -d' ' -f3 "$WORK/r.clang" | median)
  for run in clang migrate-nocache-j1 migrate-nocache-jN migrate-cold-j1 \
             migrate-warm-j1 migrate-warm-jN lint-warm-j1 lint-warm-jN; do
    t=$(cut -d' ' -f1 "$WORK/r.$run" | median)
    kb=$(cut -d' ' -f2 "$WORK/r.$run" | sort -n | tail -1)
    cpu=$(cut -d' ' -f3 "$WORK/r.$run" | median)
    printf "%-6s %-6s %-16s %9.2f %8.3f %9.2f %8.3f %10.0f\n" "$shape" "$n" "$run" \
      "$t" "$(echo "$t / $base" | bc -l)" "$cpu" "$(echo "$cpu / $cpu_base" | bc -l)" \
      "$(echo "$kb / 1024" | bc -l)"
  done
done
done
echo "cores: $(nproc); ddpify default -j = cores; medians of $REPS alternating runs ($SLOW_REPS for clang and no-cache)"
