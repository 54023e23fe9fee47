//===- BatchShapeMatchers.h - ddp-fixed-batch-shape -------------*- C++ -*-===//

#ifndef DDPIFY_BATCHSHAPEMATCHERS_H
#define DDPIFY_BATCHSHAPEMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

/// ddp-fixed-batch-shape: `x.view({batch_size, -1})` with the loader's batch
/// size inside a loop over that loader; the fix (also made by migrate, rule
/// R4) uses the batch's own size.
std::unique_ptr<MatcherModule>
createBatchShapeMatchers(FindingList &Findings, llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_BATCHSHAPEMATCHERS_H
