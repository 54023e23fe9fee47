# lit configuration of the ddpify tool tests.
import os
import shutil

import lit.formats

config.name = "ddpify"
# bash, so RUN lines may use $?, subshells and redirections freely.
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
# ddpify's precompiled-header cache (tool/HeaderCache.h) is on, shared by every
# test; `lit --param cache=off` runs the whole suite without it, in its own
# folder, so both runs may go at once (ctest's `lit` and `lit.nocache`).
cache_on = lit_config.params.get("cache", "on") != "off"
config.test_exec_root = (config.lit_binary_dir if cache_on
                         else os.path.join(config.lit_binary_dir, "nocache"))
# `lit --param torch=2` parses against the second LibTorch (PyPI's 2.x wheel,
# test/lit/CMakeLists.txt) instead of this build's, in its own folder (its
# header cache and precompiled header are its own), with the ddpify package
# of the runtime built against it.
torch2 = lit_config.params.get("torch", "1") == "2"
if torch2:
    if not getattr(config, "torch2_dir", "") or not config.torch2_include_dirs[0]:
        lit_config.fatal("--param torch=2: this build was configured without "
                         "DDPIFY_TORCH2_PREFIX")
    config.torch_include_dirs = config.torch2_include_dirs
    config.torch_dir = config.torch2_dir
    config.ddpify_build_dir = config.torch2_build_dir
    config.test_exec_root = os.path.join(config.test_exec_root, "torch2")
    # CMake projects of the tests find the wheel's Torch (and its Caffe2
    # and libraries) before the system's, whatever their own arguments.
    torch2_cmake = os.path.dirname(config.torch2_dir)
    config.environment["CMAKE_PREFIX_PATH"] = torch2_cmake
    config.environment["CMAKE_LIBRARY_PATH"] = os.path.normpath(
        os.path.join(torch2_cmake, "..", "..", "lib"))
os.makedirs(config.test_exec_root, exist_ok=True)

torch_includes = " ".join("-I" + d for d in config.torch_include_dirs)
compile_args = "-std=c++17 " + torch_includes
runtime_include = os.path.join(config.project_source_dir, "runtime", "include")


config.substitutions.append(("%ddpify", config.ddpify))
config.substitutions.append(("%FileCheck", os.path.join(config.llvm_tools_dir, "FileCheck")))
config.substitutions.append(("%not", os.path.join(config.llvm_tools_dir, "not")))
# Compiler arguments for a fixed compilation database: `ddpify ... %torch_flags`.
config.substitutions.append(("%torch_flags", "-- " + compile_args + " -I" + runtime_include))
config.substitutions.append(("%torch_args", compile_args))
config.substitutions.append(("%runtime_include", runtime_include))
# clang-tidy with ddpify's checks loaded (tidy/): `%clang_tidy --checks=...`.
# Every build has the module but a sanitizer build (tidy/CMakeLists.txt).
if not config.sanitizers:
    config.available_features.add("ddpify-tidy")
config.substitutions.append(("%clang_tidy", os.path.join(config.llvm_tools_dir, "clang-tidy") + " --load=" + os.path.join(config.ddpify_build_dir, "lib", "libddpifyTidy.so")))
# The clang++ the migrated programs are checked with, for a test's own flags.
config.substitutions.append(("%clangxx", config.clangxx))
# Checks that the migrated program compiles against LibTorch and the runtime.
# Under scripts/test.sh through syntax_check.py, which remembers the checks
# that passed (with the contents of every file each read) in the test folder
# outside the checkout, as ccache does compiles: the same check of the same
# files passes again without the compiler; a failing one always runs.
import json
import sys
import tempfile


def writable_test_cache():
    """scripts/test.sh's DDPIFY_TEST_CACHE_DIR, when set and writable."""
    folder = os.environ.get("DDPIFY_TEST_CACHE_DIR")
    if not folder:
        return None
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        lit_config.note("DDPIFY_TEST_CACHE_DIR unusable (%s): caches in the "
                        "build tree" % error)
        return None
    return folder


test_cache = writable_test_cache()
checker = config.clangxx
if test_cache:
    checker = " ".join(
        [sys.executable, os.path.join(config.test_source_root, "syntax_check.py"),
         "--memo", os.path.join(test_cache, "syntax-checks")]
        + (["--base", os.environ["DDPIFY_CACHE_BASEDIR"]]
           if os.environ.get("DDPIFY_CACHE_BASEDIR") else [])
        + ["--", config.clangxx])
config.substitutions.append(
    ("%syntax_check", checker + " -fsyntax-only " + compile_args + " -I" + runtime_include))
