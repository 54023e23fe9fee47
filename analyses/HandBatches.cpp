//===- HandBatches.cpp - Loops that cut their batches by hand -------------===//
//
// A training loop with no data loader that cuts its batches from tensors
// itself is sharded like a loader (rule R4) where ddpify can show that the
// counter only picks the batch:
//
//   for (int64_t i = A; i < N; i += S) { ... x.narrow(0, i, len) ... }
//   for (int64_t i : ddp::batch_starts(A, N, S)) { ... }
//
// The header may also be `i <= N`, `i + K <= N` (whole batches only),
// `N > i`, `i != N` (step 1), stepped by `++i`, `i++` or `i = i + S`.
// A while loop whose body's last statement steps a counter declared before
// it, read by nothing after it, keeps its body:
//
//   while (i < N) { ...; i += S; }
//   for (const auto ddp_i : ddp::batch_starts(i, N, S)) { i = ddp_i; ...;
//   i += S; }
//
// Shown when: the counter is declared by the loop (an integer); N, K and S
// change nowhere in the loop and call nothing but size queries; the loop
// trains (it calls backward(), here or through the program's functions);
// nothing leaves it early (no break, continue, return or goto of its own:
// ranks would step a different number of times); no tensor carries over from
// one batch to the next (a recurrent model's hidden state: each rank would
// feed it batches that do not follow each other); and every use of the
// counter ends, through arithmetic and local integers that do nothing else,
// in the arguments of narrow, slice, index_select, index,
// at::indexing::Slice or std::min/std::max (a batch's bound or size), or as
// the position in a std::vector of tensors or batches (`xs[i]` of
// `x.split(batch)`, `batches[i]` of input/target pairs),
// or only shows or decides progress output (`if (b % 10 == 0) std::cout <<
// ...`, a printf of the counter: statements that print values that do no
// work, and reset a figure only they print). Sharded, the main process
// prints the progress of its own batches.
// Anything else stays as it is: correct (every rank trains on every batch), and
// the flow checks' `non-torch-loader` note says the speed-up is lost and why.
//
//===----------------------------------------------------------------------===//

#include "ddpify/HandBatches.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Work.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Analysis/Analyses/ExprMutationAnalyzer.h"
#include "clang/Lex/Lexer.h"
#include <functional>
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

/// Where a value lands in a call that cuts a batch out of a tensor.
enum class CutArgument { None, Start, Extent };

/// The role of argument Index of Call, when Call cuts a tensor: the start
/// of `narrow(dim, start, length)`, `slice(dim, start, end)`,
/// `select(dim, index)`, `index({i, ...})` (and their at::/torch:: forms,
/// whose tensor comes first), or their length or end.
CutArgument cutArgument(const CallExpr *Call, unsigned Index) {
  std::string Callee = calleeName(Call);
  llvm::StringRef Name = Callee;
  bool Member = isa<CXXMemberCallExpr>(Call);
  if (!Member) {
    if (Index == 0 ||
        !(Name.consume_front("at::") || Name.consume_front("torch::")))
      return CutArgument::None;
    --Index; // the tensor
  }
  if (Name == "narrow" || Name == "slice")
    return Index == 1   ? CutArgument::Start
           : Index == 2 ? CutArgument::Extent
                        : CutArgument::None;
  if (Name == "select")
    return Index == 1 ? CutArgument::Start : CutArgument::None;
  if (Name == "index" && Member)
    return Index == 0 ? CutArgument::Start : CutArgument::None;
  return CutArgument::None;
}

/// Whether T (or what it refers to) is at::Tensor.
bool isTensorType(QualType T) {
  const auto *Record = T.getNonReferenceType()->getAsCXXRecordDecl();
  return Record && Record->getQualifiedNameAsString() == "at::Tensor";
}

/// Whether E is of type at::Tensor.
bool isTensor(const Expr *E) { return isTensorType(E->getType()); }

/// A call that computes a batch's bound or size.
bool computesBound(const CallExpr *Call) {
  std::string Name = calleeName(Call);
  return Name == "std::min" || Name == "std::max";
}

/// Whether T holds a tensor: a tensor, or a pair, tuple or vector of them.
bool holdsTensor(QualType T) {
  if (isTensorType(T))
    return true;
  const auto *Record = T.getNonReferenceType()->getAsCXXRecordDecl();
  if (const auto *Spec =
          dyn_cast_or_null<ClassTemplateSpecializationDecl>(Record))
    for (const TemplateArgument &Arg : Spec->getTemplateArgs().asArray())
      if (Arg.getKind() == TemplateArgument::Type &&
          holdsTensor(Arg.getAsType()))
        return true;
  return false;
}

/// Whether a list element of type T is a batch: it holds tensors (a tensor,
/// a pair or tuple of them, an example) or is the program's own struct with
/// a field that does (`struct Batch { torch::Tensor x, y; };`).
bool isBatchElement(QualType T) {
  if (holdsTensor(T))
    return true;
  const auto *Record = T.getNonReferenceType()->getAsCXXRecordDecl();
  if (!Record || !Record->hasDefinition() ||
      isa<ClassTemplateSpecializationDecl>(Record))
    return false;
  return llvm::any_of(Record->fields(), [](const FieldDecl *Field) {
    return holdsTensor(Field->getType());
  });
}

/// Whether T is a std::vector whose elements are batches: cut beforehand
/// (`x.split(batch)`, pairs of inputs and targets, examples, structs).
bool isBatchList(QualType T) {
  const auto *Record = T.getNonReferenceType()->getAsCXXRecordDecl();
  const auto *Spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(Record);
  return Spec && Spec->getQualifiedNameAsString() == "std::vector" &&
         Spec->getTemplateArgs().size() >= 1 &&
         Spec->getTemplateArgs()[0].getKind() == TemplateArgument::Type &&
         isBatchElement(Spec->getTemplateArgs()[0].getAsType());
}

