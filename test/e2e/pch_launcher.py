#!/usr/bin/env python3
"""A compiler launcher for the end-to-end tests' builds: precompiled LibTorch.

    CMAKE_CXX_COMPILER_LAUNCHER="python3;pch_launcher.py;--cache;DIR;--"
    CCACHE_PREFIX=DIR/launch  (under ccache: a script that runs the above)

Every program the end-to-end tests build (an example, its migration, an idiom
program) compiles <torch/torch.h> or <ddp/ddp.h>, which is most of each
compile. GCC uses a precompiled header where it would read the header: when
it searches the include path for the unit's *first* #include, it takes
`D/ddp/ddp.h.gch` of the first folder D that has one, if that file is valid
for the unit's options, and else goes on searching (docs: "Precompiled
Headers"). So this launcher, for a unit whose first #include is one of the
two, builds that header once per set of options that GCC checks (the
compiler, -std, -D/-U, -f, -m, -O, -g, -pthread) and LibTorch/ddp include
folders, in `--cache`/KEY/, and puts that folder first on the unit's include
path (with links to the header's real neighbours: a second #include of it in
the unit is looked up there). Nothing else changes: a unit whose first
include is another header, or a header GCC finds invalid, compiles exactly as without the launcher (GCC
says nothing unless -Winvalid-pch), and no header is added to any unit, so a
missing #include still fails the build. Under ccache the launcher is
ccache's prefix: it runs only where ccache compiles (a miss), and ccache
hashes the unit as without it (its preprocessor reads the headers
themselves). The key also holds the contents of
ddp's headers and the LibTorch header's identity, so a changed header gets a
new precompiled one.
"""
import fcntl
import hashlib
import os
import re
import subprocess
import sys

HEADERS = ("ddp/ddp.h", "torch/torch.h")
# Folders of these headers' own includes: the precompiled header is built
# with these only, so another project's folders cannot change it.
LIBRARY_DIRS = ("torch", "ATen", "c10", "ddp", "caffe2")
SOURCE = re.compile(r"\.(cpp|cc|cxx|c\+\+|C)$")
FIRST_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def first_include(source):
    """The unit's first #include, when nothing but comments and blank lines
    or preprocessor lines come before it (GCC's condition for a precompiled
    header: no C token before it)."""
    try:
        with open(source, errors="replace") as f:
            text = f.read(65536)
    except OSError:
        return None
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    for line in text.splitlines():
        stripped = re.sub(r"//.*", "", line).strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            return None
        match = FIRST_INCLUDE.match(stripped)
        if match:
            return match.group(1)
    return None


def split(command):
    """(key options, library include options, the source) of a compile
    command, or None when it is not one C++ source compiled with -c."""
    args = command[1:]
    if "-c" not in args:
        return None
    sources = [a for a in args if SOURCE.search(a) and not a.startswith("-")]
    if len(sources) != 1:
        return None
    key, includes = [], []
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else None
        if arg in ("-o", "-MF", "-MT", "-MQ"):
            i += 2
            continue
        # Absolute: ccache hands the compiler paths relative to the build
        # folder, and the key must not depend on where that is.
        if arg in ("-I", "-isystem", "-iquote", "-idirafter") and value:
            if library_dir(value):
                includes += [arg, os.path.abspath(value)]
            i += 2
            continue
        for prefix in ("-isystem", "-iquote", "-idirafter", "-I"):
            if arg.startswith(prefix) and len(arg) > len(prefix):
                if library_dir(arg[len(prefix):]):
                    includes += [prefix, os.path.abspath(arg[len(prefix):])]
                break
        else:
            if arg in ("-D", "-U") and value:
                key += [arg, value]
                i += 2
                continue
            # Not the diagnostics' form (ccache adds -fdiagnostics-color).
            if re.match(r"-(std=|D|U|f|m|O|g|pthread)", arg) and \
                    not re.match(r"-f(no-)?(diagnostics|message-length)", arg):
                key.append(arg)
        i += 1
    return key, includes, sources[0]


def library_dir(path):
    return any(os.path.isdir(os.path.join(path, d)) for d in LIBRARY_DIRS)


def include_dirs(includes):
    """The folders of include options, in order."""
    dirs, it = [], iter(includes)
    for arg in it:
        if arg in ("-I", "-isystem", "-iquote", "-idirafter"):
            dirs.append(next(it, ""))
            continue
        for prefix in ("-isystem", "-iquote", "-idirafter", "-I"):
            if arg.startswith(prefix):
                dirs.append(arg[len(prefix):])
                break
    return dirs


def resolve(header, includes):
    """The header's path through the library include folders."""
    for folder in include_dirs(includes):
        path = os.path.join(folder, header)
        if os.path.isfile(path):
            return os.path.realpath(path)
    return None


def identity(header_path):
    """What the key holds of a header: the contents of ddp's headers (they
    change as ddpify is developed), the path, size and time of LibTorch's."""
    h = hashlib.sha256(header_path.encode())
    folder = os.path.dirname(header_path)
    if header_path.endswith("ddp/ddp.h"):
        for name in sorted(os.listdir(folder)):
            if os.path.isfile(os.path.join(folder, name)):
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(name.encode() + f.read())
    else:
        st = os.stat(header_path)
        h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def mirror(real, folder):
    """Links to every entry of the header's real folder beside its
    precompiled form: once GCC has taken the header from this folder, a later
    #include of it (or of a neighbour) in the same unit is looked up here."""
    for name in os.listdir(real):
        link = os.path.join(folder, name)
        if not os.path.lexists(link):
            os.symlink(os.path.join(real, name), link)


def precompiled(cache, compiler, key, includes, header):
    """The folder holding HEADER's precompiled form for these options, built
    if missing (under a lock: the tests build at the same time), or None."""
    path = resolve(header, includes)
    if not path:
        return None
    digest = hashlib.sha256("\0".join(
        [os.path.realpath(compiler), header, identity(path)] + key +
        includes).encode()).hexdigest()[:24]
    folder = os.path.join(cache, digest)
    gch = os.path.join(folder, header + ".gch")
    failed = os.path.join(folder, "failed")
    os.makedirs(os.path.dirname(gch), exist_ok=True)
    with open(os.path.join(folder, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(gch) and not os.path.exists(failed):
            tmp = gch + f".{os.getpid()}.tmp"
            result = subprocess.run(
                [compiler] + key + includes +
                ["-x", "c++-header", path, "-o", tmp],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if result.returncode == 0:
                mirror(os.path.dirname(path), os.path.dirname(gch))
                os.replace(tmp, gch)
            else:
                with open(failed, "wb") as f:
                    f.write(result.stdout)
                if os.path.exists(tmp):
                    os.remove(tmp)
    return folder if os.path.exists(gch) else None


def main(argv):
    if "--" not in argv or argv[:1] != ["--cache"] or len(argv) < 4:
        sys.exit("usage: pch_launcher.py --cache DIR -- COMPILER ARGS...")
    cache = os.path.abspath(argv[1])
    command = argv[argv.index("--") + 1:]
    parts = split(command)
    if parts:
        key, includes, source = parts
        header = first_include(source)
        if header in HEADERS:
            folder = precompiled(cache, command[0], key, includes, header)
            if folder:
                command = command[:1] + ["-I", folder] + command[1:]
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
