//===- PlacementAnalysis.cpp - Where each tensor was placed ---------------===//
//
// A forward dataflow analysis on each function's clang CFG of the placement
// of every local tensor (`.cuda()`, `.cpu()`, `.to(...)`, a factory with or
// without a device option, a module's output, a helper's return) through
// declarations and assignments. The placements form a lattice
// (analyses/PlacementLattice.h). Loops are iterated to a fixed point; events
// are reported in one last pass over the fixed point. Anything not
// understood is unknown; unknown never conflicts.
//
//===----------------------------------------------------------------------===//

#include "ddpify/PlacementAnalysis.h"
#include "ddpify/MatcherUtil.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMap.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/AST/StmtCXX.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Analysis/Analyses/PostOrderCFGView.h"
#include "clang/Analysis/CFG.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include <functional>
#include <map>
#include <set>
#include <tuple>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

// --- Types -----------------------------------------------------------------

const CXXRecordDecl *recordOf(QualType Type) {
  return Type.isNull() ? nullptr
                       : Type.getNonReferenceType()
                             .getCanonicalType()
                             ->getAsCXXRecordDecl();
}

bool isRecordNamed(QualType Type, llvm::StringRef Name) {
  const CXXRecordDecl *Record = recordOf(Type);
  return Record && Record->getQualifiedNameAsString() == Name;
}

} // namespace

bool isTensorType(QualType Type) { return isRecordNamed(Type, "at::Tensor"); }

namespace {

bool isOptionsType(QualType Type) {
  return isRecordNamed(Type, "c10::TensorOptions");
}

bool isDeviceTypeEnum(QualType Type) {
  if (Type.isNull())
    return false;
  const auto *Enum =
      Type.getNonReferenceType().getCanonicalType()->getAs<EnumType>();
  return Enum &&
         Enum->getDecl()->getQualifiedNameAsString() == "c10::DeviceType";
}

bool isDeviceLike(QualType Type) {
  return isRecordNamed(Type, "c10::Device") || isDeviceTypeEnum(Type);
}

} // namespace

bool isModuleClass(const CXXRecordDecl *Record) {
  return derivesFrom(Record, "torch::nn::Module");
}

namespace {

bool isTensorClass(const CXXRecordDecl *Record) {
  if (!Record)
    return false;
  std::string Name = Record->getQualifiedNameAsString();
  return Name == "at::Tensor" || Name == "at::TensorBase";
}

/// Drops what the source does not spell: implicit casts, temporaries,
/// parentheses and copies/moves of the same value.
const Expr *strip(const Expr *E) {
  while (E) {
    const Expr *Next = E->IgnoreImplicit()->IgnoreParens();
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(Next)) {
      const CXXConstructorDecl *Ctor = Construct->getConstructor();
      if (Construct->getNumArgs() == 1 && Ctor &&
          (Ctor->isCopyOrMoveConstructor()) &&
          !isa<CXXTemporaryObjectExpr>(Construct))
        Next = Construct->getArg(0);
    } else if (const auto *Cast = dyn_cast<CXXFunctionalCastExpr>(Next)) {
      Next = Cast->getSubExpr();
    }
    if (Next == E)
      return E;
    E = Next;
  }
  return E;
}

bool inTorchNamespace(const FunctionDecl *FD) {
  if (!FD)
    return false;
  std::string Name = FD->getQualifiedNameAsString();
  return llvm::StringRef(Name).starts_with("torch::") ||
         llvm::StringRef(Name).starts_with("at::");
}

const llvm::StringSet<> &factoryNames() {
  static const llvm::StringSet<> Names = {"zeros",
                                          "ones",
                                          "empty",
                                          "full",
                                          "rand",
                                          "randn",
                                          "randint",
                                          "randperm",
                                          "arange",
                                          "range",
                                          "eye",
                                          "linspace",
                                          "logspace",
                                          "tensor",
                                          "scalar_tensor",
                                          "empty_strided",
                                          "from_blob",
                                          "zeros_like",
                                          "ones_like",
                                          "empty_like",
                                          "full_like",
                                          "rand_like",
                                          "randn_like",
                                          "randint_like",
                                          "normal",
                                          "bartlett_window",
                                          "hann_window",
                                          "hamming_window",
                                          "blackman_window",
                                          "tril_indices",
                                          "triu_indices"};
  return Names;
}

bool isLikeFactory(llvm::StringRef Name) { return Name.ends_with("_like"); }

using namespace placement;

/// Whether Type holds a module (a holder such as `Net`, a module class or a
/// pointer or reference to one).
bool isModuleValue(QualType Type) {
  if (Type.isNull())
    return false;
  Type = Type.getNonReferenceType();
  if (Type->isPointerType())
    Type = Type->getPointeeType();
  const CXXRecordDecl *Record = recordOf(Type);
  if (!Record)
    return false;
  if (isModuleClass(Record))
    return true;
  for (const CXXRecordDecl *R = Record; R;) {
    const auto *Spec = dyn_cast<ClassTemplateSpecializationDecl>(R);
    if (Spec && Spec->getQualifiedNameAsString() == "torch::nn::ModuleHolder")
      return true;
    if (!R->hasDefinition() || R->getDefinition()->getNumBases() != 1)
      return false;
    R = recordOf(R->getDefinition()->bases_begin()->getType());
  }
  return false;
}

// --- Per-function facts gathered before the walk ---------------------------

/// Variables assigned anywhere, and variables whose value may change behind
/// the analysis' back (address taken, bound to a non-const reference,
/// captured by reference, passed to a non-const reference parameter).
class FunctionFacts : public RecursiveASTVisitor<FunctionFacts> {
public:
  llvm::DenseSet<const ValueDecl *> Assigned, Escaped;

