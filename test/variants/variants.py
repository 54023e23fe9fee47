#!/usr/bin/env python3
"""Variant tests: one idiom program under semantics-preserving rewrites.

    variants.py TEMPLATE --ddpify BIN --work DIR --check "CMD"
                [--migrate-arg OPTION]... [-- FLAGS...]
    variants.py TEMPLATE --list

A template is a C++ program with marked variation points, each a run of
whole lines:

    //@{ decl                      opens point `decl`; its first alternative
    auto [x, y] = make_data(n);    is the base program's
    //@| pair .first/.second       the next alternative, with a label
    auto data = make_data(n);
    auto x = data.first, y = data.second;
    //@| std::tie !open            `!open`: a spelling the rules do not take
    ...                            yet (an expected difference, see below)
    //@}

Points that share a name switch together, alternative by label (a helper
defined above main where main calls it): where one of them has no
alternative of that label, it keeps its base lines. The variants are the base program and,
for each point and each of its other alternatives, the base with that one
alternative taken: one rewrite at a time, so a difference names its cause.

Each variant is migrated (`ddpify migrate --report`, FLAGS after `--` as a
fixed compilation database) and must give the base program's decisions:
  - the exit status;
  - the report's item ids, as a multiset;
  - what the migrated text does: how many models are wrapped
    (ddp::DistributedDataParallel, ddp::distribute), and whether it shards a
    loader (ddp::make_data_loader, ddp::DistributedSampler), shards rows
    (ddp::RowShard), shards batches cut by hand (ddp::rank_batches,
    ddp::batch_starts), guards output (ddp::is_main_process), reduces a
    metric (ddp::all_reduce, rows.global_*), joins (ddp::join), shares a
    seed (ddp::shared_seed);
and the migrated program must pass CMD (a syntax check against LibTorch and
the runtime, the file appended) and a second run of ddpify over it must
change nothing.

An alternative marked `!open` is a known gap: it must differ from the base
(it is reported, not failed); once it no longer differs, the test fails so
that the mark is taken off. Exit status 0 when every variant holds, 1 when
one does not, 2 for a malformed template.
"""
import argparse
import collections
import json
import os
import re
import shlex
import subprocess
import sys

OPEN_MARK = "!open"

# What a migration decided, read from the migrated text: name -> patterns.
DECISIONS = collections.OrderedDict([
    ("loader-sharded", [r"ddp::make_data_loader", r"ddp::DistributedSampler",
                        r"ddp::make_eval_data_loader"]),
    ("rows-sharded", [r"ddp::RowShard"]),
    ("hand-batches-sharded", [r"ddp::rank_batches", r"ddp::batch_starts"]),
    ("guarded", [r"ddp::is_main_process\(\)"]),
    ("reduced", [r"ddp::all_reduce", r"\.global_(?:mean|sum)\("]),
    ("joined", [r"ddp::join\(\);"]),
    ("seed-shared", [r"ddp::shared_seed\(", r"ddp::rollout_seed\("]),
])
WRAPS = re.compile(r"ddp::DistributedDataParallel\s+\w+\s*[({]|"
                   r"ddp::distribute\(")


class TemplateError(Exception):
    pass


def parse(text):
    """The template as a list of parts: a str (fixed lines) or a point
    (name, [(label, open, lines)])."""
    parts, point = [], None
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        marker = line.strip()
        if marker.startswith("//@{"):
            if point:
                raise TemplateError(f"line {number}: point inside a point")
            name = marker[4:].strip()
            if not name:
                raise TemplateError(f"line {number}: a point has no name")
            point = (name, [["base", False, []]])
        elif marker.startswith("//@|"):
            if not point:
                raise TemplateError(f"line {number}: //@| outside a point")
            label = marker[4:].strip()
            is_open = OPEN_MARK in label.split()
            label = " ".join(w for w in label.split() if w != OPEN_MARK)
            point[1].append([label or f"#{len(point[1])}", is_open, []])
        elif marker.startswith("//@}"):
            if not point:
                raise TemplateError(f"line {number}: //@}} outside a point")
            if len(point[1]) < 2:
                raise TemplateError(f"line {number}: point '{point[0]}' has "
                                    "one alternative")
            parts.append(point)
            point = None
        elif point:
            point[1][-1][2].append(line)
        else:
            parts.append(line)
    if point:
        raise TemplateError(f"point '{point[0]}' is not closed")
    return parts


