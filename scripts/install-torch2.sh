#!/usr/bin/env bash
# Installs LibTorch 2.x, the one ddpify's users have: PyPI's `torch` wheel (the
# CUDA build, with its NVIDIA runtime wheels: cuDNN, cuBLAS, NCCL, ...), for
# this machine's python3, without root, into a user cache folder that is
# reused between runs and between build trees:
#
#   ${DDPIFY_TORCH2_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ddpify}/torch-<version>-<python>
#
# Prints, as its only line on stdout, the folder to put on CMAKE_PREFIX_PATH
# (torch.utils.cmake_prefix_path); everything else goes to stderr.
#
#   scripts/install-torch2.sh            install when missing, print the prefix
#   scripts/install-torch2.sh --version  print the pinned version only
#   scripts/install-torch2.sh --site     print the site-packages folder only
#
# The one place the version is pinned: TORCH2_VERSION below. 2.11.0 is the
# release whose default Linux wheel on PyPI is the CUDA 13 build, the CUDA of
# this machine's toolkit (/usr/local/cuda) and of the GPU check's machine.
set -euo pipefail

TORCH2_VERSION=2.11.0

python=${PYTHON:-python3}
if [[ ${1:-} == --version ]]; then
  echo "$TORCH2_VERSION"
  exit 0
fi

pytag=$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
cache=${DDPIFY_TORCH2_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ddpify}
site=$cache/torch-$TORCH2_VERSION-$pytag
stamp=$site/.ddpify-installed

if [[ ${1:-} == --site ]]; then
  echo "$site"
  exit 0
fi

# intact: the stamp of a finished install, and the files a build needs.
intact() {
  [[ -f $stamp ]] &&
    [[ $(cat "$stamp") == "torch==$TORCH2_VERSION" ]] &&
    [[ -f $site/torch/share/cmake/Torch/TorchConfig.cmake ]] &&
    [[ -f $site/torch/lib/libtorch_cuda.so ]]
}

mkdir -p "$cache"
# Two builds (or two engineers' test runs) may install at once: one installs,
# the other waits and reuses it.
exec 9>"$cache/.torch-$TORCH2_VERSION-$pytag.lock"
flock 9
if ! intact; then
  echo "install-torch2: installing torch==$TORCH2_VERSION ($pytag) into $site" >&2
  start=$(date +%s)
  # Into a fresh folder, moved into place when complete: an interrupted
  # install never looks intact.
  tmp=$site.tmp.$$
  rm -rf "$tmp" "$site"
  "$python" -m pip install --quiet --no-cache-dir --no-warn-script-location \
    --root-user-action=ignore \
    --disable-pip-version-check --target "$tmp" "torch==$TORCH2_VERSION" >&2
  echo "torch==$TORCH2_VERSION" >"$tmp/.ddpify-installed"
  mv "$tmp" "$site"
  echo "install-torch2: done in $(($(date +%s) - start)) s, $(du -sh "$site" | cut -f1) on disk" >&2
fi
if ! intact; then
  echo "install-torch2: $site is not a complete install" >&2
  exit 1
fi
PYTHONPATH=$site "$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)'
