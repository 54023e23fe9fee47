//===- MetricLoops.cpp - Loops over sharded batches and their sums --------===//
//
// Which loops walk a sharded loader (or hand-cut batches R4 shards), which
// of them train, and which locals such a loop accumulates and reads after
// it: R11 all-reduces those, R12 and R13 ask which loops train.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MetricLoops.h"
#include "ddpify/HandBatches.h"
#include "ddpify/LoaderIterators.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Work.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMap.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/SetVector.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {

namespace {

bool nameIs(const NamedDecl *D, llvm::StringRef Name) {
  return D && D->getIdentifier() && D->getName() == Name;
}

bool isTensorClass(const CXXRecordDecl *Record) {
  return derivesFrom(Record, {"at::Tensor", "at::TensorBase"});
}

bool isOptimizerStep(const CallExpr *Call) {
  const auto *Member = dyn_cast<CXXMemberCallExpr>(Call);
  if (!Member)
    return false;
  const CXXMethodDecl *Method = Member->getMethodDecl();
  return Method && nameIs(Method, "step") &&
         derivesFrom(Method->getParent(), "torch::optim::Optimizer");
}

/// The local, parameter, global or member (through `this`) an lvalue names.
const ValueDecl *targetOf(const Expr *E) {
  E = stripParensAndImplicit(E);
  if (!E)
    return nullptr;
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E))
    return dyn_cast<VarDecl>(Ref->getDecl());
  if (const auto *Member = dyn_cast<MemberExpr>(E))
    if (isa<CXXThisExpr>(stripParensAndImplicit(Member->getBase())))
      return dyn_cast<FieldDecl>(Member->getMemberDecl());
  return nullptr;
}

/// What an update of E accumulates into: E's variable, or the container an
/// element of it belongs to (`counts[label] += 1` on a std::vector,
/// std::array, C array or tensor: per-class sums).
const ValueDecl *accumulatorOf(const Expr *E) {
  if (const ValueDecl *D = targetOf(E))
    return D;
  E = stripParensAndImplicit(E);
  // `counts[label]`, `confusion[label][prediction]`.
  if (const auto *Subscript = dyn_cast_or_null<ArraySubscriptExpr>(E))
    return accumulatorOf(Subscript->getBase());
  if (const auto *Op = dyn_cast_or_null<CXXOperatorCallExpr>(E))
    if (Op->getOperator() == OO_Subscript && Op->getNumArgs() == 2)
      return accumulatorOf(Op->getArg(0));
  return nullptr;
}

bool refersTo(const Stmt *S, const ValueDecl *D) {
  if (!S)
    return false;
  if (const auto *E = dyn_cast<Expr>(S))
    if (targetOf(E) == D)
      return true;
  for (const Stmt *Child : S->children())
    if (refersTo(Child, D))
      return true;
  return false;
}

/// How a loader loop's body changes a variable declared outside it.
struct Touch {
  bool Sum = false;   ///< `+=`, `++`, `x = x + e`, `t.add_(e)`.
  bool Other = false; ///< An update that depends on the old value otherwise.
  SourceLocation SumLoc, OtherLoc;
  std::string OtherWhat;
};

/// Methods that collect values into their object (a vector of per-batch
/// losses, a running statistic); a model's forward() or eval() is not one.
bool isCollecting(llvm::StringRef Method) {
  return llvm::is_contained({"push_back", "emplace_back", "push_front",
                             "emplace_front", "insert", "emplace", "push",
                             "append", "add", "update", "accumulate", "record",
                             "resize", "assign"},
                            Method);
}

/// A number, a tensor or a standard container: what a metric is kept in (a
/// model passed by reference to a helper is not).
bool couldHoldMetric(QualType T) {
  T = T.getNonReferenceType().getCanonicalType();
  if (T->isArithmeticType())
    return true;
  const CXXRecordDecl *Record = T->getAsCXXRecordDecl();
  return Record && (isTensorClass(Record) || Record->isInStdNamespace());
}

class TouchCollector {
public:
  llvm::MapVector<const ValueDecl *, Touch> Touches;

