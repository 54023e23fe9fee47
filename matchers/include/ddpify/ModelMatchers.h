//===- ModelMatchers.h - R5: BatchNorm to SyncBatchNorm ---------*- C++ -*-===//

#ifndef DDPIFY_MODELMATCHERS_H
#define DDPIFY_MODELMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

/// R5: the written names of torch::nn::BatchNorm{1,2,3}d types.
std::unique_ptr<MatcherModule> createModelMatchers(FindingList &Findings,
                                                   llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_MODELMATCHERS_H