  static const ValueDecl *refDecl(const Expr *E) {
    E = E ? E->IgnoreParenImpCasts() : nullptr;
    if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E))
      return Ref->getDecl();
    if (const auto *Member = dyn_cast_or_null<MemberExpr>(E))
      if (isa<CXXThisExpr>(Member->getBase()->IgnoreParenImpCasts()))
        return Member->getMemberDecl();
    return nullptr;
  }

  bool VisitBinaryOperator(BinaryOperator *Op) {
    if (Op->isAssignmentOp())
      if (const ValueDecl *D = refDecl(Op->getLHS()))
        Assigned.insert(D);
    return true;
  }
  bool VisitCXXOperatorCallExpr(CXXOperatorCallExpr *Op) {
    if (Op->getOperator() == OO_Equal && Op->getNumArgs() == 2)
      if (const ValueDecl *D = refDecl(Op->getArg(0)))
        Assigned.insert(D);
    return true;
  }
  bool VisitUnaryOperator(UnaryOperator *Op) {
    if (Op->getOpcode() == UO_AddrOf)
      if (const ValueDecl *D = refDecl(Op->getSubExpr()))
        Escaped.insert(D);
    if (Op->isIncrementDecrementOp())
      if (const ValueDecl *D = refDecl(Op->getSubExpr()))
        Assigned.insert(D);
    return true;
  }
  bool VisitVarDecl(VarDecl *Var) {
    QualType Type = Var->getType();
    if (Type->isLValueReferenceType() &&
        !Type.getNonReferenceType().isConstQualified() && Var->hasInit())
      if (const ValueDecl *D = refDecl(Var->getInit()))
        Escaped.insert(D);
    return true;
  }
  bool VisitLambdaExpr(LambdaExpr *Lambda) {
    for (const LambdaCapture &Capture : Lambda->captures())
      if (Capture.capturesVariable() && Capture.getCaptureKind() == LCK_ByRef)
        Escaped.insert(Capture.getCapturedVar());
    return true;
  }
  bool VisitCallExpr(CallExpr *Call) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    // LibTorch's own functions (a module holder's forwarding operator(),
    // in-place ops) never re-place a tensor through a reference.
    if (!Callee || inTorchNamespace(Callee))
      return true;
    unsigned Skip =
        isa<CXXOperatorCallExpr>(Call) && isa<CXXMethodDecl>(Callee) ? 1 : 0;
    for (unsigned I = Skip; I < Call->getNumArgs(); ++I) {
      unsigned Param = I - Skip;
      if (Param >= Callee->getNumParams())
        break;
      QualType Type = Callee->getParamDecl(Param)->getType();
      // A module passed by reference (`train(Net &net)`) is followed into
      // the call and forgotten after it (evalUserCall).
      if (Type->isLValueReferenceType() &&
          !Type.getNonReferenceType().isConstQualified() &&
          !isModuleValue(Type))
        if (const ValueDecl *D = refDecl(Call->getArg(I)))
          Escaped.insert(D);
    }
    return true;
  }
};

/// The variable or member an object expression names: `net`, `net->`,
/// `*net`, `this->net`.
const ValueDecl *rootDecl(const Expr *E) {
  E = strip(E);
  if (!E)
    return nullptr;
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E))
    if ((Op->getOperator() == OO_Arrow || Op->getOperator() == OO_Star) &&
        Op->getNumArgs() >= 1)
      return rootDecl(Op->getArg(0));
  if (const auto *Unary = dyn_cast<UnaryOperator>(E))
    if (Unary->getOpcode() == UO_Deref)
      return rootDecl(Unary->getSubExpr());
  return FunctionFacts::refDecl(E);
}

// --- The module and its per-function analysis ------------------------------

class Analysis {
public:
  /// Params: the placements of some parameters at one call (an analysis in
  /// that context); Quiet: report nothing.
  Analysis(PlacementAnalysis &Module, ASTContext &Context,
           const FunctionDecl *Function, Env Params = Env(), bool Quiet = false)
      : Module(Module), Context(Context), Function(Function),
        Params(std::move(Params)), Quiet(Quiet) {}

  /// Analyses the body; returns the placement every return agrees on.
  Place run();

private:
  // Statements.
  void transfer(const Stmt *S);

  // Expressions.
  Place eval(const Expr *E);
  void visitChildren(const Stmt *S);
  Place evalByType(QualType Type, const Expr *E);
  Place deviceOf(const Expr *E);
  Place optionsOf(const Expr *E);
  Place lookup(const ValueDecl *D);
  void assign(const ValueDecl *D, const Place &P);
  void tensorOperands(const Expr *Arg,
                      std::vector<std::pair<const Expr *, Place>> &Out);
  Place evalCall(const CallExpr *Call);
  Place evalUserCall(const CallExpr *Call, const FunctionDecl *Callee);
  Place evalFactory(const CallExpr *Call, const FunctionDecl *Callee);
  Place evalTensorMethod(const CXXMemberCallExpr *Call);
  Place evalModuleCall(const Expr *Call, const Expr *Object,
                       llvm::ArrayRef<const Expr *> Args, SourceRange At);
  Place evalOperator(const CXXOperatorCallExpr *Op);
  Place combine(SourceRange At, llvm::StringRef OpName,
                std::vector<std::pair<const Expr *, Place>> &Operands);
  std::string text(const Expr *E);
  std::string text(SourceRange R);
  /// Tells the observer of a factory without a device.
  void checkFactoryInForward(const CallExpr *Call, const FunctionDecl *Callee,
                             const Place &Options, int OptionsArg);

  PlacementAnalysis &Module;
  ASTContext &Context;
  const FunctionDecl *Function;
  FunctionFacts Facts;
  Env Cur;
  Env Params;
  bool Quiet;
  std::vector<Place> Returns;
  /// Reports and returns are taken in the last pass, over the fixed point.
  bool FinalPass = false;
  bool Reporting = false;
  /// The object of a `.to(...)` / `.cuda()` being evaluated: a factory
  /// there is moved at once.
  const Expr *MovedObject = nullptr;
};

// --- Analysis: statements --------------------------------------------------