  void visit(const Stmt *S) {
    if (!S)
      return;
    if (const auto *Binary = dyn_cast<BinaryOperator>(S))
      visitBinary(Binary);
    else if (const auto *Unary = dyn_cast<UnaryOperator>(S))
      visitUnary(Unary);
    else if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(S))
      visitOperator(Operator);
    else if (const auto *Call = dyn_cast<CallExpr>(S))
      visitCall(Call);
    for (const Stmt *Child : S->children())
      visit(Child);
  }

private:
  void sum(const Expr *Target, SourceLocation Loc) {
    if (const ValueDecl *D = accumulatorOf(Target)) {
      Touch &T = Touches[D];
      if (!T.Sum)
        T.SumLoc = Loc;
      T.Sum = true;
    }
  }
  void other(const Expr *Target, SourceLocation Loc, llvm::StringRef What) {
    if (const ValueDecl *D = accumulatorOf(Target)) {
      Touch &T = Touches[D];
      if (!T.Other) {
        T.OtherLoc = Loc;
        T.OtherWhat = What.str();
      }
      T.Other = true;
    }
  }

  /// `x = x + e` or `x = e + x`.
  static bool isSelfSum(const ValueDecl *D, const Expr *Rhs) {
    Rhs = stripParensAndImplicit(Rhs);
    if (const auto *Cast = dyn_cast_or_null<ExplicitCastExpr>(Rhs))
      Rhs = stripParensAndImplicit(Cast->getSubExpr());
    if (const auto *Add = dyn_cast_or_null<BinaryOperator>(Rhs))
      return Add->getOpcode() == BO_Add && (accumulatorOf(Add->getLHS()) == D ||
                                            accumulatorOf(Add->getRHS()) == D);
    if (const auto *Add = dyn_cast_or_null<CXXOperatorCallExpr>(Rhs))
      return Add->getOperator() == OO_Plus && Add->getNumArgs() == 2 &&
             (accumulatorOf(Add->getArg(0)) == D ||
              accumulatorOf(Add->getArg(1)) == D);
    return false;
  }

  void assign(const Expr *Lhs, const Expr *Rhs, SourceLocation Loc) {
    const ValueDecl *D = accumulatorOf(Lhs);
    if (!D)
      return;
    if (isSelfSum(D, Rhs))
      sum(Lhs, Loc);
    else if (refersTo(Rhs, D))
      other(Lhs, Loc, "is updated from its own value but not as a sum");
  }

  void visitBinary(const BinaryOperator *Binary) {
    if (!Binary->isAssignmentOp())
      return;
    if (Binary->getOpcode() == BO_AddAssign)
      sum(Binary->getLHS(), Binary->getOperatorLoc());
    else if (Binary->getOpcode() == BO_Assign)
      assign(Binary->getLHS(), Binary->getRHS(), Binary->getOperatorLoc());
    else
      other(Binary->getLHS(), Binary->getOperatorLoc(),
            ("is updated with '" + Binary->getOpcodeStr() + "'").str());
  }

  void visitUnary(const UnaryOperator *Unary) {
    if (Unary->isIncrementOp())
      sum(Unary->getSubExpr(), Unary->getOperatorLoc());
    else if (Unary->isDecrementOp())
      other(Unary->getSubExpr(), Unary->getOperatorLoc(), "is decremented");
    else if (Unary->getOpcode() == UO_AddrOf)
      other(Unary->getSubExpr(), Unary->getOperatorLoc(),
            "has its address taken");
  }

  void visitOperator(const CXXOperatorCallExpr *Call) {
    if (Call->getNumArgs() == 0)
      return;
    const Expr *Object = Call->getArg(0);
    switch (Call->getOperator()) {
    case OO_PlusEqual:
    case OO_PlusPlus:
      sum(Object, Call->getOperatorLoc());
      return;
    case OO_Equal:
      if (Call->getNumArgs() == 2)
        assign(Object, Call->getArg(1), Call->getOperatorLoc());
      return;
    case OO_MinusEqual:
    case OO_StarEqual:
    case OO_SlashEqual:
    case OO_PercentEqual:
    case OO_AmpEqual:
    case OO_PipeEqual:
    case OO_CaretEqual:
    case OO_LessLessEqual:
    case OO_GreaterGreaterEqual:
    case OO_MinusMinus:
      other(Object, Call->getOperatorLoc(),
            ("is updated with '" +
             llvm::StringRef(getOperatorSpelling(Call->getOperator())) + "'")
                .str());
      return;
    default:
      return;
    }
  }

  void visitCall(const CallExpr *Call) {
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call)) {
      const CXXMethodDecl *Method = Member->getMethodDecl();
      const Expr *Object = Member->getImplicitObjectArgument();
      if (Method && Object && Method->getIdentifier()) {
        llvm::StringRef Name = Method->getName();
        if (isTensorClass(Method->getParent())) {
          // Tensor methods are all const; a trailing '_' marks the in-place
          // ones.
          if (Name == "add_")
            sum(Object, Call->getExprLoc());
          else if (Name.ends_with("_"))
            other(Object, Call->getExprLoc(),
                  ("is updated in place by '" + Name + "()'").str());
        } else if (isCollecting(Name)) {
          other(Object, Call->getExprLoc(),
                ("is changed by '" + Name + "()'").str());
        }
      }
    }
    // Passed by non-const reference: the callee may accumulate into it.
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (!Callee)
      return;
    for (unsigned I = 0; I < Call->getNumArgs() && I < Callee->getNumParams();
         ++I) {
      QualType Param = Callee->getParamDecl(I)->getType();
      if (Param->isLValueReferenceType() &&
          !Param->getPointeeType().isConstQualified() &&
          couldHoldMetric(Call->getArg(I)->getType()))
        other(Call->getArg(I), Call->getArg(I)->getExprLoc(),
              "is passed by reference to '" + Callee->getNameAsString() +
                  "()'");
    }
  }
};

