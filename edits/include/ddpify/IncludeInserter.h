//===- IncludeInserter.h - R9: #include <ddp/ddp.h> -------------*- C++ -*-===//

#ifndef DDPIFY_INCLUDEINSERTER_H
#define DDPIFY_INCLUDEINSERTER_H

#include "clang/Tooling/Core/Replacement.h"
#include <optional>

namespace ddpify {

/// The insertion of `#include <ddp/ddp.h>` into Code (the text of FilePath),
/// placed in its include block; std::nullopt when Code already includes it.
std::optional<clang::tooling::Replacement>
runtimeIncludeInsertion(llvm::StringRef FilePath, llvm::StringRef Code);

} // namespace ddpify

#endif // DDPIFY_INCLUDEINSERTER_H
