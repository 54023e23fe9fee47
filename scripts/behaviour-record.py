#!/usr/bin/env python3
"""A record of what ddpify does to every program the project has, to show a
change of structure changes no behaviour (issue 24).

    scripts/behaviour-record.py record OUT [--ddpify BIN] [--jobs N] [--only RE]
    scripts/behaviour-record.py compare OLD NEW

`record` runs, for every program (each folder of test/lit/Inputs, each
example of examples/, each idiom of test/e2e/idioms/), on a copy in a fixed
scratch folder:
  - `ddpify diff` of its C++ sources with a fixed database (LibTorch's and the
    runtime's include folders, C++17), and `ddpify lint --format=json`;
  - for a folder that is a CMake project configuring against this machine's
    LibTorch: `ddpify diff -p BUILD` with no source (the whole code base,
    its CMake files included) and `ddpify lint -p BUILD --format=json`.
It writes one file per program into OUT: each run's exit status, stdout and
stderr, the scratch folder's path replaced by `<ROOT>`. `compare` names
every program whose record differs between two such folders and exits 1 if
any does, 0 if none.

Record with the build of the commit before a change, then with the build
after it, and compare. The header cache is ddpify's usual one (it changes no
answer: lit's header-cache-equivalence tests).
"""
import argparse
import concurrent.futures
import difflib
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx")
TORCH_INCLUDES = ["/usr/include/torch/csrc/api/include", "/usr/include"]
SCRATCH = "/tmp/ddpify-behaviour-record"


def programs():
    """(record name, folder) of every program, in a fixed order."""
    found = []
    for kind, parent in (("lit", "test/lit/Inputs"), ("example", "examples"),
                         ("idiom", "test/e2e/idioms")):
        base = os.path.join(ROOT, parent)
        for name in sorted(os.listdir(base)):
            if os.path.isdir(os.path.join(base, name)):
                found.append((f"{kind}.{name}", os.path.join(base, name)))
    return found


def sources_of(folder):
    """The C++ sources under folder, relative to it, sorted."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES):
                found.append(os.path.relpath(os.path.join(dirpath, name), folder))
    return found


def run(argv, cwd):
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                          errors="replace", timeout=900)
    return done.returncode, done.stdout, done.stderr


def section(title, result, scratch):
    code, out, err = result
    text = (f"== {title} (exit {code})\n--- stdout\n{out}\n--- stderr\n{err}\n")
    return text.replace(scratch, "<ROOT>")


def record_one(name, folder, ddpify, out_dir):
    scratch = os.path.join(SCRATCH, name)
    shutil.rmtree(scratch, ignore_errors=True)
    tree = os.path.join(scratch, "src")
    shutil.copytree(folder, tree, symlinks=True)
    flags = ["--", "-std=c++17"] + ["-I" + d for d in TORCH_INCLUDES] + [
        "-I" + os.path.join(ROOT, "runtime", "include")]
    text = [f"# {name}\n"]
    sources = sources_of(tree)
    if sources:
        text.append(section("diff", run(
            [ddpify, "diff", "--root", tree] + sources + flags, tree), scratch))
        text.append(section("lint", run(
            [ddpify, "lint", "--format=json", "--root", tree] + sources + flags,
            tree),
            scratch))
    if os.path.isfile(os.path.join(tree, "CMakeLists.txt")):
        build = os.path.join(scratch, "build")
        code, out, err = run(["cmake", "-S", tree, "-B", build, "-G", "Ninja",
                              "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"], scratch)
        if code == 0:
            text.append(section("diff -p", run(
                [ddpify, "diff", "-p", build, "--root", tree], tree), scratch))
            text.append(section("lint -p", run(
                [ddpify, "lint", "-p", build, "--root", tree, "--format=json"],
                tree), scratch))
        else:
            text.append(f"== configure failed (exit {code}): no -p runs\n")
    with open(os.path.join(out_dir, name + ".txt"), "w") as f:
        f.write("".join(text))
    shutil.rmtree(scratch, ignore_errors=True)
    return name


def record(args):
    ddpify = os.path.abspath(args.ddpify)
    if not os.access(ddpify, os.X_OK):
        sys.exit(f"behaviour-record: no ddpify at {ddpify} (--ddpify)")
    os.makedirs(args.out, exist_ok=True)
    if os.listdir(args.out):
        sys.exit(f"behaviour-record: {args.out} is not empty")
    todo = [p for p in programs() if re.search(args.only, p[0])]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for done, name in enumerate(pool.map(
                lambda p: record_one(p[0], p[1], ddpify, args.out), todo), 1):
            print(f"[{done}/{len(todo)}] {name}", flush=True)
    print(f"behaviour-record: {len(todo)} programs recorded in {args.out}")


def compare(args):
    old = sorted(os.listdir(args.old))
    new = sorted(os.listdir(args.new))
    differ = 0
    for name in sorted(set(old) | set(new)):
        if name not in old or name not in new:
            print(f"{name}: only in {args.old if name in old else args.new}")
            differ += 1
            continue
        with open(os.path.join(args.old, name)) as f:
            a = f.read()
        with open(os.path.join(args.new, name)) as f:
            b = f.read()
        if a != b:
            differ += 1
            print(f"{name}: differs")
            sys.stdout.writelines(difflib.unified_diff(
                a.splitlines(True), b.splitlines(True), args.old, args.new, n=2))
    print(f"behaviour-record: {len(set(old) | set(new))} records, "
          f"{differ} differ")
    return 1 if differ else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out")
    rec.add_argument("--ddpify", default=os.path.join(ROOT, "build", "bin",
                                                      "ddpify"))
    rec.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    rec.add_argument("--only", default="",
                     help="record only the programs whose name this matches")
    cmp = sub.add_parser("compare")
    cmp.add_argument("old")
    cmp.add_argument("new")
    args = parser.parse_args()
    if args.command == "record":
        record(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
