//===- Output.h - files, diffs and diagnostics ------------------*- C++ -*-===//

#ifndef DDPIFY_OUTPUT_H
#define DDPIFY_OUTPUT_H

#include "Pipeline.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>
#include <vector>

namespace ddpify {

/// `migrate`: writes the edited files in place or into a mirror of the root.
int writeMigration(const ToolOptions &Options, const PipelineResult &Result);

/// `diff`: prints a unified diff (a/ b/ paths relative to the root) to OS.
int printDiff(const PipelineResult &Result, llvm::raw_ostream &OS);

/// `lint` lives in Lint.h (runLint); --fix writes through writeMigration.

/// The end-of-run report (summary, items, --report) is in Report.h.

/// A run of changed lines: the old lines [OldBegin, OldEnd) become the new
/// lines [NewBegin, NewEnd) (0-based; an empty old run is an insertion
/// before old line OldBegin).
struct ChangedLines {
  size_t OldBegin = 0, OldEnd = 0, NewBegin = 0, NewEnd = 0;
};

/// The runs of changed lines from Old to New, in order, with unchanged lines
/// between them: the edit script unifiedDiff prints.
std::vector<ChangedLines> changedLines(llvm::StringRef Old,
                                       llvm::StringRef New);

/// File as it is on disk (Old) and with the run's edits applied (New);
/// false, with the error printed, when either cannot be had.
bool readBeforeAndAfter(const PipelineResult &Result, llvm::StringRef File,
                        std::optional<std::string> &Old,
                        std::optional<std::string> &New);

/// A unified diff of one file with 3 lines of context; empty when equal.
std::string unifiedDiff(llvm::StringRef RelativePath, llvm::StringRef Old,
                        llvm::StringRef New);

/// Whether a `--checks` glob list (`-*,ddp-cuda-*`) enables CheckName (see
/// matchesGlobList).
bool isCheckEnabled(llvm::StringRef Globs, llvm::StringRef CheckName);

} // namespace ddpify

#endif // DDPIFY_OUTPUT_H