Place Analysis::run() {
  Stmt *Body = Function->getBody();
  Facts.TraverseStmt(Body);
  if (isa<CoroutineBodyStmt>(Body))
    return unknown(); // Its suspensions are not in the CFG.
  std::unique_ptr<CFG> Graph =
      CFG::buildCFG(Function, Body, &Context, CFG::BuildOptions());
  if (!Graph)
    return unknown();

  // A block's statements, each evaluated whole: an element that is part of
  // a larger element (a `?:` operand, a declaration's initialiser) is
  // evaluated with it.
  ParentMap Parents(Body);
  llvm::DenseSet<const Stmt *> Elements;
  for (const CFGBlock *Block : *Graph)
    for (const CFGElement &Element : *Block)
      if (std::optional<CFGStmt> S = Element.getAs<CFGStmt>())
        Elements.insert(S->getStmt());
  for (const auto &[Synthetic, Original] : Graph->synthetic_stmts())
    Elements.insert(Original);
  llvm::DenseMap<const CFGBlock *, std::vector<const Stmt *>> Roots;
  // The try statements each block lies in: an exception can leave for their
  // handlers from any point of the block.
  llvm::DenseMap<const CFGBlock *, llvm::SmallPtrSet<const Stmt *, 2>> Tries;
  for (const CFGBlock *Block : *Graph)
    for (const CFGElement &Element : *Block) {
      std::optional<CFGStmt> S = Element.getAs<CFGStmt>();
      if (!S)
        continue;
      bool Root = true;
      const Stmt *Child = S->getStmt();
      for (const Stmt *P = Parents.getParent(Child); P;
           Child = P, P = Parents.getParent(P)) {
        Root &= !Elements.count(P);
        if (const auto *Try = dyn_cast<CXXTryStmt>(P))
          if (Try->getTryBlock() == Child)
            Tries[Block].insert(Try);
      }
      if (Root)
        Roots[Block].push_back(S->getStmt());
    }

  // Reverse post-order, then the blocks it does not reach from the entry
  // (handlers: CFG has no edges for exceptions).
  std::vector<const CFGBlock *> Order;
  llvm::SmallPtrSet<const CFGBlock *, 32> Ordered;
  for (const CFGBlock *Block : PostOrderCFGView(Graph.get())) {
    Order.push_back(Block);
    Ordered.insert(Block);
  }
  for (const CFGBlock *Block : *Graph)
    if (!Ordered.count(Block))
      Order.push_back(Block);
  llvm::DenseMap<const CFGBlock *, Env> In, Out;
  auto Incoming = [&](const CFGBlock *Block) -> std::optional<Env> {
    std::optional<Env> R;
    auto Add = [&](const Env &E) { R = R ? joinEnvs(*R, E) : E; };
    if (Block == &Graph->getEntry())
      Add(Params);
    for (const CFGBlock::AdjacentBlock &Pred : Block->preds())
      if (const CFGBlock *P = Pred.getReachableBlock())
        if (auto It = Out.find(P); It != Out.end())
          Add(It->second);
    // A handler: the state at any point of its try block.
    if (const auto *Catch = dyn_cast_or_null<CXXCatchStmt>(Block->getLabel()))
      for (const auto &[Other, InTries] : Tries)
        if (InTries.count(Parents.getParent(Catch)) && In.count(Other)) {
          Add(In[Other]);
          Add(Out[Other]);
        }
    return R;
  };
  auto Transfer = [&](const CFGBlock *Block) {
    for (const Stmt *S : Roots.lookup(Block))
      transfer(S);
  };
  // Each block's entry state only grows (it is joined with what it was), so
  // the iteration ends; the bound is a safety net.
  constexpr unsigned MaxRounds = 32;
  for (unsigned Round = 0;; ++Round) {
    if (Round == MaxRounds)
      return unknown(); // Nothing is claimed.
    bool Changed = false;
    for (const CFGBlock *Block : Order) {
      std::optional<Env> From = Incoming(Block);
      if (!From)
        continue; // Not reached (yet).
      auto Known = In.find(Block);
      Env Entry = Known == In.end() ? *From : joinEnvs(Known->second, *From);
      if (Known != In.end() && Known->second == Entry)
        continue;
      In[Block] = Entry;
      Cur = std::move(Entry);
      Transfer(Block);
      Out[Block] = std::move(Cur);
      Changed = true;
    }
    if (!Changed)
      break;
  }
  FinalPass = true;
  Reporting = !Quiet;
  for (const CFGBlock *Block : Order)
    if (auto It = In.find(Block); It != In.end()) {
      Cur = It->second;
      Transfer(Block);
    }

  if (Returns.empty())
    return unknown();
  for (const Place &P : Returns)
    if (!P.known() || !P.same(Returns.front()))
      return unknown();
  return Returns.front();
}

void Analysis::transfer(const Stmt *S) {
  if (const auto *Decls = dyn_cast<DeclStmt>(S)) {
    for (const Decl *D : Decls->decls())
      if (const auto *Var = dyn_cast<VarDecl>(D)) {
        Place P = Var->hasInit() ? evalByType(Var->getType(), Var->getInit())
                                 : unknown();
        if (!Var->getType()->isReferenceType())
          assign(Var, P);
      }
    return;
  }
  if (const auto *Return = dyn_cast<ReturnStmt>(S)) {
    Place P = eval(Return->getRetValue());
    if (FinalPass && Return->getRetValue())
      Returns.push_back(P);
    return;
  }
  if (const auto *E = dyn_cast<Expr>(S)) {
    eval(E);
    return;
  }
  for (const Stmt *Child : S->children())
    if (const auto *E = dyn_cast_or_null<Expr>(Child))
      eval(E);
}

// --- Analysis: expressions -------------------------------------------------

void Analysis::visitChildren(const Stmt *S) {
  for (const Stmt *Child : S->children())
    if (const auto *E = dyn_cast_or_null<Expr>(Child))
      eval(E);
}

std::string Analysis::text(SourceRange R) {
  const SourceManager &SM = Context.getSourceManager();
  if (R.isInvalid() || R.getBegin().isMacroID() || R.getEnd().isMacroID())
    return "";
  return Lexer::getSourceText(CharSourceRange::getTokenRange(R), SM,
                              Context.getLangOpts())
      .str();
}

std::string Analysis::text(const Expr *E) {
  if (!E)
    return "";
  std::string T = text(strip(E)->getSourceRange());
  if (T.empty() || T.size() > 40 || T.find('\n') != std::string::npos)
    return "";
  return T;
}

Place Analysis::lookup(const ValueDecl *D) {
  if (!D || Facts.Escaped.count(D))
    return unknown();
  auto It = Cur.Vars.find(D);
  if (It != Cur.Vars.end())
    return It->second;
  if (!isDeviceLike(D->getType()) || Facts.Assigned.count(D))
    return unknown();
  // A constant device declared elsewhere (`const torch::Device kDev(...)`).
  if (const auto *Var = dyn_cast<VarDecl>(D))
    if (Var->getType().isConstQualified() && Var->hasGlobalStorage() &&
        Var->hasInit()) {
      Env Keep = Cur;
      Place P = deviceOf(Var->getInit());
      Cur = Keep;
      if (P.known() && P.K != Kind::Var)
        return P;
    }
  // A device variable this function never assigns: one device, not known
  // here.
  Place P;
  P.K = Kind::Var;
  P.Var = D;
  P.VarName = D->getNameAsString();
  return P;
}

