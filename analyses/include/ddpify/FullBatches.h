//===- FullBatches.h - Training loops fed whole tensors ---------*- C++ -*-===//
//
// Training loops that feed the whole of a tensor (or aligned tensors X, Y,
// weights sharing dimension 0) to a model at every step, with a loss that is
// a mean or a sum over rows: which of them R15 shards by rows
// (rules/ShardFullBatches.cpp, ddp::RowShard), which keep the whole batch
// because their loss cannot be decomposed, and so which loops R12's
// non-torch-loader note leaves alone.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_FULLBATCHES_H
#define DDPIFY_FULLBATCHES_H

#include "ddpify/MetricLoops.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/Expr.h"
#include <set>
#include <string>
#include <vector>

namespace ddpify {

/// What one shard of rows changes in a stretch of code (the training loop,
/// or the evaluation after it): the tensors it shards, the figures over
/// their rows that become global, their row counts that become the total.
struct RowRegion {
  /// The aligned tensors, in declaration order; the first gives the count.
  /// A variable, or a binding of a structured binding (`auto [x, y] = ...`).
  std::vector<const clang::ValueDecl *> Tensors;
  /// A sum (true) or a mean over rows, each made global (rows.global_*).
  std::vector<std::pair<const clang::Expr *, bool>> Figures;
  /// `x.size(0)` of a sharded tensor: the total, rows.total_rows().
  std::vector<const clang::Expr *> RowCounts;
  /// Every reference to a tensor of Tensors in the stretch.
  std::vector<const clang::DeclRefExpr *> Uses;
  /// Tensors read again after the stretch (a final loss or accuracy on the
  /// training set): their shards get names of their own, so what follows
  /// sees the whole tensors and computes the one-process figure.
  std::set<const clang::ValueDecl *> WholeAfter;
};

/// A training loop fed whole tensors.
struct FullBatchLoop {
  /// A ForStmt, WhileStmt or DoStmt; null when Loop is not one.
  const clang::Stmt *Loop = nullptr;
  /// Already sharded: its backward() takes rows.mean_weighted(...) or
  /// rows.sum_weighted(...) of a ddp::RowShard. Nothing else is set.
  bool Migrated = false;
  /// Set when the loss cannot be shown to be a mean or a sum over rows:
  /// the loop keeps the whole batch, and this says why.
  std::string WholeWhy;
  /// Where the use WholeWhy names is (invalid when none is); the tensors
  /// it feeds are Train.Tensors then (nothing else of Train is set).
  clang::SourceLocation WholeAt;
  /// The loss backward() is called on (the receiver as written), whether it
  /// is a sum (else a mean), and the local holding it when it is read again
  /// after backward(), with the statement that calls backward().
  const clang::Expr *Loss = nullptr;
  bool SumLoss = false;
  const clang::VarDecl *LossVar = nullptr;
  const clang::Stmt *BackwardStatement = nullptr;
  /// When every read of LossVar after backward() lies under one `if` of the
  /// loop whose condition is the same on every rank (a print every k
  /// epochs): that condition, so that the loss is made global only when it
  /// is read, not with a collective at every step.
  const clang::Expr *LossReadWhen = nullptr;
  RowRegion Train;
  /// An evaluation after the loop on other whole tensors whose figures are
  /// sums or means over rows: sharded the same way (empty Tensors: none, or
  /// left whole).
  RowRegion Eval;
};

/// Loop as a FullBatchLoop: a null Loop when it is none (a loop over a
/// loader, batches cut by hand, a loop nested in another, a tensor re-assigned
/// in it or used after it, ...), with the reason in Why when the loop does
/// feed whole tensors (the tensors it feeds named, then what keeps it
/// whole), and in WhyAt where the use it names is.
FullBatchLoop fullBatchLoop(clang::ASTContext &Context, const clang::Stmt *Loop,
                            TrainingOracle &Oracle, std::string *Why = nullptr,
                            clang::SourceLocation *WhyAt = nullptr);

/// Every reference to Tensor (a variable or a binding) in S: MatcherUtil's
/// collectReferences for a ValueDecl.
void collectReferences(const clang::Stmt *S, const clang::ValueDecl *Tensor,
                       std::vector<const clang::DeclRefExpr *> &Out);

/// Whether `x = rows.of(x);` may re-bind Tensor in place: a local or
/// parameter neither const nor a reference, or a binding of a by-value,
/// non-const structured binding (`auto [x, y] = make_data();`). Otherwise
/// its shard takes a name of its own.
bool rebindsInPlace(const clang::ValueDecl *Tensor);

} // namespace ddpify

#endif // DDPIFY_FULLBATCHES_H
