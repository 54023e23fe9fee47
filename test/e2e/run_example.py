#!/usr/bin/env python3
"""End-to-end test of one example of examples/: migrate it, build it, train it.

    run_example.py EXAMPLE --source-root DIR --build-dir DIR --hook-object FILE
                   --work-dir DIR [--keep-going]

Steps (each a named check; every check that can still run is run, and the
summary at the end names each one that failed):
  1. the original example is configured with CMake (its compile_commands.json)
     and built (the reference program of the no-launcher comparison);
  2. `ddpify migrate --out-dir` writes the migrated tree (the same tree
     without the header cache is lit's header-cache-equivalence.test);
  3. `ddpify diff`, applied with `git apply` to a copy of the original tree,
     gives exactly the migrated tree;
  4. the migrated tree is configured and built against the ddpify build tree
     (find_package(ddpify) through CMAKE_PREFIX_PATH), with the test's own
     parameter-hash hook (param_hash_hook.cpp) linked in through
     CMAKE_PROJECT_INCLUDE; `ddpify migrate` on it changes nothing and
     `ddpify lint --warnings-as-errors='*'` on it reports nothing;
  5. `ddprun --nproc-per-node 2 --tee=3` runs it, each rank in its own working
     directory: exit 0; every rank ends with the same parameter hashes; only
     rank 0 printed on stdout, each loss line once; only rank 0 wrote files
     (the checkpoints); the loss falls;
  6. without a launcher the migrated program behaves as the original: exit
     0, the same stdout, the same files (checkpoints with the same tensors).
Exit status 0 when every check passed, 1 otherwise.
"""
import argparse
import concurrent.futures
import difflib
import filecmp
import functools
import hashlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_presets import cuda_preset_args  # noqa: E402

# Per example: how to run it small, what its loss lines look like, what it
# writes and how many models it trains.
#   loss: a regex on one stdout line; named group `loss` is the value that
#         must fall, the other groups form the line's key (each key once).
#   keys: the keys of the loss lines rank 0 must print, in order.
EXAMPLES = {
    "mnist": dict(
        args=lambda w: [w["mnist_data"], "2", "25"],
        loss=r"^Train Epoch: (\d+) \[batch (\d+)\] Loss: (?P<loss>[-0-9.]+)$",
        keys=[(e, b) for e in ("1", "2") for b in ("1", "11", "21")],
        files=["mnist_model.pt"],
        models=1,
    ),
    "resnet": dict(
        args=lambda w: ["3"],
        loss=r"^epoch (\d+) train loss (?P<loss>[-0-9.]+)$",
        keys=[("1",), ("2",), ("3",)],
        files=["resnet.pt"],
        models=1,
    ),
    "dcgan": dict(
        args=lambda w: ["3", "3"],
        # The discriminator's loss: the generator's may rise as D learns.
        loss=r"^\[(\d+)/3\] D_loss: (?P<loss>[-0-9.]+) \| G_loss: [-0-9.]+$",
        keys=[("1",), ("2",), ("3",)],
        files=[
            "generator-checkpoint.pt",
            "generator-optimizer-checkpoint.pt",
            "discriminator-checkpoint.pt",
            "discriminator-optimizer-checkpoint.pt",
        ],
        models=2,
    ),
    "csv_regression": dict(
        args=lambda w: [w["csv_file"], "10"],
        loss=r"^epoch (\d+) mse (?P<loss>[-0-9.e]+)$",
        keys=[("1",), ("5",), ("10",)],
        files=["csv_model.pt"],
        models=1,
    ),
    "device_demo": dict(
        args=lambda w: [],
        loss=r"^epoch +(\d+) +train loss (?P<loss>[-0-9.]+) +eval loss [-0-9.]+$",
        keys=[(str(e),) for e in range(1, 11)],
        files=["device_demo_model.pt"],
        models=1,
    ),
}

LAUNCHER_VARS = re.compile(
    r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|ROLE_RANK|"
    r"ROLE_WORLD_SIZE|GROUP_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_.*|"
    r"SLURM_.*|OMPI_COMM_WORLD_.*|PMI_.*|DDP_.*|DDPIFY_E2E_HASH_FILE)$")

