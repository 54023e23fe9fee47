//===- HandBatchMatchers.cpp - R4: batches cut from tensors by hand -------===//
//
// A training loop with no data loader that cuts its batches from tensors
// itself is sharded like a loader (rule R4) where ddpify can show that the
// counter only picks the batch:
//
//   for (int64_t i = A; i < N; i += S) { ... x.narrow(0, i, len) ... }
//   for (int64_t i : ddp::batch_starts(A, N, S)) { ... }
//
// Shown when: the counter is declared by the loop (an integer), tested with
// `<` and stepped with `+=`; N and S change nowhere in the loop and call
// nothing but size queries; the loop trains (it calls backward(), here or
// through the program's functions); nothing leaves it early (no break,
// continue, return or goto of its own: ranks would step a different number of
// times); and every use of the counter is inside the arguments of narrow,
// slice, index_select, index, at::indexing::Slice or std::min/std::max, as
// arithmetic. Anything else stays as it is: correct (every rank trains on
// every batch), and the flow checks' `non-torch-loader` note says the
// speed-up is lost.
//
//===----------------------------------------------------------------------===//

#include "ddpify/HandBatchMatchers.h"
#include "ddpify/MatcherUtil.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Lex/Lexer.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

const Expr *strip(const Expr *E) { return stripParensAndImplicit(E); }

const VarDecl *varOf(const Expr *E) {
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(strip(E));
  return Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
}

/// The name of a call's callee (a method's own name, a function's
/// qualified one).
std::string calleeName(const CallExpr *Call) {
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
    if (const CXXMethodDecl *Method = Member->getMethodDecl())
      return Method->getIdentifier() ? Method->getName().str() : "";
  if (const FunctionDecl *Callee = Call->getDirectCallee())
    return Callee->getQualifiedNameAsString();
  return "";
}

/// A call that picks a batch out of a tensor, or computes its bounds.
bool picksBatch(const CallExpr *Call) {
  std::string Name = calleeName(Call);
  return Name == "narrow" || Name == "slice" || Name == "index_select" ||
         Name == "index" || Name == "std::min" || Name == "std::max" ||
         Name == "at::narrow" || Name == "at::slice" ||
         Name == "at::index_select" || Name == "torch::narrow" ||
         Name == "torch::index_select";
}

bool cutsTensor(const CallExpr *Call) {
  std::string Name = calleeName(Call);
  return Name != "std::min" && Name != "std::max";
}

bool isSliceConstruction(const Expr *E) {
  const auto *Construct = dyn_cast<CXXConstructExpr>(E);
  return Construct && Construct->getConstructor() &&
         Construct->getConstructor()->getParent()->getQualifiedNameAsString() ==
             "at::indexing::Slice";
}

/// Whether E reads only values fixed during the loop: variables the loop
/// never assigns, literals, and size queries.
class Invariance {
public:
  explicit Invariance(const Stmt *Body) { collectAssigned(Body); }

  bool holds(const Expr *E) const {
    if (!E)
      return true;
    E = E->IgnoreImplicit();
    if (const auto *Ref = dyn_cast<DeclRefExpr>(E))
      return !isa<VarDecl>(Ref->getDecl()) ||
             !Assigned.count(cast<VarDecl>(Ref->getDecl()));
    if (const auto *Call = dyn_cast<CallExpr>(E)) {
      std::string Name = calleeName(Call);
      if (Name != "size" && Name != "numel" && Name != "std::min" &&
          Name != "std::max" && Name != "value")
        return false;
    }
    if (isa<UnaryOperator>(E) &&
        cast<UnaryOperator>(E)->isIncrementDecrementOp())
      return false;
    if (isa<BinaryOperator>(E) && cast<BinaryOperator>(E)->isAssignmentOp())
      return false;
    for (const Stmt *Child : E->children())
      if (const auto *ChildExpr = dyn_cast_or_null<Expr>(Child))
        if (!holds(ChildExpr))
          return false;
    return true;
  }

