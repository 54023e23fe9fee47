#!/usr/bin/env bash
# Times ddpify against the compiler on generated LibTorch codebases.
#
#   bench/tool/run.sh [BUILD_DIR] [SIZES] [REPS] [SLOW_REPS]
#
# For each size (default "1 8 32" translation units, each a copy of one of
# examples/*/main.cpp with its own name and a distinct first line), times in
# the same run, alternating, REPS times (default 3):
#   clang              clang++-19 -fsyntax-only of every file, one after another
#   migrate-nocache-*  ddpify migrate --out-dir --no-cache (bodies outside the
#                      project still skipped), at -j 1 and the default -j
#   migrate-cold-j1    with an empty header cache (builds the PCH)
#   migrate-warm-*     with the cache the cold run left, -j 1 and default -j
#   lint-warm-*        ddpify lint, warm cache, -j 1 and default -j
# SLOW_REPS (default REPS) bounds the repetitions of the slow runs (clang and
# the no-cache runs): at 32 units one clang pass takes about six minutes.
# Prints the median seconds, the ratio to clang and the peak RSS (the
# largest single clang process; the whole ddpify process, which holds -j
# parses at once). Not part of the tests: run it on a quiet machine.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
SIZES="${2:-1 8 32}"
REPS="${3:-3}"
SLOW_REPS="${4:-$REPS}"
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
  for run in clang migrate-nocache-j1 migrate-nocache-jN migrate-cold-j1 \
             migrate-warm-j1 migrate-warm-jN lint-warm-j1 lint-warm-jN; do
    t=$(cut -d' ' -f1 "$WORK/r.$run" | median)
    kb=$(cut -d' ' -f2 "$WORK/r.$run" | sort -n | tail -1)
    printf "%-6s %-16s %9.2f %8.3f %10.0f\n" "$n" "$run" "$t" \
      "$(echo "$t / $base" | bc -l)" "$(echo "$kb / 1024" | bc -l)"
  done
done
echo "cores: $(nproc); ddpify default -j = cores; medians of $REPS alternating runs ($SLOW_REPS for clang and no-cache)"