RUN_TIMEOUT_S = 300  # a hang guard, not a speed assertion
BUILD_TIMEOUT_S = 1200


class Checks:
    def __init__(self, name):
        self.name = name
        self.results = []  # (check, ok, detail)

    def record(self, check, ok, detail=""):
        self.results.append((check, ok, detail))
        if ok:
            print(f"[PASS] {check}", flush=True)
        else:
            print(f"[FAIL] {check}" + (f": {detail}" if detail else ""),
                  flush=True)
        return ok

    def failed(self):
        return [r for r in self.results if not r[1]]

    def summary(self):
        print(f"\n== e2e.{self.name}: {len(self.results)} checks, "
              f"{len(self.failed())} failed ==")
        for check, ok, detail in self.results:
            line = detail.splitlines()[0] if detail else ""
            print(f"  {'ok  ' if ok else 'FAIL'} {check}"
                  + (f" -- {line}" if not ok and line else ""))


def test_cache_dir(name):
    """The folder of ddpify's header cache for tests of one kind inside
    scripts/test.sh's DDPIFY_TEST_CACHE_DIR, outside the checkout and
    shared by its clones (test/lit/lit.cfg.py says why); None elsewhere."""
    shared = os.environ.get("DDPIFY_TEST_CACHE_DIR")
    return os.path.join(shared, name) if shared else None


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not LAUNCHER_VARS.match(k)}
    # Two ranks share this machine's cores: one thread each, and the same
    # thread count everywhere so CPU kernels reduce in the same order.
    env["OMP_NUM_THREADS"] = "1"
    env["MKL_NUM_THREADS"] = "1"
    if test_cache_dir("examples") and "DDPIFY_CACHE_DIR" not in os.environ:
        env["DDPIFY_CACHE_DIR"] = test_cache_dir("examples")
    if extra:
        env.update(extra)
    return env


