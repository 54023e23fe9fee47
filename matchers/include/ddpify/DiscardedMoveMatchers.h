//===- DiscardedMoveMatchers.h - ddp-discarded-move ------------*- C++ -*-===//

#ifndef DDPIFY_DISCARDEDMOVEMATCHERS_H
#define DDPIFY_DISCARDEDMOVEMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

/// ddp-discarded-move: `x.to(device);`, `x.cuda();`, `x.cpu();` as a
/// statement on a tensor: the moved copy is thrown away.
std::unique_ptr<MatcherModule>
createDiscardedMoveMatchers(FindingList &Findings, llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_DISCARDEDMOVEMATCHERS_H
