"""Checks ddpify's rdjson output (reviewdog's DiagnosticResult).

usage:
  check_rdjson.py schema RDJSON SCHEMA ROOT
      RDJSON (its paths relative to ROOT) against SCHEMA (DiagnosticResult.schema.json, beside this
      script), with a validator of the keywords the schema uses (and with
      python's jsonschema too when it is installed; nothing is downloaded);
      then ddpify's own promises: every suggestion is line-wise (whole
      lines, no columns) and on the lines of its diagnostic, every range
      lies in its file. Prints "ok: N diagnostics,
      M suggestions".
  check_rdjson.py apply RDJSON ROOT OUT
      Applies every suggestion of RDJSON to the files under ROOT (paths
      relative to it) and writes the results under OUT. Overlapping
      suggestions in one file are an error.
  check_rdjson.py fixes RDJSON LINT_JSON
      Each suggestion of `lint --format=rdjson`, applied alone, gives the
      file that the fix-it of the same finding (the same place in the
      order) in `lint --format=json` gives applied alone.
Exits non-zero with a message on the first violation.
"""
import json
import os
import sys


def fail(message):
    sys.exit("check_rdjson.py: " + message)


def expect(condition, message):
    if not condition:
        fail(message)


# A validator of the JSON Schema keywords the vendored schema uses.
def validate(value, schema, root, where):
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        return validate(value, root["definitions"][name], root, where)
    if "enum" in schema:
        expect(value in schema["enum"] and type(value) in (str, int),
               "%s: %r is not one of %r" % (where, value, schema["enum"]))
    kind = schema.get("type")
    if kind == "object":
        expect(isinstance(value, dict), "%s: not an object" % where)
        for key in schema.get("required", []):
            expect(key in value, "%s: lacks '%s'" % (where, key))
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                validate(value[key], sub, root, where + "." + key)
    elif kind == "array":
        expect(isinstance(value, list), "%s: not an array" % where)
        for i, item in enumerate(value):
            validate(item, schema["items"], root, "%s[%d]" % (where, i))
    elif kind == "string":
        expect(isinstance(value, str), "%s: not a string" % where)
        expect(len(value) >= schema.get("minLength", 0), "%s: empty" % where)
    elif kind == "integer":
        expect(isinstance(value, int) and not isinstance(value, bool),
               "%s: not an integer" % where)
        expect(value >= schema.get("minimum", value), "%s: below minimum" % where)


def line_starts(code):
    starts = [0]
    for i, byte in enumerate(code):
        if byte == ord("\n") and i + 1 < len(code):
            starts.append(i + 1)
    return starts


def offset(code, position, where):
    """The byte offset of an rdjson Position (1-based line, byte column)."""
    starts = line_starts(code)
    line, column = position["line"], position.get("column", 1)
    if line == len(starts) + 1 and column == 1 and code.endswith(b"\n"):
        return len(code)
    expect(1 <= line <= len(starts), "%s: line %d is not in the file" % (where, line))
    start = starts[line - 1]
    end = starts[line] if line < len(starts) else len(code)
    at = start + column - 1
    expect(at <= end, "%s: column %d is past its line" % (where, column))
    return at


def is_linewise(rng):
    return "column" not in rng["start"] and "column" not in rng.get("end", {})


def span(code, rng, where):
    """The bytes [begin, end) a Range covers; a line-wise one (no columns)
    from the start of its first line through the end of its last."""
    if is_linewise(rng):
        starts = line_starts(code)
        first, last = rng["start"]["line"], rng.get("end", rng["start"])["line"]
        expect(1 <= first <= last <= len(starts),
               "%s: lines %d-%d are not in the file" % (where, first, last))
        return starts[first - 1], starts[last] if last < len(starts) else len(code)
    begin = offset(code, rng["start"], where + ".start")
    end = offset(code, rng.get("end", rng["start"]), where + ".end")
    expect(begin <= end, "%s: ends before it starts" % where)
    return begin, end


def replaced(code, sug, where):
    """The file with the suggestion applied as reviewdog posts it: a
    line-wise suggestion's text is its new lines without the last line
    break, empty for lines deleted."""
    begin, end = span(code, sug["range"], where)
    text = sug["text"].encode()
    if is_linewise(sug["range"]) and text and code[end - 1:end] == b"\n":
        text += b"\n"
    return begin, end, text


