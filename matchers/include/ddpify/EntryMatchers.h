//===- EntryMatchers.h - R1: ddp::init at the start of main -----*- C++ -*-===//

#ifndef DDPIFY_ENTRYMATCHERS_H
#define DDPIFY_ENTRYMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

/// R1: `main` without a ddp::init call.
std::unique_ptr<MatcherModule> createEntryMatchers(FindingList &Findings,
                                                   llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_ENTRYMATCHERS_H