void Analysis::assign(const ValueDecl *D, const Place &P) {
  if (!D || Facts.Escaped.count(D))
    return;
  QualType Type = D->getType();
  if (isDeviceLike(Type) && P.K != Kind::Var && !P.known() &&
      !Facts.Assigned.count(D)) {
    // Declared once with a value not known here: still one device.
    Place Var;
    Var.K = Kind::Var;
    Var.Var = D;
    Var.VarName = D->getNameAsString();
    Cur.Vars[D] = Var;
    return;
  }
  Cur.Vars[D] = P;
}

Place Analysis::evalByType(QualType Type, const Expr *E) {
  if (isDeviceLike(Type))
    return deviceOf(E);
  if (isOptionsType(Type))
    return optionsOf(E);
  return eval(E);
}

Place Analysis::deviceOf(const Expr *E) {
  E = strip(E);
  if (!E)
    return unknown();
  Place P;
  if (const auto *Construct = dyn_cast<CXXConstructExpr>(E)) {
    if (isRecordNamed(Construct->getType(), "c10::Device") ||
        isOptionsType(Construct->getType())) {
      if (Construct->getNumArgs() == 0)
        return unknown();
      Place Type = deviceOf(Construct->getArg(0));
      for (unsigned I = 1; I < Construct->getNumArgs(); ++I)
        eval(Construct->getArg(I));
      if (Type.K == Kind::Cuda && Construct->getNumArgs() >= 2 &&
          !isa<CXXDefaultArgExpr>(Construct->getArg(1))) {
        Expr::EvalResult Value;
        Type.Index = -2;
        if (Construct->getArg(1)->EvaluateAsInt(Value, Context)) {
          int64_t N = Value.Val.getInt().getExtValue();
          Type.Index = N < 0 ? -1 : static_cast<int>(N);
        }
      }
      return Type;
    }
    // `std::string("cuda:1")` on its way to a torch::Device, a device
    // wrapped in a c10::optional (TensorOptions::device's parameter).
    if (Construct->getNumArgs() >= 1 &&
        (isa<StringLiteral>(strip(Construct->getArg(0))) ||
         (Construct->getNumArgs() == 1 &&
          isRecordNamed(Construct->getType(), "c10::optional"))))
      return deviceOf(Construct->getArg(0));
    visitChildren(E);
    return unknown();
  }
  if (const auto *Literal = dyn_cast<StringLiteral>(E)) {
    if (!Literal->isOrdinary())
      return unknown();
    llvm::StringRef S = Literal->getString();
    if (S == "cpu") {
      P.K = Kind::Cpu;
      return P;
    }
    if (S.consume_front("cuda")) {
      P.K = Kind::Cuda;
      unsigned N;
      if (S.empty())
        P.Index = -1;
      else if (S.consume_front(":") && !S.getAsInteger(10, N))
        P.Index = static_cast<int>(N);
      else
        return unknown();
      return P;
    }
    return unknown();
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
    std::string Name = Ref->getDecl()->getQualifiedNameAsString();
    if (Name == "c10::kCUDA" || Name == "c10::DeviceType::CUDA") {
      P.K = Kind::Cuda;
      return P;
    }
    if (Name == "c10::kCPU" || Name == "c10::DeviceType::CPU") {
      P.K = Kind::Cpu;
      return P;
    }
    if (isDeviceLike(Ref->getType()))
      return lookup(Ref->getDecl());
    return unknown();
  }
  if (const auto *Member = dyn_cast<MemberExpr>(E)) {
    if (isa<CXXThisExpr>(Member->getBase()->IgnoreParenImpCasts()) &&
        isDeviceLike(Member->getType()))
      return lookup(Member->getMemberDecl());
    visitChildren(E);
    return unknown();
  }
  if (const auto *Call = dyn_cast<CXXMemberCallExpr>(E)) {
    const CXXMethodDecl *Method = Call->getMethodDecl();
    if (Method && Method->getName() == "device" &&
        isTensorClass(Method->getParent())) {
      Place Of = eval(Call->getImplicitObjectArgument());
      Of.Scalar = false;
      return Of;
    }
    eval(E);
    return unknown();
  }
  if (const auto *Ternary = dyn_cast<ConditionalOperator>(E)) {
    eval(Ternary->getCond());
    Place A = deviceOf(Ternary->getTrueExpr());
    Place B = deviceOf(Ternary->getFalseExpr());
    return joinPaths(A, B);
  }
  if (const auto *Call = dyn_cast<CallExpr>(E)) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (Callee && Callee->getQualifiedNameAsString() == "ddp::device") {
      // ddp::device() and ddp::device(kind) (the program's choice of kind,
      // on this process's device) are one place: the overload without
      // arguments stands for both.
      const Decl *Process = Callee->getCanonicalDecl();
      for (const NamedDecl *Overload :
           Callee->getDeclContext()->lookup(Callee->getDeclName()))
        if (const auto *Function = dyn_cast<FunctionDecl>(Overload))
          if (Function->getNumParams() == 0)
            Process = Function->getCanonicalDecl();
      P.K = Kind::Var;
      P.Var = Process;
      P.VarName = "ddp::device()";
      return P;
    }
  }
  eval(E);
  return unknown();
}

