#!/usr/bin/env python3
"""Times training programs in one process against their migration on 2 ranks.

    bench.py --build-dir BUILD [--reps N] [--all] [PROGRAM ...]

Each PROGRAM is an example of examples/ or an idiom of test/e2e/idioms/ (the
default set: the examples and the idioms whose kind of training differs,
below; --all: every idiom that trains). For each, in a work folder of its
own under BUILD/bench-programs/: the original is configured and built as its
user would (Release, against BUILD's LibTorch), `ddpify migrate` (BUILD's)
writes the migration, which is built against BUILD's runtime. Then, REPS
times, alternating: the original in one process, and the migration under
`ddprun --nproc-per-node 2`, with the same arguments, each rank in a working
folder of its own. Both with OMP_NUM_THREADS=1: one thread per process, so
that 2 ranks use the 2 cores one process leaves idle, as in the issue's
measurements. The ranks run with DDP_PROFILE=1: each prints where its time
went (docs/runtime-core.md), and the table shows rank 0's line of the median
run.

Printed: a Markdown table, one row per program: its kind of training (from
the migration's report: a sharded loader, full batches sharded by rows,
whole batches, unsharded rollouts), median wall seconds of one process and of
2 ranks, their ratio, and rank 0's phases. Not a test: nothing is asserted.
Time it on a quiet machine (nothing else compiling or running).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import run_idiom  # noqa: E402  (IDIOMS: each idiom's program and arguments)

PYTHON = "/usr/bin/python3"  # numpy, for make_synthetic_mnist.py


def mnist_inputs(exe, work):
    data = os.path.join(work, "mnist-data")
    if not os.path.isdir(data):
        subprocess.run([PYTHON, os.path.join(ROOT, "examples", "mnist",
                                             "make_synthetic_mnist.py"),
                        data], check=True, stdout=subprocess.DEVNULL)
    return {"data": data}


def csv_inputs(exe, work):
    path = os.path.join(work, "sample.csv")
    if not os.path.exists(path):
        subprocess.run([exe, "--write-sample", path], check=True,
                       stdout=subprocess.DEVNULL)
    return {"csv": path}


# The examples: arguments of a run of several seconds (MNIST: two epochs of
# 60000 synthetic images, each followed by the 10000-image test pass).
EXAMPLES = {
    "mnist": dict(exe="mnist", args=lambda i: [i["data"], "2"],
                  inputs=mnist_inputs),
    "csv_regression": dict(exe="csv_regression",
                           args=lambda i: [i["csv"], "20"],
                           inputs=csv_inputs),
    "resnet": dict(exe="resnet", args=lambda i: ["3"]),
    "dcgan": dict(exe="dcgan", args=lambda i: ["5", "5"]),
}

DEFAULT = ["mnist", "csv_regression", "resnet", "dcgan", "cxx14",
           "per_class_accuracy", "full_batch_regression",
           "full_batch_bn_classifier", "full_batch_custom_loss",
           "rollouts_env", "rollouts_per_rank"]

PROFILE = re.compile(
    r"^ddp: profile rank 0 of \d+: start-up (?P<startup>[\d.]+) s, "
    r"init (?P<init>[\d.]+) s, (?:before the first backward "
    r"(?P<before>[\d.]+) s, training (?P<training>[\d.]+) s \((?P<passes>\d+) "
    r"backward passes; waiting for gradients (?P<waited>[\d.]+) s, sync "
    r"checks (?P<checked>[\d.]+) s\), after the last backward "
    r"(?P<after>[\d.]+) s|no synchronised backward pass, after init "
    r"(?P<after_init>[\d.]+) s); the program's collectives "
    r"(?P<collectives>[\d.]+) s", re.M)


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed ({result.returncode}):\n"
                 f"{result.stdout[-2000:]}{result.stderr[-4000:]}")
    return result


def cache_value(cache, name):
    with open(cache) as f:
        for line in f:
            m = re.match(rf"^{name}:[A-Z]*=(.*)$", line.strip())
            if m:
                return m.group(1)
    return None


def program_spec(name):
    if name in EXAMPLES:
        spec = dict(EXAMPLES[name])
        spec.update(src=os.path.join(ROOT, "examples", name), migrate_args=[])
        return spec
    if name not in run_idiom.IDIOMS:
        sys.exit(f"bench: no example or idiom named {name!r}")
    idiom = run_idiom.IDIOMS[name]
    if idiom.get("untouched") or idiom.get("whole"):
        sys.exit(f"bench: {name} trains nothing or is a whole code base")
    prepare = idiom.get("prepare")

    def inputs(exe, work):
        if not prepare:
            return {}
        argv, found = prepare(exe, work)
        if not all(os.path.exists(p) for p in found.values()):
            run(argv, cwd=work)
        return found

    return dict(exe=idiom["exe"],
                args=lambda i: idiom["args"](run_idiom.BATCH, i),
                inputs=inputs,
                src=os.path.join(ROOT, "test", "e2e", "idioms",
                                 idiom.get("source") or name),
                migrate_args=idiom.get("migrate_args", []))


def kind_of(report_path):
    with open(report_path) as f:
        report = json.load(f)
    ids = {item.get("id", "") for item in report.get("items", [])}
    ids |= {note.get("id", "") for note in report.get("notes", [])
            if isinstance(note, dict)}
    text = json.dumps(report)
    if "rollouts-per-rank" in text:
        return "rollouts per rank"
    if "full-batch-sharded" in ids:
        return "full batch, sharded by rows"
    if "full-batch-whole" in ids:
        return "full batch, whole"
    if "non-torch-loader" in ids or "unsharded" in text:
        return "unsharded loop"
    rules = report.get("summary", {}).get("rules", {})
    return "sharded loader" if "R4" in rules else "other"


def sync_tree(fresh, tree):
    """Makes `tree` the copy of `fresh` (then removed), rewriting only the
    files that differ: an unchanged migration builds nothing again."""
    wanted = set()
    for folder, _, files in os.walk(fresh):
        for f in files:
            rel = os.path.relpath(os.path.join(folder, f), fresh)
            wanted.add(rel)
            source, target = os.path.join(fresh, rel), os.path.join(tree, rel)
            with open(source, "rb") as a:
                new = a.read()
            old = None
            if os.path.exists(target):
                with open(target, "rb") as b:
                    old = b.read()
            if old != new:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy2(source, target)
    for folder, _, files in os.walk(tree):
        for f in files:
            path = os.path.join(folder, f)
            if os.path.relpath(path, tree) not in wanted:
                os.remove(path)
    shutil.rmtree(fresh)


def build(name, spec, build_dir, work):
    torch_dir = cache_value(os.path.join(build_dir, "CMakeCache.txt"),
                            "Torch_DIR")
    torch_args = [f"-DTorch_DIR={torch_dir}"] if torch_dir else []
    prefix = [build_dir] + ([os.path.dirname(torch_dir)] if torch_dir else [])
    orig_build = os.path.join(work, "original-build")
    migrated = os.path.join(work, "migrated")
    mig_build = os.path.join(work, "migrated-build")
    common = ["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"] + torch_args
    if not os.path.exists(os.path.join(orig_build, "build.ninja")):
        run(["cmake", "-S", spec["src"], "-B", orig_build,
             "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
             f"-DCMAKE_PREFIX_PATH={os.path.dirname(torch_dir)}"
             if torch_dir else "-DCMAKE_PREFIX_PATH="] + common)
    run(["cmake", "--build", orig_build, "-j", "2"])
    fresh = migrated + ".new"
    shutil.rmtree(fresh, ignore_errors=True)
    report = os.path.join(work, "report.json")
    sources = sorted(
        os.path.join(d, f) for d, _, files in os.walk(spec["src"])
        for f in files if f.endswith((".cpp", ".cc", ".cxx")))
    run([os.path.join(build_dir, "bin", "ddpify"), "migrate", "--quiet",
         "--out-dir", fresh, "--root", spec["src"], "-p", orig_build,
         "--report", report] + spec["migrate_args"] + sources)
    sync_tree(fresh, migrated)
    if not os.path.exists(os.path.join(mig_build, "build.ninja")):
        run(["cmake", "-S", migrated, "-B", mig_build,
             f"-DCMAKE_PREFIX_PATH={';'.join(prefix)}"] + common)
    run(["cmake", "--build", mig_build, "-j", "2"])
    return (os.path.join(orig_build, spec["exe"]),
            os.path.join(mig_build, spec["exe"]), kind_of(report))


def timed(cmd, cwd, env):
    start = time.monotonic()
    result = run(cmd, cwd=cwd, env=env)
    return time.monotonic() - start, result


def bench(name, build_dir, reps):
    spec = program_spec(name)
    work = os.path.join(build_dir, "bench-programs", name)
    os.makedirs(work, exist_ok=True)
    original, migrated, kind = build(name, spec, build_dir, work)
    inputs = spec.get("inputs")
    found = inputs(original, work) if inputs else {}
    args = spec["args"](found)
    env = {k: v for k, v in os.environ.items()
           if not re.match(r"^(RANK|WORLD_SIZE|LOCAL_RANK|MASTER_.*|DDP_.*|"
                           r"TORCHELASTIC_.*)$", k)}
    env["OMP_NUM_THREADS"] = "1"
    ranked = dict(env, DDP_PROFILE="1")
    ddprun = os.path.join(build_dir, "bin", "ddprun")
    one, two = [], []
    for rep in range(reps):
        cwd = os.path.join(work, f"run-{rep}")
        shutil.rmtree(cwd, ignore_errors=True)
        for sub in ("one", "rank0", "rank1"):
            os.makedirs(os.path.join(cwd, sub))
        one.append(timed([original] + args, os.path.join(cwd, "one"),
                         env)[0])
        # Each rank in a folder of its own: no rank reads another's files.
        seconds, result = timed(
            [ddprun, "--nproc-per-node", "2", "--", "/bin/sh", "-c",
             'cd "$0/rank$RANK" && exec "$@"', cwd, migrated] + args, cwd,
            ranked)
        two.append((seconds, result.stderr))
    t1 = statistics.median(one)
    t2, stderr = sorted(two)[len(two) // 2]
    profile = PROFILE.search(stderr)
    return dict(name=name, kind=kind, one=t1, two=t2, ratio=t2 / t1,
                profile=profile.groupdict() if profile else None)


def cell(value):
    return "" if value is None else value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--all", action="store_true",
                        help="every example and every idiom that trains")
    parser.add_argument("programs", nargs="*")
    args = parser.parse_args()
    build_dir = os.path.abspath(args.build_dir)
    names = args.programs or (
        list(EXAMPLES) + sorted(
            n for n, s in run_idiom.IDIOMS.items()
            if not s.get("untouched") and not s.get("whole"))
        if args.all else DEFAULT)
    rows = []
    for name in names:
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        rows.append(bench(name, build_dir, args.reps))
    print(f"One process against 2 ranks (ddprun), one thread each; median "
          f"of {args.reps}; seconds. Phases: rank 0's DDP_PROFILE line.\n")
    print("| program | kind | 1 process | 2 ranks | ratio | start-up | init "
          "| before 1st backward | training (passes) | waiting for gradients "
          "| after last backward |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        p = r["profile"] or {}
        training = (f"{p['training']} ({p['passes']})"
                    if p.get("training") else "")
        after = p.get("after") or p.get("after_init")
        print(f"| {r['name']} | {r['kind']} | {r['one']:.2f} | {r['two']:.2f} "
              f"| {r['ratio']:.2f} | {cell(p.get('startup'))} "
              f"| {cell(p.get('init'))} | {cell(p.get('before'))} "
              f"| {training} | {cell(p.get('waited'))} | {cell(after)} |")


if __name__ == "__main__":
    main()
