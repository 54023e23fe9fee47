//===- SeedMatchers.h - R13: seeds drawn at run time, shared -----*- C++
//-*-===//
//
// A random seed drawn at run time (`std::random_device{}()`, `time(nullptr)`,
// a clock) differs by process; R13 makes every rank use the main process's
// (`ddp::shared_seed(...)`), so ranks that shuffle or make their data alike
// share out one order.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_SEEDMATCHERS_H
#define DDPIFY_SEEDMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

std::unique_ptr<MatcherModule> createSeedMatchers(FindingList &Findings,
                                                  llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_SEEDMATCHERS_H