Place Analysis::optionsOf(const Expr *E) {
  E = strip(E);
  if (!E)
    return unknown();
  Place None;
  None.K = Kind::NoDevice;
  if (const auto *Construct = dyn_cast<CXXConstructExpr>(E)) {
    if (!isOptionsType(Construct->getType())) {
      visitChildren(E);
      return unknown();
    }
    if (Construct->getNumArgs() == 0)
      return None;
    const Expr *Arg = Construct->getArg(0);
    QualType ArgType = strip(Arg)->getType();
    if (isDeviceLike(ArgType) || isa<StringLiteral>(strip(Arg)))
      return deviceOf(Arg);
    if (isOptionsType(ArgType))
      return optionsOf(Arg);
    // A dtype, layout or memory format: no device.
    eval(Arg);
    return None;
  }
  if (const auto *Call = dyn_cast<CXXMemberCallExpr>(E)) {
    const CXXMethodDecl *Method = Call->getMethodDecl();
    if (!Method) {
      visitChildren(E);
      return unknown();
    }
    llvm::StringRef Name = Method->getName();
    if (isTensorClass(Method->getParent()) && Name == "options") {
      Place Of = eval(Call->getImplicitObjectArgument());
      Of.Scalar = false;
      return Of;
    }
    if (Method->getParent()->getQualifiedNameAsString() ==
        "c10::TensorOptions") {
      Place Base = optionsOf(Call->getImplicitObjectArgument());
      if (Name == "device" && Call->getNumArgs() >= 1) {
        Place D = deviceOf(Call->getArg(0));
        for (unsigned I = 1; I < Call->getNumArgs(); ++I)
          eval(Call->getArg(I));
        return D;
      }
      for (const Expr *Arg : Call->arguments())
        eval(Arg);
      if (Name == "dtype" || Name == "layout" || Name == "requires_grad" ||
          Name == "pinned_memory" || Name == "memory_format")
        return Base;
      return unknown();
    }
    eval(E);
    return unknown();
  }
  if (const auto *Call = dyn_cast<CallExpr>(E)) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (Callee && inTorchNamespace(Callee) && isOptionsType(Call->getType())) {
      llvm::StringRef Name = Callee->getName();
      if (Name == "device" && Call->getNumArgs() >= 1)
        return deviceOf(Call->getArg(0));
      for (const Expr *Arg : Call->arguments())
        eval(Arg);
      if (Name == "dtype" || Name == "layout" || Name == "requires_grad" ||
          Name == "memory_format")
        return None;
      return unknown();
    }
    eval(E);
    return unknown();
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E))
    return lookup(Ref->getDecl());
  if (isDeviceLike(E->getType()) || isa<StringLiteral>(E))
    return deviceOf(E);
  eval(E);
  return unknown();
}

void Analysis::tensorOperands(
    const Expr *Arg, std::vector<std::pair<const Expr *, Place>> &Out) {
  if (!Arg || isa<CXXDefaultArgExpr>(Arg))
    return;
  const Expr *E = strip(Arg);
  if (isTensorType(E->getType())) {
    Out.emplace_back(E, eval(E));
    return;
  }
  // Tensor lists (`{a, b}` as ArrayRef / IListRef) and optional tensors.
  if (const auto *Construct = dyn_cast<CXXConstructExpr>(E)) {
    for (const Expr *Inner : Construct->arguments())
      tensorOperands(Inner, Out);
    return;
  }
  if (const auto *List = dyn_cast<CXXStdInitializerListExpr>(E)) {
    tensorOperands(List->getSubExpr(), Out);
    return;
  }
  if (const auto *Init = dyn_cast<InitListExpr>(E)) {
    for (const Expr *Inner : Init->inits())
      tensorOperands(Inner, Out);
    return;
  }
  eval(E);
}

Place Analysis::combine(SourceRange At, llvm::StringRef OpName,
                        std::vector<std::pair<const Expr *, Place>> &Operands) {
  std::vector<Place> Places;
  for (auto &[E, P] : Operands)
    Places.push_back(P);
  for (size_t I = 0; I < Operands.size(); ++I)
    for (size_t J = I + 1; J < Operands.size(); ++J) {
      std::string Why;
      const Place &A = Operands[I].second, &B = Operands[J].second;
      if (!conflict(A, B, Why))
        continue;
      std::string NameA = text(Operands[I].first);
      std::string NameB = text(Operands[J].first);
      if (NameA.empty())
        NameA = "operand " + std::to_string(I + 1);
      if (NameB.empty())
        NameB = "operand " + std::to_string(J + 1);
      std::string Message = "'" + OpName.str() +
                            "' mixes tensors on different devices: '" + NameA +
                            "' is on " + describe(A) + ", '" + NameB + "' on " +
                            describe(B) + "; " + Why;
      std::vector<std::pair<SourceRange, std::string>> Notes;
      Notes.emplace_back(A.Origin, "'" + NameA + "' is placed on " +
                                       describe(A) + " here by " + A.How);
      Notes.emplace_back(B.Origin, "'" + NameB + "' is placed on " +
                                       describe(B) + " here by " + B.How);
      if (Reporting)
        Module.observer().mismatch(Context, At, Message, Notes);
      return join(Places, At, OpName);
    }
  return join(Places, At, OpName);
}

Place Analysis::eval(const Expr *E) {
  if (!E)
    return unknown();
  E = strip(E);
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
    if (isTensorType(Ref->getType()) || isOptionsType(Ref->getType()) ||
        isDeviceLike(Ref->getType()))
      return lookup(Ref->getDecl());
    return unknown();
  }
  if (isa<LambdaExpr>(E) || isa<DeclRefExpr>(E) || isa<IntegerLiteral>(E))
    return unknown(); // A lambda body is analysed on its own.
  if (const auto *Ternary = dyn_cast<ConditionalOperator>(E)) {
    eval(Ternary->getCond());
    Env Before = Cur;
    Place A = eval(Ternary->getTrueExpr());
    Env True = Cur;
    Cur = Before;
    Place B = eval(Ternary->getFalseExpr());
    Cur = joinEnvs(True, Cur);
    return joinPaths(A, B);
  }
  if (const auto *Binary = dyn_cast<BinaryOperator>(E)) {
    if (Binary->isLogicalOp()) {
      eval(Binary->getLHS());
      Env Before = Cur;
      eval(Binary->getRHS());
      Cur = joinEnvs(Before, Cur);
      return unknown();
    }
    if (Binary->getOpcode() == BO_Assign) {
      if (const ValueDecl *D = FunctionFacts::refDecl(Binary->getLHS())) {
        Place P = evalByType(D->getType(), Binary->getRHS());
        assign(D, P);
        return P;
      }
    }
    visitChildren(E);
    return unknown();
  }
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E))
    return evalOperator(Op);
  if (const auto *Call = dyn_cast<CallExpr>(E))
    return evalCall(Call);
  if (const auto *Construct = dyn_cast<CXXConstructExpr>(E)) {
    if (isOptionsType(Construct->getType()))
      return optionsOf(E);
    if (isRecordNamed(Construct->getType(), "c10::Device"))
      return deviceOf(E);
  }
  if (const auto *Member = dyn_cast<MemberExpr>(E)) {
    if (isa<CXXThisExpr>(Member->getBase()->IgnoreParenImpCasts()))
      return lookup(Member->getMemberDecl());
  }
  visitChildren(E);
  return unknown();
}

