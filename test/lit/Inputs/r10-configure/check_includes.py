"""check_includes.py COMPILE_COMMANDS RUNTIME_INCLUDE ROOT WITHOUT...: every
unit of the compilation database under ROOT compiles with the runtime's
include folder (its target links ddpify::runtime, or a library that links it
PUBLIC), except the units WITHOUT (relative to ROOT), which must not."""
import json
import os
import sys

database, include, root, *without = sys.argv[1:]
include = os.path.realpath(include)
root = os.path.realpath(root)
failed = []
seen = 0
for entry in json.load(open(database)):
    source = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    if not source.startswith(root + os.sep):
        continue
    seen += 1
    command = entry.get("command") or " ".join(entry["arguments"])
    has = any(os.path.realpath(token[len(flag):]) == include
              for token in command.split()
              for flag in ("-I", "-isystem") if token.startswith(flag) and len(token) > len(flag))
    has = has or (" -isystem " + include) in command or (" -I " + include) in command
    relative = os.path.relpath(source, root)
    if has == (relative in without):
        failed.append(f"{relative}: runtime include {'present' if has else 'missing'}")
if not seen:
    failed.append("no unit under the root")
for line in failed:
    print(line)
sys.exit(1 if failed else 0)
