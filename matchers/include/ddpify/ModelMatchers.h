//===- ModelMatchers.h - R5 SyncBatchNorm, R6 DDP wrap ----------*- C++ -*-===//

#ifndef DDPIFY_MODELMATCHERS_H
#define DDPIFY_MODELMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

/// R5: the written names of torch::nn::BatchNorm{1,2,3}d types. R6: where
/// each trained model is placed on the device, for its DDP wrap (or a
/// model-not-wrapped report item).
std::unique_ptr<MatcherModule> createModelMatchers(FindingList &Findings,
                                                   llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_MODELMATCHERS_H