/// Whether E is `c.begin()` (or cbegin, `std::begin(c)`) of a standard
/// sequence: a list of sample indices or samples an offset walks.
bool isSequenceBegin(const Expr *E) {
  E = E->IgnoreImplicit();
  if (const auto *Temporary = dyn_cast<MaterializeTemporaryExpr>(E))
    E = Temporary->getSubExpr()->IgnoreImplicit();
  const Expr *Object = nullptr;
  std::string Name;
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E)) {
    Object = Member->getImplicitObjectArgument();
    Name = calleeName(Member);
    size_t Colons = Name.rfind("::");
    if (Colons != std::string::npos)
      Name = Name.substr(Colons + 2);
  } else if (const auto *Call = dyn_cast<CallExpr>(E)) {
    Name = calleeName(Call);
    if (Call->getNumArgs() == 1)
      Object = Call->getArg(0);
  }
  if (!Object || (Name != "begin" && Name != "cbegin" && Name != "std::begin" &&
                  Name != "std::cbegin"))
    return false;
  const auto *Record =
      Object->getType().getNonReferenceType()->getAsCXXRecordDecl();
  if (!Record)
    return false;
  std::string Container = Record->getQualifiedNameAsString();
  return Container == "std::vector" || Container == "std::deque" ||
         Container == "std::array";
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
  /// Except, when given, is a statement of Body not counted (a while loop's
  /// own step, `i += batch;`).
  explicit Invariance(const Stmt *Body, const Stmt *Except = nullptr)
      : Except(Except) {
    collectAssigned(Body);
  }

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
    if (!S || S == Except)
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

  const Stmt *Except;
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

/// Every reference to Counter in S, except inside Except.
void referencesTo(const Stmt *S, const VarDecl *Counter,
                  std::vector<const DeclRefExpr *> &Out,
                  const Stmt *Except = nullptr) {
  if (!S || S == Except)
    return;
  if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
    if (Ref->getDecl() == Counter)
      Out.push_back(Ref);
  for (const Stmt *Child : S->children())
    referencesTo(Child, Counter, Out, Except);
}

/// Progress output inside the loop: statements that only print, under
/// conditions that do no work. A counter may decide them (`if (b % 10 == 0)
/// std::cout << ...`) or be printed: once sharded, the counter differs by
/// rank, but what it decides then only changes which lines a rank would
/// print (R7 prints the main process's), never what any rank computes.
class ProgressOutput {
public:
  ProgressOutput(ASTContext &Context, const Stmt *Body)
      : Context(Context), SM(Context.getSourceManager()), Body(Body) {}

  /// Whether Use lies in an output statement that does no work, or in the
  /// condition of an `if` whose branches only print.
  bool holds(const DeclRefExpr *Use) {
    DynTypedNode Parent;
    const Expr *Full = fullExpression(DynTypedNode::create(*Use), Parent);
    if (!Full)
      return false;
    if (const auto *If = Parent.get<IfStmt>())
      if (If->getCond() == Full)
        return printingIf(If, /*Figures=*/true);
    return onlyPrints(Full, /*Figures=*/false);
  }

private:
  /// The expression of Node's statement (Node itself, or the outermost
  /// expression around it) and, in Parent, what holds it; null when Node is
  /// not inside one (a declaration's initialiser).
  const Expr *fullExpression(DynTypedNode Node, DynTypedNode &Parent) {
    while (true) {
      DynTypedNodeList Parents = Context.getParents(Node);
      if (Parents.empty())
        return nullptr;
      if (!Parents[0].get<Expr>()) {
        Parent = Parents[0];
        return Node.get<Expr>();
      }
      Node = Parents[0];
    }
  }

  bool isProgramFunction(const FunctionDecl *Callee) const {
    std::string Qualified = Callee->getQualifiedNameAsString();
    llvm::StringRef Name = Qualified;
    if (Name.starts_with("std::") || Name.starts_with("at::") ||
        Name.starts_with("c10::") || Name.starts_with("torch::"))
      return false;
    // A C library builtin (printf) may be declared with no location.
    SourceLocation At = Callee->getLocation();
    return !Callee->getBuiltinID() && At.isValid() &&
           !SM.isInSystemHeader(SM.getExpansionLoc(At));
  }

  bool doesNoWork(const Stmt *S) const {
    return !containsWork(
        S, [&](const FunctionDecl *F) { return isProgramFunction(F); });
  }

  /// An `if` with no init statement or variable whose condition does no work
  /// and whose branches only print (see onlyPrints).
  bool printingIf(const IfStmt *If, bool Figures) {
    return !If->getInit() && !If->getConditionVariable() &&
           doesNoWork(If->getCond()) && onlyPrints(If->getThen(), Figures) &&
           onlyPrints(If->getElse(), Figures);
  }

  /// Whether S only prints: output statements that do no work, in blocks.
  /// With Figures, also `if`s that only print and resets of a figure that
  /// only they print (`running_loss = 0.0;` after printing it).
  bool onlyPrints(const Stmt *S, bool Figures) {
    if (!S || isa<NullStmt>(S))
      return true;
    if (const auto *Block = dyn_cast<CompoundStmt>(S))
      return llvm::all_of(Block->body(), [&](const Stmt *Child) {
        return onlyPrints(Child, Figures);
      });
    if (const auto *If = dyn_cast<IfStmt>(S))
      return Figures && printingIf(If, Figures);
    const auto *E = dyn_cast<Expr>(S);
    if (!E)
      return false;
    if (isOutputStatement(E))
      return doesNoWork(E);
    const auto *Assign = Figures ? dyn_cast<BinaryOperator>(strip(E)) : nullptr;
    return Assign && Assign->isAssignmentOp() && doesNoWork(Assign->getRHS()) &&
           isPrintedFigure(Assign->getLHS());
  }