def run(cmd, cwd=None, env=None, timeout=RUN_TIMEOUT_S, log=None):
    """Runs cmd; returns (returncode, stdout, stderr). A timeout ends the
    whole process group and returns code None."""
    print("$ " + " ".join(cmd) + (f"   (in {cwd})" if cwd else ""),
          flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env if env else clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        code = None
    out = out.decode(errors="replace")
    err = err.decode(errors="replace")
    print(f"  (exit {code}, {time.monotonic() - start:.1f} s)", flush=True)
    if log:
        with open(log, "w") as f:
            f.write(f"$ {' '.join(cmd)}\nexit: {code}\n--- stdout\n{out}"
                    f"--- stderr\n{err}")
    return code, out, err


def tail(text, lines=40):
    rows = text.rstrip("\n").splitlines()
    return "\n".join(rows[-lines:])


def is_build_tree(path):
    return os.path.exists(os.path.join(path, "CMakeCache.txt"))


def tree_files(root):
    """Relative paths of the files under root, build trees skipped (as
    `ddpify migrate --out-dir` skips them)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git" and
                             not is_build_tree(os.path.join(dirpath, d)))
        for f in sorted(filenames):
            found.append(os.path.relpath(os.path.join(dirpath, f), root))
    return found


def copy_tree(src, dst):
    shutil.rmtree(dst, ignore_errors=True)
    for rel in tree_files(src):
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        shutil.copy2(os.path.join(src, rel), os.path.join(dst, rel))


def compare_trees(a, b):
    """'' when the trees hold the same files with the same bytes, else a
    description with a unified diff of the first differing text file."""
    fa, fb = set(tree_files(a)), set(tree_files(b))
    problems = []
    if fa - fb:
        problems.append(f"only in {a}: {sorted(fa - fb)}")
    if fb - fa:
        problems.append(f"only in {b}: {sorted(fb - fa)}")
    shown = False
    for rel in sorted(fa & fb):
        pa, pb = os.path.join(a, rel), os.path.join(b, rel)
        if filecmp.cmp(pa, pb, shallow=False):
            continue
        problems.append(f"{rel} differs")
        if not shown:
            shown = True
            with open(pa, errors="replace") as f1, \
                    open(pb, errors="replace") as f2:
                problems.append("".join(difflib.unified_diff(
                    f1.readlines(), f2.readlines(), f"{a}/{rel}",
                    f"{b}/{rel}"))[:4000])
    return "\n".join(problems)


def tensor_records(path):
    """Sorted contents of the tensor records (`*/data/N`) of a LibTorch
    archive, or None when the file is not one."""
    try:
        with zipfile.ZipFile(path) as archive:
            return sorted(archive.read(n) for n in archive.namelist()
                          if re.search(r"/data/\d+$", n))
    except (zipfile.BadZipFile, OSError):
        return None


def compare_outputs(a, b):
    """Like compare_trees for the files two runs wrote, except that two
    LibTorch archives holding the same tensors are equal: optimizer
    checkpoints name their states by memory address (TensorImpl pointers),
    which differ from run to run, so their bytes never match."""
    fa, fb = set(files_in(a)), set(files_in(b))
    problems = []
    if fa != fb:
        problems.append(f"{a} holds {sorted(fa)}, {b} holds {sorted(fb)}")
    for rel in sorted(fa & fb):
        pa, pb = os.path.join(a, rel), os.path.join(b, rel)
        if filecmp.cmp(pa, pb, shallow=False):
            continue
        ta = tensor_records(pa)
        if ta is None or ta != tensor_records(pb):
            problems.append(f"{rel} differs")
    return "\n".join(problems)


def sources(root):
    return [os.path.join(root, f) for f in tree_files(root)
            if f.endswith((".cpp", ".cc", ".cxx"))]


def files_in(directory):
    return sorted(os.path.relpath(os.path.join(d, f), directory)
                  for d, _, fs in os.walk(directory) for f in fs)


def split_ranks(text):
    """{rank: [line, ...]} of `[rankN]: line` lines (what follows the last
    carriage return of a line, as a terminal shows it); other lines under
    None."""
    by_rank = {}
    # Not splitlines(): it also splits at the carriage returns.
    for line in text.split("\n"):
        m = re.match(r"^\[rank(\d+)\]: (.*)$", line)
        rank, body = (int(m.group(1)), m.group(2)) if m else (None, line)
        by_rank.setdefault(rank, []).append(body.split("\r")[-1])
    return by_rank


def loss_lines(lines, pattern):
    found = []
    for line in lines:
        m = re.match(pattern, line.split("\r")[-1])
        if m:
            key = tuple(g for i, g in enumerate(m.groups(), 1)
                        if i != m.re.groupindex["loss"])
            found.append((key, float(m.group("loss"))))
    return found


def read_hashes(path):
    """[(rank, hash, rest)] from the hook's file ([] when it is missing)."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            rows.append((int(parts[0]), parts[1], " ".join(parts[2:])))
    return rows


def first_differing_tensor(path):
    """The first tensor whose hash differs between rank 0 and rank 1."""
    per_rank = {}
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        for line in f:
            rank, wrapper, digest, name = line.rstrip("\n").split(" ", 3)
            per_rank.setdefault(int(rank), []).append((wrapper, name, digest))
    for a, b in zip(per_rank.get(0, []), per_rank.get(1, [])):
        if a != b:
            return f"first difference: wrapper {a[0]} tensor '{a[1]}'"
    return ""


def tool_paths(args, src, label):
    """(ddpify, ddprun) of --build-dir, or None after naming what is
    missing (the tools, the hook object, the program's sources)."""
    bindir = os.path.join(args.build_dir, "bin")
    ddpify = args.ddpify or os.path.join(bindir, "ddpify")
    ddprun = os.path.join(bindir, "ddprun")
    for needed in (ddpify, ddprun, args.hook_object, src):
        if not os.path.exists(needed):
            print(f"{label}: missing {needed} (build the targets ddpify, "
                  "ddprun, ddp_runtime and ddpify_e2e_hook first)")
            return None
    return ddpify, ddprun


def add_pch_cache_argument(parser):
    parser.add_argument("--pch-cache", help="folder of precompiled LibTorch "
                        "and ddp headers shared by the builds "
                        "(pch_launcher.py); none when not given")


def add_platform_cache_argument(parser):
    parser.add_argument("--platform-cache", help="folder where the first "
                        "configure of a test project leaves CMake's "
                        "identification of the compilers for the others "
                        "(configure()); none when not given")


@functools.lru_cache(maxsize=None)
def _cmake_version():
    return subprocess.run(["cmake", "--version"], capture_output=True,
                          text=True).stdout.split("\n")[0]


def _platform_key(cmake_command):
    """What CMake's identification of the compilers depends on here: CMake's
    version, the compilers the environment names or PATH finds, and the CUDA
    compiler a CUDA LibTorch enables (with their sizes and times)."""
    parts = [_cmake_version()]
    for name, default in (("CXX", "c++"), ("CC", "cc"),
                          ("CUDACXX", "/usr/local/cuda/bin/nvcc")):
        program = shutil.which(os.environ.get(name, default)) or ""
        if program:
            real = os.path.realpath(program)
            stat = os.stat(real)
            program = f"{program}={real}:{stat.st_size}:{int(stat.st_mtime)}"
        parts.append(f"{name}={program}")
    # -D options that choose a compiler or a toolchain change the answer.
    parts += [a for a in cmake_command
              if re.match(r"-D(CMAKE_\w*(COMPILER|TOOLCHAIN)\w*)[:=]", a)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def configure(args, cmake_command, build_dir, **run_args):
    """Runs `cmake -S ... -B build_dir ...` (cmake_command) as run() does.
    With --platform-cache, the build folder starts with CMake's
    identification of the compilers that the first configure here made
    (CMakeFiles/<version>/CMake<LANG>Compiler.cmake and its neighbours):
    what CMake reads on a second configure of one build folder instead of
    compiling its probe programs again. Identifying nvcc, which a CUDA
    LibTorch's TorchConfig enables, is most of such a project's configure
    (about 4 of 5 s on these machines); the test is about the project's
    build, not CMake's probe of the compilers, which the first configure
    still makes and checks."""
    cache = getattr(args, "platform_cache", None)
    if not cache:
        return run(cmake_command, **run_args)
    template = os.path.join(os.path.abspath(cache),
                            _platform_key(cmake_command))
    seeded = False
    if os.path.isdir(template):
        for version in os.listdir(template):
            target = os.path.join(build_dir, "CMakeFiles", version)
            if not os.path.exists(target):
                shutil.copytree(os.path.join(template, version), target)
                seeded = True
    command = list(cmake_command)
    if seeded:
        # A cache without this entry makes CMake ignore the files.
        command.append("-DCMAKE_PLATFORM_INFO_INITIALIZED:INTERNAL=1")
    code, out, err = run(command, **run_args)
    if code == 0 and not seeded and not os.path.isdir(template):
        files = os.path.join(build_dir, "CMakeFiles")
        versions = [v for v in os.listdir(files) if re.match(r"\d+\.\d+", v)
                    and os.path.isdir(os.path.join(files, v))]
        staging = f"{template}.{os.getpid()}"
        try:
            for version in versions:
                shutil.copytree(
                    os.path.join(files, version),
                    os.path.join(staging, version),
                    ignore=lambda d, names: [n for n in names
                                             if n.startswith("CompilerId")])
            os.makedirs(os.path.dirname(template), exist_ok=True)
            os.rename(staging, template)
        except OSError:
            # Another test's configure got there first.
            shutil.rmtree(staging, ignore_errors=True)
    return code, out, err


def launcher_args(args):
    """CMake arguments that compile through pch_launcher.py. Under ccache
    (test.sh's CMAKE_CXX_COMPILER_LAUNCHER) the launcher is ccache's prefix
    instead: it runs only where ccache misses, so a warm ccache builds no
    precompiled header, and a cold one compiles with it."""
    if not args.pch_cache:
        return []
    launcher = [sys.executable,
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "pch_launcher.py"),
                "--cache", os.path.abspath(args.pch_cache), "--"]
    if os.path.basename(
            os.environ.get("CMAKE_CXX_COMPILER_LAUNCHER", "")) == "ccache":
        # ccache's prefix is one program: a script that runs the launcher.
        cache = os.path.abspath(args.pch_cache)
        os.makedirs(cache, exist_ok=True)
        script = os.path.join(cache, "launch")
        tmp = f"{script}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write("#!/bin/sh\nexec " +
                    " ".join(shlex.quote(a) for a in launcher) + ' "$@"\n')
        os.chmod(tmp, 0o755)
        os.replace(tmp, script)
        # The builds inherit this environment.
        os.environ["CCACHE_PREFIX"] = script
        return []
    return ["-DCMAKE_CXX_COMPILER_LAUNCHER=" + ";".join(launcher)]


