"""Checks the --report JSON of report.test: check_report.py FILE MODE."""
import json
import sys

path, mode = sys.argv[1], sys.argv[2]
with open(path) as f:
    report = json.load(f)


def expect(cond, what):
    if not cond:
        sys.exit("check_report.py: %s\n%s" % (what, json.dumps(report, indent=2)))


expect(report["tool"] == "ddpify", "tool")
expect(report["mode"] == mode, "mode")
expect(report["applied"] is True, "applied")
files = {f["path"]: f for f in report["files"]}
expect(list(files) == ["main.cpp"], "only main.cpp changed (plain.cpp has nothing)")
expect(files["main.cpp"]["rules"] == {"R1": 1, "R7": 2, "R9": 1}, "per-file rule counts")
expect(files["main.cpp"]["reportComments"] == 3, "three comments")
summary = report["summary"]
expect(summary == {"filesChanged": 1, "items": 3,
                   "rules": {"R1": 1, "R7": 2, "R9": 1}}, "summary")
items = report["items"]
expect([(i["id"], i["rule"], i["check"], i["file"], i["line"], i["column"])
        for i in items] ==
       [("macro-expansion", "R7", "ddp-unguarded-output", "main.cpp", 13, 3),
        ("macro-expansion", "R7", "ddp-unguarded-output", "main.cpp", 15, 5),
        ("macro-expansion", "R7", "ddp-unguarded-output", "main.cpp", 16, 22)],
       "items: id, rule, check, file, line, column")
for item, macro in zip(items, ["SAY", "SHOUT", "SAY"]):
    expect(item["reason"].startswith(
        "inside the expansion of macro '%s', which ddpify never rewrites" % macro),
        "reason names the macro")
expect(report["notes"] and "no CMakeLists.txt" in report["notes"][0], "note")
print("report OK")