  /// A local number that the loop only sums, resets and prints, and that
  /// nothing reads outside the loop: a rank's own progress figure.
  bool isPrintedFigure(const Expr *Target) {
    const auto *Ref = dyn_cast_or_null<DeclRefExpr>(strip(Target));
    const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
    if (!Var || !Var->isLocalVarDecl() || !Var->getType()->isArithmeticType())
      return false;
    const auto *Function =
        dyn_cast_or_null<FunctionDecl>(Var->getParentFunctionOrMethod());
    if (!Function || !Function->getBody())
      return false;
    std::vector<const DeclRefExpr *> Uses;
    referencesTo(Function->getBody(), Var, Uses);
    SourceRange Inside = Body->getSourceRange();
    for (const DeclRefExpr *Use : Uses) {
      if (SM.isBeforeInTranslationUnit(Use->getBeginLoc(), Inside.getBegin()) ||
          SM.isBeforeInTranslationUnit(Inside.getEnd(), Use->getBeginLoc()))
        return false;
      if (!isAssignedOrPrinted(Use))
        return false;
    }
    return true;
  }

  /// A figure's use: assigned (from values that do no work), or read in an
  /// output statement or in the condition of an `if` that only prints.
  bool isAssignedOrPrinted(const DeclRefExpr *Use) {
    DynTypedNode Node = DynTypedNode::create(*Use);
    DynTypedNodeList Parents = Context.getParents(Node);
    while (!Parents.empty() && Parents[0].get<ImplicitCastExpr>()) {
      Node = Parents[0];
      Parents = Context.getParents(Node);
    }
    if (!Parents.empty())
      if (const auto *Assign = Parents[0].get<BinaryOperator>())
        if (Assign->isAssignmentOp() && strip(Assign->getLHS()) == Use)
          return doesNoWork(Assign->getRHS());
    DynTypedNode Parent;
    const Expr *Full = fullExpression(Node, Parent);
    if (!Full)
      return false;
    if (const auto *If = Parent.get<IfStmt>())
      if (If->getCond() == Full)
        return doesNoWork(Full) && onlyPrints(If->getThen(), false) &&
               onlyPrints(If->getElse(), false);
    return onlyPrints(Full, /*Figures=*/false);
  }

  ASTContext &Context;
  const SourceManager &SM;
  const Stmt *Body;
};

/// Whether Use only steps its own variable: the operand of `++`/`--`, the
/// target of an assignment, or read in the value assigned to it (`k = k + 1`).
bool isOwnStep(ASTContext &Context, const DeclRefExpr *Use) {
  DynTypedNode Node = DynTypedNode::create(*Use);
  for (int Steps = 0; Steps < 8; ++Steps) {
    DynTypedNodeList Parents = Context.getParents(Node);
    if (Parents.empty())
      return false;
    // `++k;` whose value nothing reads (not `ys[k++]`).
    if (const auto *Unary = Parents[0].get<UnaryOperator>()) {
      DynTypedNodeList Above = Context.getParents(Parents[0]);
      return Unary->isIncrementDecrementOp() && !Above.empty() &&
             !Above[0].get<Expr>();
    }
    if (const auto *Binary = Parents[0].get<BinaryOperator>()) {
      if (Binary->isAssignmentOp() && varOf(Binary->getLHS()) == Use->getDecl())
        return true;
      if (!Binary->isAdditiveOp() && !Binary->isMultiplicativeOp())
        return false;
    } else if (!Parents[0].get<ImplicitCastExpr>() &&
               !Parents[0].get<ParenExpr>()) {
      return false;
    }
    Node = Parents[0];
  }
  return false;
}

/// Whether Var is declared inside Body (a fresh one each iteration).
bool declaredIn(const VarDecl *Var, const Stmt *Body) {
  return Var->getBeginLoc() >= Body->getBeginLoc() &&
         Var->getBeginLoc() <= Body->getEndLoc();
}

/// Whether the counter's uses only pick batches: each ends, through
/// arithmetic and local integers that do nothing else, in an argument of a
/// call that cuts a tensor or computes a bound, or as the position in a
/// vector of tensors. Cuts is set when one does cut.
class BatchPicking {
public:
  /// Except: as Invariance's.
  BatchPicking(ASTContext &Context, const Stmt *Body, const Invariance &Fixed,
               const Stmt *Except = nullptr)
      : Context(Context), Body(Body), Except(Except), Fixed(Fixed),
        Progress(Context, Body) {}

  bool onlyPicks(const VarDecl *Var, int Depth = 0) {
    if (Depth > 4)
      return false;
    std::vector<const DeclRefExpr *> Uses;
    referencesTo(Body, Var, Uses, Except);
    bool Only = true;
    for (const DeclRefExpr *Use : Uses)
      Only &= usePicks(Use, Depth);
    return Only;
  }

