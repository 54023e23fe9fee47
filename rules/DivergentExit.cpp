//===- DivergentExit.cpp - R12: control and data flow hazards of DDP ------===//
//
// Two report items that ddpify cannot migrate by itself:
//
// ddp-divergent-exit (report id `divergent-exit`): in a loop that trains (its
// body, or a loop it nests in, calls backward()), a `break`, a `return` or
// the loop's condition decided by a value only this rank computed: the
// `.item()` of a tensor, or a local assigned from one (also through `if`s
// that set a flag, and through the user's functions that return one), unless
// it went through ddp::all_reduce / ddp::broadcast / a RowShard's global
// figures, or is a loss R15 made global (its `global-value:` fact). The
// ranks would leave the loop at different steps and the others hang in the
// next collective.
// A loop that cannot take part in a collective itself (no backward pass, no
// ddp:: call, no forward pass where the program has BatchNorm layers, none
// through the program's functions: an RL rollout that stops when its episode
// ends) may end at a different step on each rank: its exits are not checked.
// Sums R11 all-reduces after a loop that does not train count as reduced.
// R12 fixes the exit where every rank-local value it depends on is a float or
// a double (`loss.item<float>()`, a local, a helper's result): each becomes
// its mean over the ranks, `ddp::all_reduce(v, ddp::ReduceOp::kMean)`, so
// every rank takes the same decision (report note `divergent-exit-averaged`).
// Otherwise (a bool flag such as an episode's `done`, an integer) the ranks
// may take different numbers of steps, which the runtime's ddp::join() makes
// right: `ddp::join();` goes after the outermost loop around the exit that
// makes no collective of the program's own (analyses/UnevenSteps.h), and
// before each return inside it (report note `uneven-steps-joined`); a mean
// exit inside that loop is joined with it. Where every such loop makes one
// (ddp::all_reduce, ddp::barrier, a sum R11 reduces, a SyncBatchNorm
// forward), a goto leaves it, or the exit is in a macro, it is an error item
// naming why. A loop followed by `ddp::join();` is a migrated one.
//
// non-torch-loader: a loop that calls backward() and whose data does not come
// from a torch data loader (no range-for over one, here or around it): its
// samples are not sharded, so every rank trains on the same ones. Loops that
// cut batches by hand R4 shards, and loops fed whole tensors that R15 shards
// or keeps whole with its own note, are not. For a loop that draws its own
// experience, the note says every rank draws the same (a fixed seed is
// named) and points to --rollouts-per-rank. The note provides
// `unsharded-loop:FILE:OFFSET`, which a rule that shares the loop's data out
// another way requires, and gives way to its `sharded-loop:` key.
//
//===----------------------------------------------------------------------===//

#include "ddpify/FullBatches.h"
#include "ddpify/HandBatches.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/MetricLoops.h"
#include "ddpify/Registry.h"
#include "ddpify/UnevenSteps.h"
#include "ddpify/Work.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMap.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/DenseSet.h"
#include <functional>
#include <map>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

const VarDecl *varOf(const Expr *E) {
  E = stripParensAndImplicit(E);
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E))
    return dyn_cast<VarDecl>(Ref->getDecl());
  return nullptr;
}

bool isLoop(const Stmt *S) {
  return isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(S);
}

bool isTensorType(QualType T) {
  const CXXRecordDecl *Record =
      T.isNull() ? nullptr : T.getNonReferenceType()->getAsCXXRecordDecl();
  if (!Record)
    return false;
  std::string Name = Record->getQualifiedNameAsString();
  return Name == "at::Tensor" || Name == "at::TensorBase";
}

bool isItemCall(const Expr *E) {
  const auto *Call = dyn_cast<CXXMemberCallExpr>(E);
  const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
  return Method && Method->getIdentifier() && Method->getName() == "item" &&
         isTensorType(QualType(Method->getParent()->getTypeForDecl(), 0));
}

bool containsCollective(const Stmt *S) {
  if (!S)
    return false;
  if (const auto *Call = dyn_cast<CallExpr>(S))
    if (isDdpCollective(Call))
      return true;
  for (const Stmt *Child : S->children())
    if (containsCollective(Child))
      return true;
  return false;
}

bool userFunction(const SourceManager &SM, const FunctionDecl *Function,
                  const FunctionDecl *&Definition) {
  Definition = nullptr;
  return Function && Function->hasBody(Definition) && Definition &&
         !Definition->isDependentContext() &&
         !SM.isInSystemHeader(Definition->getLocation());
}

/// Which values of a function are rank-local: computed from this rank's
/// data and not yet combined across ranks.
struct FunctionTaint {
  llvm::DenseSet<const VarDecl *> Clean;
  /// A rank-local variable, and the expression that made it so.
  llvm::DenseMap<const VarDecl *, const Expr *> Tainted;
  const Expr *ReturnCulprit = nullptr;
};

class TaintAnalyzer {
public:
  TaintAnalyzer(ASTContext &Context, TrainingOracle &Oracle)
      : Context(Context), SM(Context.getSourceManager()), Oracle(Oracle) {}

  const FunctionTaint &of(const FunctionDecl *Function) {
    auto Known = Results.find(Function);
    if (Known != Results.end())
      return Known->second;
    FunctionTaint &Result = Results[Function];
    if (Depth > 4 || !Function->getBody())
      return Result;
    ++Depth;
    compute(Function, Result);
    --Depth;
    return Results[Function];
  }

