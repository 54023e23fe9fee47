#!/usr/bin/env bash
# Compiles the runtime against LibTorch 2.x headers, which this machine's
# Debian 12 does not have: Debian 13 (trixie) packages LibTorch 2.6 as a CPU
# build (Gloo) and as a CUDA build (Gloo and NCCL). The packages are fetched
# from deb.debian.org and unpacked (dpkg -x) under BUILD_DIR/torch-compat,
# never installed; every runtime source is compiled with -fsyntax-only against
# them, as runtime/CMakeLists.txt would compile it (USE_C10D_GLOO, and for the
# CUDA build DDP_WITH_NCCL with USE_C10D_NCCL). Nothing is linked or run: the
# libraries need trixie's C library.
#
#   scripts/check-torch-compat.sh [BUILD_DIR] [cpu|cuda|all]
#
# cpu fetches about 5 MB; cuda about 1.1 GB (the CUDA toolkit's headers come
# only in nvidia-cuda-dev). Not part of the test suite; see docs/runtime.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
which_builds=${2:-all}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=trixie
work=$build/torch-compat
mkdir -p "$work/debs"
cxx=${CXX:-g++}

# package_url NAME: the pool address of NAME in trixie (main, contrib or
# non-free), from the suite's package indexes.
package_url() {
  local name=$1 component
  for component in main contrib non-free; do
    local index=$work/Packages-$component
    if [ ! -s "$index" ]; then
      curl -fsS "$mirror/dists/$suite/$component/binary-amd64/Packages.xz" |
        xz -dc >"$index.tmp"
      mv "$index.tmp" "$index"
    fi
    local file
    file=$(awk -v want="$name" '
      /^Package: / { hit = ($2 == want) }
      hit && /^Filename: / { print $2; exit }' "$index")
    if [ -n "$file" ]; then
      echo "$mirror/$file"
      return
    fi
  done
  echo "check-torch-compat: no package $name in $suite" >&2
  return 1
}

# unpack PREFIX PACKAGE...: each package's files under $work/PREFIX.
unpack() {
  local prefix=$work/$1
  shift
  mkdir -p "$prefix"
  local name
  for name in "$@"; do
    local url deb
    url=$(package_url "$name")
    deb=$work/debs/$(basename "$url")
    if [ ! -s "$deb" ]; then
      echo "fetching $name ($url)"
      curl -fsS -o "$deb.tmp" "$url"
      mv "$deb.tmp" "$deb"
    fi
    if [ ! -e "$prefix/.$name" ]; then
      dpkg -x "$deb" "$prefix"
      touch "$prefix/.$name"
    fi
  done
}

# check NAME PREFIX FLAGS...: every runtime source, -fsyntax-only.
check() {
  local name=$1 prefix=$work/$2
  shift 2
  local inc=$prefix/usr/include
  local flags=(-std=c++17 -fsyntax-only -DUSE_C10D_GLOO "$@"
    -I"$root/runtime/include" -I"$root/runtime/src"
    -I"$inc" -I"$inc/torch/csrc/api/include")
  local version
  version=$(awk '/^#define TORCH_VERSION_(MAJOR|MINOR|PATCH) / { v = v (v ? "." : "") $3 }
    END { print v }' "$inc/torch/csrc/api/include/torch/version.h" 2>/dev/null || true)
  echo "== $name: LibTorch ${version:-?}, $cxx"
  local failed=0 src
  for src in "$root"/runtime/src/*.cpp "$root"/runtime/ddprun/*.cpp; do
    if "$cxx" "${flags[@]}" "$src" 2>"$work/$name-$(basename "$src").log"; then
      echo "  ok   ${src#"$root"/}"
    else
      echo "  FAIL ${src#"$root"/} (log: $work/$name-$(basename "$src").log)"
      head -20 "$work/$name-$(basename "$src").log" | sed 's/^/       /'
      failed=1
    fi
  done
  return $failed
}

status=0
case $which_builds in cpu | all)
  unpack cpu libtorch-dev libgloo-dev libfmt-dev
  check torch-2-cpu cpu || status=1
  ;;
esac
case $which_builds in cuda | all)
  unpack cuda libtorch-cuda-dev libgloo-dev libfmt-dev nvidia-cuda-dev \
    libnccl-dev libcub-dev libthrust-dev libcu++-dev
  check torch-2-cuda-nccl cuda -DDDP_WITH_NCCL -DUSE_C10D_NCCL \
    -I"$work/cuda/usr/include/x86_64-linux-gnu" || status=1
  ;;
esac
exit $status
