//===- LoaderIterators.cpp - Loaders walked by their iterators ------------===//
//
// An iterator taken from a loader's begin() is followed through the uses of
// the variable holding it in its function: `*it` and `it->` read a batch,
// `++it`, `it++`, `std::advance(it, k)` and `it = std::next(it)` advance it,
// `it != l->end()` compares it, `it = l->begin()` re-takes it. It is a pass
// when one loop whose condition is `it != end` holds every read and every
// advance and cannot be left early (no break, return or goto out of it);
// any other reading is a set of draws. `std::distance(l->begin(), l->end())`
// is a count of the loader's batches (every one made and dropped, none read
// by the program).
//
//===----------------------------------------------------------------------===//

#include "ddpify/LoaderIterators.h"
#include "ddpify/MatcherUtil.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/StmtCXX.h"
#include "clang/Basic/SourceManager.h"

using namespace clang;

namespace ddpify {

namespace {

DynTypedNode parentOf(ASTContext &Context, const DynTypedNode &Node) {
  DynTypedNodeList Parents = Context.getParents(Node);
  return Parents.empty() ? DynTypedNode() : Parents[0];
}

bool wraps(const Expr *Outer, const Expr *Inner) {
  return stripParensAndImplicit(Outer) == stripParensAndImplicit(Inner);
}

bool isStdCall(const CallExpr *Call, llvm::StringRef Name) {
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  return Callee && Callee->getQualifiedNameAsString() == ("std::" + Name).str();
}

/// `loader->begin()`, `(*loader).begin()`, `loader.begin()`.
bool isBeginCall(const Expr *E) {
  const auto *Call = dyn_cast_or_null<CXXMemberCallExpr>(
      E ? stripParensAndImplicit(E) : nullptr);
  const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
  return Method && Method->getIdentifier() && Method->getName() == "begin";
}

/// `loader->end()`, `(*loader).end()`, `loader.end()`.
bool isEndCall(const Expr *E) {
  const auto *Call = dyn_cast_or_null<CXXMemberCallExpr>(
      E ? stripParensAndImplicit(E) : nullptr);
  const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
  return Method && Method->getIdentifier() && Method->getName() == "end";
}

/// The loader whose batches Call counts: `std::distance(l->begin(),
/// l->end())`, the same holder on both sides; null for any other call.
const Expr *distanceLoader(const CallExpr *Call) {
  if (!isStdCall(Call, "distance") || Call->getNumArgs() != 2)
    return nullptr;
  const Expr *First = stripCopies(Call->getArg(0));
  const Expr *Last = stripCopies(Call->getArg(1));
  if (!isBeginCall(First) || !isEndCall(Last))
    return nullptr;
  const Expr *Loader =
      cast<CXXMemberCallExpr>(First)->getImplicitObjectArgument();
  const ValueDecl *Holder = loaderHolderOf(Loader);
  if (!Holder ||
      Holder != loaderHolderOf(
                    cast<CXXMemberCallExpr>(Last)->getImplicitObjectArgument()))
    return nullptr;
  return Loader;
}

bool contains(const Stmt *Outer, const Stmt *Inner, ASTContext &Context) {
  const SourceManager &SM = Context.getSourceManager();
  SourceRange Range = Outer->getSourceRange();
  SourceLocation Loc = Inner->getBeginLoc();
  return !SM.isBeforeInTranslationUnit(Loc, Range.getBegin()) &&
         !SM.isBeforeInTranslationUnit(Range.getEnd(), Loc);
}

/// Whether Body can leave the loop it is the body of early: a break that is
/// not inside a nested loop or switch, a return, a goto.
bool leavesEarly(const Stmt *S, bool Nested = false) {
  if (!S || isa<LambdaExpr>(S))
    return false;
  if (isa<ReturnStmt, GotoStmt, CoreturnStmt>(S))
    return true;
  if (isa<BreakStmt>(S))
    return !Nested;
  bool Inner =
      Nested || isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt, SwitchStmt>(S);
  for (const Stmt *Child : S->children())
    if (leavesEarly(Child, Inner))
      return true;
  return false;
}

/// The statement of a block that holds Node, and that block: the statements
/// from it to the block's end are what a value made at Node may reach.
const Stmt *regionStart(ASTContext &Context, DynTypedNode Node,
                        const CompoundStmt *&Block) {
  Block = nullptr;
  const Stmt *Last = Node.get<Stmt>();
  for (DynTypedNode Parent = parentOf(Context, Node);
       !Parent.getNodeKind().isNone(); Parent = parentOf(Context, Parent)) {
    if (Parent.get<FunctionDecl>() || Parent.get<LambdaExpr>())
      return Last;
    if (const auto *Compound = Parent.get<CompoundStmt>()) {
      Block = Compound;
      return Last;
    }
    if (const Stmt *S = Parent.get<Stmt>())
      Last = S;
  }
  return Last;
}

class IteratorFollower {
public:
  explicit IteratorFollower(ASTContext &Context) : Context(Context) {}