  bool assigns(const VarDecl *Var) const { return Assigned.count(Var); }

private:
  void collectAssigned(const Stmt *S) {
    if (!S)
      return;
    if (const auto *Binary = dyn_cast<BinaryOperator>(S)) {
      if (Binary->isAssignmentOp())
        if (const VarDecl *Var = varOf(Binary->getLHS()))
          Assigned.insert(Var);
    } else if (const auto *Unary = dyn_cast<UnaryOperator>(S)) {
      if (Unary->isIncrementDecrementOp())
        if (const VarDecl *Var = varOf(Unary->getSubExpr()))
          Assigned.insert(Var);
    } else if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(S)) {
      if ((Op->isAssignmentOp() || Op->getOperator() == OO_PlusPlus ||
           Op->getOperator() == OO_MinusMinus) &&
          Op->getNumArgs() >= 1)
        if (const VarDecl *Var = varOf(Op->getArg(0)))
          Assigned.insert(Var);
    } else if (const auto *Call = dyn_cast<CallExpr>(S)) {
      // Passed by non-const reference: it may change.
      if (const FunctionDecl *Callee = Call->getDirectCallee())
        for (unsigned I = 0;
             I < Call->getNumArgs() && I < Callee->getNumParams(); ++I) {
          QualType T = Callee->getParamDecl(I)->getType();
          if (T->isReferenceType() &&
              !T.getNonReferenceType().isConstQualified())
            if (const VarDecl *Var = varOf(Call->getArg(I)))
              Assigned.insert(Var);
        }
    }
    for (const Stmt *Child : S->children())
      collectAssigned(Child);
  }

  std::set<const VarDecl *> Assigned;
};

/// An exit of Loop itself: a break or continue that is not a nested loop's
/// or switch's, a return, a goto.
const Stmt *earlyExit(const Stmt *S, bool Nested) {
  if (!S || isa<LambdaExpr>(S))
    return nullptr;
  if (isa<ReturnStmt, GotoStmt, IndirectGotoStmt, CoreturnStmt>(S))
    return S;
  if (!Nested && isa<BreakStmt, ContinueStmt>(S))
    return S;
  bool Inner =
      Nested || isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt, SwitchStmt>(S);
  for (const Stmt *Child : S->children())
    if (const Stmt *Found = earlyExit(Child, Inner))
      return Found;
  return nullptr;
}

/// Every reference to Counter in S.
void referencesTo(const Stmt *S, const VarDecl *Counter,
                  std::vector<const DeclRefExpr *> &Out) {
  if (!S)
    return;
  if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
    if (Ref->getDecl() == Counter)
      Out.push_back(Ref);
  for (const Stmt *Child : S->children())
    referencesTo(Child, Counter, Out);
}

/// Whether the reference Use only feeds the bounds of a batch: arithmetic up
/// to an argument of a call that picks a batch. Cuts is set when that call
/// cuts a tensor.
bool onlyPicksBatch(ASTContext &Context, const DeclRefExpr *Use, bool &Cuts) {
  DynTypedNode Node = DynTypedNode::create(*Use);
  for (int Depth = 0; Depth < 16; ++Depth) {
    DynTypedNodeList Parents = Context.getParents(Node);
    if (Parents.empty())
      return false;
    const Expr *Parent = Parents[0].get<Expr>();
    if (!Parent)
      return false;
    if (const auto *Call = dyn_cast<CallExpr>(Parent)) {
      // The object of `x.narrow(...)` is the tensor, not a bound.
      if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
        if (Member->getImplicitObjectArgument() == Node.get<Expr>())
          return false;
      if (!picksBatch(Call))
        return false;
      Cuts |= cutsTensor(Call);
      return true;
    }
    if (isSliceConstruction(Parent)) {
      Cuts = true;
      return true;
    }
    if (const auto *Binary = dyn_cast<BinaryOperator>(Parent)) {
      if (!Binary->isAdditiveOp() && !Binary->isMultiplicativeOp())
        return false;
    } else if (!isa<ImplicitCastExpr, ParenExpr, CXXFunctionalCastExpr,
                    CStyleCastExpr, CXXStaticCastExpr, MaterializeTemporaryExpr,
                    CXXBindTemporaryExpr, CXXConstructExpr, InitListExpr,
                    CXXStdInitializerListExpr>(Parent)) {
      return false;
    }
    Node = Parents[0];
  }
  return false;
}

} // namespace