  bool Cuts = false;

private:
  bool usePicks(const DeclRefExpr *Use, int Depth) {
    if (Progress.holds(Use))
      return true;
    DynTypedNode Node = DynTypedNode::create(*Use);
    for (int Steps = 0; Steps < 24; ++Steps) {
      DynTypedNodeList Parents = Context.getParents(Node);
      if (Parents.empty())
        return false;
      // `const int64_t end = std::min(i + batch, n);`: a local integer
      // that must itself only pick batches.
      if (const auto *Local = Parents[0].get<VarDecl>()) {
        if (!Local->isLocalVarDecl() || !Local->getType()->isIntegerType() ||
            Fixed.assigns(Local))
          return false;
        return onlyPicks(Local, Depth + 1);
      }
      const Expr *Parent = Parents[0].get<Expr>();
      if (!Parent)
        return false;
      const Expr *Child = Node.get<Expr>();
      // `perm.begin() + i`, `std::next(perm.begin(), i)`: a position in a
      // list of sample indices (or samples) that a range then copies.
      if (const auto *Plus = dyn_cast<CXXOperatorCallExpr>(Parent))
        if (Plus->getOperator() == OO_Plus && Plus->getNumArgs() == 2 &&
            Plus->getArg(1) == Child && isSequenceBegin(Plus->getArg(0)))
          return iteratorPicks(Plus);
      if (const auto *Next = dyn_cast<CallExpr>(Parent))
        if (calleeName(Next) == "std::next" && Next->getNumArgs() == 2 &&
            Next->getArg(1) == Child && isSequenceBegin(Next->getArg(0)))
          return iteratorPicks(Next);
      if (const auto *Subscript = dyn_cast<CXXOperatorCallExpr>(Parent)) {
        // `xs[i]` of `auto xs = x.split(batch);`, `batches[i]` of a vector
        // of input/target pairs, or sample i of `x[i]`.
        if (Subscript->getOperator() != OO_Subscript ||
            Subscript->getNumArgs() != 2 || Subscript->getArg(1) != Child ||
            !(isBatchList(Subscript->getArg(0)->getType()) ||
              isTensor(Subscript->getArg(0))))
          return false;
        Cuts = true;
        return true;
      }
      if (const auto *Call = dyn_cast<CallExpr>(Parent)) {
        // The object of `x.narrow(...)` is the tensor, not a bound.
        if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
          if (Member->getImplicitObjectArgument() == Child)
            return false;
        if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
          if (calleeName(Call) == "at" &&
              isBatchList(Member->getImplicitObjectArgument()->getType())) {
            Cuts = true;
            return true;
          }
        // A batch's bound or size (`std::min(batch, n - i)`) may also weigh
        // a metric: its value is this rank's batch's.
        if (computesBound(Call))
          return true;
        for (unsigned I = 0; I < Call->getNumArgs(); ++I)
          if (Call->getArg(I) == Child) {
            CutArgument Role = cutArgument(Call, I);
            // Only a start makes the batches disjoint: a counter in the
            // length alone (`x.narrow(0, 0, (epoch + 1) * 100)`) grows one
            // window, which ranks must not split.
            Cuts |= Role == CutArgument::Start;
            return Role != CutArgument::None;
          }
        return false;
      } else if (isSliceConstruction(Parent)) {
        const auto *Construct = cast<CXXConstructExpr>(Parent);
        if (Construct->getNumArgs() > 0 && Construct->getArg(0) == Child)
          Cuts = true;
        return true;
      } else if (const auto *Binary = dyn_cast<BinaryOperator>(Parent)) {
        // `end - start`: the size of the batch, which may weigh a metric as
        // a bound does.
        if (isBatchSize(Binary))
          return true;
        if (!Binary->isAdditiveOp() && !Binary->isMultiplicativeOp())
          return false;
      } else if (!isa<ImplicitCastExpr, ParenExpr, CXXFunctionalCastExpr,
                      CStyleCastExpr, CXXStaticCastExpr,
                      MaterializeTemporaryExpr, CXXBindTemporaryExpr,
                      ExprWithCleanups, CXXConstructExpr, InitListExpr,
                      CXXStdInitializerListExpr>(Parent)) {
        return false;
      }
      Node = Parents[0];
    }
    return false;
  }

  /// Whether the iterator Position (an offset from a sequence's begin) only
  /// bounds a range that is copied: the first or last iterator of a range
  /// constructor (`std::vector<int64_t> chunk(first, last)`), of `assign`
  /// or of `std::copy`, possibly moved on by a fixed amount first
  /// (`first + batch`). A first iterator cuts the batch.
  bool iteratorPicks(const Expr *Position) {
    DynTypedNode Node = DynTypedNode::create(*Position);
    for (int Steps = 0; Steps < 12; ++Steps) {
      DynTypedNodeList Parents = Context.getParents(Node);
      const Expr *Parent = Parents.empty() ? nullptr : Parents[0].get<Expr>();
      const Expr *Child = Node.get<Expr>();
      if (!Parent || !Child)
        return false;
      if (const auto *Plus = dyn_cast<CXXOperatorCallExpr>(Parent)) {
        if (Plus->getOperator() != OO_Plus || Plus->getNumArgs() != 2 ||
            Plus->getArg(0) != Child || !Fixed.holds(Plus->getArg(1)))
          return false;
      } else if (const auto *Construct = dyn_cast<CXXConstructExpr>(Parent)) {
        // A copy of the iterator goes on up; a range construction ends here.
        if (Construct->getNumArgs() >= 2 && isRangeHolder(Construct->getType()))
          return rangeArgument(Construct->arguments(), Child);
        if (Construct->getNumArgs() != 1)
          return false;
      } else if (const auto *Call = dyn_cast<CallExpr>(Parent)) {
        std::string Name = calleeName(Call);
        if (Name == "std::copy")
          return rangeArgument(Call->arguments(), Child);
        const auto *Member = dyn_cast<CXXMemberCallExpr>(Call);
        if (Member && Member->getImplicitObjectArgument() != Child &&
            llvm::StringRef(Name).ends_with("assign") &&
            isRangeHolder(Member->getImplicitObjectArgument()->getType()))
          return rangeArgument(Call->arguments(), Child);
        return false;
      } else if (!isa<ImplicitCastExpr, ParenExpr, MaterializeTemporaryExpr,
                      CXXBindTemporaryExpr, ExprWithCleanups>(Parent)) {
        return false;
      }
      Node = Parents[0];
    }
    return false;
  }