  IteratorUse fromBegin(const CXXMemberCallExpr *Begin) {
    const Expr *Cur = Begin;
    DynTypedNode Parent = climb(Cur);
    if (const auto *Var = Parent.get<VarDecl>()) {
      if (Var->getInit() && wraps(Var->getInit(), Cur))
        return fromVariable(Var);
      return unknown("its begin() is used in a way ddpify does not follow");
    }
    const auto *ParentExpr = Parent.get<Expr>();
    if (!ParentExpr)
      return unknown("its begin() is used in a way ddpify does not follow");
    if (const VarDecl *Var = assignedVariable(ParentExpr, Cur))
      return fromVariable(Var);
    IteratorUse Use;
    if (const auto *Call = dyn_cast<CallExpr>(ParentExpr))
      if (Call->getNumArgs() == 2 && wraps(Call->getArg(0), Cur) &&
          distanceLoader(Call)) {
        Use.K = IteratorUse::Count;
        Use.Distance = Call;
        return Use;
      }
    if (isRead(ParentExpr, Cur)) {
      Use.K = IteratorUse::Draws;
      addRegion(Use, Parent);
      return Use;
    }
    if (isComparison(ParentExpr, Cur))
      return Use; // `l->begin() == l->end()`: an emptiness test.
    return unknown("its begin() is used in a way ddpify does not follow");
  }

  const Expr *passLoader(const Stmt *Loop, const VarDecl **Iterator) {
    const Expr *Cond = nullptr;
    if (const auto *For = dyn_cast<ForStmt>(Loop))
      Cond = For->getCond();
    else if (const auto *While = dyn_cast<WhileStmt>(Loop))
      Cond = While->getCond();
    const auto *Compare =
        dyn_cast_or_null<CXXOperatorCallExpr>(stripParensAndImplicit(Cond));
    if (!Compare || Compare->getOperator() != OO_ExclaimEqual ||
        Compare->getNumArgs() != 2)
      return nullptr;
    for (unsigned I = 0; I < 2; ++I) {
      const auto *Ref =
          dyn_cast<DeclRefExpr>(stripParensAndImplicit(Compare->getArg(I)));
      const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
      if (!Var || !isIteratorType(Var->getType()))
        continue;
      // The begin() it is taken from: its initialiser or an assignment.
      const CXXMemberCallExpr *Begin = nullptr;
      if (Var->getInit() && isBeginCall(Var->getInit()))
        Begin = cast<CXXMemberCallExpr>(stripParensAndImplicit(Var->getInit()));
      else
        Begin = assignedBegin(Var);
      if (!Begin)
        return nullptr;
      IteratorUse Use = fromVariable(Var);
      if (Use.K != IteratorUse::Pass || Use.Loop != Loop)
        return nullptr;
      if (Iterator)
        *Iterator = Var;
      return Begin->getImplicitObjectArgument();
    }
    return nullptr;
  }

private:
  static IteratorUse unknown(std::string Why) {
    IteratorUse Use;
    Use.K = IteratorUse::Unknown;
    Use.Why = std::move(Why);
    return Use;
  }

