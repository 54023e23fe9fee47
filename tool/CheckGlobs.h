//===- CheckGlobs.h - clang-tidy's --checks glob lists ----------*- C++ -*-===//
//
// The `--checks` and `--warnings-as-errors` syntax of lint, shared by the
// lint driver (Lint.cpp) and the output (Output.cpp) without either
// including the other.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_TOOL_CHECKGLOBS_H
#define DDPIFY_TOOL_CHECKGLOBS_H

#include "llvm/ADT/StringRef.h"

namespace ddpify {

/// Whether a `--checks` glob list (`-*,ddp-cuda-*`) enables CheckName, with
/// clang-tidy's syntax: comma-separated, `*` the only wildcard, a leading
/// `-` removes, the last matching glob wins.
bool matchesGlobList(llvm::StringRef Globs, llvm::StringRef CheckName);

} // namespace ddpify

#endif