def read(path):
    with open(path, "rb") as f:
        return f.read()


def suggestions(doc):
    for d, diag in enumerate(doc["diagnostics"]):
        for s, sug in enumerate(diag.get("suggestions", [])):
            yield diag, sug, "diagnostics[%d].suggestions[%d]" % (d, s)


def check_schema(doc, schema_path, root):
    with open(schema_path) as f:
        schema = json.load(f)
    validate(doc, schema, schema, "$")
    try:
        import jsonschema  # only where installed
    except ImportError:
        jsonschema = None
    if jsonschema is not None:
        jsonschema.validate(doc, schema)
    count = 0
    for diag, sug, where in suggestions(doc):
        count += 1
        code = read(os.path.join(root, diag["location"]["path"]))
        expect("end" in sug["range"], where + ": no end")
        expect(is_linewise(sug["range"]), where + ": not line-wise")
        span(code, sug["range"], where + ".range")
        # reviewdog posts a suggestion on its diagnostic's lines.
        location = diag["location"]["range"]
        expect((location["start"]["line"], location["end"]["line"]) ==
               (sug["range"]["start"]["line"], sug["range"]["end"]["line"]),
               where + ": not on its diagnostic's lines")
    for d, diag in enumerate(doc["diagnostics"]):
        code = read(os.path.join(root, diag["location"]["path"]))
        span(code, diag["location"]["range"], "diagnostics[%d].location" % d)
    print("ok: %d diagnostics, %d suggestions" % (len(doc["diagnostics"]), count))


def apply_all(doc, root, out):
    per_file = {}
    for diag, sug, where in suggestions(doc):
        path = diag["location"]["path"]
        code = read(os.path.join(root, path))
        begin, end, text = replaced(code, sug, where)
        per_file.setdefault(path, []).append((begin, end, text, where))
    for path, edits in per_file.items():
        code = read(os.path.join(root, path))
        edits.sort()
        for (b1, e1, _, w1), (b2, e2, _, w2) in zip(edits, edits[1:]):
            expect(e1 <= b2, "%s overlaps %s" % (w1, w2))
        for begin, end, text, _ in reversed(edits):
            code = code[:begin] + text + code[end:]
        target = os.path.join(out, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(code)
    print("applied %d files" % len(per_file))


def check_fixes(doc, lint):
    """Diagnostics and findings come in the same order."""
    findings = lint["findings"]
    expect(len(findings) == len(doc["diagnostics"]),
           "%d diagnostics for %d findings" % (len(doc["diagnostics"]), len(findings)))
    count = 0
    for d, (diag, finding) in enumerate(zip(doc["diagnostics"], findings)):
        where = "diagnostics[%d]" % d
        expect(diag["code"]["value"] == finding["check"], where + ": another check")
        sugs = diag.get("suggestions", [])
        expect(len(sugs) == len(finding["fixes"]),
               where + ": %d suggestions for %d fix-its" % (len(sugs), len(finding["fixes"])))
        for sug, fix in zip(sugs, finding["fixes"]):
            code = read(finding["file"])
            begin, end, text = replaced(code, sug, where)
            by_suggestion = code[:begin] + text + code[end:]
            by_fix = (code[:fix["offset"]] + fix["replacement"].encode() +
                      code[fix["offset"] + fix["length"]:])
            expect(by_suggestion == by_fix, where + ": applied, not the fix-it's file")
            count += 1
    expect(count > 0, "no suggestions at all")
    print("ok: %d suggestions give the fix-its' files" % count)


def main():
    mode = sys.argv[1]
    with open(sys.argv[2]) as f:
        doc = json.load(f)
    if mode == "schema":
        check_schema(doc, sys.argv[3], sys.argv[4])
    elif mode == "apply":
        apply_all(doc, sys.argv[3], sys.argv[4])
    elif mode == "fixes":
        with open(sys.argv[3]) as f:
            check_fixes(doc, json.load(f))
    else:
        fail("unknown mode " + mode)


main()
