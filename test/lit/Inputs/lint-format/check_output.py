"""Asserts the required fields of `ddpify lint --format=json|sarif` output.

usage: check_output.py json|sarif OUTPUT SOURCE EXPECTED_COUNT [ERROR_CHECK]

Every finding / result must point at bytes of SOURCE that agree with its
line and column, carry a message and check id, and (outside macros) a fix
whose replaced bytes are the reported range. ERROR_CHECK, when given, is a
check whose findings must have level "error" (--warnings-as-errors).
Exits non-zero with a message on the first violation.
"""
import json
import sys
import urllib.parse


def fail(message):
    sys.exit("check_output.py: " + message)


def expect(condition, message):
    if not condition:
        fail(message)


def line_col(code, offset):
    before = code[:offset]
    line = before.count(b"\n") + 1
    start = before.rfind(b"\n") + 1
    return line, offset - start + 1


def check_json(doc, code, source, count, error_check):
    expect(doc.get("tool") == "ddpify", "tool is not ddpify")
    findings = doc["findings"]
    expect(len(findings) == count, "%d findings, expected %d" % (len(findings), count))
    checks = set()
    for f in findings:
        for key in ("check", "rule", "file", "line", "column", "message", "fixes", "level"):
            expect(key in f, "finding lacks '%s': %r" % (key, f))
        expect(f["file"] == source, "file %s is not %s" % (f["file"], source))
        expect(f["message"], "empty message")
        expect((f["line"], f["column"]) == line_col(code, f["offset"]),
               "line/column disagree with offset in %r" % f)
        level = "error" if f["check"] == error_check else "warning"
        expect(f["level"] == level, "level %s, expected %s" % (f["level"], level))
        checks.add(f["check"])
        if f["inMacro"]:
            expect(f["fixes"] == [], "a fix inside a macro")
            continue
        expect(len(f["fixes"]) == 1, "no fix in %r" % f)
        fix = f["fixes"][0]
        for key in ("file", "offset", "length", "replacement"):
            expect(key in fix, "fix lacks '%s'" % key)
        expect(fix["file"] == source, "fix file")
        expect((fix["offset"], fix["length"]) == (f["offset"], f["length"]),
               "fix range differs from the finding's range")
        expect(fix["replacement"], "empty replacement")
    return checks


def check_sarif(doc, code, source, count, error_check):
    expect("sarif-2.1.0" in doc["$schema"], "$schema")
    expect(doc["version"] == "2.1.0", "version")
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    expect(driver["name"] == "ddpify", "driver name")
    expect(driver["version"], "driver version")
    rules = driver["rules"]
    ids = [r["id"] for r in rules]
    for needed in ("ddp-cuda-call", "ddp-hardcoded-device"):
        expect(needed in ids, "rule %s missing" % needed)
    for r in rules:
        expect(r["shortDescription"]["text"], "rule without shortDescription")
        expect(r["helpUri"].endswith("checks.md#" + r["id"]), "helpUri " + r["helpUri"])
    root = run["originalUriBaseIds"]["SRCROOT"]["uri"]
    expect(root.startswith("file:///") and root.endswith("/"), "SRCROOT " + root)
    results = run["results"]
    expect(len(results) == count, "%d results, expected %d" % (len(results), count))
    checks = set()
    fixes = 0
    for res in results:
        expect(ids[res["ruleIndex"]] == res["ruleId"], "ruleIndex/ruleId disagree")
        level = "error" if res["ruleId"] == error_check else "warning"
        expect(res["level"] == level, "level")
        expect(res["message"]["text"], "message.text")
        loc = res["locations"][0]["physicalLocation"]
        art = loc["artifactLocation"]
        expect(art["uriBaseId"] == "SRCROOT", "uriBaseId")
        path = urllib.parse.unquote(urllib.parse.urlparse(root).path) + art["uri"]
        expect(path == source, "location %s is not %s" % (path, source))
        region = loc["region"]
        offset = region["charOffset"]
        expect((region["startLine"], region["startColumn"]) == line_col(code, offset),
               "region start disagrees with charOffset")
        expect((region["endLine"], region["endColumn"]) ==
               line_col(code, offset + region["charLength"]), "region end")
        checks.add(res["ruleId"])
        for fix in res.get("fixes", []):
            fixes += 1
            expect(fix["description"]["text"], "fix description")
            change = fix["artifactChanges"][0]
            expect(change["artifactLocation"]["uri"] == art["uri"], "fix artifact")
            rep = change["replacements"][0]
            deleted = rep["deletedRegion"]
            # The fix starts where the result does and covers it (a fix of
            # several edits, such as R2's replacement and the read of a local
            # it leaves unused after the statement, is one larger region).
            expect(deleted["charOffset"] == offset and
                   deleted["charLength"] >= region["charLength"], "deletedRegion")
            expect((deleted["startLine"], deleted["startColumn"]) ==
                   line_col(code, deleted["charOffset"]), "deletedRegion start")
            expect(rep["insertedContent"]["text"], "insertedContent.text")
    expect(fixes > 0, "no fixes at all")
    return checks


def main():
    mode, output, source, count = sys.argv[1:5]
    error_check = sys.argv[5] if len(sys.argv) > 5 else None
    with open(output) as f:
        doc = json.load(f)
    with open(source, "rb") as f:
        code = f.read()
    check = check_json if mode == "json" else check_sarif
    checks = check(doc, code, source, int(count), error_check)
    print("ok: %s, checks %s" % (mode, ",".join(sorted(checks))))


main()
