//===- PlacementMatchers.h ---------------------------------------------*- C++
//-*-===//

#ifndef DDPIFY_PLACEMENTMATCHERS_H
#define DDPIFY_PLACEMENTMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

/// ddp-device-mismatch and ddp-cpu-factory-in-forward: where each tensor was
/// placed.
std::unique_ptr<MatcherModule>
createPlacementMatchers(FindingList &Findings, llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_PLACEMENTMATCHERS_H
