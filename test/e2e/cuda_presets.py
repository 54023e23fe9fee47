"""CMake cache entries that spare a CUDA LibTorch's configure its slowest
probes, for the test projects configured against PyPI's torch wheel.

Caffe2's public/cuda.cmake, run by every find_package(Torch) of a CUDA
LibTorch, compiles and runs a program to find the GPUs' architectures unless
TORCH_CUDA_ARCH_LIST says them (PyTorch's documented setting; the test
programs compile no CUDA code, so the list changes nothing they build), and
hashes libnvrtc.so through a Python it looks for unless CUDA_NVRTC_SHORTHASH
is set (a value it only prints). Given both, a configure takes about 3.5 s
instead of 7.5 s on the 2-core test machines. The hash is computed here as
Caffe2 computes it (the first 8 hex digits of the library's SHA-256), once
per library, and kept in a file beside the tests' work.
"""
import hashlib
import json
import os

# Any architecture list stops the probe; TORCH_CUDA_ARCH_LIST in the
# environment wins, as it does for Caffe2 itself.
DEFAULT_ARCH_LIST = "8.0"


def _nvrtc_library():
    root = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or \
        "/usr/local/cuda"
    for sub in ("lib", "lib64"):
        path = os.path.join(root, sub, "libnvrtc.so")
        if os.path.exists(path):
            return os.path.realpath(path)
    return None


def _shorthash(library, cache_file):
    stat = os.stat(library)
    key = f"{library}:{stat.st_size}:{int(stat.st_mtime)}"
    try:
        with open(cache_file) as f:
            cached = json.load(f)
        if cached.get("key") == key:
            return cached["hash"]
    except (OSError, ValueError, KeyError):
        pass
    digest = hashlib.sha256()
    with open(library, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()[:8]
    try:
        os.makedirs(os.path.dirname(cache_file), exist_ok=True)
        temporary = f"{cache_file}.{os.getpid()}"
        with open(temporary, "w") as f:
            json.dump({"key": key, "hash": value}, f)
        os.replace(temporary, cache_file)
    except OSError:
        pass
    return value


def cuda_preset_args(caffe2_dir, cache_dir):
    """-D arguments for a configure against the LibTorch whose Caffe2Config
    is in caffe2_dir; none for a CPU LibTorch (no public/cuda.cmake)."""
    if not caffe2_dir or not os.path.exists(
            os.path.join(caffe2_dir, "public", "cuda.cmake")):
        return []
    args = ["-DTORCH_CUDA_ARCH_LIST=" +
            os.environ.get("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_LIST)]
    library = _nvrtc_library()
    if library:
        args.append("-DCUDA_NVRTC_SHORTHASH=" + _shorthash(
            library, os.path.join(cache_dir, "nvrtc-shorthash.json")))
    return args
