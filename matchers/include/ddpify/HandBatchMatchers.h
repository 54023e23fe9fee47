//===- HandBatchMatchers.h - R4: batches cut from tensors by hand -*- C++
//-*-===//
//
// Training loops that cut their minibatches from tensors themselves,
// `for (int64_t i = 0; i < n; i += batch)` with `x.narrow(0, i, len)`,
// `x.slice(0, i, i + len)` or `perm.slice(0, i, i + batch)` and
// `index_select`, become `for (int64_t i : ddp::batch_starts(0, n, batch))`:
// each rank takes every N-th batch, padded so all ranks step as often.
// R11 and the flow checks share the analysis that decides which loops are so
// sharded.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_HANDBATCHMATCHERS_H
#define DDPIFY_HANDBATCHMATCHERS_H

#include "ddpify/MetricsMatchers.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/StmtCXX.h"

namespace ddpify {

/// A loop `for (T Counter = Begin; Counter [+ Ahead] < End; Counter += Step)`
/// (`<=` when Inclusive; a null Step is `++Counter`) that trains and whose
/// counter only picks a batch out of tensors.
struct HandBatchLoop {
  const clang::ForStmt *Loop = nullptr;
  const clang::VarDecl *Counter = nullptr;
  const clang::Expr *Begin = nullptr, *End = nullptr, *Step = nullptr;
  const clang::Expr *Ahead = nullptr;
  bool Inclusive = false;
};

/// Loop as a HandBatchLoop, or why it is not one (empty Why and a null Loop
/// for a loop that does not cut batches at all).
HandBatchLoop handBatchLoop(clang::ASTContext &Context,
                            const clang::ForStmt *Loop, TrainingOracle &Oracle,
                            std::string *Why = nullptr);

/// A range-for over `ddp::batch_starts(...)`: a hand batch loop migrated.
bool isBatchStartsLoop(const clang::CXXForRangeStmt *Loop);

/// R4 for hand-cut batches: the loop rewritten over ddp::batch_starts.
std::unique_ptr<MatcherModule>
createHandBatchMatchers(FindingList &Findings, llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_HANDBATCHMATCHERS_H
