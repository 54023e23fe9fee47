//===- ReportItems.h - Report items and their comments ----------*- C++ -*-===//
//
// A report item is a Finding that cannot be migrated safely (inside a macro
// expansion, or with a NotRewrittenReason): migrate and diff list it and mark
// its spot with a `// ddpify: <id>: <reason>` comment. The ids are documented
// in docs/report.md.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_REPORTITEMS_H
#define DDPIFY_REPORTITEMS_H

#include "ddpify/Finding.h"
#include "clang/Tooling/Core/Replacement.h"
#include "llvm/ADT/ArrayRef.h"
#include <string>
#include <vector>

namespace ddpify {

/// Whether F is listed in the report instead of being rewritten.
bool isReportItem(const Finding &F);

/// F's stable id: its ReportId, else `macro-expansion` for code in a macro
/// expansion, else `not-rewritten`.
std::string reportItemId(const Finding &F);

/// What the user must do about F, on one line.
std::string reportItemReason(const Finding &F);

/// The comments of every report item among Findings (reportCommentFor),
/// those above the same line merged into one edit.
std::vector<clang::tooling::Replacement>
reportComments(llvm::ArrayRef<Finding> Findings);

} // namespace ddpify

#endif // DDPIFY_REPORTITEMS_H