  static bool isIteratorType(QualType Type) {
    const CXXRecordDecl *Record =
        Type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
    return Record &&
           Record->getQualifiedNameAsString() == "torch::data::Iterator";
  }

  /// Climbs from Cur through wrappers, copies of the iterator and
  /// `std::next(Cur, k)` (an iterator further on); Cur ends at the last of
  /// them and the result is its parent.
  DynTypedNode climb(const Expr *&Cur) {
    DynTypedNode Parent = parentOf(Context, DynTypedNode::create(*Cur));
    while (const auto *ParentExpr = Parent.get<Expr>()) {
      bool Up = wraps(ParentExpr, Cur);
      if (const auto *Construct = dyn_cast<CXXConstructExpr>(ParentExpr))
        Up |= Construct->getNumArgs() == 1 && wraps(Construct->getArg(0), Cur);
      if (const auto *Call = dyn_cast<CallExpr>(ParentExpr))
        Up |= isStdCall(Call, "next") && Call->getNumArgs() >= 1 &&
              wraps(Call->getArg(0), Cur);
      if (!Up)
        break;
      Cur = ParentExpr;
      Parent = parentOf(Context, Parent);
    }
    return Parent;
  }

  /// `*Cur` or `Cur->...`: a batch read.
  static bool isRead(const Expr *Parent, const Expr *Cur) {
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Parent))
      return (Op->getOperator() == OO_Star || Op->getOperator() == OO_Arrow) &&
             Op->getNumArgs() == 1 && wraps(Op->getArg(0), Cur);
    return false;
  }

