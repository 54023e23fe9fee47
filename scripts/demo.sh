#!/usr/bin/env bash
# Quick start (1): the main job on the bundled example. Installs what is
# missing, builds ddpify, exports the example's compilation database, prints
# the migration as a diff and writes the migrated tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
example=${1:-device_demo}
src="$root/examples/$example"
[[ -d "$src" ]] || { echo "demo: no example '$example' under examples/" >&2; exit 2; }

bash "$root/scripts/build.sh" >&2

# The example's own build, only for its compile_commands.json.
cmake -S "$src" -B "$build/demo/$example-db" -G Ninja \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null

echo "== ddpify diff examples/$example ==" >&2
set +e
"$build/bin/ddpify" diff --root "$src" -p "$build/demo/$example-db" "$src"/*.cpp
status=$?
set -e
# Exit 1 only means "changes pending".
[[ $status -le 1 ]] || exit "$status"

out="$build/demo/$example-migrated"
rm -rf "$out"
"$build/bin/ddpify" migrate --root "$src" --out-dir "$out" -p "$build/demo/$example-db" "$src"/*.cpp
echo "== migrated tree: $out ==" >&2