  /// A first (cutting) or last iterator of a range's arguments.
  template <typename Range> bool rangeArgument(Range Arguments, const Expr *E) {
    unsigned I = 0;
    for (const Expr *Argument : Arguments) {
      if (Argument == E && I < 2) {
        Cuts |= I == 0;
        return true;
      }
      ++I;
    }
    return false;
  }

  static bool isRangeHolder(QualType T) {
    const auto *Record = T.getNonReferenceType()->getAsCXXRecordDecl();
    if (!Record)
      return false;
    std::string Name = Record->getQualifiedNameAsString();
    return Name == "std::vector" || Name == "std::deque";
  }

  /// `end - start`, where the body declares `end` from `start`.
  bool isBatchSize(const BinaryOperator *Binary) const {
    if (Binary->getOpcode() != BO_Sub)
      return false;
    const VarDecl *End = varOf(Binary->getLHS());
    const VarDecl *Start = varOf(Binary->getRHS());
    if (!End || !Start || !End->getType()->isIntegerType() ||
        !End->isLocalVarDecl() || !declaredIn(End, Body) || !End->getInit() ||
        Fixed.assigns(End))
      return false;
    std::vector<const DeclRefExpr *> Reads;
    referencesTo(End->getInit(), Start, Reads);
    return !Reads.empty();
  }

  ASTContext &Context;
  const Stmt *Body;
  const Stmt *Except;
  const Invariance &Fixed;
  ProgressOutput Progress;
};

/// A variable of the enclosing scope that holds a tensor and that the loop
/// reads before it assigns it, or assigns from itself: a value carried from
/// one batch to the next (`hidden = model->forward(x, hidden)`). Sums made
/// with `+=` are not carried state.
const VarDecl *carriedTensor(const Stmt *Body) {
  struct Assignment {
    const VarDecl *Var;
    const Expr *Value;
    SourceLocation At;
  };
  std::vector<Assignment> Assignments;
  std::function<void(const Stmt *)> Collect = [&](const Stmt *S) {
    if (!S || isa<LambdaExpr>(S))
      return;
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(S)) {
      if (Op->getOperator() == OO_Equal && Op->getNumArgs() == 2)
        if (const VarDecl *Var = varOf(Op->getArg(0)))
          Assignments.push_back({Var, Op->getArg(1), Op->getBeginLoc()});
    } else if (const auto *Binary = dyn_cast<BinaryOperator>(S)) {
      if (Binary->getOpcode() == BO_Assign)
        if (const VarDecl *Var = varOf(Binary->getLHS()))
          Assignments.push_back({Var, Binary->getRHS(), Binary->getBeginLoc()});
    }
    for (const Stmt *Child : S->children())
      Collect(Child);
  };
  Collect(Body);
  for (const Assignment &A : Assignments) {
    const VarDecl *Var = A.Var;
    if (!holdsTensor(Var->getType()) || declaredIn(Var, Body))
      continue;
    std::vector<const DeclRefExpr *> Reads;
    referencesTo(A.Value, Var, Reads);
    if (!Reads.empty())
      return Var;
    // A read before the first assignment in the body's order.
    SourceLocation First = A.At;
    for (const Assignment &Other : Assignments)
      if (Other.Var == Var && Other.At < First)
        First = Other.At;
    std::vector<const DeclRefExpr *> Uses;
    referencesTo(Body, Var, Uses);
    for (const DeclRefExpr *Use : Uses)
      if (Use->getBeginLoc() < First)
        return Var;
  }
  return nullptr;
}

/// An integer of the enclosing scope that the loop steps (`++seen`,
/// `k += 1`) and reads for anything but stepping it or printing progress:
/// once sharded, its count would no longer follow the batches a rank takes
/// (`ys[k++]` beside the loop's own batch pairs other samples).
const VarDecl *countedOutside(ASTContext &Context, const Stmt *Body,
                              const Invariance &Fixed) {
  std::set<const VarDecl *> Checked;
  ProgressOutput Progress(Context, Body);
  std::function<const VarDecl *(const Stmt *)> Find =
      [&](const Stmt *S) -> const VarDecl * {
    if (!S || isa<LambdaExpr>(S))
      return nullptr;
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S)) {
      const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
      if (!Var || !Var->getType()->isIntegerType() || !Fixed.assigns(Var) ||
          declaredIn(Var, Body) || !Checked.insert(Var).second)
        return nullptr;
      std::vector<const DeclRefExpr *> Uses;
      referencesTo(Body, Var, Uses);
      for (const DeclRefExpr *Use : Uses)
        if (!isOwnStep(Context, Use) && !Progress.holds(Use))
          return Var;
      return nullptr;
    }
    for (const Stmt *Child : S->children())
      if (const VarDecl *Found = Find(Child))
        return Found;
    return nullptr;
  };
  return Find(Body);
}

constexpr llvm::StringLiteral StopsEarly =
    "it can stop early (a break, continue, return or goto of its own), so "
    "ranks could step a different number of times";

