//===- MetricLoops.h - Loops over sharded batches and their sums -*- C++
//-*-===//
//
// The loop analysis R11 (rules/ReduceMetrics.cpp) and the flow checks share:
// which loops iterate a torch data loader, which ones train, and which
// locals a loader loop accumulates.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_METRICLOOPS_H
#define DDPIFY_METRICLOOPS_H

#include "ddpify/Finding.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Stmt.h"
#include "llvm/ADT/DenseMap.h"
#include <string>
#include <vector>

namespace ddpify {

/// Whether T (a reference stripped) is a torch data loader:
/// torch::data::StatelessDataLoader, StatefulDataLoader, DataLoaderBase or
/// ddp::DistributedDataLoader, or a class derived from one.
bool isDataLoaderType(clang::QualType T);

/// A call to Tensor::backward() or torch::autograd::backward().
bool isBackwardCall(const clang::CallExpr *Call);

/// Every backward() call in S, lambdas left out, in source order.
void collectBackwardCalls(const clang::Stmt *S,
                          std::vector<const clang::CallExpr *> &Out);

/// Whether a statement trains: it calls backward() (or an optimizer's
/// step()), directly or through functions defined in the user's code.
/// Memoised per function; one instance per translation unit.
class TrainingOracle {
public:
  explicit TrainingOracle(clang::ASTContext &Context) : Context(Context) {}
  bool trains(const clang::Stmt *S) { return reaches(S, Training); }
  bool functionTrains(const clang::FunctionDecl *Function) {
    return functionReaches(Function, Training);
  }
  /// Whether S steps an optimizer (backward alone does not count): one
  /// iteration of a loop whose body does is one training step.
  bool stepsOptimizer(const clang::Stmt *S) { return reaches(S, Stepping); }

private:
  enum Goal { Training, Stepping };
  bool reaches(const clang::Stmt *S, Goal Sought);
  bool functionReaches(const clang::FunctionDecl *Function, Goal Sought);

  clang::ASTContext &Context;
  /// Per goal, 0: being analysed (a recursion is taken as "no"), 1: no,
  /// 2: yes.
  llvm::DenseMap<const clang::FunctionDecl *, int> Memo[2];
  unsigned Depth = 0;
};

/// Every call in S that takes a training step, lambdas left out, in source
/// order: backward() and calls of step helpers, functions of the user's that
/// train and loop over nothing (an agent's update(): the loop that calls one
/// is the training loop; a function that loops may fetch data of its own).
void collectTrainingCalls(const clang::Stmt *S, TrainingOracle &Oracle,
                          std::vector<const clang::CallExpr *> &Out);

/// What R11 found for one loop over a sharded loader: a range-for over a
/// data loader or a pass over one by iterator, or a training loop that cuts its
/// batches by hand and that R4 shards (HandBatches.h).
struct MetricLoop {
  const clang::Stmt *Loop = nullptr;
  const clang::Stmt *Body = nullptr;
  /// The accumulators to all-reduce right after the loop, in declaration
  /// order, each with its kind (MetricLoops.cpp: kindOf).
  std::vector<const clang::VarDecl *> Accumulators;
  std::vector<std::string> Kinds;
  /// Each accumulation that is not recognised (a metric-pattern report
  /// item each): why, and where.
  struct Problem {
    std::string Text;
    clang::SourceLocation Loc;
  };
  std::vector<Problem> Problems;
  /// What holds the loader walked (loaderHolderKey), empty for batches cut
  /// by hand: R11's edits and items hold unless R4 leaves that loader
  /// unsharded.
  std::string LoaderHolder;
};

/// R11's analysis of every loader loop of Function (a definition that is
/// not a template pattern).
std::vector<MetricLoop> analyzeMetricLoops(clang::ASTContext &Context,
                                           const clang::FunctionDecl *Function);

/// Whether Call calls ddp::all_reduce, ddp::all_gather or ddp::broadcast.
bool isDdpCollective(const clang::CallExpr *Call);

} // namespace ddpify

#endif // DDPIFY_METRICLOOPS_H