bool isLoop(const Stmt *S) {
  return isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(S);
}

bool inside(const SourceManager &SM, SourceLocation Loc, SourceRange Range) {
  return SM.isBeforeInTranslationUnit(Range.getBegin(), Loc) &&
         SM.isBeforeInTranslationUnit(Loc, Range.getEnd());
}

bool callsMainProcessCheck(const Stmt *S) {
  if (!S)
    return false;
  if (const auto *Call = dyn_cast<CallExpr>(S))
    if (const FunctionDecl *Callee = Call->getDirectCallee()) {
      std::string Name = Callee->getQualifiedNameAsString();
      if (Name == "ddp::is_main_process" || Name == "ddp::rank")
        return true;
    }
  for (const Stmt *Child : S->children())
    if (callsMainProcessCheck(Child))
      return true;
  return false;
}

bool isAllReduceCall(const Stmt *S) {
  const auto *Call = dyn_cast_or_null<CallExpr>(S);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  return Callee && Callee->getQualifiedNameAsString() == "ddp::all_reduce";
}

bool containsAllReduce(const Stmt *S) {
  if (!S)
    return false;
  if (isAllReduceCall(S))
    return true;
  for (const Stmt *Child : S->children())
    if (containsAllReduce(Child))
      return true;
  return false;
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

/// The variable a statement R11 writes (or a user wrote the same way)
/// all-reduces: `v = ddp::all_reduce(v);`, `v = static_cast<T>(...)`,
/// `ddp::all_reduce(v);`.
const ValueDecl *reducedBy(const Stmt *S) {
  const auto *E = dyn_cast_or_null<Expr>(S);
  if (!E)
    return nullptr;
  E = stripParensAndImplicit(E);
  if (isAllReduceCall(E)) {
    const auto *Call = cast<CallExpr>(E);
    return Call->getNumArgs() ? targetOf(Call->getArg(0)) : nullptr;
  }
  if (const auto *Assign = dyn_cast<BinaryOperator>(E))
    if (Assign->getOpcode() == BO_Assign && containsAllReduce(Assign->getRHS()))
      return targetOf(Assign->getLHS());
  if (const auto *Assign = dyn_cast<CXXOperatorCallExpr>(E))
    if (Assign->getOperator() == OO_Equal && Assign->getNumArgs() == 2 &&
        containsAllReduce(Assign->getArg(1)))
      return targetOf(Assign->getArg(0));
  return nullptr;
}

/// The kind of an accumulator's type ("tensor", "elements", "double",
/// "int64", "int:<type>", "float:<type>"; rules/ReduceMetrics.cpp spells each
/// one's all-reduce), or empty with Why set.
std::string kindOf(ASTContext &Context, const VarDecl *Var, std::string &Why) {
  QualType Type = Var->getType();
  QualType Canonical = Type.getCanonicalType().getUnqualifiedType();
  PrintingPolicy Policy = Context.getPrintingPolicy();
  Policy.SuppressTagKeyword = true;
  std::string Spelling = Type->getContainedAutoType()
                             ? Canonical.getAsString(Policy)
                             : Type.getUnqualifiedType().getAsString(Policy);
  if (const CXXRecordDecl *Record = Canonical->getAsCXXRecordDecl()) {
    if (Record->getQualifiedNameAsString() == "at::Tensor")
      return "tensor";
    // Per-class counts: ddp::all_reduce sums them element by element.
    if (const auto *Spec = dyn_cast<ClassTemplateSpecializationDecl>(Record))
      if (llvm::is_contained({"std::vector", "std::array"},
                             Spec->getQualifiedNameAsString()) &&
          Spec->getTemplateArgs().size() > 0 &&
          Spec->getTemplateArgs()[0].getKind() == TemplateArgument::Type) {
        QualType Element = Spec->getTemplateArgs()[0].getAsType();
        if (Element->isArithmeticType() && !Element->isBooleanType())
          return "elements";
      }
    Why = "has type '" + Spelling + "', which ddp::all_reduce does not take";
    return "";
  }
  if (const auto *Array = Context.getAsConstantArrayType(Canonical))
    if (Array->getElementType()->isArithmeticType() &&
        !Array->getElementType()->isBooleanType())
      return "elements";
  if (Canonical->isSpecificBuiltinType(BuiltinType::Double))
    return "double";
  if (Context.hasSameType(Canonical,
                          Context.getIntTypeForBitwidth(64, /*Signed=*/true)))
    return "int64";
  if (Canonical->isBooleanType() || Canonical->isEnumeralType() ||
      Canonical->isAnyCharacterType()) {
    Why = "has type '" + Spelling + "', which is not a number to sum";
    return "";
  }
  if (Canonical->isIntegerType())
    return "int:" + Spelling;
  if (Canonical->isRealFloatingType())
    return "float:" + Spelling;
  Why = "has type '" + Spelling + "', which ddp::all_reduce does not take";
  return "";
}

class FunctionAnalysis {
public:
  FunctionAnalysis(ASTContext &Context, const FunctionDecl *Function)
      : Context(Context), SM(Context.getSourceManager()), Function(Function),
        Body(Function->getBody()), Parents(Body), Oracle(Context) {
    indexReferences(Body);
  }

  std::vector<MetricLoop> run() {
    std::vector<MetricLoop> Loops;
    collectLoops(Body, Loops);
    return Loops;
  }

private:
  void indexReferences(const Stmt *S) {
    if (!S)
      return;
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
        References[Var].push_back(Ref);
    // Plain assignments, which start a sum afresh (a reset).
    if (const auto *Assign = dyn_cast<BinaryOperator>(S)) {
      if (Assign->getOpcode() == BO_Assign)
        if (const auto *Var =
                dyn_cast_or_null<VarDecl>(targetOf(Assign->getLHS())))
          if (!refersTo(Assign->getRHS(), Var))
            Resets[Var].push_back(Assign->getOperatorLoc());
    } else if (const auto *Assign = dyn_cast<CXXOperatorCallExpr>(S)) {
      if (Assign->getOperator() == OO_Equal && Assign->getNumArgs() == 2)
        if (const auto *Var =
                dyn_cast_or_null<VarDecl>(targetOf(Assign->getArg(0))))
          if (!refersTo(Assign->getArg(1), Var))
            Resets[Var].push_back(Assign->getOperatorLoc());
    }
    for (const Stmt *Child : S->children())
      indexReferences(Child);
  }

  void collectLoops(const Stmt *S, std::vector<MetricLoop> &Loops) {
    if (!S)
      return;
    const Stmt *Sharded = nullptr, *LoopBody = nullptr;
    const Expr *Loader = nullptr;
    if (const auto *Loop = dyn_cast<CXXForRangeStmt>(S)) {
      if (Loop->getRangeInit() &&
          isDataLoaderType(Loop->getRangeInit()->getType()) &&
          !isUnshardedLoader(Loop->getRangeInit()))
        Sharded = Loop, LoopBody = Loop->getBody(),
        Loader = Loop->getRangeInit();
      else if (isShardedBatchLoop(Loop) || handBatchList(Context, Loop, Oracle))
        Sharded = Loop, LoopBody = Loop->getBody();
    } else if (isa<ForStmt, WhileStmt>(S)) {
      // A pass over a loader by its iterator, as a range-for; batches cut
      // by hand, which R4 shards over ddp::batch_starts.
      const Expr *Walked = iteratorPassLoader(Context, S);
      QualType Type = Walked ? Walked->getType() : QualType();
      if (!Type.isNull() && Type->isPointerType())
        Type = Type->getPointeeType(); // `loader->begin()`
      if (Walked && isDataLoaderType(Type) && !isUnshardedLoader(Walked))
        Loader = Walked;
      if (Loader || handBatchLoop(Context, S, Oracle).Loop)
        Sharded = S, LoopBody = isa<ForStmt>(S) ? cast<ForStmt>(S)->getBody()
                                                : cast<WhileStmt>(S)->getBody();
    }
    if (Sharded) {
      MetricLoop Result = analyze(Sharded, LoopBody);
      // A loader R4 may leave unsharded (drawn one batch at a time).
      if (const ValueDecl *Holder = loaderHolderOf(Loader))
        Result.LoaderHolder = loaderHolderKey(Holder, Context);
      if (!Result.Accumulators.empty() || !Result.Problems.empty())
        Loops.push_back(std::move(Result));
    }
    for (const Stmt *Child : S->children())
      collectLoops(Child, Loops);
  }

  /// A loader this function builds itself without make_data_loader
  /// (`std::make_unique<StatelessDataLoader<...>>(...)`, a constructor):
  /// R4 does not shard it, every rank reads all of it, and its sums are
  /// already global. Reducing them would count each sample N times.
  static bool isUnshardedLoader(const Expr *Range) {
    const auto *Var = dyn_cast_or_null<VarDecl>(loaderHolderOf(Range));
    if (!Var || isa<ParmVarDecl>(Var) || !Var->getInit())
      return false;
    const Expr *Init = stripParensAndImplicit(Var->getInit());
    while (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(Init)) {
      // `StatelessDataLoader<...> loader(dataset, sampler, options)`.
      if (isDataLoaderType(Construct->getType()))
        return true;
      if (Construct->getNumArgs() != 1)
        return false;
      Init = stripParensAndImplicit(Construct->getArg(0));
    }
    if (isa_and_nonnull<CXXNewExpr>(Init))
      return true;
    const auto *Call = dyn_cast_or_null<CallExpr>(Init);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    if (!Callee)
      return false;
    std::string Name = Callee->getQualifiedNameAsString();
    return Name == "std::make_unique" || Name == "std::make_shared";
  }

  bool readAfter(const VarDecl *Var, const Stmt *Loop) {
    for (const DeclRefExpr *Ref : References[Var])
      if (SM.isBeforeInTranslationUnit(Loop->getEndLoc(), Ref->getLocation()))
        return true;
    return false;
  }

  bool isLocalOfFunction(const VarDecl *Var) {
    return Var->hasLocalStorage() && !Var->getType()->isReferenceType() &&
           Var->getParentFunctionOrMethod() ==
               static_cast<const DeclContext *>(Function);
  }

  /// Whether Var is stepped by one once per iteration (`++v`, `v++`,
  /// `v += 1` as a statement of the loop's body) and named nowhere else in it.
  bool isBatchCounter(const VarDecl *Var, const Stmt *LoopBody) {
    const auto *Block = dyn_cast_or_null<CompoundStmt>(LoopBody);
    if (!Block || !Var->getType()->isIntegerType())
      return false;
    auto IsVar = [&](const Expr *E) {
      const auto *Ref =
          dyn_cast_or_null<DeclRefExpr>(stripParensAndImplicit(E));
      return Ref && Ref->getDecl() == Var;
    };
    int Steps = 0;
    for (const Stmt *S : Block->body()) {
      const auto *E = dyn_cast<Expr>(S);
      E = E ? stripParensAndImplicit(E) : nullptr;
      bool Step = false;
      if (const auto *Unary = dyn_cast_or_null<UnaryOperator>(E))
        Step = Unary->isIncrementOp() && IsVar(Unary->getSubExpr());
      else if (const auto *Add = dyn_cast_or_null<CompoundAssignOperator>(E))
        if (Add->getOpcode() == BO_AddAssign && IsVar(Add->getLHS()))
          if (const auto *One = dyn_cast<IntegerLiteral>(
                  stripParensAndImplicit(Add->getRHS())))
            Step = One->getValue() == 1;
      if (Step)
        ++Steps;
      else if (refersTo(S, Var))
        return false;
    }
    return Steps == 1;
  }

  /// Whether every read of Var after Loop prints it: an operand of `<<` on
  /// an output stream, or an argument of printf and its kin.
  bool onlyPrintedAfter(const VarDecl *Var, const Stmt *Loop) {
    bool Any = false;
    for (const DeclRefExpr *Ref : References[Var]) {
      if (!SM.isBeforeInTranslationUnit(Loop->getEndLoc(), Ref->getLocation()))
        continue;
      Any = true;
      const Stmt *Child = Ref;
      const Stmt *Parent = Parents.getParent(Child);
      while (Parent &&
             (isa<ImplicitCastExpr, ParenExpr, ExplicitCastExpr>(Parent))) {
        Child = Parent;
        Parent = Parents.getParent(Parent);
      }
      if (const auto *Shift = dyn_cast_or_null<CXXOperatorCallExpr>(Parent))
        if (Shift->getOperator() == OO_LessLess && Shift->getNumArgs() == 2 &&
            Shift->getArg(1) == Child && isStreamChain(Shift->getArg(0)))
          continue;
      if (const auto *Call = dyn_cast_or_null<CallExpr>(Parent))
        if (isOutputStatement(Call) && Call->getNumArgs() > 0 &&
            Call->getArg(0) != Child)
          continue;
      return false;
    }
    return Any;
  }

  /// The enclosing loop over whose iterations Var's sum would carry on (the
  /// all-reduce after the inner loop would then add sums already reduced),
  /// or nullptr.
  const Stmt *carryingLoop(const VarDecl *Var, const Stmt *Loop) {
    for (const Stmt *S = Parents.getParent(Loop); S; S = Parents.getParent(S)) {
      if (!isLoop(S))
        continue;
      if (inside(SM, Var->getLocation(), S->getSourceRange()))
        return nullptr;
      bool Reset = false;
      for (SourceLocation At : Resets[Var])
        Reset |= SM.isBeforeInTranslationUnit(S->getBeginLoc(), At) &&
                 SM.isBeforeInTranslationUnit(At, Loop->getBeginLoc());
      if (!Reset)
        return S;
    }
    return nullptr;
  }

  void problem(MetricLoop &Result, SourceLocation Loc,
               const std::string &Text) {
    for (const MetricLoop::Problem &Known : Result.Problems)
      if (Known.Loc == Loc)
        return;
    Result.Problems.push_back({Text, Loc});
  }

  MetricLoop analyze(const Stmt *Loop, const Stmt *Body) {
    MetricLoop Result;
    Result.Loop = Loop;
    Result.Body = Body;
    TouchCollector Collector;
    Collector.visit(Body);

    std::vector<const VarDecl *> Candidates;
    std::vector<std::string> Kinds;
    for (const auto &[Decl, T] : Collector.Touches) {
      if (!T.Sum && !T.Other)
        continue;
      std::string Name = "'" + Decl->getNameAsString() + "'";
      SourceLocation Loc = T.Other ? T.OtherLoc : T.SumLoc;
      const auto *Var = dyn_cast<VarDecl>(Decl);
      if (!Var) {
        problem(Result, Loc,
                Name + " is a member accumulated over this rank's share of "
                       "the data only; accumulate into a local "
                       "and add 'v = ddp::all_reduce(v);' after the loop");
        continue;
      }
      if (inside(SM, Var->getLocation(), Loop->getSourceRange()))
        continue; // Declared in the loop: per batch, not a metric.
      if (!isLocalOfFunction(Var)) {
        problem(Result, Loc,
                Name + " is accumulated over this rank's share of the "
                       "data only and is not a local of this "
                       "function (a reference, global or static); "
                       "all-reduce it with ddp::all_reduce where it is "
                       "complete");
        continue;
      }
      if (!readAfter(Var, Loop))
        continue;
      // A count of a training loop's iterations, only printed: the number
      // of optimizer steps, which is this rank's as in any DDP program (one
      // process at the global batch takes as many). An evaluation's count
      // of batches is all of the ranks' batches, reduced as a sum.
      if (!T.Other && isBatchCounter(Var, Body) &&
          onlyPrintedAfter(Var, Loop) && Oracle.stepsOptimizer(Body))
        continue;
      if (T.Other) {
        problem(
            Result, Loc,
            Name + " " + T.OtherWhat +
                " in a loop over a sharded loader, which sees only this rank's "
                "share of the data; ddpify recognises sums only (+=, ++, "
                "x = x + ...): combine the ranks' values after the loop "
                "with ddp::all_reduce (kSum, kMax, kMin) or "
                "ddp::all_gather");
        continue;
      }
      std::string Why;
      std::string Kind = kindOf(Context, Var, Why);
      if (Kind.empty()) {
        problem(Result, Loc,
                Name +
                    " is a sum over this rank's share of the data "
                    "but " +
                    Why + "; all-reduce its parts after the loop");
        continue;
      }
      if (carryingLoop(Var, Loop)) {
        problem(Result, Loc,
                Name + " keeps summing over the iterations of an enclosing "
                       "loop, so an all-reduce after this loop would add "
                       "sums already reduced; reset it before the loop or "
                       "all-reduce it once after the enclosing loop");
        continue;
      }
      Candidates.push_back(Var);
      Kinds.push_back(Kind);
    }
    if (Candidates.empty())
      return Result;

    for (const Stmt *S = Parents.getParent(Loop); S; S = Parents.getParent(S))
      if (const auto *If = dyn_cast<IfStmt>(S))
        if (callsMainProcessCheck(If->getCond())) {
          problem(Result, Loop->getBeginLoc(),
                  "this loop runs on the main process only, "
                  "which sees its share of the data only; run it on every "
                  "rank and keep only the printing on the main process");
          return Result;
        }
    const auto *Block = dyn_cast_or_null<CompoundStmt>(Parents.getParent(Loop));
    if (!Block) {
      problem(Result, Loop->getBeginLoc(),
              "this loop is not a statement of a block, so its "
              "sums cannot be all-reduced right after it; put it in braces");
      return Result;
    }
    // Idempotence: the statements R11 wrote last time, and sums the user
    // reduced by hand (a collective later in the same block).
    auto At = llvm::find(Block->body(), Loop);
    llvm::SmallPtrSet<const ValueDecl *, 4> Reduced;
    for (++At; At != Block->body_end(); ++At) {
      if (const ValueDecl *D = reducedBy(*At)) {
        Reduced.insert(D);
        continue;
      }
      if (containsCollective(*At))
        return Result; // Reduced by hand.
    }
    for (size_t I = 0; I < Candidates.size(); ++I)
      if (!Reduced.count(Candidates[I])) {
        Result.Accumulators.push_back(Candidates[I]);
        Result.Kinds.push_back(Kinds[I]);
      }
    return Result;
  }

  ASTContext &Context;
  const SourceManager &SM;
  const FunctionDecl *Function;
  Stmt *Body;
  ParentMap Parents;
  TrainingOracle Oracle;
  llvm::DenseMap<const VarDecl *, std::vector<const DeclRefExpr *>> References;
  llvm::DenseMap<const VarDecl *, std::vector<SourceLocation>> Resets;
};

} // namespace