/// Why a training loop over batches may not be sharded whatever picks its
/// batches: it may stop early, carries state from batch to batch, or counts
/// its batches in a variable it reads. Empty when none holds.
std::string sharedRefusal(ASTContext &Context, const Stmt *Body,
                          const Invariance &Fixed) {
  if (earlyExit(Body, false))
    return StopsEarly.str();
  if (const VarDecl *Carried = carriedTensor(Body))
    return "it carries '" + Carried->getNameAsString() +
           "' from one batch to the next (a hidden state), and each rank's "
           "batches would not follow each other";
  if (const VarDecl *Counted = countedOutside(Context, Body, Fixed))
    return "it counts its batches in '" + Counted->getNameAsString() +
           "' and uses the count for more than progress output, which would "
           "no longer follow the batches each rank takes";
  return "";
}

constexpr llvm::StringLiteral NoStep =
    "it steps no optimizer itself: its batches are pieces of one step (as in "
    "gradient accumulation), and split among ranks each step's gradient "
    "would change";

} // namespace

const Stmt *enclosingBatchLoop(ASTContext &Context, const Stmt *Loop,
                               TrainingOracle &Oracle) {
  DynTypedNodeList Parents = Context.getParents(*Loop);
  for (int Steps = 0; Steps < 64 && !Parents.empty(); ++Steps) {
    const auto *S = Parents[0].get<Stmt>();
    if (!S)
      return nullptr; // The function, or a declaration's initialiser.
    if (const auto *Range = dyn_cast<CXXForRangeStmt>(S)) {
      const Expr *Init = Range->getRangeInit();
      if (Init &&
          (isDataLoaderType(Init->getType()) || isShardedBatchLoop(Range) ||
           handBatchList(Context, Range, Oracle)))
        return S;
    } else if (isa<ForStmt, WhileStmt>(S)) {
      if (handBatchLoop(Context, S, Oracle).Loop)
        return S;
    }
    Parents = Context.getParents(*S);
  }
  return nullptr;
}

namespace {

/// The step Inc makes of Counter: `i += S`, `i = i + S`, `i = S + i` (S in
/// StepBy), `++i` or `i++` (UnitStep). False when it is none of these.
bool counterStep(const Expr *Inc, const VarDecl *Counter, const Expr *&StepBy,
                 bool &UnitStep) {
  Inc = Inc ? Inc->IgnoreImplicit() : nullptr;
  StepBy = nullptr;
  UnitStep = false;
  if (const auto *Step = dyn_cast_or_null<CompoundAssignOperator>(Inc)) {
    if (Step->getOpcode() == BO_AddAssign && varOf(Step->getLHS()) == Counter)
      StepBy = Step->getRHS();
  } else if (const auto *Step = dyn_cast_or_null<UnaryOperator>(Inc)) {
    UnitStep = Step->isIncrementOp() && varOf(Step->getSubExpr()) == Counter;
  } else if (const auto *Step = dyn_cast_or_null<BinaryOperator>(Inc)) {
    const auto *Sum = dyn_cast<BinaryOperator>(strip(Step->getRHS()));
    if (Step->getOpcode() == BO_Assign && varOf(Step->getLHS()) == Counter &&
        Sum && Sum->getOpcode() == BO_Add) {
      if (varOf(Sum->getLHS()) == Counter)
        StepBy = Sum->getRHS();
      else if (varOf(Sum->getRHS()) == Counter)
        StepBy = Sum->getLHS();
    }
  }
  return StepBy || UnitStep;
}

/// S of `i + S` or `S + i`.
const Expr *addedTo(const Expr *E, const VarDecl *Counter) {
  const auto *Sum = dyn_cast_or_null<BinaryOperator>(strip(E));
  if (!Sum || Sum->getOpcode() != BO_Add)
    return nullptr;
  if (varOf(Sum->getLHS()) == Counter)
    return Sum->getRHS();
  if (varOf(Sum->getRHS()) == Counter)
    return Sum->getLHS();
  return nullptr;
}

/// The step of a while loop over batches, its body's last statement: as
/// counterStep, or `i = end;` where the body declares `end` as `i + S` or
/// `std::min(i + S, M)` (S in StepBy, M in Limit).
bool whileStep(const Stmt *Last, const VarDecl *Counter, const Stmt *Body,
               const Expr *&StepBy, bool &UnitStep, const Expr *&Limit) {
  const auto *Inc = dyn_cast_or_null<Expr>(Last);
  Limit = nullptr;
  if (counterStep(Inc, Counter, StepBy, UnitStep))
    return true;
  const auto *Assign =
      dyn_cast_or_null<BinaryOperator>(Inc ? strip(Inc) : nullptr);
  if (!Assign || Assign->getOpcode() != BO_Assign ||
      varOf(Assign->getLHS()) != Counter)
    return false;
  const VarDecl *End = varOf(Assign->getRHS());
  if (!End || !End->isLocalVarDecl() || !declaredIn(End, Body) ||
      !End->getInit())
    return false;
  const Expr *Init = strip(End->getInit());
  if ((StepBy = addedTo(Init, Counter)))
    return true;
  const auto *Min = dyn_cast<CallExpr>(Init);
  if (!Min || calleeName(Min) != "std::min" || Min->getNumArgs() != 2)
    return false;
  for (unsigned I = 0; I < 2; ++I)
    if ((StepBy = addedTo(Min->getArg(I), Counter))) {
      Limit = Min->getArg(1 - I);
      return true;
    }
  return false;
}

/// Whether every use of Counter outside Loop in its function only assigns it
/// (`start = 0;` before the loop): nothing reads the value it leaves.
bool onlyResetOutside(ASTContext &Context, const VarDecl *Counter,
                      const Stmt *Loop) {
  const auto *Function =
      dyn_cast_or_null<FunctionDecl>(Counter->getParentFunctionOrMethod());
  if (!Function || !Function->getBody())
    return false;
  std::vector<const DeclRefExpr *> Uses;
  referencesTo(Function->getBody(), Counter, Uses, Loop);
  for (const DeclRefExpr *Use : Uses) {
    DynTypedNodeList Parents = Context.getParents(*Use);
    const auto *Assign =
        Parents.empty() ? nullptr : Parents[0].get<BinaryOperator>();
    if (!Assign || Assign->getOpcode() != BO_Assign || Assign->getLHS() != Use)
      return false;
  }
  return true;
}

} // namespace