HandBatchLoop handBatchLoop(ASTContext &Context, const ForStmt *Loop,
                            TrainingOracle &Oracle, std::string *Why) {
  HandBatchLoop Result;
  auto Refuse = [&](llvm::StringRef Reason) {
    if (Why)
      *Why = Reason.str();
    return HandBatchLoop();
  };
  // `T i = A`
  const auto *Init = dyn_cast_or_null<DeclStmt>(Loop->getInit());
  if (!Init || !Init->isSingleDecl())
    return HandBatchLoop();
  const auto *Counter = dyn_cast<VarDecl>(Init->getSingleDecl());
  if (!Counter || !Counter->getInit() || !Counter->getType()->isIntegerType() ||
      Counter->getType().isConstQualified())
    return HandBatchLoop();
  // `i < N`
  const auto *Cond = dyn_cast_or_null<BinaryOperator>(strip(Loop->getCond()));
  if (!Cond || Cond->getOpcode() != BO_LT || varOf(Cond->getLHS()) != Counter)
    return HandBatchLoop();
  // `i += S`
  const Expr *Inc = Loop->getInc() ? Loop->getInc()->IgnoreImplicit() : nullptr;
  const auto *Step = dyn_cast_or_null<CompoundAssignOperator>(Inc);
  if (!Step || Step->getOpcode() != BO_AddAssign ||
      varOf(Step->getLHS()) != Counter)
    return HandBatchLoop();

  // The counter picks batches out of tensors, nothing else.
  std::vector<const DeclRefExpr *> Uses;
  referencesTo(Loop->getBody(), Counter, Uses);
  bool Cuts = false, OnlyPicks = true;
  for (const DeclRefExpr *Use : Uses)
    OnlyPicks &= onlyPicksBatch(Context, Use, Cuts);
  if (!Cuts || !Oracle.trains(Loop->getBody()))
    return HandBatchLoop();

  Invariance Fixed(Loop->getBody());
  if (earlyExit(Loop->getBody(), false))
    return Refuse("it can stop early (a break, continue, return or goto of "
                  "its own), so ranks could step a different number of times");
  if (Fixed.assigns(Counter))
    return Refuse("its counter is changed inside the loop");
  if (!Fixed.holds(Cond->getRHS()) || !Fixed.holds(Step->getRHS()) ||
      !Fixed.holds(Counter->getInit()))
    return Refuse("its bound or step may change while it runs");
  if (!OnlyPicks)
    return Refuse("its counter does more than pick the batch (a test, an "
                  "output, an index of its own), which would differ by rank");
  Result.Loop = Loop;
  Result.Counter = Counter;
  Result.Begin = Counter->getInit();
  Result.End = Cond->getRHS();
  Result.Step = Step->getRHS();
  return Result;
}

bool isBatchStartsLoop(const CXXForRangeStmt *Loop) {
  const auto *Call = dyn_cast_or_null<CallExpr>(
      Loop && Loop->getRangeInit() ? strip(Loop->getRangeInit()) : nullptr);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  return Callee && Callee->getQualifiedNameAsString() == "ddp::batch_starts";
}

namespace {

class HandBatchMatchers : public MatcherModule,
                          public MatchFinder::MatchCallback {
public:
  HandBatchMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(forStmt().bind("loop"), this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Oracle.reset();
    OracleOf = nullptr;
  }

  void run(const MatchFinder::MatchResult &Result) override {
    const auto *Loop = Result.Nodes.getNodeAs<ForStmt>("loop");
    ASTContext &Context = *Result.Context;
    if (!Loop || !Locator.isInRoot(Context, Loop->getBeginLoc()))
      return;
    if (OracleOf != &Context) {
      Oracle = std::make_unique<TrainingOracle>(Context);
      OracleOf = &Context;
    }
    HandBatchLoop Batches = handBatchLoop(Context, Loop, *Oracle);
    if (!Batches.Loop)
      return;
    const SourceManager &SM = Context.getSourceManager();
    const Stmt *Init = Loop->getInit();
    Finding F = Locator.make(
        Context, SourceRange(Init->getBeginLoc(), Loop->getInc()->getEndLoc()),
        "R4", "", FindingForm::OwnEdits);
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    F.Message = "this training loop cuts its batches from tensors by hand, "
                "so every rank would train on every batch; each rank takes "
                "every N-th batch (ddp::batch_starts)";
    if (!F.InMacro) {
      auto Text = [&](SourceRange Range) {
        return Lexer::getSourceText(CharSourceRange::getTokenRange(Range), SM,
                                    Context.getLangOpts())
            .str();
      };
      // The counter's type as written (`int64_t `, `size_t `, `auto `).
      std::string Type =
          Lexer::getSourceText(
              CharSourceRange::getCharRange(Init->getBeginLoc(),
                                            Batches.Counter->getLocation()),
              SM, Context.getLangOpts())
              .str();
      for (const Expr *Part : {Batches.Begin, Batches.End, Batches.Step})
        if (Part->getBeginLoc().isMacroID() || Part->getEndLoc().isMacroID())
          return;
      F.Edits.push_back({F.Offset, F.Length,
                         Type + Batches.Counter->getNameAsString() +
                             " : ddp::batch_starts(" +
                             Text(Batches.Begin->getSourceRange()) + ", " +
                             Text(Batches.End->getSourceRange()) + ", " +
                             Text(Batches.Step->getSourceRange()) + ")"});
    }
    Findings.push_back(std::move(F));
  }

private:
  FindingList &Findings;
  FindingLocator Locator;
  std::unique_ptr<TrainingOracle> Oracle;
  const ASTContext *OracleOf = nullptr;
  std::set<std::pair<std::string, unsigned>> Seen;
};

} // namespace

std::unique_ptr<MatcherModule>
createHandBatchMatchers(FindingList &Findings, llvm::StringRef ProjectRoot) {
  return std::make_unique<HandBatchMatchers>(Findings, ProjectRoot);
}

} // namespace ddpify
