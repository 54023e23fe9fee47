#!/usr/bin/env bash
# Installs the Debian packages ddpify needs that are missing (Debian 12).
set -euo pipefail

packages=(
  cmake ninja-build g++ git python3 ccache
  clang-19 libclang-19-dev libclang-cpp19-dev llvm-19-dev llvm-19-tools
  clang-tools-19 clang-format-19
  # The ddp-* checks inside clang-tidy (tidy/, --load).
  clang-tidy-19
  # cpack's Debian package: dpkg-shlibdeps (cmake/ddpifyPackage.cmake).
  dpkg-dev
  libtorch-dev libgloo-dev python3-torch
  googletest libgtest-dev
  # ddprun's job token: HMAC-SHA256 and random challenges (libcrypto).
  libssl-dev
  # Clang's own <omp.h>: units built with -fopenmp parse as they build.
  libomp-19-dev
  # libFuzzer and the sanitizers' runtimes for clang++-19 (fuzz/).
  libclang-rt-19-dev
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  echo "ddpify: installing ${missing[*]}" >&2
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
