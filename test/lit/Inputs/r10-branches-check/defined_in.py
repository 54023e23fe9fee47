"""For R10-branches.test: the sources of a compilation database (file names,
sorted, on one line) whose compile command has the definition given."""
import json
import os
import sys

entries = json.load(open(sys.argv[1]))
print(" ".join(sorted(os.path.basename(e["file"]) for e in entries
                      if "-D" + sys.argv[2] in e["command"])))
