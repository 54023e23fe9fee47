#!/usr/bin/env bash
# Times ddpify against the compiler on generated LibTorch codebases.
#
#   bench/tool/run.sh [BUILD_DIR] [SIZES] [REPS]
#
# For each size (default "1 8 32" translation units, each a copy of one of
# examples/*/main.cpp with its own name and a distinct first line), times in
# the same run, alternating, REPS times (default 3):
#   clang    clang++-19 -fsyntax-only of every file, one after another
#   migrate  ddpify migrate --out-dir at -j 1 and at the default -j
#   lint     ddpify lint at -j 1 and at the default -j
# and prints the median seconds, the ratio to clang and the peak RSS (the
# largest single clang process; the whole ddpify process, which holds -j
# parses at once). Not part of the tests: run it on a quiet machine.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
SIZES="${2:-1 8 32}"
REPS="${3:-3}"
DDPIFY="$BUILD/bin/ddpify"
[ -x "$DDPIFY" ] || { echo "bench/tool: no $DDPIFY; build first" >&2; exit 2; }
WORK="$BUILD/bench-tool"
FLAGS=(-std=c++17 -I/usr/include/torch/csrc/api/include -I/usr/include)
EXAMPLES=("$ROOT"/examples/{mnist,resnet,dcgan,csv_regression,device_demo}/main.cpp)

# generate N: a project of N translation units and its compile_commands.json.
generate() {
  local n=$1 dir="$WORK/tu$1"
  rm -rf "$dir"; mkdir -p "$dir/src"
  for ((i = 0; i < n; ++i)); do
    local src="${EXAMPLES[$((i % ${#EXAMPLES[@]}))]}"
    { echo "// bench variant $i of $(basename "$(dirname "$src")")"; cat "$src"; } \
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

# measure NAME CMD...: appends "seconds peak_kb" of one run to $WORK/NAME.
measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/.time" "$@" >/dev/null 2>&1 || {
    echo "bench/tool: '$*' failed" >&2; exit 1; }
  cat "$WORK/.time" >>"$WORK/$name"
}

clang_all() {
  local dir=$1 peak=0 start end
  start=$(date +%s.%N)
  for f in "$dir"/src/*.cpp; do
    /usr/bin/time -f "%M" -o "$WORK/.mem" clang++-19 -fsyntax-only "${FLAGS[@]}" "$f" >/dev/null 2>&1
    local m; m=$(cat "$WORK/.mem"); ((m > peak)) && peak=$m
  done
  end=$(date +%s.%N)
  echo "$(echo "$end - $start" | bc) $peak" >>"$WORK/$2"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

mkdir -p "$WORK"
printf "%-6s %-16s %9s %8s %10s\n" TUs run seconds ratio peak_MiB
for n in $SIZES; do
  generate "$n"
  dir="$WORK/tu$n"
  rm -f "$WORK"/r.*
  for ((r = 0; r < REPS; ++r)); do
    clang_all "$dir" r.clang
    rm -rf "$dir.out"
    measure r.migrate-j1 "$DDPIFY" migrate -p "$dir" --out-dir "$dir.out" -j 1 --quiet "$dir"/src/*.cpp
    rm -rf "$dir.out"
    measure r.migrate-jN "$DDPIFY" migrate -p "$dir" --out-dir "$dir.out" --quiet "$dir"/src/*.cpp
    measure r.lint-j1 "$DDPIFY" lint -p "$dir" -j 1 --quiet --exit-zero "$dir"/src/*.cpp
    measure r.lint-jN "$DDPIFY" lint -p "$dir" --quiet --exit-zero "$dir"/src/*.cpp
  done
  base=$(cut -d' ' -f1 "$WORK/r.clang" | median)
  for run in clang migrate-j1 migrate-jN lint-j1 lint-jN; do
    t=$(cut -d' ' -f1 "$WORK/r.$run" | median)
    kb=$(cut -d' ' -f2 "$WORK/r.$run" | sort -n | tail -1)
    printf "%-6s %-16s %9.2f %8.3f %10.0f\n" "$n" "$run" "$t" \
      "$(echo "$t / $base" | bc -l)" "$(echo "$kb / 1024" | bc -l)"
  done
done
echo "cores: $(nproc); ddpify default -j = cores; medians of $REPS alternating runs"