Place Analysis::evalOperator(const CXXOperatorCallExpr *Op) {
  OverloadedOperatorKind Kind = Op->getOperator();
  const FunctionDecl *Callee = Op->getDirectCallee();
  if (Kind == OO_Equal && Op->getNumArgs() == 2) {
    if (const ValueDecl *D = FunctionFacts::refDecl(Op->getArg(0))) {
      Place P = evalByType(D->getType(), Op->getArg(1));
      assign(D, P);
      return P;
    }
    visitChildren(Op);
    return unknown();
  }
  if (Kind == OO_Call && Op->getNumArgs() >= 1)
    if (const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Callee))
      if (Method->getParent()->getQualifiedNameAsString() ==
          "torch::nn::ModuleHolder") {
        llvm::SmallVector<const Expr *, 4> Args;
        for (unsigned I = 1; I < Op->getNumArgs(); ++I)
          Args.push_back(Op->getArg(I));
        return evalModuleCall(Op, Op->getArg(0), Args, Op->getSourceRange());
      }
  bool AnyTensor = false;
  for (const Expr *Arg : Op->arguments())
    AnyTensor |= isTensorType(strip(Arg)->getType());
  if (!AnyTensor) {
    visitChildren(Op);
    return unknown();
  }
  if (Kind == OO_Subscript && Op->getNumArgs() == 2) {
    Place P = eval(Op->getArg(0));
    eval(Op->getArg(1));
    P.Scalar = false;
    return P;
  }
  std::vector<std::pair<const Expr *, Place>> Operands;
  for (const Expr *Arg : Op->arguments()) {
    const Expr *S = strip(Arg);
    if (isTensorType(S->getType()))
      Operands.emplace_back(S, eval(S));
    else
      eval(S);
  }
  if (Operands.size() == 1)
    return Operands.front().second; // With a number: the tensor's place.
  const char *Spelling = getOperatorSpelling(Kind);
  Place P = combine(SourceRange(Op->getOperatorLoc(), Op->getOperatorLoc()),
                    Spelling ? Spelling : "operator", Operands);
  if (Op->isAssignmentOp() && !Operands.empty())
    return Operands.front().second; // `a += b` keeps a's placement.
  return P;
}

Place Analysis::evalModuleCall(const Expr *Call, const Expr *Object,
                               llvm::ArrayRef<const Expr *> Args,
                               SourceRange At) {
  const ValueDecl *Model = rootDecl(Object);
  eval(Object);
  Place ModelPlace = unknown();
  if (Model) {
    auto It = Cur.Vars.find(Model);
    if (It != Cur.Vars.end() && !Facts.Escaped.count(Model))
      ModelPlace = It->second;
  }
  std::vector<std::pair<const Expr *, Place>> Inputs;
  for (const Expr *Arg : Args)
    tensorOperands(Arg, Inputs);
  std::string ModelName = Model ? Model->getNameAsString() : "the module";
  for (auto &[Input, P] : Inputs) {
    std::string Why;
    if (!conflict(ModelPlace, P, Why))
      continue;
    std::string InputName = text(Input);
    if (InputName.empty())
      InputName = "its input";
    std::vector<std::pair<SourceRange, std::string>> Notes;
    Notes.emplace_back(ModelPlace.Origin, "'" + ModelName + "' is placed on " +
                                              describe(ModelPlace) +
                                              " here by " + ModelPlace.How);
    Notes.emplace_back(P.Origin, "'" + InputName + "' is placed on " +
                                     describe(P) + " here by " + P.How);
    if (Reporting)
      Module.observer().mismatch(Context, At,
                                 "the module '" + ModelName + "' on " +
                                     describe(ModelPlace) +
                                     " is called with '" + InputName + "' on " +
                                     describe(P) + "; " + Why,
                                 Notes);
    return unknown();
  }
  Place Out = ModelPlace;
  Out.Scalar = false;
  return Out;
}

Place Analysis::evalCall(const CallExpr *Call) {
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call)) {
    const CXXMethodDecl *Method = Member->getMethodDecl();
    if (Method && isTensorClass(Method->getParent()))
      return evalTensorMethod(Member);
    if (Method && isModuleClass(Method->getParent())) {
      const Expr *Object = Member->getImplicitObjectArgument();
      if (Method->getName() == "to" && Member->getNumArgs() >= 1 &&
          isDeviceLike(strip(Member->getArg(0))->getType())) {
        Place P = deviceOf(Member->getArg(0));
        eval(Object);
        if (const ValueDecl *Model = rootDecl(Object)) {
          P.Scalar = false;
          P.Origin = Member->getSourceRange();
          std::string Written = text(Member->getSourceRange());
          P.How = Written.empty() || Written.size() > 60
                      ? std::string("'to(...)'")
                      : "'" + Written + "'";
          if (Facts.Escaped.count(Model) == 0)
            Cur.Vars[Model] = P;
        }
        return unknown();
      }
      if (Method->getName() == "forward") {
        llvm::SmallVector<const Expr *, 4> Args(Member->arguments());
        SourceRange At(Member->getExprLoc(), Member->getExprLoc());
        return evalModuleCall(Member, Object, Args, At);
      }
    }
  }
  const FunctionDecl *Callee = Call->getDirectCallee();
  if (Callee && inTorchNamespace(Callee) && !isa<CXXMethodDecl>(Callee)) {
    if (factoryNames().contains(Callee->getName()))
      return evalFactory(Call, Callee);
    std::vector<std::pair<const Expr *, Place>> Operands;
    for (const Expr *Arg : Call->arguments())
      tensorOperands(Arg, Operands);
    if (!isTensorType(Call->getType()))
      return unknown();
    SourceRange At = Call->getCallee()->getSourceRange();
    Place P = combine(At, Callee->getName(), Operands);
    P.Scalar = false;
    return P;
  }
  return evalUserCall(Call, Callee);
}