def torch_args(args, build_dir=None):
    """CMake arguments that select --torch-dir's LibTorch (only build_dir's
    package without it). Its parent folder goes on CMAKE_PREFIX_PATH, not
    Torch_DIR alone: TorchConfig finds Caffe2Config and its libraries after
    the system folders, which may hold another LibTorch (docs/libtorch.md).
    The original (no build_dir) does not use ddpify's package, which keeps
    another LibTorch's libraries out: its find_library calls search
    --torch-dir's lib/ first."""
    prefixes = [os.path.abspath(build_dir)] if build_dir else []
    extra = []
    if args.torch_dir:
        prefixes.append(os.path.dirname(os.path.abspath(args.torch_dir)))
        # Torch_DIR (and Caffe2_DIR beside it) too: a project that sets
        # CMAKE_PREFIX_PATH itself would find another LibTorch in the
        # system folders (ddpify's package then refuses the mix).
        torch_dir = os.path.abspath(args.torch_dir)
        extra.append(f"-DTorch_DIR={torch_dir}")
        caffe2 = os.path.normpath(os.path.join(torch_dir, "..", "Caffe2"))
        if os.path.exists(os.path.join(caffe2, "Caffe2Config.cmake")):
            extra.append(f"-DCaffe2_DIR={caffe2}")
            extra += cuda_preset_args(caffe2, os.path.dirname(
                os.path.abspath(args.work_dir)))
        lib = os.path.normpath(os.path.join(args.torch_dir, "..", "..", "..", "lib"))
        if not build_dir and os.path.exists(os.path.join(lib, "libtorch.so")):
            extra.append(f"-DCMAKE_LIBRARY_PATH={lib}")
    return ([f"-DCMAKE_PREFIX_PATH={';'.join(prefixes)}"] if prefixes else []) + extra