  /// The sub-expression of E that makes it rank-local, or nullptr.
  const Expr *culprit(const FunctionTaint &Taint, const Expr *E) {
    if (!E || isa<LambdaExpr>(E))
      return nullptr;
    if (const auto *Call = dyn_cast<CallExpr>(E)) {
      if (isDdpCollective(Call))
        return nullptr;
      if (isItemCall(E)) {
        const Expr *Object =
            cast<CXXMemberCallExpr>(E)->getImplicitObjectArgument();
        return objectIsClean(Taint, Object) ? nullptr : E;
      }
      const FunctionDecl *Definition = nullptr;
      if (userFunction(SM, Call->getDirectCallee(), Definition) &&
          of(Definition).ReturnCulprit)
        return E;
    }
    if (const VarDecl *Var = varOf(E))
      if (Taint.Tainted.count(Var))
        return E;
    for (const Stmt *Child : E->children())
      if (const auto *ChildExpr = dyn_cast_or_null<Expr>(Child))
        if (const Expr *Found = culprit(Taint, ChildExpr))
          return Found;
    return nullptr;
  }

  /// Every outermost rank-local part of E, in source order (none when every
  /// rank computes the same value).
  void culprits(const FunctionTaint &Taint, const Expr *E,
                std::vector<const Expr *> &Out) {
    if (!E || isa<LambdaExpr>(E))
      return;
    if (const auto *Call = dyn_cast<CallExpr>(E))
      if (isDdpCollective(Call))
        return;
    if (culprit(Taint, E) == E) {
      Out.push_back(E);
      return;
    }
    for (const Stmt *Child : E->children())
      if (const auto *ChildExpr = dyn_cast_or_null<Expr>(Child))
        culprits(Taint, ChildExpr, Out);
  }

  /// Follows a variable to the `.item()` (or call) that made it rank-local.
  const Expr *origin(const FunctionTaint &Taint, const Expr *Culprit) {
    for (int I = 0; I < 8 && Culprit; ++I) {
      const VarDecl *Var = varOf(Culprit);
      auto Found = Var ? Taint.Tainted.find(Var) : Taint.Tainted.end();
      if (Found == Taint.Tainted.end() || !Found->second)
        return Culprit;
      Culprit = Found->second;
    }
    return Culprit;
  }

private:
  /// `t.item()` of a tensor reduced across ranks (every tensor variable in
  /// the object expression was passed through a collective).
  bool objectIsClean(const FunctionTaint &Taint, const Expr *Object) {
    bool Any = false, All = true;
    std::function<void(const Stmt *)> Walk = [&](const Stmt *S) {
      if (!S)
        return;
      if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
        if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
          if (isTensorType(Var->getType())) {
            Any = true;
            All &= Taint.Clean.count(Var) > 0;
          }
      for (const Stmt *Child : S->children())
        Walk(Child);
    };
    Walk(Object);
    return Any && All;
  }

  struct Assignment {
    const VarDecl *Var;
    const Expr *Value;
    const Stmt *Site;
  };

  void collect(const Stmt *S, FunctionTaint &Result,
               std::vector<Assignment> &Assignments,
               std::vector<const ReturnStmt *> &Returns) {
    if (!S || isa<LambdaExpr>(S))
      return;
    if (const auto *Call = dyn_cast<CallExpr>(S))
      if (isDdpCollective(Call) && Call->getNumArgs())
        if (const VarDecl *Var = varOf(Call->getArg(0)))
          Result.Clean.insert(Var);
    if (const auto *Decls = dyn_cast<DeclStmt>(S))
      for (const Decl *D : Decls->decls())
        if (const auto *Var = dyn_cast<VarDecl>(D))
          if (const Expr *Init = Var->getInit())
            Assignments.push_back({Var, Init, S});
    if (const auto *Binary = dyn_cast<BinaryOperator>(S)) {
      if (Binary->isAssignmentOp())
        if (const VarDecl *Var = varOf(Binary->getLHS()))
          Assignments.push_back({Var, Binary->getRHS(), S});
    } else if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(S)) {
      if (Operator->isAssignmentOp() && Operator->getNumArgs() == 2)
        if (const VarDecl *Var = varOf(Operator->getArg(0)))
          Assignments.push_back({Var, Operator->getArg(1), S});
    }
    if (const auto *Return = dyn_cast<ReturnStmt>(S))
      Returns.push_back(Return);
    for (const Stmt *Child : S->children())
      collect(Child, Result, Assignments, Returns);
  }

  void compute(const FunctionDecl *Function, FunctionTaint &Result) {
    Stmt *Body = Function->getBody();
    std::vector<Assignment> Assignments;
    std::vector<const ReturnStmt *> Returns;
    collect(Body, Result, Assignments, Returns);
    for (const Assignment &A : Assignments)
      if (containsCollective(A.Value))
        Result.Clean.insert(A.Var);
    // Sums R11 all-reduces after a loop that does not train. A training
    // loop's sums are reduced only after it: an exit inside it decided by one
    // still diverges.
    for (const MetricLoop &Loop : analyzeMetricLoops(Context, Function))
      if (!Oracle.trains(Loop.Body))
        for (const VarDecl *Var : Loop.Accumulators)
          Result.Clean.insert(Var);

    ParentMap Parents(Body);
    for (bool Changed = true; Changed;) {
      Changed = false;
      for (const Assignment &A : Assignments) {
        if (Result.Clean.count(A.Var) || Result.Tainted.count(A.Var))
          continue;
        const Expr *Why = culprit(Result, A.Value);
        if (!Why)
          Why = governingCulprit(Result, Parents, A.Site);
        if (Why) {
          Result.Tainted[A.Var] = Why;
          Changed = true;
        }
      }
    }
    for (const ReturnStmt *Return : Returns)
      if (const Expr *Why = culprit(Result, Return->getRetValue())) {
        Result.ReturnCulprit = Why;
        break;
      }
  }