Place Analysis::evalUserCall(const CallExpr *Call, const FunctionDecl *Callee) {
  // The placements of the arguments its parameters take: the helper is then
  // analysed as called here (`train(net, device, batch)`).
  Env AtCall;
  unsigned Skip =
      isa<CXXOperatorCallExpr>(Call) && Callee && isa<CXXMethodDecl>(Callee)
          ? 1
          : 0;
  for (const Stmt *Child : Call->children()) {
    const auto *E = dyn_cast_or_null<Expr>(Child);
    if (!E)
      continue;
    const ParmVarDecl *Param = nullptr;
    for (unsigned I = Skip; Callee && I < Call->getNumArgs(); ++I)
      if (Call->getArg(I) == E && I - Skip < Callee->getNumParams())
        Param = Callee->getParamDecl(I - Skip);
    if (!Param || isa<CXXDefaultArgExpr>(E)) {
      eval(E);
      continue;
    }
    QualType Type = Param->getType();
    Place P;
    if (isTensorType(Type) || isDeviceLike(Type) || isOptionsType(Type)) {
      P = evalByType(Type.getNonReferenceType(), E);
    } else if (isModuleValue(Type)) {
      eval(E);
      if (const ValueDecl *Model = rootDecl(E))
        if (!Facts.Escaped.count(Model))
          if (auto It = Cur.Vars.find(Model); It != Cur.Vars.end())
            P = It->second;
    } else {
      eval(E);
    }
    if (!P.known())
      continue;
    P.How += " (passed to '" + Callee->getNameAsString() + "')";
    AtCall.Vars[Param] = P;
  }
  // A module the call may move: unknown after it.
  auto ForgetMovableModules = [&] {
    for (unsigned I = Skip; Callee && I < Call->getNumArgs(); ++I) {
      if (I - Skip >= Callee->getNumParams())
        break;
      QualType Type = Callee->getParamDecl(I - Skip)->getType();
      if (Type->isLValueReferenceType() &&
          !Type.getNonReferenceType().isConstQualified() && isModuleValue(Type))
        if (const ValueDecl *Model = rootDecl(Call->getArg(I)))
          Cur.Vars[Model] = unknown();
    }
  };
  if (!Callee || (isa<CXXMethodDecl>(Callee) &&
                  cast<CXXMethodDecl>(Callee)->isVirtual())) {
    ForgetMovableModules();
    return unknown();
  }
  Place P =
      AtCall.Vars.empty()
          ? (isTensorType(Call->getType()) ? Module.summaryOf(Context, Callee)
                                           : unknown())
          : Module.summaryAt(Context, Callee, AtCall, Reporting);
  ForgetMovableModules();
  if (!isTensorType(Call->getType()))
    return unknown();
  if (P.known())
    P.How += " (returned by '" + Callee->getNameAsString() + "')";
  return P;
}

Place Analysis::evalFactory(const CallExpr *Call, const FunctionDecl *Callee) {
  llvm::StringRef Name = Callee->getName();
  int OptionsArg = -1;
  for (unsigned I = 0; I < Callee->getNumParams() && I < Call->getNumArgs();
       ++I)
    if (isOptionsType(Callee->getParamDecl(I)->getType()))
      OptionsArg = I;
  Place Options = unknown();
  Place Like = unknown();
  bool HasOptionsParam = OptionsArg >= 0;
  for (unsigned I = 0; I < Call->getNumArgs(); ++I) {
    const Expr *Arg = Call->getArg(I);
    if (static_cast<int>(I) == OptionsArg) {
      if (isa<CXXDefaultArgExpr>(Arg)) {
        Options.K = Kind::NoDevice;
      } else {
        Options = optionsOf(Arg);
      }
      continue;
    }
    if (I == 0 && isLikeFactory(Name))
      Like = eval(Arg);
    else
      eval(Arg);
  }
  std::string Written = text(Call->getCallee()->getSourceRange());
  if (Written.empty())
    Written = Callee->getQualifiedNameAsString();
  Place P;
  if (isLikeFactory(Name)) {
    P = Options.known() ? Options : Like;
    if (Options.known()) {
      P.Origin = Call->getSourceRange();
      P.How = "'" + Written + "' with a device option";
    }
    P.Scalar = false;
    return P;
  }
  if (!HasOptionsParam)
    return unknown();
  if (Options.K == Kind::NoDevice) {
    P.K = Kind::Cpu;
    P.How = "'" + Written + "' without a device option";
  } else if (Options.known()) {
    P = Options;
    P.How = "'" + Written + "' with a device option";
  } else {
    P = unknown();
  }
  P.Origin = Call->getCallee()->getSourceRange();
  // A scalar: torch::tensor(1.0), torch::scalar_tensor(x).
  if (Name == "scalar_tensor")
    P.Scalar = true;
  if (Name == "tensor" && Call->getNumArgs() >= 1) {
    const Expr *Data = Call->getArg(0)->IgnoreImplicit();
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(Data))
      if (Construct->getNumArgs() == 1 &&
          strip(Construct->getArg(0))->getType()->isArithmeticType())
        P.Scalar = true;
  }
  if (Reporting)
    checkFactoryInForward(Call, Callee, Options, OptionsArg);
  return P;
}

void Analysis::checkFactoryInForward(const CallExpr *Call,
                                     const FunctionDecl *Callee,
                                     const Place &Options, int OptionsArg) {
  if (Options.K == Kind::NoDevice && Call != MovedObject)
    Module.observer().factoryWithoutDevice(Context, Call, Callee, Function,
                                           OptionsArg);
}