bool isDataLoaderType(QualType T) {
  if (T.isNull())
    return false;
  return derivesFrom(
      T.getNonReferenceType()->getAsCXXRecordDecl(),
      {"torch::data::StatelessDataLoader", "torch::data::StatefulDataLoader",
       "torch::data::DataLoaderBase", "ddp::DistributedDataLoader"});
}

void collectBackwardCalls(const Stmt *S, std::vector<const CallExpr *> &Out) {
  if (!S || isa<LambdaExpr>(S))
    return;
  if (const auto *Call = dyn_cast<CallExpr>(S))
    if (isBackwardCall(Call))
      Out.push_back(Call);
  for (const Stmt *Child : S->children())
    collectBackwardCalls(Child, Out);
}

static bool containsLoop(const Stmt *S) {
  if (!S)
    return false;
  if (isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(S))
    return true;
  for (const Stmt *Child : S->children())
    if (containsLoop(Child))
      return true;
  return false;
}

void collectTrainingCalls(const Stmt *S, TrainingOracle &Oracle,
                          std::vector<const CallExpr *> &Out) {
  if (!S || isa<LambdaExpr>(S))
    return;
  if (const auto *Call = dyn_cast<CallExpr>(S)) {
    const FunctionDecl *Definition = nullptr;
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (isBackwardCall(Call) ||
        (Callee && Callee->hasBody(Definition) && Definition &&
         Oracle.functionTrains(Definition) &&
         !containsLoop(Definition->getBody())))
      Out.push_back(Call);
  }
  for (const Stmt *Child : S->children())
    collectTrainingCalls(Child, Oracle, Out);
}

