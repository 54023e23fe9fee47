//===- FlowMatchers.h ---------------------------------------------*- C++
//-*-===//

#ifndef DDPIFY_FLOWMATCHERS_H
#define DDPIFY_FLOWMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

/// ddp-divergent-exit: loop exits and returns decided by one rank's data; data
/// pipelines that are not torch data loaders.
std::unique_ptr<MatcherModule> createFlowMatchers(FindingList &Findings,
                                                  llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_FLOWMATCHERS_H