def fresh_work_dir(work_dir):
    """Empties work_dir; returns (work, logs, original build, migrated tree,
    migrated build) under it, logs created."""
    work = os.path.abspath(work_dir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    logs = os.path.join(work, "logs")
    os.makedirs(logs)
    return (work, logs, os.path.join(work, "original-build"),
            os.path.join(work, "migrated"),
            os.path.join(work, "migrated-build"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("example", choices=sorted(EXAMPLES))
    parser.add_argument("--source-root", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--hook-object", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--generator", default="Ninja")
    parser.add_argument("--ddpify", help="the ddpify tool (default: bin/ of "
                        "--build-dir; a runtime-only build names another's)")
    parser.add_argument("--torch-dir", help="the LibTorch (TorchConfig.cmake "
                        "folder) both programs are built against")
    parser.add_argument("--torchrun", help="command line of a torchrun to "
                        "run the migrated program under as well")
    add_pch_cache_argument(parser)
    add_platform_cache_argument(parser)
    args = parser.parse_args()

    name = args.example
    spec = EXAMPLES[name]
    checks = Checks(name)
    src = os.path.join(args.source_root, "examples", name)
    here = os.path.dirname(os.path.abspath(__file__))
    tools = tool_paths(args, src, f"e2e.{name}")
    if not tools:
        return 1
    ddpify, ddprun = tools
    work, logs, orig_build, migrated, mig_build = fresh_work_dir(
        args.work_dir)
    # Keeps git from finding the repository this test runs in: `git apply`
    # then works on plain files, as for a user's patch.
    git_env = clean_env({"GIT_CEILING_DIRECTORIES": os.path.dirname(work)})

    def summary_exit():
        checks.summary()
        print(f"(logs: {logs})")
        return 1 if checks.failed() else 0

    # 1. The original's compilation database.
    code, out, err = configure(args, [
        "cmake", "-S", src, "-B", orig_build, "-G", args.generator,
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *torch_args(args),
        *launcher_args(args)], orig_build, timeout=BUILD_TIMEOUT_S,
                         log=os.path.join(logs, "configure-original.log"))
    if not checks.record("configure-original", code == 0, tail(out + err)):
        return summary_exit()
    srcs = sources(src)
    base = ["--root", src, "-p", orig_build]
    original_exe = os.path.join(orig_build, name)
    migrated_exe = os.path.join(mig_build, name)
    # Two things at a time: a LibTorch compile or a ddpify parse each keeps
    # one core busy for tens of seconds.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)

    def build_original():
        code, out, err = run(["cmake", "--build", orig_build],
                             timeout=BUILD_TIMEOUT_S,
                             log=os.path.join(logs, "build-original.log"))
        return checks.record("build-original", code == 0, tail(out + err))

    def migrate_and_diff():
        # 2. Migrate into an output tree.
        code, out, err = run([ddpify, "migrate", "--out-dir", migrated] +
                             base + srcs, timeout=BUILD_TIMEOUT_S,
                             log=os.path.join(logs, "migrate.log"))
        print("--- ddpify migrate report (stderr)\n" + err, flush=True)
        if not checks.record("migrate", code == 0 and os.path.isdir(migrated),
                             f"exit {code}\n{tail(err)}"):
            return False
        # (The same tree without the header cache: lit's
        # header-cache-equivalence.test, every example, both LibTorch
        # versions' headers.)
        # 3. The diff is a patch that gives the migrated tree.
        code, patch, err = run([ddpify, "diff"] + base + srcs,
                               timeout=BUILD_TIMEOUT_S,
                               log=os.path.join(logs, "diff.log"))
        patch_file = os.path.join(work, "ddpify.patch")
        with open(patch_file, "w") as f:
            f.write(patch)
        if checks.record("diff-exit-1", code == 1,
                         f"exit {code} (1: changes pending)\n{tail(err)}"):
            applied = os.path.join(work, "applied")
            copy_tree(src, applied)
            gcode, gout, gerr = run(["git", "apply", "--whitespace=nowarn",
                                     patch_file], cwd=applied, env=git_env)
            if checks.record("diff-applies", gcode == 0, tail(gout + gerr)):
                difference = compare_trees(applied, migrated)
                checks.record("diff-gives-migrated-tree", not difference,
                              difference)
        return True

    inputs = {}

    def mnist_data():
        data = os.path.join(args.build_dir, "test", "e2e", "data", "mnist")
        wanted = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
        if not all(os.path.exists(os.path.join(data, f)) for f in wanted):
            code, out, err = run([sys.executable, os.path.join(
                src, "make_synthetic_mnist.py"), data])
            if not checks.record("make-synthetic-mnist", code == 0,
                                 tail(out + err)):
                return False
        inputs["mnist_data"] = data
        return True

    jobs = [pool.submit(build_original), pool.submit(migrate_and_diff)]
    original_ok, migrated_tree = [j.result() for j in jobs]
    if name == "mnist" and not mnist_data():
        return summary_exit()
    if not migrated_tree:
        return summary_exit()

    # 4. The migrated tree, configured as a user's build would be
    # (find_package(ddpify) through CMAKE_PREFIX_PATH), with the test's hash
    # hook linked in without a word in its sources.
    code, out, err = configure(args, [
        "cmake", "-S", migrated, "-B", mig_build, "-G", args.generator,
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        *torch_args(args, args.build_dir), *launcher_args(args),
        f"-DCMAKE_PROJECT_INCLUDE={os.path.join(here, 'link_hook.cmake')}",
        f"-DDDPIFY_E2E_HOOK_OBJECT={os.path.abspath(args.hook_object)}"],
        mig_build, timeout=BUILD_TIMEOUT_S,
        log=os.path.join(logs, "configure-migrated.log"))
    if not checks.record("configure-migrated", code == 0, tail(out + err)):
        return summary_exit()
    cmake_text = open(os.path.join(migrated, "CMakeLists.txt")).read()
    checks.record(
        "migrated-cmake-links-runtime",
        re.search(r"find_package\s*\(\s*ddpify\b", cmake_text) is not None
        and "ddpify::runtime" in cmake_text,
        "the migrated CMakeLists.txt lacks find_package(ddpify ...) or "
        "ddpify::runtime (rule R10)")

    def build_migrated():
        code, out, err = run(["cmake", "--build", mig_build],
                             timeout=BUILD_TIMEOUT_S,
                             log=os.path.join(logs, "build-migrated.log"))
        return checks.record("build-migrated", code == 0, tail(out + err))

    def idempotence_and_lint():
        # On the migrated tree's own compilation database.
        mbase = ["--root", migrated, "-p", mig_build]
        msrcs = sources(migrated)
        again = os.path.join(work, "migrated-again")
        code, out, err = run([ddpify, "migrate", "--out-dir", again] + mbase +
                             msrcs, timeout=BUILD_TIMEOUT_S,
                             log=os.path.join(logs, "migrate-again.log"))
        if checks.record("migrate-again-runs", code == 0,
                         f"exit {code}\n{tail(err)}"):
            difference = compare_trees(migrated, again)
            checks.record("migrate-again-changes-nothing", not difference,
                          difference)
        code, out, err = run([ddpify, "lint", "--warnings-as-errors=*"] +
                             mbase + msrcs, timeout=BUILD_TIMEOUT_S,
                             log=os.path.join(logs, "lint-migrated.log"))
        checks.record("lint-migrated-clean", code == 0,
                      f"exit {code}\n{tail(out + err)}")

    jobs = [pool.submit(build_migrated), pool.submit(idempotence_and_lint)]
    migrated_ok = jobs[0].result()
    jobs[1].result()

    if name == "csv_regression":
        if not original_ok:
            return summary_exit()
        inputs["csv_file"] = os.path.join(work, "data.csv")
        code, out, err = run([original_exe, "--write-sample",
                              inputs["csv_file"]], cwd=work)
        if not checks.record("write-csv-sample", code == 0, tail(out + err)):
            return summary_exit()
    program_args = spec["args"](inputs)

    if not migrated_ok:
        checks.record("ddprun-run", False,
                      "not run: the migrated program was not built")
        return summary_exit()

    # 5. Two ranks under ddprun, each in its own working directory so that
    # what each rank writes can be told apart.
    ddp_dir = os.path.join(work, "ddprun")
    for r in (0, 1):
        os.makedirs(os.path.join(ddp_dir, f"rank{r}"))
    hash_file = os.path.join(work, "hashes-ddprun.txt")
    code, out, err = run(
        [ddprun, "--nproc-per-node", "2", "--tee=3", "--", "/bin/sh", "-c",
         'cd "$0/rank$RANK" && exec "$@"', ddp_dir, migrated_exe] +
        program_args,
        env=clean_env({"DDPIFY_E2E_HASH_FILE": hash_file}),
        log=os.path.join(logs, "ddprun.log"))
    print("--- ddprun stdout\n" + out + "--- ddprun stderr\n" + tail(err, 60),
          flush=True)
    checks.record("ddprun-exit-0", code == 0,
                  f"exit {code}\n{tail(err)}" if code != 0 else "")
    stdout = split_ranks(out)

    hashes = read_hashes(hash_file)
    per_rank = {r: [h for (rk, h, _) in hashes if rk == r] for r in (0, 1)}
    expected = spec["models"]
    detail = (f"rank 0: {per_rank[0]}, rank 1: {per_rank[1]}; "
              f"expected {expected} wrapped model(s) per rank")
    if not hashes:
        detail = ("no ddp::DistributedDataParallel ended on any rank: the "
                  "trained model is not wrapped (rule R6)")
    elif any("active=1" not in rest for (_, _, rest) in hashes):
        detail += "; a wrapper did not communicate (world size 1?)"
    same = (len(per_rank[0]) == expected and per_rank[0] == per_rank[1] and
            all("active=1" in rest for (_, _, rest) in hashes) and
            {rk for (rk, _, _) in hashes} == {0, 1})
    if not same and per_rank[0] and per_rank[1]:
        detail += "; " + first_differing_tensor(hash_file + ".tensors")
    checks.record("ranks-identical-parameters", same, "" if same else detail)

    rank1_lines = [l for l in stdout.get(1, []) if l.strip()]
    checks.record("only-rank0-printed", not rank1_lines,
                  f"rank 1 printed: {rank1_lines[:5]}")
    rank0_losses = loss_lines(stdout.get(0, []), spec["loss"])
    keys = [k for k, _ in rank0_losses]
    wanted_keys = [tuple(k) for k in spec["keys"]]
    checks.record("loss-lines-once-each", keys == wanted_keys,
                  f"rank 0 printed loss lines {keys}, expected {wanted_keys}")
    if len(rank0_losses) >= 2:
        first, last = rank0_losses[0][1], rank0_losses[-1][1]
        checks.record("loss-falls", last < first,
                      f"first {first}, last {last}")
    else:
        checks.record("loss-falls", False, "fewer than 2 loss lines")

    written = {r: files_in(os.path.join(ddp_dir, f"rank{r}")) for r in (0, 1)}
    missing = [f for f in spec["files"] if f not in written[0] or
               os.path.getsize(os.path.join(ddp_dir, "rank0", f)) == 0]
    checks.record("rank0-wrote-checkpoints", not missing,
                  f"missing in rank 0's directory: {missing}; it holds "
                  f"{written[0]}")
    checks.record("rank1-wrote-nothing", not written[1],
                  f"rank 1 wrote {written[1]}")

    # 5b. Two ranks under the real torchrun of this LibTorch's PyTorch
    # (--torchrun: the wheel's, unpatched), started with --no-python: the
    # same parameters on both ranks, exit 0.
    if args.torchrun:
        tr_dir = os.path.join(work, "torchrun")
        for r in (0, 1):
            os.makedirs(os.path.join(tr_dir, f"rank{r}"))
        tr_hash = os.path.join(work, "hashes-torchrun.txt")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        code, out, err = run(
            args.torchrun.split() +
            ["--no-python", "--nproc-per-node", "2", "--master-addr",
             "127.0.0.1", "--master-port", str(port), "/bin/sh", "-c",
             'cd "$0/rank$RANK" && exec "$@"', tr_dir, migrated_exe] +
            program_args,
            env=clean_env({"DDPIFY_E2E_HASH_FILE": tr_hash}),
            log=os.path.join(logs, "torchrun.log"))
        checks.record("torchrun-exit-0", code == 0,
                      f"exit {code}\n{tail(out + err)}" if code != 0 else "")
        tr = read_hashes(tr_hash)
        tr_ranks = {r: [h for (rk, h, _) in tr if rk == r] for r in (0, 1)}
        checks.record(
            "torchrun-ranks-identical-parameters",
            len(tr_ranks[0]) == spec["models"] and tr_ranks[0] == tr_ranks[1]
            and all("active=1" in rest for (_, _, rest) in tr),
            f"rank 0: {tr_ranks[0]}, rank 1: {tr_ranks[1]}")

    # 6. No launcher: the migrated program is the original program.
    def alone(label, exe):
        rundir = os.path.join(work, f"alone-{label}")
        os.makedirs(rundir)
        hfile = os.path.join(work, f"hashes-alone-{label}.txt")
        code, out, err = run([exe] + program_args, cwd=rundir,
                             env=clean_env({"DDPIFY_E2E_HASH_FILE": hfile}),
                             log=os.path.join(logs, f"alone-{label}.log"))
        checks.record(f"alone-{label}-exit-0", code == 0,
                      f"exit {code}\n{tail(err)}")
        return (code, out, err, rundir, hfile)

    programs = [("migrated", migrated_exe)]
    if original_ok:
        programs.insert(0, ("original", original_exe))
    jobs = {label: pool.submit(alone, label, exe) for label, exe in programs}
    solo = {label: job.result() for label, job in jobs.items()}
    if "original" in solo:
        o, m = solo["original"], solo["migrated"]
        same_out = o[1] == m[1]
        checks.record("alone-same-stdout", same_out, "" if same_out else
                      "".join(difflib.unified_diff(
                          o[1].splitlines(True), m[1].splitlines(True),
                          "original", "migrated"))[:4000])
        difference = compare_outputs(o[3], m[3])
        checks.record("alone-same-files", not difference, difference)
        hashes = read_hashes(m[4])
        checks.record(
            "alone-hook-saw-models",
            len(hashes) == expected and
            all("active=0" in rest for (_, _, rest) in hashes),
            f"hook lines {hashes}, expected {expected} inactive wrapper(s)")
    return summary_exit()


if __name__ == "__main__":
    sys.exit(main())
