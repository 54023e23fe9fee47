#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test
# (lit tests of the tool, GoogleTest suites of the runtime, end-to-end tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "$(nproc)" "$@"