  static bool isComparison(const Expr *Parent, const Expr *Cur) {
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Parent))
      return (Op->getOperator() == OO_ExclaimEqual ||
              Op->getOperator() == OO_EqualEqual) &&
             Op->getNumArgs() == 2 &&
             (wraps(Op->getArg(0), Cur) || wraps(Op->getArg(1), Cur));
    return false;
  }

  /// The iterator variable `V = Cur` assigns Cur to.
  static const VarDecl *assignedVariable(const Expr *Parent, const Expr *Cur) {
    const auto *Op = dyn_cast<CXXOperatorCallExpr>(Parent);
    if (!Op || Op->getOperator() != OO_Equal || Op->getNumArgs() != 2 ||
        !wraps(Op->getArg(1), Cur))
      return nullptr;
    const auto *Ref =
        dyn_cast<DeclRefExpr>(stripParensAndImplicit(Op->getArg(0)));
    return Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
  }

  /// A `Var = l->begin()` in Var's function (the last one found).
  const CXXMemberCallExpr *assignedBegin(const VarDecl *Var) {
    const CXXMemberCallExpr *Found = nullptr;
    for (const DeclRefExpr *Ref : referencesTo(Var)) {
      DynTypedNode Parent = parentOf(Context, DynTypedNode::create(*Ref));
      while (Parent.get<ImplicitCastExpr>())
        Parent = parentOf(Context, Parent);
      const auto *Op = Parent.get<CXXOperatorCallExpr>();
      if (Op && Op->getOperator() == OO_Equal && Op->getNumArgs() == 2 &&
          wraps(Op->getArg(0), Ref) && isBeginCall(Op->getArg(1)))
        Found = cast<CXXMemberCallExpr>(stripParensAndImplicit(Op->getArg(1)));
    }
    return Found;
  }

  std::vector<const DeclRefExpr *> referencesTo(const VarDecl *Var) {
    std::vector<const DeclRefExpr *> Refs;
    const auto *Function =
        dyn_cast_or_null<FunctionDecl>(Var->getParentFunctionOrMethod());
    collectReferences(Function ? Function->getBody() : nullptr, Var, Refs);
    return Refs;
  }

  /// For a draw at Node: the rest of its block, or of the block declaring
  /// the variable the batch is assigned to.
  void addRegion(IteratorUse &Use, DynTypedNode Node) {
    // `batch = *it;` into a variable declared before: what follows its
    // declaration.
    DynTypedNode Above = parentOf(Context, Node);
    while (Above.get<ImplicitCastExpr>() || Above.get<CXXConstructExpr>() ||
           Above.get<MaterializeTemporaryExpr>() || Above.get<ParenExpr>())
      Above = parentOf(Context, Above);
    const Expr *Target = nullptr;
    if (const auto *Op = Above.get<CXXOperatorCallExpr>())
      if (Op->getOperator() == OO_Equal && Op->getNumArgs() == 2)
        Target = Op->getArg(0);
    if (const auto *Assign = Above.get<BinaryOperator>())
      if (Assign->getOpcode() == BO_Assign)
        Target = Assign->getLHS();
    if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(
            Target ? stripParensAndImplicit(Target) : nullptr))
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
        if (Var->isLocalVarDecl()) {
          DynTypedNode Declared = parentOf(Context, DynTypedNode::create(*Var));
          if (Declared.get<DeclStmt>())
            Node = Declared;
        }
    const CompoundStmt *Block = nullptr;
    const Stmt *Start = regionStart(Context, Node, Block);
    if (!Block) {
      if (Start)
        Use.Regions.push_back(Start);
      return;
    }
    bool In = false;
    for (const Stmt *S : Block->body()) {
      In |= S == Start;
      if (In)
        Use.Regions.push_back(S);
    }
  }

  /// The loop whose condition is the comparison Compare, an `!=`.
  const Stmt *walkingLoop(const Expr *Compare) {
    DynTypedNode Parent = parentOf(Context, DynTypedNode::create(*Compare));
    while (Parent.get<ImplicitCastExpr>() || Parent.get<ParenExpr>() ||
           Parent.get<ExprWithCleanups>())
      Parent = parentOf(Context, Parent);
    const Stmt *Loop = nullptr;
    const Expr *Cond = nullptr;
    if (const auto *For = Parent.get<ForStmt>())
      Loop = For, Cond = For->getCond();
    else if (const auto *While = Parent.get<WhileStmt>())
      Loop = While, Cond = While->getCond();
    if (!Loop || !Cond || !wraps(Cond, Compare))
      return nullptr;
    const auto *Op = cast<CXXOperatorCallExpr>(Compare);
    if (Op->getOperator() != OO_ExclaimEqual)
      return nullptr;
    return Loop;
  }

  IteratorUse fromVariable(const VarDecl *Var) {
    std::string Name = "'" + Var->getNameAsString() + "'";
    if (!Var->isLocalVarDecl() || Var->getType()->isReferenceType())
      return unknown("its iterator is held by " + Name +
                     ", which is not a local");
    std::vector<const Expr *> Reads, Advances, Retakes;
    const Stmt *Loop = nullptr;
    bool ManyLoops = false;
    for (const DeclRefExpr *Ref : referencesTo(Var)) {
      const Expr *Cur = Ref;
      DynTypedNode Parent = climb(Cur);
      const auto *ParentExpr = Parent.get<Expr>();
      if (!ParentExpr)
        return unknown("its iterator " + Name +
                       " is used in a way ddpify does not follow");
      if (isRead(ParentExpr, Cur)) {
        Reads.push_back(ParentExpr);
        continue;
      }
      if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(ParentExpr)) {
        if (Op->getOperator() == OO_PlusPlus && wraps(Op->getArg(0), Cur)) {
          Advances.push_back(Op);
          continue;
        }
        if (isComparison(Op, Cur)) {
          if (const Stmt *Walking = walkingLoop(Op)) {
            ManyLoops |= Loop && Loop != Walking;
            Loop = Walking;
          }
          continue;
        }
        if (Op->getOperator() == OO_Equal && Op->getNumArgs() == 2) {
          if (wraps(Op->getArg(1), Cur)) {
            // `other = it`: a second iterator, not followed.
            return unknown("its iterator " + Name + " is copied");
          }
          // `it = l->begin()`: re-taken; `it = std::next(it)`: advanced
          // (the right side's reference says so).
          if (isBeginCall(Op->getArg(1)))
            Retakes.push_back(Op);
          else if (!(isa<CallExpr>(stripParensAndImplicit(Op->getArg(1))) &&
                     isStdCall(
                         cast<CallExpr>(stripParensAndImplicit(Op->getArg(1))),
                         "next")))
            return unknown("its iterator " + Name +
                           " is assigned in a way ddpify does not follow");
          continue;
        }
      }
      if (const auto *Call = dyn_cast<CallExpr>(ParentExpr))
        if (isStdCall(Call, "advance") && Call->getNumArgs() >= 1 &&
            wraps(Call->getArg(0), Cur)) {
          Advances.push_back(Call);
          continue;
        }
      // The std::next of `it = std::next(it)`: climb stops at the assignment.
      if (Cur != Ref && isa<CallExpr>(Cur))
        if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(ParentExpr))
          if (Op->getOperator() == OO_Equal && Op->getNumArgs() == 2 &&
              wraps(Op->getArg(1), Cur)) {
            Advances.push_back(Cur);
            continue;
          }
      return unknown("its iterator " + Name +
                     " is used in a way ddpify does not follow");
    }
    IteratorUse Use;
    if (Reads.empty())
      return Use;
    const Stmt *Body = nullptr;
    if (const auto *For = dyn_cast_or_null<ForStmt>(Loop))
      Body = For->getBody();
    else if (const auto *While = dyn_cast_or_null<WhileStmt>(Loop))
      Body = While->getBody();
    bool IsPass = Body && !ManyLoops && !leavesEarly(Body) && !Advances.empty();
    for (const Expr *Read : Reads)
      IsPass &= contains(Body ? Body : Read, Read, Context);
    for (const Expr *Advance : Advances)
      IsPass &= contains(Loop ? Loop : Advance, Advance, Context);
    for (const Expr *Retake : Retakes)
      IsPass &= !contains(Body ? Body : Retake, Retake, Context);
    if (IsPass) {
      Use.K = IteratorUse::Pass;
      Use.Loop = Loop;
      Use.Body = Body;
      return Use;
    }
    Use.K = IteratorUse::Draws;
    for (const Expr *Read : Reads)
      addRegion(Use, DynTypedNode::create(*Read));
    return Use;
  }

  ASTContext &Context;
};