bool isBackwardCall(const CallExpr *Call) {
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
    if (const CXXMethodDecl *Method = Member->getMethodDecl())
      if (nameIs(Method, "backward") && isTensorClass(Method->getParent()))
        return true;
  const FunctionDecl *Callee = Call->getDirectCallee();
  return Callee &&
         Callee->getQualifiedNameAsString() == "torch::autograd::backward";
}

bool isDdpCollective(const CallExpr *Call) {
  const FunctionDecl *Callee = Call->getDirectCallee();
  if (!Callee)
    return false;
  std::string Name = Callee->getQualifiedNameAsString();
  // RowShard's global figures all-reduce their argument (R15).
  return Name == "ddp::all_reduce" || Name == "ddp::all_gather" ||
         Name == "ddp::broadcast" || Name == "ddp::RowShard::global_mean" ||
         Name == "ddp::RowShard::global_sum";
}

bool TrainingOracle::reaches(const Stmt *S, Goal Sought) {
  if (!S)
    return false;
  if (const auto *Call = dyn_cast<CallExpr>(S)) {
    if (isOptimizerStep(Call) || (Sought == Training && isBackwardCall(Call)))
      return true;
    if (const FunctionDecl *Callee = Call->getDirectCallee())
      if (functionReaches(Callee, Sought))
        return true;
  }
  for (const Stmt *Child : S->children())
    if (reaches(Child, Sought))
      return true;
  return false;
}

bool TrainingOracle::functionReaches(const FunctionDecl *Function,
                                     Goal Sought) {
  const FunctionDecl *Definition = nullptr;
  if (!Function->hasBody(Definition) || !Definition ||
      Definition->isDependentContext() ||
      Context.getSourceManager().isInSystemHeader(Definition->getLocation()))
    return false;
  auto &Known = Memo[Sought];
  auto Found = Known.find(Definition);
  if (Found != Known.end())
    return Found->second == 2;
  if (Depth > 6)
    return false;
  Known[Definition] = 0;
  ++Depth;
  bool Reached = reaches(Definition->getBody(), Sought);
  --Depth;
  Known[Definition] = Reached ? 2 : 1; // A reference: still valid.
  return Reached;
}

std::vector<MetricLoop> analyzeMetricLoops(ASTContext &Context,
                                           const FunctionDecl *Function) {
  if (!Function->getBody())
    return {};
  return FunctionAnalysis(Context, Function).run();
}

} // namespace ddpify