HandBatchLoop handBatchLoop(ASTContext &Context, const Stmt *Loop,
                            TrainingOracle &Oracle, std::string *Why) {
  HandBatchLoop Result;
  auto Refuse = [&](llvm::StringRef Reason) {
    if (Why)
      *Why = Reason.str();
    return HandBatchLoop();
  };
  const VarDecl *Counter = nullptr;
  const Expr *StepBy = nullptr, *Limit = nullptr, *CondExpr = nullptr;
  const Stmt *Body = nullptr, *OwnStep = nullptr;
  bool UnitStep = false;
  if (const auto *For = dyn_cast<ForStmt>(Loop)) {
    // `for (T i = A; ...; i += S)`
    const auto *Init = dyn_cast_or_null<DeclStmt>(For->getInit());
    if (!Init || !Init->isSingleDecl())
      return HandBatchLoop();
    Counter = dyn_cast<VarDecl>(Init->getSingleDecl());
    if (!Counter || !Counter->getInit())
      return HandBatchLoop();
    if (!counterStep(For->getInc(), Counter, StepBy, UnitStep))
      return HandBatchLoop();
    Body = For->getBody();
    CondExpr = For->getCond();
  } else if (const auto *While = dyn_cast<WhileStmt>(Loop)) {
    // `while (i < N) { ...; i += S; }`: the counter is the condition's, and
    // the body's last statement steps it.
    const auto *Block = dyn_cast_or_null<CompoundStmt>(While->getBody());
    const auto *Cond = dyn_cast_or_null<BinaryOperator>(
        While->getCond() ? strip(While->getCond()) : nullptr);
    if (!Block || Block->body_empty() || !Cond || While->getConditionVariable())
      return HandBatchLoop();
    std::vector<const VarDecl *> Candidates;
    for (const Expr *Side : {Cond->getLHS(), Cond->getRHS()}) {
      Candidates.push_back(varOf(Side));
      if (const auto *Sum = dyn_cast<BinaryOperator>(strip(Side)))
        if (Sum->getOpcode() == BO_Add) {
          Candidates.push_back(varOf(Sum->getLHS()));
          Candidates.push_back(varOf(Sum->getRHS()));
        }
    }
    for (const VarDecl *Var : Candidates)
      if (Var &&
          whileStep(Block->body_back(), Var, Block, StepBy, UnitStep, Limit)) {
        Counter = Var;
        break;
      }
    if (!Counter || !Counter->isLocalVarDecl() || declaredIn(Counter, Block))
      return HandBatchLoop();
    Body = Block;
    CondExpr = While->getCond();
    OwnStep = Block->body_back();
  } else {
    return HandBatchLoop();
  }
  if (!Counter->getType()->isIntegerType() ||
      Counter->getType().isConstQualified())
    return HandBatchLoop();
  // `i < N`, `N > i`, `i <= N`, `i + K <= N`, `i != N` (step 1)
  const auto *Cond =
      dyn_cast_or_null<BinaryOperator>(CondExpr ? strip(CondExpr) : nullptr);
  if (!Cond)
    return HandBatchLoop();
  BinaryOperatorKind Op = Cond->getOpcode();
  const Expr *CounterSide = Cond->getLHS(), *Bound = Cond->getRHS();
  if (Op == BO_GT || Op == BO_GE) {
    std::swap(CounterSide, Bound);
    Op = Op == BO_GT ? BO_LT : BO_LE;
  }
  if (Op == BO_NE && UnitStep)
    Op = BO_LT;
  if (Op != BO_LT && Op != BO_LE)
    return HandBatchLoop();
  const Expr *Ahead = nullptr; // K of `i + K < N`
  if (varOf(CounterSide) != Counter && !(Ahead = addedTo(CounterSide, Counter)))
    return HandBatchLoop();

  // The counter picks batches out of tensors, nothing else.
  Invariance Fixed(Body, OwnStep);
  BatchPicking Picking(Context, Body, Fixed, OwnStep);
  bool OnlyPicks = Picking.onlyPicks(Counter);
  if (!Picking.Cuts || !Oracle.trains(Body))
    return HandBatchLoop();

  // Inside a loop that walks batches already, these are pieces of its batch.
  if (enclosingBatchLoop(Context, Loop, Oracle))
    return Refuse("it runs inside a loop over batches");
  if (!Oracle.stepsOptimizer(Body))
    return Refuse(NoStep);
  // An early exit is the first reason given: its test usually reads the
  // counter too, and "stops early" says what a user must change.
  if (earlyExit(Body, false))
    return Refuse(StopsEarly);
  if (Fixed.assigns(Counter))
    return Refuse("its counter is changed inside the loop");
  auto ReadsCounter = [&](const Expr *E) {
    std::vector<const DeclRefExpr *> Uses;
    referencesTo(E, Counter, Uses);
    return !Uses.empty();
  };
  if (!Fixed.holds(Bound) || (StepBy && !Fixed.holds(StepBy)) ||
      (Ahead && !Fixed.holds(Ahead)) || !Fixed.holds(Limit) ||
      (!OwnStep && !Fixed.holds(Counter->getInit())) || ReadsCounter(Bound) ||
      (StepBy && ReadsCounter(StepBy)) || (Ahead && ReadsCounter(Ahead)))
    return Refuse("its bound or step may change while it runs");
  if (!OnlyPicks)
    return Refuse("its counter does more than pick the batch (a test, an "
                  "output, an index of its own), which would differ by rank");
  // A while loop leaves its counter past the end, where a rank's last batch
  // leaves it elsewhere.
  if (OwnStep && !onlyResetOutside(Context, Counter, Loop))
    return Refuse("its counter '" + Counter->getNameAsString() +
                  "' is read after the loop, where each rank would leave it "
                  "at another value");
  std::string Refusal = sharedRefusal(Context, Body, Fixed);
  if (!Refusal.empty())
    return Refuse(Refusal);
  Result.Loop = Loop;
  Result.Counter = Counter;
  Result.Begin = OwnStep ? nullptr : Counter->getInit();
  Result.End = Bound;
  Result.Ahead = Ahead;
  Result.Inclusive = Op == BO_LE;
  Result.Step = StepBy;
  Result.OwnStep = OwnStep;
  return Result;
}