config.substitutions.append(
    ("%memo_check", sys.executable + " " + os.path.join(config.test_source_root, "syntax_check.py")))
# `%expect N cmd...`: runs cmd and fails unless its exit status is N.
config.substitutions.append(
    ("%expect", "bash " + os.path.join(config.test_source_root, "Inputs", "expect-exit.sh")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%project_source_dir", config.project_source_dir))
config.environment["LC_ALL"] = "C"
# Where the test command compiles through ccache (scripts/test.sh), so do
# the programs the tests build with the plain compiler (a Makefile's,
# pkg-config's flags): ccache's compiler links go first on PATH, with the
# checkout as its base folder, so a fresh clone reuses what an earlier one
# compiled.
if (os.environ.get("CMAKE_CXX_COMPILER_LAUNCHER", "").endswith("ccache")
        and os.path.isdir("/usr/lib/ccache")):
    config.environment["PATH"] = os.pathsep.join(
        ["/usr/lib/ccache", config.environment.get("PATH", os.environ["PATH"])])
    for name in ("CCACHE_BASEDIR", "CCACHE_NOHASHDIR", "CCACHE_DIR"):
        if name in os.environ:
            config.environment[name] = os.environ[name]
# The ddpify CMake package of this build tree (R10-configure.test): only
# written when the runtime is configured.
ddpify_build_dir = getattr(config, "ddpify_build_dir", "")
config.substitutions.append(("%package_build_dir", ddpify_build_dir))
if ddpify_build_dir and os.path.exists(os.path.join(ddpify_build_dir, "ddpifyConfig.cmake")):
    config.available_features.add("ddpify-package")
    # This build tree in CMake's user package registry (R10-registry.test).
    registry = os.path.join(os.path.expanduser("~"), ".cmake", "packages", "ddpify")
    if os.path.isdir(registry):
        for entry in os.listdir(registry):
            with open(os.path.join(registry, entry)) as f:
                if f.read().strip() == ddpify_build_dir:
                    config.available_features.add("ddpify-registered")

# `%cmake_configure -S SRC -B BUILD`: configures a CMake input project with
# its compilation database (R10 reads the targets from CMake's File API in
# BUILD), finding the LibTorch this build tree uses.
torch_dir = getattr(config, "torch_dir", "")
torch_found = torch_dir and not torch_dir.endswith("NOTFOUND")
# A CUDA LibTorch's configure without its slowest probes (cuda_presets.py).
import sys
sys.path.insert(0, os.path.join(config.project_source_dir, "test", "e2e"))
from cuda_presets import cuda_preset_args
cuda_presets = cuda_preset_args(
    os.path.join(os.path.dirname(torch_dir), "Caffe2") if torch_found else "",
    config.test_exec_root)
config.substitutions.append(("%cuda_presets", " ".join(cuda_presets)))
config.substitutions.append((
    "%cmake_configure",
    "cmake -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON"
    + (" -DTorch_DIR=" + torch_dir if torch_found else "")
    + "".join(" " + arg for arg in cuda_presets)))
if shutil.which("pkg-config"):
    config.available_features.add("pkg-config")

# The immutable attribute (ext4 and friends) lets the root-run tests make a
# file that cannot be written: see bad-input-unwritable.test.
import subprocess
import tempfile
with tempfile.NamedTemporaryFile(dir=config.test_exec_root) as probe:
    if subprocess.call(["chattr", "+i", probe.name], stderr=subprocess.DEVNULL) == 0:
        subprocess.call(["chattr", "-i", probe.name])
        config.available_features.add("chattr")

# script(1) gives ddpify a terminal (progress.test).
import shutil
if shutil.which("script"):
    config.available_features.add("script")

if cache_on:
    # DDPIFY_TEST_CACHE_DIR (scripts/test.sh: one folder outside the
    # checkout) with DDPIFY_CACHE_BASEDIR (the checkout): a fresh clone
    # reuses the headers an earlier checkout built, as ccache does its
    # objects (tool/HeaderCache.h). Else a folder of this build's own.
    config.environment["DDPIFY_CACHE_DIR"] = (
        os.path.join(test_cache, "lit") if test_cache
        else os.path.join(config.test_exec_root, "ddpify-cache"))
    if os.environ.get("DDPIFY_CACHE_BASEDIR"):
        config.environment["DDPIFY_CACHE_BASEDIR"] = os.environ["DDPIFY_CACHE_BASEDIR"]
else:
    config.environment["DDPIFY_CACHE_DIR"] = ""


def syntax_check_pch(args=compile_args, name="syntax-check-torch.pch"):
    """A precompiled <torch/torch.h> for %syntax_check (each check would
    otherwise parse all of LibTorch), rebuilt when clang no longer accepts it
    (a changed header or flag); None when it cannot be built. Its templates
    are instantiated once, in the PCH (-fpch-instantiate-templates), not again
    by every check: a third of the time of each."""
    folder = config.test_exec_root if torch2 else config.lit_binary_dir
    # In scripts/test.sh's folder outside the checkout, where a fresh clone
    # finds it built (its arguments name no path of the checkout).
    if test_cache:
        import hashlib
        folder = os.path.join(
            test_cache, "syntax-check",
            hashlib.sha256((config.clangxx + "\0" + args).encode()).hexdigest()[:16])
        os.makedirs(folder, exist_ok=True)
    pch = os.path.join(folder, name)
    flags = args.split()

    # clang checks a PCH's input files by size and time, which takes it 1.3 s
    # (loading the PCH); every lit process (each ctest shard) asks. So the
    # first check that passes writes, beside the PCH, the size and time of
    # the PCH, of the compiler and of every file the header includes (clang
    # -M), and a later process takes the PCH as accepted while they are all
    # the same: what clang would check, in a few milliseconds.
    stamp_path = pch + ".accepted.json"
    header = os.path.join(folder, "syntax-check-torch.hpp")

    def fingerprint(paths):
        stats = {}
        for path in paths:
            try:
                info = os.stat(path)
            except OSError:
                return None
            stats[path] = [info.st_size, info.st_mtime_ns]
        return stats

    def stamped():
        try:
            with open(stamp_path) as f:
                stamp = json.load(f)
        except (OSError, ValueError):
            return False
        files = stamp.get("files")
        return (stamp.get("flags") == flags and isinstance(files, dict) and
                fingerprint(files) == files)

    def write_stamp():
        deps = subprocess.run(
            [config.clangxx, *flags, "-M", "-x", "c++-header", header],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if deps.returncode != 0:
            return
        files = deps.stdout.replace("\\\n", " ").split(":", 1)[-1].split()
        stats = fingerprint([pch, shutil.which(config.clangxx) or config.clangxx]
                            + [os.path.realpath(f) for f in files])
        if stats is None:
            return
        temp = stamp_path + ".tmp-%d" % os.getpid()
        with open(temp, "w") as f:
            json.dump({"flags": flags, "files": stats}, f)
        os.replace(temp, stamp_path)

    def accepted():
        if not os.path.exists(pch):
            return False
        if stamped():
            return True
        ok = subprocess.call(
            [config.clangxx, "-fsyntax-only", *flags, "-include-pch", pch, "-x", "c++", "/dev/null"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0
        if ok and os.path.exists(header):
            write_stamp()
        return ok

    if accepted():
        return pch
    if not os.path.exists(header):
        with open(header + ".tmp-%d" % os.getpid(), "w") as f:
            f.write("#include <torch/torch.h>\n")
        os.replace(header + ".tmp-%d" % os.getpid(), header)
    temp = pch + ".tmp-%d" % os.getpid()
    if subprocess.call([config.clangxx, *flags, "-fpch-instantiate-templates",
                        "-x", "c++-header", header, "-o", temp],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
        return None
    os.replace(temp, pch)
    return pch if accepted() else None


# The migrated program is checked with <torch/torch.h> precompiled in front:
# the same meaning (it includes LibTorch itself, which is guarded), a fraction
# of the time. Also with cache=off: that parameter is about ddpify's cache.
pch = syntax_check_pch()
# The same header for a clang-tidy run whose subject is not the parse (a
# .clang-tidy file's choice of checks): `%clang_tidy FILE %torch_flags
# %torch_pch`; nothing where it could not be built.
config.substitutions.append(("%torch_pch", "-include-pch " + pch if pch else ""))
if pch:
    config.substitutions.insert(0, (
        "%syntax_check",
        checker + " -fsyntax-only " + compile_args + " -include-pch " + pch + " -I" + runtime_include))
# The same check at C++14 (a precompiled header of its own); ahead of
# %syntax_check, whose name is a prefix of it. LibTorch 2.x needs C++17
# (its headers stop with #error at C++14): the tests run it only where the
# LibTorch under test allows C++14 (`%if libtorch-cxx14`).
cxx14_args = compile_args + " -std=c++14"
cxx14_pch = None
if not torch2:
    config.available_features.add("libtorch-cxx14")
    cxx14_pch = syntax_check_pch(cxx14_args, "syntax-check-torch-cxx14.pch")
config.substitutions.insert(0, (
    "%syntax_check_cxx14",
    checker + " -fsyntax-only " + cxx14_args +
    (" -include-pch " + cxx14_pch if cxx14_pch else "") + " -I" + runtime_include))
