//===- HandBatches.h - Loops that cut their batches by hand -----*- C++ -*-===//
//
// Training loops that cut their minibatches from tensors themselves,
// `for (int64_t i = 0; i < n; i += batch)` with `x.narrow(0, i, len)`,
// `x.slice(0, i, i + len)` or `perm.slice(0, i, i + batch)` and
// `index_select`, and range-fors over batches cut beforehand (`x.split(batch)`,
// a vector of pairs): which of them R4 may shard (rules/ShardHandBatches.cpp),
// and so which loops R11 and the flow checks see as sharded.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_HANDBATCHES_H
#define DDPIFY_HANDBATCHES_H

#include "ddpify/Finding.h"
#include "ddpify/MetricLoops.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/StmtCXX.h"

namespace ddpify {

/// A loop `for (T Counter = Begin; Counter [+ Ahead] < End; Counter += Step)`
/// (`<=` when Inclusive; a null Step is `++Counter`) that trains and whose
/// counter only picks a batch out of tensors.
struct HandBatchLoop {
  /// A ForStmt, or a WhileStmt whose body's last statement, OwnStep, steps
  /// a counter declared before it (`while (i < N) { ...; i += S; }`; a null
  /// Begin: the counter's value where the loop starts).
  const clang::Stmt *Loop = nullptr;
  const clang::Stmt *OwnStep = nullptr;
  const clang::VarDecl *Counter = nullptr;
  const clang::Expr *Begin = nullptr, *End = nullptr, *Step = nullptr;
  const clang::Expr *Ahead = nullptr;
  bool Inclusive = false;
};

/// Loop as a HandBatchLoop, or why it is not one (empty Why and a null Loop
/// for a loop that does not cut batches at all).
HandBatchLoop handBatchLoop(clang::ASTContext &Context, const clang::Stmt *Loop,
                            TrainingOracle &Oracle, std::string *Why = nullptr);

/// A range-for that trains over a std::vector of batches cut beforehand
/// (`for (const auto &idx : perm.split(batch))`, a vector of tensors, of
/// input/target pairs or of examples): its range, which R4 shards as
/// `ddp::rank_batches(range)`; null when it is not one, with the reason in
/// Why when it walks batches but may not be sharded.
const clang::Expr *handBatchList(clang::ASTContext &Context,
                                 const clang::CXXForRangeStmt *Loop,
                                 TrainingOracle &Oracle,
                                 std::string *Why = nullptr);

/// The loop around Loop that walks batches already, if any: a range-for over
/// a data loader, over ddp::batch_starts/rank_batches, or a hand batch loop
/// or list. Loops inside it cut pieces of its batch and are not sharded.
const clang::Stmt *enclosingBatchLoop(clang::ASTContext &Context,
                                      const clang::Stmt *Loop,
                                      TrainingOracle &Oracle);

/// A range-for over `ddp::batch_starts(...)` or `ddp::rank_batches(...)`: a
/// hand batch loop migrated.
bool isShardedBatchLoop(const clang::CXXForRangeStmt *Loop);

} // namespace ddpify

#endif // DDPIFY_HANDBATCHES_H