/// Whether S reads a module's own tensors (`parameters()`, `buffers()`):
/// a loop over them walks weights, not data.
static bool readsModuleTensors(const Stmt *S) {
  if (!S)
    return false;
  if (const auto *Call = dyn_cast<CallExpr>(S)) {
    std::string Name = calleeName(Call);
    if (Name == "parameters" || Name == "named_parameters" ||
        Name == "buffers" || Name == "named_buffers" || Name == "children" ||
        Name == "modules")
      return true;
  }
  for (const Stmt *Child : S->children())
    if (readsModuleTensors(Child))
      return true;
  return false;
}

/// The loop variable's name, or `[a, b]` for structured bindings.
static std::string batchName(const VarDecl *Batch) {
  const auto *Decomposed = dyn_cast<DecompositionDecl>(Batch);
  if (!Decomposed)
    return Batch->getNameAsString();
  std::string Names;
  for (const BindingDecl *Binding : Decomposed->bindings())
    Names += (Names.empty() ? "" : ", ") + Binding->getNameAsString();
  return "[" + Names + "]";
}

/// Whether Body may change the element Batch (a non-const reference) refers
/// to, through it or one of its structured bindings: clang's mutation
/// analysis (an assignment, `++`, a swap, a non-const method or reference,
/// followed into the callees). A tensor's own methods are const
/// (`b.x.add_(1)` changes the shared data, which a copy of the batch shares).
static bool changesBatch(ASTContext &Context, const Stmt *Body,
                         const VarDecl *Batch) {
  ExprMutationAnalyzer Mutations(*Body, Context);
  if (Mutations.isMutated(Batch))
    return true;
  if (const auto *Decomposed = dyn_cast<DecompositionDecl>(Batch))
    for (const BindingDecl *Binding : Decomposed->bindings())
      if (Mutations.isMutated(Binding))
        return true;
  return false;
}

const Expr *handBatchList(ASTContext &Context, const CXXForRangeStmt *Loop,
                          TrainingOracle &Oracle, std::string *Why) {
  auto Refuse = [&](llvm::StringRef Reason) -> const Expr * {
    if (Why)
      *Why = Reason.str();
    return nullptr;
  };
  const Expr *Range = Loop->getRangeInit();
  if (!Range || isShardedBatchLoop(Loop) || !isBatchList(Range->getType()) ||
      !Loop->getLoopVariable())
    return nullptr;
  const VarDecl *List = varOf(Range);
  if (readsModuleTensors(Range) ||
      (List && readsModuleTensors(List->getInit())) ||
      !Oracle.trains(Loop->getBody()))
    return nullptr;
  if (enclosingBatchLoop(Context, Loop, Oracle))
    return Refuse("it runs inside a loop over batches");
  if (!Oracle.stepsOptimizer(Loop->getBody()))
    return Refuse(NoStep);
  const Stmt *Body = Loop->getBody();
  Invariance Fixed(Body);
  if (List) {
    std::vector<const DeclRefExpr *> Uses;
    referencesTo(Body, List, Uses);
    if (!Uses.empty())
      return Refuse("it reads or changes the list of batches it walks");
  }
  const VarDecl *Batch = Loop->getLoopVariable();
  if (Batch->getType()->isReferenceType() &&
      !Batch->getType().getNonReferenceType().isConstQualified() &&
      changesBatch(Context, Body, Batch))
    return Refuse("it changes its batch '" + batchName(Batch) +
                  "' in the list it walks (each rank walks a copy of its "
                  "share, so the change would not reach the list)");
  std::string Refusal = sharedRefusal(Context, Body, Fixed);
  if (!Refusal.empty())
    return Refuse(Refusal);
  return Range;
}

bool isShardedBatchLoop(const CXXForRangeStmt *Loop) {
  const auto *Call = dyn_cast_or_null<CallExpr>(
      Loop && Loop->getRangeInit() ? strip(Loop->getRangeInit()) : nullptr);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee)
    return false;
  std::string Name = Callee->getQualifiedNameAsString();
  return Name == "ddp::batch_starts" || Name == "ddp::rank_batches";
}

} // namespace ddpify
