//===- DataMatchers.h - R4: data loaders sharded across ranks ---*- C++ -*-===//

#ifndef DDPIFY_DATAMATCHERS_H
#define DDPIFY_DATAMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

/// R4: calls of torch::data::make_data_loader, each with the ddp loader it
/// becomes (even when its batches reach backward(), exact otherwise), or a
/// report item (custom sampler, stateful dataset, loader type written out,
/// use not followed).
std::unique_ptr<MatcherModule> createDataMatchers(FindingList &Findings,
                                                  llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_DATAMATCHERS_H
