"""Compares two clang-tidy --export-fixes documents (ddpify lint's and
clang-tidy's): the same diagnostics, each with the same message, place,
replacements and notes; prints what differs and exits 1, else prints how
many diagnostics and replacements agree.

usage: compare_fixes.py EXPECTED.yaml GOT.yaml
"""
import sys

import yaml


def diagnostics(path):
    with open(path) as f:
        document = yaml.safe_load(f) or {}
    found = []
    for d in document.get("Diagnostics") or []:
        message = d["DiagnosticMessage"]
        replacements = sorted(
            (r["FilePath"], r["Offset"], r["Length"], r["ReplacementText"])
            for r in message.get("Replacements") or [])
        notes = sorted((n["Message"], n["FilePath"], n["FileOffset"])
                       for n in d.get("Notes") or [])
        found.append((d["DiagnosticName"], message["FilePath"],
                      message["FileOffset"], message["Message"],
                      tuple(replacements), tuple(notes)))
    return sorted(found)


def main():
    expected, got = diagnostics(sys.argv[1]), diagnostics(sys.argv[2])
    if expected == got:
        edits = sum(len(d[4]) for d in got)
        print(f"same: {len(got)} diagnostics, {edits} replacements")
        return 0
    for d in expected:
        if d not in got:
            print(f"only in {sys.argv[1]}: {d}")
    for d in got:
        if d not in expected:
            print(f"only in {sys.argv[2]}: {d}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