std::string qualifiedSpelling(QualType Type, const ASTContext &Context) {
  PrintingPolicy Policy(Context.getLangOpts());
  Policy.FullyQualifiedName = true;
  Policy.SuppressScope = false;
  return Type.getAsString(Policy);
}

} // namespace

IteratorUse iteratorUse(ASTContext &Context, const CXXMemberCallExpr *Begin) {
  return IteratorFollower(Context).fromBegin(Begin);
}

namespace {

/// Whether Var, a local, keeps its initial value: const, or every use of
/// it in its function reads its value (no assignment, increment, address or
/// reference taken).
bool neverChanged(ASTContext &Context, const VarDecl *Var) {
  if (!Var->isLocalVarDecl() || Var->getType()->isReferenceType())
    return false;
  if (Var->getType().isConstQualified())
    return true;
  const auto *Function =
      dyn_cast_or_null<FunctionDecl>(Var->getParentFunctionOrMethod());
  if (!Function || !Function->getBody())
    return false;
  std::vector<const DeclRefExpr *> Refs;
  collectReferences(Function->getBody(), Var, Refs);
  for (const DeclRefExpr *Ref : Refs) {
    DynTypedNode Parent = parentOf(Context, DynTypedNode::create(*Ref));
    while (Parent.get<ParenExpr>())
      Parent = parentOf(Context, Parent);
    const auto *Cast = Parent.get<ImplicitCastExpr>();
    if (!Cast || Cast->getCastKind() != CK_LValueToRValue)
      return false;
  }
  return true;
}

const Expr *countOf(ASTContext &Context, const Expr *E, int Depth) {
  E = stripCasts(E);
  if (!E || Depth > 2)
    return nullptr;
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
    const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
    if (!Var || !Var->getInit() || !neverChanged(Context, Var))
      return nullptr;
    return countOf(Context, Var->getInit(), Depth + 1);
  }
  const auto *Call = dyn_cast<CallExpr>(E);
  if (!Call)
    return nullptr;
  if (const Expr *Loader = distanceLoader(Call))
    return Loader;
  // A helper `return std::distance(loader.begin(), loader.end());` over one
  // of its parameters: the argument is the loader counted.
  const FunctionDecl *Callee = Call->getDirectCallee();
  if (!Callee || isa<CXXOperatorCallExpr>(Call))
    return nullptr;
  const FunctionDecl *Definition = nullptr;
  const Stmt *Body = Callee->getBody(Definition);
  const auto *Block = dyn_cast_or_null<CompoundStmt>(Body);
  if (!Block || Block->size() != 1)
    return nullptr;
  const auto *Return = dyn_cast<ReturnStmt>(Block->body_front());
  if (!Return || !Return->getRetValue())
    return nullptr;
  const Expr *Counted = countOf(Context, Return->getRetValue(), Depth + 1);
  const auto *Param = dyn_cast_or_null<ParmVarDecl>(loaderHolderOf(Counted));
  if (!Param || Param->getFunctionScopeIndex() >= Call->getNumArgs())
    return nullptr;
  return Call->getArg(Param->getFunctionScopeIndex());
}

} // namespace

