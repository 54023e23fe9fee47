#!/usr/bin/env bash
# The Debian package as a user gets it: cpack makes it from this build, it is
# unpacked into a scratch prefix (dpkg-deb -x, no root), and the bundled
# example is migrated with the prefix's ddpify, built with the prefix's CMake
# package and trained on 2 CPU ranks with the prefix's ddprun. Nothing may
# come from this build tree or the source tree: CMake finds ddpify in the
# prefix alone (a HOME of the test's own: an empty package registry), and no
# command of the migrated build names either tree.
#
#   run_package_test.sh BUILD_DIR SOURCE_DIR WORK_DIR [CACHE_DIR]
set -euo pipefail
build=$(cd "$1" && pwd)
source_root=$(cd "$2" && pwd)
work=$3
cache=${4:-}
fail() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/home"
work=$(cd "$work" && pwd)
export HOME="$work/home"

# 1. The package.
(cd "$build" && cpack -G DEB -B "$work/deb" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log" >&2; fail "cpack -G DEB failed"; }
deb=$(ls "$work"/deb/ddpify_*.deb)
control=$(dpkg-deb -f "$deb")
echo "$control"
depends=$(dpkg-deb -f "$deb" Depends)
for needed in libclang-cpp19 libllvm19 libclang-common-19-dev libtorch-dev; do
  [[ $depends == *"$needed"* ]] || fail "Depends lacks $needed: $depends"
done
listing=$(dpkg-deb -c "$deb")
for file in usr/bin/ddpify usr/bin/ddprun usr/include/ddp/ddp.h \
  usr/lib/cmake/ddpify/ddpifyConfig.cmake usr/lib/pkgconfig/ddpify.pc \
  usr/lib/ddpify/libddpifyTidy.so; do
  grep -q "\./$file\$" <<<"$listing" || fail "the package has no /$file"
done

# 2. Unpacked into a scratch prefix.
prefix="$work/root/usr"
dpkg-deb -x "$deb" "$work/root"
ddpify="$prefix/bin/ddpify"
ddprun="$prefix/bin/ddprun"
"$ddpify" --version
# Its clang-tidy module loads and lists the ddp-* checks.
clang-tidy-19 --load="$prefix/lib/ddpify/libddpifyTidy.so" \
  --checks='-*,ddp-*' --list-checks | grep -q ddp-cuda-call ||
  fail "clang-tidy-19 does not list the package's ddp-* checks"

# 3. The bundled example: its compilation database, migrate, build.
src="$work/csv_regression"
cp -r "$source_root/examples/csv_regression" "$src"
cmake -S "$src" -B "$work/db" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  >"$work/configure-original.log" 2>&1 ||
  { cat "$work/configure-original.log" >&2; fail "configure of the original"; }
cache_args=()
[[ -n $cache ]] && cache_args=(--cache-dir "$cache")
"$ddpify" migrate --quiet --root "$src" -p "$work/db" --out-dir "$work/migrated" \
  "${cache_args[@]}" "$src/main.cpp" || fail "ddpify migrate exited $?"
grep -q "ddp::init" "$work/migrated/main.cpp" || fail "main.cpp not migrated"
cmake -S "$work/migrated" -B "$work/migrated-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  >"$work/configure-migrated.log" 2>&1 ||
  { cat "$work/configure-migrated.log" >&2; fail "configure of the migrated tree"; }
found=$(sed -n 's/^ddpify_DIR:PATH=//p' "$work/migrated-build/CMakeCache.txt")
[[ $(realpath "$found") == $(realpath "$prefix/lib/cmake/ddpify") ]] ||
  fail "ddpify_DIR is '$found', not the prefix's"
cmake --build "$work/migrated-build" >"$work/build-migrated.log" 2>&1 ||
  { tail -30 "$work/build-migrated.log" >&2; fail "build of the migrated tree"; }
# (The work folder itself may lie in the build tree: its paths are taken out
# of the commands before they are searched.)
commands=$(sed "s#$work/##g" "$work/migrated-build/compile_commands.json" \
  "$work/migrated-build/build.ninja")
for tree in "$build" "$source_root"; do
  if grep -q -F "$tree/" <<<"$commands"; then
    grep -F "$tree/" <<<"$commands" | head -3 >&2
    fail "the migrated build uses $tree"
  fi
done

# 4. Trained on 2 CPU ranks with the prefix's ddprun.
mkdir -p "$work/run"
cd "$work/run"
"$work/migrated-build/csv_regression" --write-sample data.csv
OMP_NUM_THREADS=1 DDP_TIMEOUT_SECONDS=60 timeout 300 "$ddprun" \
  --nproc-per-node 2 --tee=3 "$work/migrated-build/csv_regression" data.csv 2 \
  >"$work/ddprun.log" 2>&1 || { cat "$work/ddprun.log" >&2; fail "ddprun exited $?"; }
cat "$work/ddprun.log"
grep -q "^\[rank0\]: epoch 1 mse [0-9]" "$work/ddprun.log" ||
  fail "rank 0 printed no epoch's loss"
[[ -s csv_model.pt ]] || fail "the main process saved no csv_model.pt"
if grep -q "^\[rank1\]:.*[^[:space:]]" "$work/ddprun.log"; then
  fail "rank 1 printed: $(grep '^\[rank1\]' "$work/ddprun.log" | head -2)"
fi
echo "PASS: the package migrates, builds and trains the example alone"