def expand(parts):
    """[(variant name, open, program text)], the base first."""
    def render(name, label):
        out = []
        for part in parts:
            if isinstance(part, tuple):
                lines = part[1][0][2]
                if part[0] == name:
                    for alternative in part[1][1:]:
                        if alternative[0] == label:
                            lines = alternative[2]
                out.extend(lines)
            else:
                out.append(part)
        return "".join(out)

    # Per point name, its labels in order of first appearance; a point of
    # that name without a label keeps its base lines in that variant.
    labels = collections.OrderedDict()
    for part in parts:
        if isinstance(part, tuple):
            known = labels.setdefault(part[0], collections.OrderedDict())
            for label, is_open, _ in part[1][1:]:
                known[label] = known.get(label, False) or is_open
    variants = [("base", False, render(None, None))]
    for name, known in labels.items():
        for index, (label, is_open) in enumerate(known.items(), 1):
            slug = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower()
            variants.append((f"{name}-{index}-{slug}", is_open,
                             render(name, label)))
    return variants


def decisions(migrated_text, report, code):
    # The code only: the report comments name the runtime's calls too.
    migrated_text = re.sub(r"//[^\n]*", "", migrated_text)
    found = {name: any(re.search(p, migrated_text) for p in patterns)
             for name, patterns in DECISIONS.items()}
    return {
        "exit": code,
        "items": sorted(item["id"] for item in report.get("items", [])),
        "wrapped": len(WRAPS.findall(migrated_text)),
        "does": sorted(name for name, on in found.items() if on),
    }


def tail(text, lines=12):
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run(cmd, cwd=None):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check_variant(name, text, args, flags):
    """The variant's decisions and the problems that are not decisions (it
    does not compile, a second run changes it)."""
    folder = os.path.join(args.work, name)
    src = os.path.join(folder, "src")
    out = os.path.join(folder, "out")
    os.makedirs(src, exist_ok=True)
    source = os.path.join(src, "main.cpp")
    with open(source, "w") as f:
        f.write(text)
    report_file = os.path.join(folder, "report.json")
    cache = ["--cache-dir", args.cache_dir] if args.cache_dir else []
    code, _, err = run([args.ddpify, "migrate", source, "--root", src,
                        "--out-dir", out, "--report", report_file] +
                       args.migrate_arg + cache +
                       ["--"] + flags)
    with open(os.path.join(folder, "migrate.err"), "w") as f:
        f.write(err)
    problems = []
    migrated = os.path.join(out, "main.cpp")
    if not os.path.exists(migrated):
        migrated = source  # nothing written: nothing migrated
    try:
        with open(report_file) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        report = {}
        problems.append(f"no report ({e}); ddpify said: {err[-400:]}")
    with open(migrated) as f:
        migrated_text = f.read()
    if code in (0, 1) and migrated != source:
        ccode, cout, cerr = run(shlex.split(args.check) + [migrated])
        if ccode != 0:
            problems.append("the migrated program does not compile:\n" +
                            tail(cout + cerr))
        dcode, dout, derr = run([args.ddpify, "diff", migrated, "--root",
                                 out, "--quiet"] + args.migrate_arg + cache +
                                ["--"] + flags)
        if dout.strip():
            problems.append("a second run changes the migrated program:\n" +
                            tail(dout))
    return decisions(migrated_text, report, code), problems


def describe(mine, base):
    return "; ".join(f"{key}: {mine[key]} (base: {base[key]})"
                     for key in mine if mine[key] != base[key])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("template")
    parser.add_argument("--list", action="store_true",
                        help="print the variants' names and stop")
    parser.add_argument("--ddpify")
    parser.add_argument("--work")
    parser.add_argument("--check", help="the syntax check, a command line "
                        "the migrated file is appended to")
    parser.add_argument("--cache-dir", help="ddpify's header cache")
    parser.add_argument("--migrate-arg", action="append", default=[],
                        help="an option for every run of ddpify "
                        "(--rollouts-per-rank), repeatable")
    argv = sys.argv[1:]
    flags = []
    if "--" in argv:
        flags = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    args = parser.parse_args(argv)
    args.flags = flags
    try:
        with open(args.template) as f:
            variants = expand(parse(f.read()))
    except (OSError, TemplateError) as e:
        print(f"variants.py: {args.template}: {e}", file=sys.stderr)
        return 2
    if args.list:
        for name, is_open, _ in variants:
            print(name + (" (open)" if is_open else ""))
        return 0
    if not (args.ddpify and args.work and args.check):
        parser.error("--ddpify, --work and --check are required")
    failed = 0
    base = None
    for name, is_open, text in variants:
        got, problems = check_variant(name, text, args, args.flags)
        if base is None:
            base = got
            print(f"base: {json.dumps(got)}")
        differs = describe(got, base)
        if is_open:
            if differs:
                print(f"OPEN {name}: {differs}")
            else:
                failed += 1
                print(f"FAIL {name}: marked !open but gives the base's "
                      "decisions now: take the mark off")
        elif differs:
            failed += 1
            print(f"FAIL {name}: {differs}")
        else:
            print(f"PASS {name}")
        for problem in problems:
            if not is_open:
                failed += 1
            print(f"{'OPEN' if is_open else 'FAIL'} {name}: {problem}")
    print(f"{len(variants)} variant(s), {failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