const Expr *loaderCountOf(ASTContext &Context, const Expr *E) {
  return E ? countOf(Context, E, 0) : nullptr;
}

const Expr *iteratorPassLoader(ASTContext &Context, const Stmt *Loop,
                               const VarDecl **Iterator) {
  return Loop ? IteratorFollower(Context).passLoader(Loop, Iterator) : nullptr;
}

std::string parameterKey(const FunctionDecl *Function, unsigned Index,
                         const ASTContext &Context) {
  std::string Key = Function->getQualifiedNameAsString() + "(";
  for (const ParmVarDecl *Param : Function->parameters())
    Key +=
        qualifiedSpelling(Param->getType().getCanonicalType(), Context) + ",";
  if (const auto *Method = dyn_cast<CXXMethodDecl>(Function))
    Key += Method->isConst() ? ") const#" : ")#";
  else
    Key += ")#";
  return Key + std::to_string(Index);
}

std::string loaderHolderKey(const ValueDecl *Holder,
                            const ASTContext &Context) {
  if (const auto *Param = dyn_cast<ParmVarDecl>(Holder))
    if (const auto *Function =
            dyn_cast_or_null<FunctionDecl>(Param->getParentFunctionOrMethod()))
      return "param:" +
             parameterKey(Function, Param->getFunctionScopeIndex(), Context);
  if (isa<FieldDecl>(Holder))
    return "field:" + Holder->getQualifiedNameAsString();
  const SourceManager &SM = Context.getSourceManager();
  SourceLocation Loc = SM.getExpansionLoc(Holder->getLocation());
  return "var:" + SM.getFilename(Loc).str() + ":" +
         std::to_string(SM.getFileOffset(Loc));
}

const ValueDecl *loaderHolderOf(const Expr *Loader) {
  const Expr *E = Loader ? stripParensAndImplicit(Loader) : nullptr;
  if (const auto *Deref = dyn_cast_or_null<UnaryOperator>(E))
    if (Deref->getOpcode() == UO_Deref)
      E = stripParensAndImplicit(Deref->getSubExpr());
  if (const auto *Op = dyn_cast_or_null<CXXOperatorCallExpr>(E))
    if ((Op->getOperator() == OO_Star || Op->getOperator() == OO_Arrow) &&
        Op->getNumArgs() == 1)
      E = stripParensAndImplicit(Op->getArg(0));
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E))
    return dyn_cast<VarDecl>(Ref->getDecl());
  if (const auto *Member = dyn_cast_or_null<MemberExpr>(E))
    return dyn_cast<FieldDecl>(Member->getMemberDecl());
  return nullptr;
}

std::string unshardedLoaderFact(llvm::StringRef HolderKey) {
  return ("ddp-loader-unsharded:" + HolderKey).str();
}

} // namespace ddpify