public:
  /// A rank-local condition of an `if` around S (S in its branches): a flag
  /// set there is rank-local too.
  const Expr *governingCulprit(const FunctionTaint &Taint,
                               const ParentMap &Parents, const Stmt *S) {
    for (const Stmt *Child = S, *Parent = Parents.getParent(S); Parent;
         Child = Parent, Parent = Parents.getParent(Parent)) {
      if (isa<LambdaExpr>(Parent))
        return nullptr;
      if (const auto *If = dyn_cast<IfStmt>(Parent))
        if (Child != If->getCond())
          if (const Expr *Why = culprit(Taint, If->getCond()))
            return Why;
    }
    return nullptr;
  }

private:
  ASTContext &Context;
  const SourceManager &SM;
  TrainingOracle &Oracle;
  std::map<const FunctionDecl *, FunctionTaint> Results;
  unsigned Depth = 0;
};

class FlowMatchers : public MatcherModule, public MatchFinder::MatchCallback {
public:
  FlowMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot), Root(ProjectRoot.str()) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(functionDecl(isDefinition()).bind("function"), this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Seen.clear();
    Taint.reset();
    Oracle.reset();
    State = nullptr;
    BatchNormOf = nullptr;
  }

  void run(const MatchFinder::MatchResult &Result) override {
    const auto *Function = Result.Nodes.getNodeAs<FunctionDecl>("function");
    Context = Result.Context;
    // Template patterns are analysed through their instantiations.
    if (!Function || !Function->getBody() || Function->isDependentContext() ||
        Context->getSourceManager().isInSystemHeader(Function->getLocation()))
      return;
    if (State != Context) {
      Oracle = std::make_unique<TrainingOracle>(*Context);
      Taint = std::make_unique<TaintAnalyzer>(*Context, *Oracle);
      State = Context;
    }
    Parents = std::make_unique<ParentMap>(Function->getBody());
    TrainingLoops.clear();
    Exits.clear();
    const FunctionTaint &Values = Taint->of(Function);
    checkExits(Values, Function->getBody());
    resolveExits(Values, Function);
    checkUnshardedData(Function);
  }

