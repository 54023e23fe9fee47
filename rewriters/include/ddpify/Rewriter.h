//===- Rewriter.h - Findings to edits ---------------------------*- C++ -*-===//
//
// A rewriter turns one Finding into its clang::tooling::Replacements; it never
// looks at the AST. Each concern has its own file (DeviceRewriter.cpp, ...);
// editsFor() asks them in turn. A rule that spells its edits itself, as
// clang's Transformer rules do, carries them in Finding::Edits (R7/R8):
// editsFor() applies those as they are.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_REWRITER_H
#define DDPIFY_REWRITER_H

#include "ddpify/Finding.h"
#include "clang/Tooling/Core/Replacement.h"
#include <optional>
#include <vector>

namespace ddpify {

/// The expression migrated code uses for "this process's device".
inline constexpr const char *ProcessDevice = "ddp::device()";

/// R2/R3 edits; std::nullopt for a finding of another rule.
std::optional<clang::tooling::Replacement>
rewriteDeviceFinding(const Finding &F);

/// R1 edits: the ddp::init call (and main's parameters when it has none).
std::vector<clang::tooling::Replacement> rewriteEntryFinding(const Finding &F);

/// R5 edits: a BatchNorm type name becomes its SyncBatchNorm.
std::vector<clang::tooling::Replacement> rewriteModelFinding(const Finding &F);

/// R6 edits share rewriteModelFinding (ModelRewriter.cpp).

/// R4 edits: a loader construction's callee becomes ddp::make_data_loader or
/// ddp::make_eval_data_loader. DataRewriter.cpp.
std::vector<clang::tooling::Replacement> rewriteDataFinding(const Finding &F);

/// R11 edits: the all-reduce of a validation loop's accumulators right after
/// the loop. MetricsRewriter.cpp.
std::vector<clang::tooling::Replacement>
rewriteMetricsFinding(const Finding &F);

/// Fix-its of the lint-only checks (no migration rule), e.g.
/// ddp-cpu-factory-in-forward. PlacementRewriter.cpp.
std::vector<clang::tooling::Replacement>
rewritePlacementFinding(const Finding &F);

/// The `// ddpify: <id>: <reason>` comment migrate and diff put above a
/// report item (F.ReportId set); empty when it is already there.
/// ReportRewriter.cpp.
std::vector<clang::tooling::Replacement> reportCommentFor(const Finding &F);

/// Every edit for F from whichever rewriter owns its rule (one or two: R1 may
/// also add main's parameters, a braced R7/R8 guard closes after the
/// statement); empty for a finding that is only reported (inside a macro
/// expansion, ...). Dispatch.cpp.
std::vector<clang::tooling::Replacement> editsFor(const Finding &F);

/// editsFor(F) as one replacement (what lint shows and exports as the
/// fix-it): several edits become one spanning them, the text between kept
/// (read from F.FilePath); std::nullopt when there is none.
std::optional<clang::tooling::Replacement> editFor(const Finding &F);

/// The text F's range becomes (what lint shows as the fix-it).
std::string replacementText(const Finding &F);

} // namespace ddpify

#endif // DDPIFY_REWRITER_H
