//===- Lint.h - lint output, suppression and selection ----------*- C++ -*-===//
//
// `ddpify lint`: selects Findings with --checks, drops the ones a NOLINT
// comment suppresses, and prints the rest as clang-style text, JSON, SARIF
// 2.1.0 or reviewdog's rdjson; optionally exports the fix-its as clang-tidy
// YAML or applies them.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_LINT_H
#define DDPIFY_LINT_H

#include "CheckGlobs.h"
#include "Pipeline.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace ddpify {

enum class LintFormat { Text, Json, Sarif, Rdjson };
enum class ColorMode { Auto, Always, Never };

struct LintOptions {
  LintFormat Format = LintFormat::Text;
  ColorMode Color = ColorMode::Auto;
  /// Globs of checks whose findings are errors.
  std::string WarningsAsErrors;
  /// Where --export-fixes writes its YAML; empty: nowhere.
  std::string ExportFixes;
  bool Fix = false;
  bool ExitZero = false;
  /// List what `migrate` rewrites one by one in the text output too, instead
  /// of one line per file.
  bool ShowMigration = false;
};

/// Prints the selected, unsuppressed Findings to OS in LintOpts.Format,
/// exports / applies their fix-its as asked. Returns the exit code.
int runLint(const ToolOptions &Options, const LintOptions &LintOpts,
            const PipelineResult &Result, llvm::raw_ostream &OS);

/// Whether a NOLINT comment in Code suppresses CheckName's diagnostic on the
/// 1-based Line: `NOLINT` / `NOLINT(globs)` on that line, `NOLINTNEXTLINE`
/// on the line before, or a `NOLINTBEGIN`...`NOLINTEND` region around it.
bool isSuppressedByNolint(llvm::StringRef Code, unsigned Line,
                          llvm::StringRef CheckName);

} // namespace ddpify

#endif // DDPIFY_LINT_H
