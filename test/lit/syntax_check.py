#!/usr/bin/env python3
"""Runs a syntax check (`clang++ -fsyntax-only ...`) and remembers that it passed.

    syntax_check.py [--memo DIR] [--base DIR] -- COMPILER ARGS...

What ccache does for objects, for a check that makes none (ccache cannot keep
a `-fsyntax-only` run): a check that passed is recorded under a key of the
compiler, its arguments and the checked file's contents, with the contents of
every file it read (clang's dependency list, `-MD`); the same check with the
same files is a pass without running the compiler again. Paths under --base
(the checkout) count as relative, so a fresh clone finds the checks an
earlier checkout passed. A check that fails is never recorded: it runs, and
prints its errors, every time. Without --memo the compiler just runs.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

BASE_MARK = "@BASE@"


def relative(text, base):
    if not base:
        return text
    return text.replace(base + os.sep, BASE_MARK + os.sep)


def absolute(text, base):
    return text.replace(BASE_MARK + os.sep, base + os.sep) if base else text


def file_hash(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def digest_of(path):
    """A file's contents; a precompiled header's size and time instead (a
    few hundred megabytes; clang checks its own inputs, and it is rebuilt,
    with a new time, when they change)."""
    if path.endswith((".pch", ".gch")):
        try:
            st = os.stat(path)
        except OSError:
            return None
        return f"stat:{st.st_size}:{st.st_mtime_ns}"
    return file_hash(path)


def dependencies(deps_file):
    """The files of a Makefile rule clang wrote (`target: a b \\ ...`)."""
    with open(deps_file) as f:
        text = f.read().replace("\\\n", " ")
    _, _, files = text.partition(": ")
    out, word, escaped = [], "", False
    for ch in files:
        if escaped:
            word += ch
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch.isspace():
            if word:
                out.append(word)
            word = ""
        else:
            word += ch
    if word:
        out.append(word)
    return out


def main(argv):
    memo = base = None
    while argv and argv[0] != "--":
        if argv[0] == "--memo":
            memo, argv = argv[1], argv[2:]
        elif argv[0] == "--base":
            base, argv = os.path.realpath(argv[1]), argv[2:]
        else:
            sys.exit(f"syntax_check.py: unknown argument {argv[0]!r}")
    command = argv[1:]
    if not memo or not command:
        return subprocess.call(command)

    key = hashlib.sha256()
    # The compiler by its identity (its real file, size and time).
    compiler = os.path.realpath(command[0])
    if os.path.isfile(compiler):
        st = os.stat(compiler)
        key.update(f"{compiler}:{st.st_size}:{st.st_mtime_ns}".encode())
    for arg in command:
        key.update(b"\0" + relative(arg, base).encode())
        # A source by its contents, a precompiled header by its identity.
        if arg is not command[0] and os.path.isfile(arg):
            key.update(b"\0" + (digest_of(arg) or "").encode())
    entry = os.path.join(memo, key.hexdigest()[:32] + ".json")
    try:
        with open(entry) as f:
            files = json.load(f)["files"]
        if all(digest_of(absolute(path, base)) == digest
               for path, digest in files):
            return 0
    except (OSError, ValueError, KeyError):
        pass

    try:
        os.makedirs(memo, exist_ok=True)
        scratch_dir = tempfile.TemporaryDirectory(dir=memo)
    except OSError:  # Nowhere to remember it: the check just runs.
        return subprocess.call(command)
    with scratch_dir as scratch:
        deps_file = os.path.join(scratch, "deps")
        code = subprocess.call(command + ["-MD", "-MF", deps_file,
                                          "-MT", "check"])
        if code != 0 or not os.path.exists(deps_file):
            return code
        files = []
        for path in dependencies(deps_file):
            digest = digest_of(path)
            if digest is None:
                return code
            files.append([relative(os.path.realpath(path), base), digest])
        temp = os.path.join(scratch, "entry")
        with open(temp, "w") as f:
            json.dump({"files": files}, f)
        os.replace(temp, entry)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
