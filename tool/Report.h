//===- Report.h - R10, report comments and the migration report -*- C++ -*-===//
//
// What migrate and diff do after the rules' edits: R10 (CMakeLists.txt) and
// the `// ddpify:` comments of the report items join the same EditSet; at the
// end, a summary on stderr (per-file rule counts, then every item that needs
// a person) and, with --report, the same as JSON. The ids: docs/report.md.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_REPORT_H
#define DDPIFY_REPORT_H

#include "Pipeline.h"
#include "llvm/Support/raw_ostream.h"

namespace ddpify {

/// migrate/diff, after every rule and R9: adds the R10 edits and items and
/// the report comments to Result. Returns ExitOk, or ExitError after printing
/// why (an R10 edit that conflicts with another edit).
int addBuildAndReportEdits(const ToolOptions &Options, PipelineResult &Result);

/// The end-of-run summary: per-file rule counts (unless Options.Quiet or
/// \p Applied is false: a failed write changed nothing), then every report
/// item (always), then notes.
void printReport(const ToolOptions &Options, const PipelineResult &Result,
                 bool Applied = true, llvm::raw_ostream &OS = llvm::errs());

/// The same as a JSON document (--report).
std::string reportJson(const ToolOptions &Options, const PipelineResult &Result,
                       bool Applied);

/// `migrate`: writes the files, prints the report and writes --report; a
/// report that cannot be written is an error before anything is written.
int migrateAndReport(const ToolOptions &Options, const PipelineResult &Result);

/// `diff`: prints the diff to OS, the report to stderr, and writes --report.
int diffAndReport(const ToolOptions &Options, const PipelineResult &Result,
                  llvm::raw_ostream &OS);

} // namespace ddpify

#endif // DDPIFY_REPORT_H
