//===- OutputMatchers.h - R7/R8: output and checkpoints ---------*- C++ -*-===//

#ifndef DDPIFY_OUTPUTMATCHERS_H
#define DDPIFY_OUTPUTMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

/// R7 (statements writing to stdout) and R8 (torch::save and checkpoint
/// writes) not guarded by the main-process check.
std::unique_ptr<MatcherModule>
createOutputMatchers(FindingList &Findings, llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_OUTPUTMATCHERS_H
