//===- Rdjson.h - reviewdog's diagnostic format -----------------*- C++ -*-===//
//
// `ddpify diff --format=rdjson` and `ddpify lint --format=rdjson`: reviewdog's
// Diagnostic Format as one JSON document (rdjson, the DiagnosticResult
// message), for `reviewdog -f=rdjson`. Every edit is a suggestion on the whole
// lines it replaces (the text: those lines as migrated), which is what review
// interfaces can show and apply: a pull request then holds the migration as
// suggestions a reviewer accepts one by one. Suggestions and the locations
// of diagnostics that carry one are line-wise (reviewdog posts a suggestion
// on the lines of its diagnostic); other locations have 1-based lines and
// byte columns, their ends exclusive.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_RDJSON_H
#define DDPIFY_RDJSON_H

#include "Pipeline.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace ddpify {

/// Whole lines replaced: the bytes [Begin, End) of a file, Begin at a line's
/// start and End at a line's start or the end of the file, become Text.
struct LineSuggestion {
  size_t Begin = 0, End = 0;
  std::string Text;
};

/// The replacement of the bytes [Offset, Offset + Length) of Code by
/// Replacement, widened to the whole lines it touches. An insertion between
/// two lines takes the line after it (at the end of the file, the line
/// before), so that every suggestion replaces lines that exist.
LineSuggestion wholeLines(llvm::StringRef Code, size_t Offset, size_t Length,
                          llvm::StringRef Replacement);

/// rdjson's Range of the bytes [Begin, End) of Code (1-based lines, columns
/// in bytes, End exclusive).
llvm::json::Object rdjsonRange(llvm::StringRef Code, size_t Begin, size_t End);

/// rdjson's line-wise Range of the lines of S (no columns: from the start of
/// the first line through the end of the last, line break included).
llvm::json::Object rdjsonLineRange(llvm::StringRef Code,
                                   const LineSuggestion &S);

/// rdjson's Suggestion of S in Code: line-wise, the way reviewdog turns it
/// into a GitHub or GitLab suggestion block (the text: the new lines,
/// without the line break after the last one; empty: the lines deleted).
llvm::json::Object rdjsonSuggestion(llvm::StringRef Code,
                                    const LineSuggestion &S);

/// A file's path as rdjson gives it: relative to Root when under it (where
/// reviewdog runs, the root of the checkout), else absolute.
std::string rdjsonPath(llvm::StringRef File, llvm::StringRef Root);

/// The DiagnosticResult document of Diagnostics, printed to OS.
void printRdjsonResult(llvm::json::Array Diagnostics, llvm::raw_ostream &OS);

/// Where the docs of a rule ("R2": docs/rules/R2.md) are, beside the checks'
/// docs (DDPIFY_DOCS_URL).
std::string ruleDocsUrl(llvm::StringRef RuleId);

/// `diff --format=rdjson`: one diagnostic per run of changed lines of each
/// file, its message the rules (and report items) behind the run, its one
/// suggestion the run as migrated; applying every suggestion gives what
/// `migrate` writes. Returns what printDiff would (1 when changes are
/// pending).
int printDiffRdjson(const PipelineResult &Result, llvm::raw_ostream &OS);

} // namespace ddpify

#endif // DDPIFY_RDJSON_H