Place Analysis::evalTensorMethod(const CXXMemberCallExpr *Call) {
  const CXXMethodDecl *Method = Call->getMethodDecl();
  llvm::StringRef Name = Method->getName();
  const Expr *Object = Call->getImplicitObjectArgument();
  SourceLocation NameLoc = Call->getExprLoc();
  SourceRange Written(NameLoc, Call->getEndLoc());
  auto placedBy = [&](Place P) {
    P.Origin = Written;
    std::string T = text(Written);
    P.How = T.empty() || T.size() > 60 ? "'." + Name.str() + "(...)'"
                                       : "'." + T + "'";
    return P;
  };

  if (Name == "cuda" || Name == "cpu" || Name == "to") {
    const Expr *Saved = MovedObject;
    MovedObject = strip(Object);
    Place Of = eval(Object);
    MovedObject = Saved;
    Place P;
    if (Name == "cuda") {
      for (const Expr *Arg : Call->arguments())
        eval(Arg);
      P.K = Kind::Cuda;
      P.Index = -1;
    } else if (Name == "cpu") {
      P.K = Kind::Cpu;
    } else {
      if (Call->getNumArgs() == 0)
        return Of;
      const Expr *First = strip(Call->getArg(0));
      QualType Type = First->getType();
      if (isOptionsType(Type) || isDeviceLike(Type) ||
          isa<StringLiteral>(First)) {
        P = isOptionsType(Type) ? optionsOf(First) : deviceOf(First);
        if (P.K == Kind::NoDevice)
          P = Of; // A dtype change only.
        else if (!P.known())
          P = unknown();
      } else if (isTensorType(Type)) {
        P = eval(First);
      } else {
        eval(First);
        P = Of; // A dtype.
      }
      for (unsigned I = 1; I < Call->getNumArgs(); ++I)
        eval(Call->getArg(I));
      if (P.same(Of) && P.Origin == Of.Origin) {
        P.Scalar = Of.Scalar;
        return P;
      }
    }
    if (!P.known())
      return unknown();
    P.Scalar = Of.Scalar;
    return placedBy(P);
  }

  Place Of = eval(Object);
  bool ReturnsTensor = isTensorType(Call->getType());
  static const llvm::StringSet<> NoDeviceCheck = {
      "copy_",    "type_as",    "expand_as", "view_as",    "reshape_as",
      "index",    "index_put_", "index_put", "set_",       "new_zeros",
      "new_ones", "new_empty",  "new_full",  "new_tensor", "new_empty_strided"};
  if (NoDeviceCheck.contains(Name)) {
    for (const Expr *Arg : Call->arguments())
      eval(Arg);
    if (!ReturnsTensor)
      return unknown();
    Of.Scalar = false;
    return Of;
  }
  std::vector<std::pair<const Expr *, Place>> Operands;
  Operands.emplace_back(strip(Object), Of);
  for (const Expr *Arg : Call->arguments())
    tensorOperands(Arg, Operands);
  if (!ReturnsTensor)
    return unknown();
  bool Explicit = false;
  for (const Expr *Arg : Call->arguments())
    Explicit |= !isa<CXXDefaultArgExpr>(Arg);
  static const llvm::StringSet<> Reductions = {
      "sum", "mean", "max", "min",  "prod", "norm",     "std",
      "var", "all",  "any", "amax", "amin", "logsumexp"};
  static const llvm::StringSet<> KeepShape = {
      "detach", "clone", "contiguous", "requires_grad_", "float", "double",
      "half",   "long",  "int"};
  Place P = Operands.size() == 1
                ? Of
                : combine(SourceRange(NameLoc, NameLoc), Name, Operands);
  if (Reductions.contains(Name) && !Explicit && Operands.size() == 1)
    P.Scalar = true;
  else if (!KeepShape.contains(Name))
    P.Scalar = false;
  return P;
}

} // namespace

// --- The analysis of a run -------------------------------------------------

void PlacementAnalysis::registerMatchers(MatchFinder &Finder) {
  Finder.addMatcher(functionDecl(isDefinition()).bind("function"), this);
  Finder.addMatcher(lambdaExpr().bind("lambda"), this);
}

void PlacementAnalysis::onStartOfTranslationUnit() {
  Summaries.clear();
  ContextSummaries.clear();
  ReportedContexts.clear();
  InProgress.clear();
  Observer.startTranslationUnit();
}

void PlacementAnalysis::run(const MatchFinder::MatchResult &Result) {
  if (const auto *Function = Result.Nodes.getNodeAs<FunctionDecl>("function"))
    summaryOf(*Result.Context, Function);
  if (const auto *Lambda = Result.Nodes.getNodeAs<LambdaExpr>("lambda"))
    summaryOf(*Result.Context, Lambda->getCallOperator());
}

Place PlacementAnalysis::summaryOf(ASTContext &Context,
                                   const FunctionDecl *Function) {
  if (!Function)
    return unknown();
  Function = Function->getDefinition() ? Function->getDefinition() : Function;
  auto Done = Summaries.find(Function);
  if (Done != Summaries.end())
    return Done->second;
  if (!isAnalysable(Context, Function) || !InProgress.insert(Function).second)
    return unknown();
  Place Summary = Analysis(*this, Context, Function).run();
  InProgress.erase(Function);
  Summaries[Function] = Summary;
  return Summary;
}

Place PlacementAnalysis::summaryAt(ASTContext &Context,
                                   const FunctionDecl *Function,
                                   const Env &Params, bool Report) {
  Function = Function->getDefinition() ? Function->getDefinition() : Function;
  std::string Key = std::to_string(reinterpret_cast<uintptr_t>(Function));
  std::vector<std::pair<const ValueDecl *, Place>> Sorted(Params.Vars.begin(),
                                                          Params.Vars.end());
  llvm::sort(Sorted, [](const auto &A, const auto &B) {
    return A.first->getLocation() < B.first->getLocation();
  });
  for (const auto &[Decl, P] : Sorted)
    Key += llvm::formatv("|{0}:{1}:{2}:{3}:{4}",
                         reinterpret_cast<uintptr_t>(Decl), int(P.K), P.Index,
                         reinterpret_cast<uintptr_t>(P.Var), P.Scalar)
               .str();
  auto Done = ContextSummaries.find(Key);
  if (Done != ContextSummaries.end() &&
      (!Report || ReportedContexts.count(Key)))
    return Done->second;
  // Calls are followed three deep, and never into a function being
  // analysed.
  if (!isAnalysable(Context, Function) || InProgress.size() >= 3 ||
      !InProgress.insert(Function).second)
    return unknown();
  Place Summary =
      Analysis(*this, Context, Function, Params, /*Quiet=*/!Report).run();
  InProgress.erase(Function);
  ContextSummaries[Key] = Summary;
  if (Report)
    ReportedContexts.insert(Key);
  return Summary;
}

bool PlacementAnalysis::isAnalysable(ASTContext &Context,
                                     const FunctionDecl *Function) {
  if (!Function->doesThisDeclarationHaveABody() || !Function->getBody() ||
      Function->isDependentContext() || Function->isTemplateInstantiation() ||
      Function->isImplicit())
    return false;
  const SourceManager &SM = Context.getSourceManager();
  SourceLocation Loc = SM.getExpansionLoc(Function->getLocation());
  return Loc.isValid() && !SM.isInSystemHeader(Loc);
}

} // namespace ddpify