private:
  /// The loop trains, or nests in a loop that does.
  bool inTraining(const Stmt *Loop) {
    auto Known = TrainingLoops.find(Loop);
    if (Known != TrainingLoops.end())
      return Known->second;
    bool Result = Oracle->trains(Loop);
    for (const Stmt *S = Parents->getParent(Loop); S && !Result;
         S = Parents->getParent(S))
      if (isLoop(S))
        Result = inTraining(S);
    TrainingLoops[Loop] = Result;
    return Result;
  }

  /// Whether running S may take part in a collective: a backward pass
  /// (here or through the program's functions), a ddp:: collective, a
  /// forward pass where the program has BatchNorm layers (SyncBatchNorm's
  /// collectives run in forward), a program function that may do any of
  /// these. A loop that cannot (a reinforcement-learning rollout that only
  /// runs the policy and the environment) may end at a different step on
  /// each rank: the ranks go on to the same collectives after it.
  bool mayCommunicate(const Stmt *S, unsigned Depth = 0) {
    if (!S)
      return false;
    if (Depth == 0 && Oracle->trains(S))
      return true;
    if (const auto *Call = dyn_cast<CallExpr>(S)) {
      if (isDdpCollective(Call))
        return true;
      const FunctionDecl *Callee = Call->getDirectCallee();
      std::string Name = Callee ? Callee->getQualifiedNameAsString() : "";
      llvm::StringRef Ref = Name;
      if (Ref.starts_with("ddp::") || Ref.starts_with("c10d::"))
        return true;
      if (isForwardPass(Call) && programHasBatchNorm())
        return true;
      const FunctionDecl *Definition = nullptr;
      // A function pointer or a std::function: it may call anything.
      if (!Callee && !isa<CXXOperatorCallExpr>(Call))
        return true;
      if (const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Callee))
        if (Method->getOverloadedOperator() == OO_Call &&
            Method->getParent()->getQualifiedNameAsString() == "std::function")
          return true;
      if (userFunction(Context->getSourceManager(), Callee, Definition) &&
          Locator.isInRoot(*Context, Definition->getLocation())) {
        // Backward passes through it are Oracle->trains's (depth 0).
        if (Depth >= 4)
          return true;
        if (mayCommunicate(Definition->getBody(), Depth + 1))
          return true;
      }
    }
    for (const Stmt *Child : S->children())
      if (mayCommunicate(Child, Depth))
        return true;
    return false;
  }

  /// Whether the program's own code (under the root) names a BatchNorm
  /// layer: R5 makes those SyncBatchNorm. Once per translation unit.
  bool programHasBatchNorm() {
    if (BatchNormOf == Context)
      return HasBatchNorm;
    BatchNormOf = Context;
    auto BatchNormType = hasType(hasUnqualifiedDesugaredType(
        recordType(hasDeclaration(cxxRecordDecl(matchesName("BatchNorm"))))));
    // One walk of the unit: expressions (`torch::nn::BatchNorm2d(16)`) and
    // declarations (members, locals) of a BatchNorm type.
    struct Collector : MatchFinder::MatchCallback {
      std::vector<SourceLocation> Uses;
      void run(const MatchFinder::MatchResult &Result) override {
        if (const auto *E = Result.Nodes.getNodeAs<Expr>("use"))
          Uses.push_back(E->getBeginLoc());
        else if (const auto *D = Result.Nodes.getNodeAs<DeclaratorDecl>("use"))
          Uses.push_back(D->getLocation());
      }
    } Found;
    MatchFinder Finder;
    Finder.addMatcher(expr(BatchNormType).bind("use"), &Found);
    Finder.addMatcher(
        declaratorDecl(anyOf(fieldDecl(), varDecl(unless(parmVarDecl()))),
                       BatchNormType)
            .bind("use"),
        &Found);
    Finder.matchAST(*Context);
    HasBatchNorm = llvm::any_of(Found.Uses, [&](SourceLocation At) {
      return Locator.isInRoot(*Context, At);
    });
    return HasBatchNorm;
  }

  void checkExits(const FunctionTaint &Values, const Stmt *S) {
    if (!S || isa<LambdaExpr>(S))
      return;
    if (isa<BreakStmt>(S))
      checkBreak(Values, S);
    else if (isa<ReturnStmt>(S))
      checkReturn(Values, S);
    else if (isLoop(S))
      checkCondition(Values, S);
    for (const Stmt *Child : S->children())
      checkExits(Values, Child);
  }

  void checkBreak(const FunctionTaint &Values, const Stmt *Break) {
    std::vector<const IfStmt *> Ifs;
    for (const Stmt *Child = Break, *Parent = Parents->getParent(Break); Parent;
         Child = Parent, Parent = Parents->getParent(Parent)) {
      if (isa<SwitchStmt>(Parent) || isa<LambdaExpr>(Parent))
        return;
      if (const auto *If = dyn_cast<IfStmt>(Parent)) {
        if (Child != If->getCond())
          Ifs.push_back(If);
        continue;
      }
      if (!isLoop(Parent))
        continue;
      if (!inTraining(Parent) || !mayCommunicate(Parent))
        return;
      std::vector<const Expr *> Conditions;
      for (const IfStmt *If : Ifs)
        Conditions.push_back(If->getCond());
      decide(Values, Break, Conditions, "this 'break'", loopsFrom(Parent));
      return;
    }
  }

  void checkReturn(const FunctionTaint &Values, const Stmt *Return) {
    std::vector<const IfStmt *> Ifs;
    size_t Governing = 0; // Ifs inside the outermost training loop.
    for (const Stmt *Child = Return, *Parent = Parents->getParent(Return);
         Parent; Child = Parent, Parent = Parents->getParent(Parent)) {
      if (isa<LambdaExpr>(Parent))
        return;
      if (const auto *If = dyn_cast<IfStmt>(Parent)) {
        if (Child != If->getCond())
          Ifs.push_back(If);
      } else if (isLoop(Parent) && inTraining(Parent)) {
        Governing = Ifs.size();
      }
    }
    std::vector<const Expr *> Conditions;
    for (size_t I = 0; I < Governing; ++I)
      Conditions.push_back(Ifs[I]->getCond());
    const Stmt *Outer = outermostLoop(Return, *Parents);
    if (!Outer)
      return;
    decide(Values, Return, Conditions, "this 'return' from a training loop",
           {Outer});
  }

  void checkCondition(const FunctionTaint &Values, const Stmt *Loop) {
    const Expr *Condition = nullptr;
    if (const auto *For = dyn_cast<ForStmt>(Loop))
      Condition = For->getCond();
    else if (const auto *While = dyn_cast<WhileStmt>(Loop))
      Condition = While->getCond();
    else if (const auto *Do = dyn_cast<DoStmt>(Loop))
      Condition = Do->getCond();
    if (!Condition || !inTraining(Loop) || !mayCommunicate(Loop))
      return;
    decide(Values, Condition, {Condition},
           "the condition of this training loop", loopsFrom(Loop));
  }

  /// Loop and the loops around it, innermost first (lambdas not crossed).
  std::vector<const Stmt *> loopsFrom(const Stmt *Loop) {
    std::vector<const Stmt *> Loops{Loop};
    for (const Stmt *S = Parents->getParent(Loop); S && !isa<LambdaExpr>(S);
         S = Parents->getParent(S))
      if (isLoop(S))
        Loops.push_back(S);
    return Loops;
  }

  /// An exit decided by values one rank computed.
  struct Exit {
    const Stmt *At = nullptr;
    std::string What;
    /// The rank-local values in its conditions, the means that replace
    /// them (as many where each is a float or a double), and the first
    /// that has none.
    std::vector<const Expr *> Local, Targets;
    const Expr *NoMean = nullptr;
    /// The loops every rank could leave through ddp::join() for it,
    /// innermost first: the loop it leaves (a return: the outermost) and
    /// those around it.
    std::vector<const Stmt *> Loops;
  };

  /// An exit at At, taken when Conditions (the loop's condition, or the
  /// conditions of the `if`s around the exit inside the loop) hold, leaving
  /// Loops[0]. Decided for the whole function at once (resolveExits).
  void decide(const FunctionTaint &Values, const Stmt *At,
              llvm::ArrayRef<const Expr *> Conditions, llvm::StringRef What,
              std::vector<const Stmt *> Loops) {
    Exit E;
    for (const Expr *Condition : Conditions)
      Taint->culprits(Values, Condition, E.Local);
    if (E.Local.empty())
      return;
    E.At = At;
    E.What = What.str();
    E.Loops = std::move(Loops);
    for (const Expr *Value : E.Local) {
      if (const Expr *Target = meanTarget(Value))
        E.Targets.push_back(Target);
      else if (!E.NoMean)
        E.NoMean = Value;
    }
    Exits.push_back(std::move(E));
  }

  /// Where every rank-local value of an exit is a floating-point scalar,
  /// each is replaced by its mean over the ranks: every rank then evaluates
  /// the same conditions (left to right, each on values already shared), so
  /// all leave the loop at the same step. Otherwise (a bool flag, an integer
  /// from an environment) the ranks may take different numbers of steps:
  /// every rank leaves the outermost loop around the exit that makes no
  /// collective of the program's own through `ddp::join();` after it (and
  /// before each return inside it), which lets the ranks that finish first
  /// take part in the others' gradient all-reduces; a mean exit inside that
  /// loop needs no mean then (its all-reduce would itself be a collective
  /// whose count differs by rank). Where every such loop makes a collective
  /// of its own, the exit is an error item naming it.
  void resolveExits(const FunctionTaint &Values, const FunctionDecl *Function) {
    if (Exits.empty())
      return;
    CollectiveFinder Collectives(*Context, *Oracle, Locator, Root,
                                 programHasBatchNorm());
    std::vector<const Stmt *> Joined;
    std::map<const Stmt *, std::vector<const Exit *>> Groups;
    for (const Exit &E : Exits) {
      if (!E.NoMean)
        continue;
      const Stmt *Chosen = nullptr;
      for (const Stmt *Loop : E.Loops)
        if (followedByJoin(Loop, *Parents))
          Chosen = Loop;
      ProgramCollective Blocker;
      const Stmt *Goto = nullptr;
      for (auto Loop = E.Loops.rbegin(); !Chosen && Loop != E.Loops.rend();
           ++Loop) {
        Blocker =
            Collectives.find(Function, *Loop, *Parents, containsReturn(*Loop));
        Goto = Blocker ? nullptr : gotoOutOf(*Loop);
        if (!Blocker && !Goto)
          Chosen = *Loop;
      }
      if (!Chosen) {
        report(Values, E.At, E.NoMean, E.What, Blocker, Goto);
        continue;
      }
      if (!Groups.count(Chosen))
        Joined.push_back(Chosen);
      Groups[Chosen].push_back(&E);
    }
    for (const Exit &E : Exits) {
      if (E.NoMean)
        continue;
      auto Group = llvm::find_if(
          Joined, [&](const Stmt *Loop) { return encloses(Loop, E.At); });
      if (Group == Joined.end())
        decideOnMeans(E.At, E.Targets, E.What);
      else
        Groups[*Group].push_back(&E);
    }
    for (const Stmt *Loop : Joined)
      join(Values, Loop, Groups[Loop]);
  }

  bool encloses(const Stmt *Outer, const Stmt *S) {
    for (; S; S = Parents->getParent(S))
      if (S == Outer)
        return true;
    return false;
  }

  static bool containsReturn(const Stmt *S) {
    if (!S || isa<LambdaExpr>(S))
      return false;
    if (isa<ReturnStmt>(S))
      return true;
    for (const Stmt *Child : S->children())
      if (containsReturn(Child))
        return true;
    return false;
  }

  /// Every rank leaves Loop through `ddp::join();`: the exits in it may
  /// come at a different step on each rank.
  void join(const FunctionTaint &Values, const Stmt *Loop,
            llvm::ArrayRef<const Exit *> Group) {
    Finding Anchor = Locator.make(*Context, SourceRange(Loop->getBeginLoc()),
                                  "R12", "ddp-divergent-exit");
    std::vector<FindingEdit> Edits;
    if (Anchor.FilePath.empty() || Anchor.InMacro ||
        !joinEdits(*Context, Locator, Anchor, Loop, *Parents, Edits)) {
      for (const Exit *E : Group)
        report(Values, E->At, E->NoMean ? E->NoMean : E->Local.front(), E->What,
               {}, nullptr);
      return;
    }
    std::string After = "after the loop " + loopHeader(*Context, Loop);
    for (const Exit *E : Group) {
      Finding F = Locator.make(*Context, SourceRange(E->At->getBeginLoc()),
                               "R12", "ddp-divergent-exit");
      if (F.FilePath.empty() || F.InMacro ||
          !Seen.insert({F.FilePath, F.Offset, "divergent-exit"}).second)
        continue;
      F.Length = 0;
      std::string Names;
      for (const Expr *Value : E->Local)
        Names += (Names.empty() ? "'" : ", '") + sourceText(Value) + "'";
      F.Message = E->What + " depends on " + Names +
                  ", computed from this rank's data only: each rank may take a "
                  "different number of steps; 'ddp::join();' " +
                  After +
                  " lets the ranks that finish first take part in the others' "
                  "gradient all-reduces until every rank is done";
      F.Edits = Edits;
      // A migrated return: its comment stands above the join before it.
      const Stmt *Joined = joinRightBefore(E->At, *Parents);
      Finding Note = reportNoteFor(
          Joined ? Locator.make(*Context, SourceRange(Joined->getBeginLoc()),
                                "", "")
                 : F,
          "uneven-steps-joined",
          E->What + " depends on " + Names +
              " of one rank, so each rank may take a different number of "
              "steps: the ranks that finish first wait in ddp::join() " +
              After +
              ", and each update averages the gradients of the ranks that "
              "took it");
      if (!Edits.empty())
        Findings.push_back(std::move(F));
      Findings.push_back(std::move(Note));
    }
  }

  static bool isFloatingScalar(QualType T) {
    T = T.getCanonicalType().getNonReferenceType();
    return T->isSpecificBuiltinType(BuiltinType::Float) ||
           T->isSpecificBuiltinType(BuiltinType::Double);
  }

  /// The expression whose mean over the ranks replaces the rank-local
  /// Value: Value itself when it is a float or a double, the whole
  /// `t.item().toDouble()` (or toFloat()) for an `item()`; null when there is
  /// none (a bool flag, an integer, a tensor, code from a macro).
  const Expr *meanTarget(const Expr *Value) {
    const Expr *Target = Value;
    if (isItemCall(stripParensAndImplicit(Value)) &&
        !isFloatingScalar(Value->getType())) {
      const Stmt *Parent = Parents->getParent(Value);
      while (Parent && isa<ImplicitCastExpr, MaterializeTemporaryExpr,
                           CXXBindTemporaryExpr, ParenExpr>(Parent))
        Parent = Parents->getParent(Parent);
      const auto *Member = dyn_cast_or_null<MemberExpr>(Parent);
      const auto *Call =
          Member
              ? dyn_cast_or_null<CXXMemberCallExpr>(Parents->getParent(Member))
              : nullptr;
      const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
      if (!Method || !Method->getIdentifier() ||
          (Method->getName() != "toDouble" && Method->getName() != "toFloat"))
        return nullptr;
      Target = Call;
    }
    if (!isFloatingScalar(Target->getType()) ||
        Target->getBeginLoc().isMacroID() || Target->getEndLoc().isMacroID())
      return nullptr;
    return Target;
  }

  /// The local tensor whose value Target reads (`loss.item<double>()`,
  /// `loss.item().toDouble()`), or null.
  static const VarDecl *tensorRead(const Expr *Target) {
    const Expr *E = Target->IgnoreParenImpCasts();
    while (const auto *Call = dyn_cast<CXXMemberCallExpr>(E))
      E = Call->getImplicitObjectArgument()->IgnoreParenImpCasts();
    const auto *Ref = dyn_cast<DeclRefExpr>(E);
    const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
    return Var && Var->isLocalVarDecl() ? Var : nullptr;
  }

  void decideOnMeans(const Stmt *At, llvm::ArrayRef<const Expr *> Targets,
                     llvm::StringRef What) {
    Finding F = Locator.make(*Context, SourceRange(At->getBeginLoc()), "R12",
                             "ddp-divergent-exit");
    if (F.FilePath.empty() || F.InMacro ||
        !Seen.insert({F.FilePath, F.Offset, "divergent-exit"}).second)
      return;
    F.Length = 0;
    std::string Names;
    for (const Expr *Target : Targets) {
      Finding Where = Locator.make(*Context, Target->getSourceRange(), "", "");
      if (Where.FilePath != F.FilePath || Where.InMacro)
        return;
      F.Edits.push_back({Where.Offset, 0, "ddp::all_reduce("});
      F.Edits.push_back(
          {Where.Offset + Where.Length, 0, ", ddp::ReduceOp::kMean)"});
      Names += (Names.empty() ? "'" : ", '") + sourceText(Target) + "'";
    }
    F.Message = (What + " depends on " + Names +
                 ", computed from this rank's data only: ranks would leave "
                 "the loop at different steps and the others hang in the "
                 "next collective; decide on the mean over the ranks "
                 "(ddp::all_reduce with ddp::ReduceOp::kMean)")
                    .str();
    // The report says the decision changed: on N ranks it is taken on the
    // mean of the N values (for a mean loss, the whole batch's loss).
    // A decision on a tensor another rule made the same on every rank (R15's
    // global loss, key `global-value:FILE:OFFSET` of its declaration) needs
    // no mean.
    if (Targets.size() == 1)
      if (const VarDecl *Var = tensorRead(Targets.front())) {
        Finding Decl =
            Locator.make(*Context, SourceRange(Var->getLocation()), "", "");
        if (!Decl.FilePath.empty())
          F.Excludes.push_back("global-value:" + locationKey(Decl));
      }
    Finding Note = reportNoteFor(
        F, "divergent-exit-averaged",
        (What + " was decided by " + Names +
         " of one rank; it now decides on the mean over the ranks "
         "(ddp::all_reduce), so every rank leaves the loop at the same step")
            .str());
    Findings.push_back(std::move(F));
    Findings.push_back(std::move(Note));
  }

  std::string sourceText(const Expr *E) {
    const SourceManager &SM = Context->getSourceManager();
    std::string Text =
        Lexer::getSourceText(
            CharSourceRange::getTokenRange(
                SM.getExpansionRange(E->getSourceRange()).getAsRange()),
            SM, Context->getLangOpts())
            .str();
    std::string Flat;
    for (char C : Text)
      if (!(C == ' ' && !Flat.empty() && Flat.back() == ' ') && C != '\n')
        Flat += C == '\t' ? ' ' : C;
    if (Flat.size() > 60)
      Flat = Flat.substr(0, 57) + "...";
    return Flat;
  }

  void report(const FunctionTaint &Values, const Stmt *At, const Expr *Why,
              llvm::StringRef What, const ProgramCollective &Blocker,
              const Stmt *Goto) {
    Finding F = Locator.make(*Context, SourceRange(At->getBeginLoc()), "",
                             "ddp-divergent-exit");
    if (F.FilePath.empty() ||
        !Seen.insert({F.FilePath, F.Offset, "divergent-exit"}).second)
      return;
    F.ReportId = "divergent-exit";
    // The ranks would diverge and hang: the migrated program is wrong.
    F.Level = ReportLevel::Error;
    F.Length = 0;
    const Expr *Origin = Taint->origin(Values, Why);
    // Why ddp::join() after the loop cannot make the ranks' different step
    // counts right.
    std::string Cannot;
    if (Blocker)
      Cannot = ", and ddp::join() after the loop cannot make that right: the "
               "loop makes a collective of the program's own, " +
               Blocker.What + " at " +
               placeOf(*Context, Locator, Root, Blocker.At->getBeginLoc()) +
               Blocker.Through +
               ", which would run a different number of times on each rank";
    else if (Goto)
      Cannot = ", and a 'goto' at " +
               placeOf(*Context, Locator, Root, Goto->getBeginLoc()) +
               " leaves the loop past the ddp::join() it would need";
    F.NotRewrittenReason =
        (What + " depends on '" + sourceText(Why) +
         "', computed from this rank's data only: ranks would leave the loop "
         "at different steps and the others hang in the next collective" +
         Cannot +
         "; decide on a value passed through ddp::all_reduce (or "
         "ddp::broadcast)")
            .str();
    F.Message = F.NotRewrittenReason;
    if (Origin && Origin != Why) {
      Finding Where = Locator.make(*Context, Origin->getSourceRange(), "", "");
      if (!Where.FilePath.empty())
        F.Notes.push_back({Where.FilePath, Where.Offset, Where.Line,
                           Where.Column,
                           "'" + sourceText(Why) + "' is computed here from '" +
                               sourceText(Origin) + "'"});
    }
    if (Blocker) {
      Finding Where = Locator.make(
          *Context, SourceRange(Blocker.At->getBeginLoc()), "", "");
      if (!Where.FilePath.empty())
        F.Notes.push_back(
            {Where.FilePath, Where.Offset, Where.Line, Where.Column,
             "the collective of the program's own: " + Blocker.What});
    }
    Findings.push_back(std::move(F));
  }

  /// An expression of a data loader (or its iterator) type, through
  /// pointers and smart pointers.
  static bool isLoaderExpr(const Expr *E) {
    QualType T = E->getType();
    if (T.isNull())
      return false;
    T = T.getNonReferenceType();
    if (T->isPointerType())
      T = T->getPointeeType();
    if (const auto *Special = dyn_cast_or_null<ClassTemplateSpecializationDecl>(
            T->getAsCXXRecordDecl()))
      if (Special->getTemplateArgs().size() > 0 &&
          Special->getTemplateArgs()[0].getKind() == TemplateArgument::Type &&
          (Special->getQualifiedNameAsString() == "std::unique_ptr" ||
           Special->getQualifiedNameAsString() == "std::shared_ptr"))
        T = Special->getTemplateArgs()[0].getAsType();
    if (isDataLoaderType(T))
      return true;
    const CXXRecordDecl *Record = T->getAsCXXRecordDecl();
    return Record &&
           Record->getQualifiedNameAsString() == "torch::data::Iterator";
  }

  /// Whether S names a loader's iterator (a batch drawn through it).
  static bool usesIterator(const Stmt *S) {
    if (!S || isa<LambdaExpr>(S))
      return false;
    if (const auto *E = dyn_cast<Expr>(S))
      if (const CXXRecordDecl *Record =
              E->getType().getNonReferenceType()->getAsCXXRecordDecl())
        if (Record->getQualifiedNameAsString() == "torch::data::Iterator")
          return true;
    for (const Stmt *Child : S->children())
      if (usesIterator(Child))
        return true;
    return false;
  }

  /// Whether S names a loader or its iterator, or (FollowLocals) a local
  /// holding a batch drawn through one before the loop (`auto first =
  /// *loader->begin();`, trained on again and again).
  static bool usesLoader(const Stmt *S, bool FollowLocals = true) {
    if (!S || isa<LambdaExpr>(S))
      return false;
    if (const auto *E = dyn_cast<Expr>(S))
      if (isLoaderExpr(E))
        return true;
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
        if (FollowLocals && Var->isLocalVarDecl() && Var->getInit() &&
            usesIterator(Var->getInit()))
          return true;
    for (const Stmt *Child : S->children())
      if (usesLoader(Child, FollowLocals))
        return true;
    return false;
  }

  /// The parts of a loop that say what it iterates (not its body).
  static bool headerUsesLoader(const Stmt *Loop) {
    if (const auto *Range = dyn_cast<CXXForRangeStmt>(Loop))
      return usesLoader(Range->getRangeInit());
    if (const auto *For = dyn_cast<ForStmt>(Loop))
      return usesLoader(For->getInit()) || usesLoader(For->getCond()) ||
             usesLoader(For->getInc());
    if (const auto *While = dyn_cast<WhileStmt>(Loop))
      return usesLoader(While->getCond()) ||
             usesLoader(While->getConditionVariableDeclStmt());
    if (const auto *Do = dyn_cast<DoStmt>(Loop))
      return usesLoader(Do->getCond());
    return false;
  }

  static bool callsRankHelpers(const Stmt *S) {
    if (!S)
      return false;
    if (const auto *Call = dyn_cast<CallExpr>(S))
      if (const FunctionDecl *Callee = Call->getDirectCallee()) {
        std::string Name = Callee->getQualifiedNameAsString();
        if (Name == "ddp::rank" || Name == "ddp::world_size" ||
            Name == "ddp::batch_starts" || Name == "ddp::rank_batches")
          return true;
      }
    for (const Stmt *Child : S->children())
      if (callsRankHelpers(Child))
        return true;
    return false;
  }

  void checkUnshardedData(const FunctionDecl *Function) {
    std::vector<const CallExpr *> Calls;
    collectTrainingCalls(Function->getBody(), *Oracle, Calls);
    if (Calls.empty() || callsRankHelpers(Function->getBody()))
      return; // No training step here, or sharded by hand.
    llvm::SmallPtrSet<const Stmt *, 4> Done;
    for (const CallExpr *Call : Calls) {
      const Stmt *Loop = nullptr;
      for (const Stmt *S = Parents->getParent(Call); S && !Loop;
           S = Parents->getParent(S))
        if (isLoop(S))
          Loop = S;
      if (!Loop || !Done.insert(Loop).second || usesLoader(Loop))
        continue;
      // Batches cut by hand that R4 shards (analyses/HandBatches.cpp).
      std::string NotShardedWhy;
      if (isa<ForStmt, WhileStmt>(Loop))
        if (handBatchLoop(*Context, Loop, *Oracle, &NotShardedWhy).Loop)
          continue;
      if (const auto *List = dyn_cast<CXXForRangeStmt>(Loop))
        if (handBatchList(*Context, List, *Oracle, &NotShardedWhy))
          continue;
      // Whole tensors R15 shards by rows, or keeps whole with a note of its
      // own (analyses/FullBatches.cpp); where it cannot, why, and where.
      std::string WholeWhy;
      SourceLocation WholeAt;
      if (fullBatchLoop(*Context, Loop, *Oracle, &WholeWhy, &WholeAt).Loop)
        continue;
      std::string WholeNote;
      if (!WholeWhy.empty() && NotShardedWhy.empty()) {
        std::string Place =
            WholeAt.isValid() ? placeOf(*Context, Locator, Root, WholeAt) : "";
        WholeNote = " (" + WholeWhy + (Place.empty() ? "" : ", at " + Place) +
                    ", so R15 cannot shard its rows)";
      }
      bool Fed = enclosingBatchLoop(*Context, Loop, *Oracle) != nullptr;
      for (const Stmt *S = Parents->getParent(Loop); S && !Fed;
           S = Parents->getParent(S))
        Fed = isLoop(S) && headerUsesLoader(S);
      if (Fed)
        continue;
      Finding F =
          Locator.make(*Context, SourceRange(Loop->getBeginLoc()), "", "");
      if (F.FilePath.empty() ||
          !Seen.insert({F.FilePath, F.Offset, "non-torch-loader"}).second)
        continue;
      F.Length = 0;
      F.ReportId = "non-torch-loader";
      // A rule that shares this loop's data out by other means (an opt-in
      // one: per-rank rollouts) requires this key and provides the other.
      std::string Where = locationKey(F);
      F.Provides = "unsharded-loop:" + Where;
      F.Excludes = {"sharded-loop:" + Where};
      F.NotRewrittenReason =
          "this training loop's data does not come from a torch data loader, "
          "so ddpify cannot shard it and every rank trains on the same "
          "samples" +
          (NotShardedWhy.empty()
               ? std::string()
               : " (it cuts its batches by hand, but " + NotShardedWhy + ")") +
          WholeNote +
          "; shard it by ddp::rank()/ddp::world_size() or use a torch "
          "dataset with ddp::make_data_loader" +
          rolloutsAdvice(Loop);
      F.Message = F.NotRewrittenReason;
      Findings.push_back(std::move(F));
    }
  }

  /// For a loop that draws its own experience (an agent's rollouts): every
  /// rank draws the same (a fixed seed, the default seeds, or a seed R13
  /// shares), so every rank does the same work; --rollouts-per-rank (R16)
  /// gives each rank its own.
  std::string rolloutsAdvice(const Stmt *Loop) {
    const Stmt *Outer = outermostLoop(Loop, *Parents);
    Draws Found = drawsOf(Context->getSourceManager(), Outer ? Outer : Loop);
    if (!Found.Random)
      return "";
    std::string Seed = fixedSeedOf(*Context, Locator, Root, Found);
    return "; this loop draws its own experience from random streams " +
           (Seed.empty() ? std::string("that are the same on every rank")
                         : "seeded identically on every rank (" + Seed + ")") +
           ", so every rank plays the same episodes and does the same work: "
           "no speed-up; with --rollouts-per-rank each rank collects its own "
           "experience and each update averages N ranks' minibatches";
  }

  FindingList &Findings;
  FindingLocator Locator;
  std::string Root;
  std::vector<Exit> Exits;
  ASTContext *Context = nullptr;
  ASTContext *State = nullptr;
  std::unique_ptr<TrainingOracle> Oracle;
  const ASTContext *BatchNormOf = nullptr;
  bool HasBatchNorm = false;
  std::unique_ptr<TaintAnalyzer> Taint;
  std::unique_ptr<ParentMap> Parents;
  llvm::DenseMap<const Stmt *, bool> TrainingLoops;
  std::set<std::tuple<std::string, unsigned, std::string>> Seen;
};

const RuleInfo DivergentExitRows[] = {
    {"R12", "ddp-divergent-exit",
     "a loop exit or return decided by one rank's data (ranks diverge "
     "and hang) decides on the value's mean over the ranks where it is a "
     "floating-point scalar; otherwise every rank leaves the loop through "
     "ddp::join()"},
};
} // namespace

extern const RuleUnit DivergentExit{DivergentExitRows,
                                    createModule<FlowMatchers>};

} // namespace ddpify
