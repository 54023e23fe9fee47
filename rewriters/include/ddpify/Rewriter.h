//===- Rewriter.h - Findings to edits ---------------------------*- C++ -*-===//
//
// A rewriter turns one Finding into one clang::tooling::Replacement; it never
// looks at the AST. Each concern has its own file (DeviceRewriter.cpp, ...);
// editFor() asks them in turn.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_REWRITER_H
#define DDPIFY_REWRITER_H

#include "ddpify/Finding.h"
#include "clang/Tooling/Core/Replacement.h"
#include <optional>

namespace ddpify {

/// The expression migrated code uses for "this process's device".
inline constexpr const char *ProcessDevice = "ddp::device()";

/// R2/R3 edits; std::nullopt for a finding of another rule.
std::optional<clang::tooling::Replacement>
rewriteDeviceFinding(const Finding &F);

/// The edit for F from whichever rewriter owns its rule; std::nullopt for a
/// finding that is only reported (inside a macro expansion, ...).
std::optional<clang::tooling::Replacement> editFor(const Finding &F);

/// The text F's range becomes (what lint shows as the fix-it).
std::string replacementText(const Finding &F);

} // namespace ddpify

#endif // DDPIFY_REWRITER_H
