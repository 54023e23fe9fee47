//===- FullBatches.cpp - Training loops fed whole tensors -----------------===//
//
// A training loop (backward() and an optimizer step, nested in no other
// loop) that feeds tensors declared before it whole to a model. Every
// expression of the loop is classified by what it holds of the rows of those
// tensors: nothing that differs by rank (a scalar), one value per row (a
// model's output, `out.argmax(1)`, a per-row loss), a figure over the rows (a
// mean or a sum: `.mean()`, `.sum(0)`, a loss with a mean or sum reduction,
// and linear combinations of them), the value of such a figure once made
// global, or something ddpify cannot follow (a reduction across rows that is
// no mean or sum, rows handed to a function of the program's own, printed or
// stored). The loss backward() takes must be a figure built from no other
// figure's value: then each rank may take its block of rows and weigh its
// loss, and R15 shards the loop. A loss that is something else keeps the
// whole batch (WholeWhy).
//
//===----------------------------------------------------------------------===//

#include "ddpify/FullBatches.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Work.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/SaveAndRestore.h"
#include <algorithm>
#include <functional>
#include <map>
#include <set>

using namespace clang;

namespace ddpify {
namespace {

const Expr *strip(const Expr *E) {
  for (int Depth = 0; E && Depth < 16; ++Depth) {
    E = stripParensAndImplicit(E);
    const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E);
    if (!Construct || Construct->getNumArgs() != 1 ||
        isa<CXXTemporaryObjectExpr>(Construct) ||
        !(Construct->getConstructor()->isCopyOrMoveConstructor() ||
          Construct->getConstructor()->isConvertingConstructor(false)))
      return E;
    E = Construct->getArg(0);
  }
  return E;
}

const VarDecl *varOf(const Expr *E) {
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(strip(E)))
    return dyn_cast<VarDecl>(Ref->getDecl());
  return nullptr;
}

/// The local a tensor is named by: a variable, or a binding of a structured
/// binding (`auto [x, y] = make_data();`).
const ValueDecl *tensorDeclOf(const Expr *E) {
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(strip(E)))
    if (isa<VarDecl, BindingDecl>(Ref->getDecl()))
      return Ref->getDecl();
  return nullptr;
}

/// A local variable or parameter, or a binding of a local structured
/// binding.
bool isLocalTensorDecl(const ValueDecl *D) {
  if (const auto *Var = dyn_cast<VarDecl>(D))
    return Var->isLocalVarDeclOrParm();
  if (const auto *Binding = dyn_cast<BindingDecl>(D))
    if (const auto *Whole =
            dyn_cast_or_null<VarDecl>(Binding->getDecomposedDecl()))
      return Whole->isLocalVarDecl();
  return false;
}

/// The locals the object a binding of `auto &[x, y] = data;` refers into is
/// reached through (data; holder and p of `auto &[x, y] = holder.pair` or
/// `= *p`): none for anything else.
std::vector<const VarDecl *> referredHolders(const ValueDecl *D) {
  std::vector<const VarDecl *> Holders;
  const auto *Binding = dyn_cast<BindingDecl>(D);
  const auto *Whole =
      Binding ? dyn_cast_or_null<VarDecl>(Binding->getDecomposedDecl())
              : nullptr;
  if (!Whole || !Whole->getType()->isReferenceType())
    return Holders;
  llvm::SmallVector<const Stmt *, 8> Work{Whole->getInit()};
  while (!Work.empty()) {
    const Stmt *S = Work.pop_back_val();
    if (!S)
      continue;
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
        Holders.push_back(Var);
    for (const Stmt *Child : S->children())
      Work.push_back(Child);
  }
  return Holders;
}

bool isTensorRecord(const CXXRecordDecl *Record) {
  if (!Record)
    return false;
  std::string Name = Record->getQualifiedNameAsString();
  return Name == "at::Tensor" || Name == "at::TensorBase";
}

bool isTensorType(QualType T) {
  return isTensorRecord(T.getNonReferenceType()->getAsCXXRecordDecl());
}

std::string textOf(ASTContext &Context, const Expr *E) {
  return sourceText(Context, E->getSourceRange());
}

/// A literal integer, negated or not; false when E is none.
bool integerLiteral(const Expr *E, int64_t &Value) {
  E = strip(E);
  bool Negative = false;
  if (const auto *Unary = dyn_cast_or_null<UnaryOperator>(E))
    if (Unary->getOpcode() == UO_Minus) {
      Negative = true;
      E = strip(Unary->getSubExpr());
    }
  const auto *Literal = dyn_cast_or_null<IntegerLiteral>(E);
  if (!Literal)
    return false;
  Value = Literal->getValue().getSExtValue();
  if (Negative)
    Value = -Value;
  return true;
}

/// The first integer of E: a literal, or the first element of `{-1, k}`.
bool firstInteger(const Expr *E, int64_t &Value) {
  E = strip(E);
  if (const auto *List = dyn_cast_or_null<InitListExpr>(E))
    return List->getNumInits() > 0 && firstInteger(List->getInit(0), Value);
  if (const auto *List = dyn_cast_or_null<CXXStdInitializerListExpr>(E))
    return firstInteger(List->getSubExpr(), Value);
  if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E))
    return Construct->getNumArgs() > 0 &&
           firstInteger(Construct->getArg(0), Value);
  return integerLiteral(E, Value);
}

bool isDefaultArgument(const Expr *E) {
  return isa<CXXDefaultArgExpr>(E->IgnoreImplicit());
}

// What a tensor method (or at::/torch:: function on a tensor) does to rows.
const llvm::StringSet<> KeepsRows = {
    "to",          "cuda",       "cpu",         "float",      "double",
    "long",        "toType",     "type_as",     "contiguous", "detach",
    "clone",       "sigmoid",    "tanh",        "relu",       "exp",
    "log",         "abs",        "neg",         "sqrt",       "pow",
    "clamp",       "clamp_min",  "clamp_max",   "round",      "floor",
    "ceil",        "sign",       "log1p",       "expm1",      "square",
    "eq",          "ne",         "lt",          "le",         "gt",
    "ge",          "add",        "sub",         "mul",        "div",
    "logical_and", "logical_or", "logical_not", "squeeze",    "flatten",
    "int",         "bool",       "sigmoid_",    "exp2",       "reciprocal",
    "rsqrt"};
const llvm::StringSet<> Reshapes = {"view", "reshape"};
const llvm::StringSet<> MeanOrSum = {"mean", "sum"};
/// Reductions along a dimension: per row when it is not 0.
const llvm::StringSet<> AlongDimension = {
    "argmax",      "argmin",    "max",       "min",  "amax", "amin",  "softmax",
    "log_softmax", "logsumexp", "all",       "any",  "std",  "var",   "prod",
    "cumsum",      "cumprod",   "unsqueeze", "mean", "sum",  "select"};
const llvm::StringSet<> Metadata = {"dim",     "scalar_type",   "dtype",
                                    "device",  "options",       "is_cuda",
                                    "defined", "requires_grad", "ndimension"};

enum class Reduction { Mean, Sum, None, Unknown };

Reduction reductionIn(llvm::StringRef Text) {
  if (Text.contains("kSum") || Text.contains("Reduction::Sum"))
    return Reduction::Sum;
  if (Text.contains("kNone") || Text.contains("Reduction::None"))
    return Reduction::None;
  if (Text.contains("kMean") || Text.contains("Reduction::Mean"))
    return Reduction::Mean;
  return Reduction::Unknown;
}

/// A loss over rows ddpify knows: its input and target, its reduction, and
/// why it cannot be decomposed by rows (class weights, ignore_index).
struct LossCall {
  bool Is = false;
  const Expr *Input = nullptr, *Target = nullptr;
  Reduction R = Reduction::Mean;
  std::string Why;
};

/// The configuration text of a loss module: a local's initialiser, a
/// member's in-class initialiser and its constructors' initialisers.
std::string moduleConfig(ASTContext &Context, const Expr *Object) {
  Object = strip(Object);
  if (const auto *Arrow = dyn_cast_or_null<CXXOperatorCallExpr>(Object))
    if (Arrow->getOperator() == OO_Arrow && Arrow->getNumArgs() > 0)
      Object = strip(Arrow->getArg(0));
  if (const auto *Temporary = dyn_cast_or_null<CXXConstructExpr>(Object))
    return textOf(Context, Temporary);
  if (const VarDecl *Var = varOf(Object)) {
    if (!Var->getInit())
      return "";
    const auto *Construct = dyn_cast<CXXConstructExpr>(strip(Var->getInit()));
    if (Construct && Construct->getNumArgs() == 0)
      return "";
    return textOf(Context, Var->getInit());
  }
  const auto *Member = dyn_cast_or_null<MemberExpr>(Object);
  const auto *Field =
      Member ? dyn_cast<FieldDecl>(Member->getMemberDecl()) : nullptr;
  if (!Field)
    return "?";
  std::string Text;
  if (const Expr *Init = Field->getInClassInitializer())
    Text += textOf(Context, Init);
  if (const auto *Record = dyn_cast<CXXRecordDecl>(Field->getParent()))
    for (const CXXConstructorDecl *Constructor : Record->ctors())
      for (const CXXCtorInitializer *Init : Constructor->inits())
        if (Init->isWritten() && Init->getMember() == Field)
          Text += " " + textOf(Context, Init->getInit());
  return Text;
}

/// The options of a loss (a functional form's options argument, a module's
/// configuration) read into Loss: its reduction, weights, ignore_index.
void readOptions(LossCall &Loss, llvm::StringRef Text, bool ClassLoss) {
  Loss.R = reductionIn(Text);
  if (Loss.R == Reduction::Unknown)
    Loss.R =
        Text.trim().empty() || Text.contains("Options") || Text.trim() == "{}"
            ? Reduction::Mean
            : Reduction::Unknown;
  if (Text.contains(".weight(") || Text.contains("Options(torch::Tensor"))
    Loss.Why = ClassLoss ? "its loss weighs the classes, so its mean "
                           "divides by the weights of the whole batch's "
                           "targets"
                         : "its loss weighs the elements with weights "
                           "ddpify does not shard";
  else if (Text.contains("ignore_index("))
    Loss.Why = "its loss ignores a target class, so its mean divides by "
               "the count of the whole batch's other targets";
}

LossCall lossCall(ASTContext &Context, const Expr *E) {
  LossCall Loss;
  E = strip(E);
  const auto *Call = dyn_cast_or_null<CallExpr>(E);
  if (!Call)
    return Loss;
  static const llvm::StringSet<> ClassLosses = {"cross_entropy_loss",
                                                "cross_entropy", "nll_loss",
                                                "CrossEntropyLoss", "NLLLoss"};
  // Module forms: `criterion(out, y)`, `criterion->forward(out, y)`.
  static const llvm::StringSet<> Modules = {
      "MSELoss",          "L1Loss",  "SmoothL1Loss", "HuberLoss",
      "CrossEntropyLoss", "NLLLoss", "BCELoss",      "BCEWithLogitsLoss"};
  auto ModuleName = [](const CXXRecordDecl *Record) -> std::string {
    if (!Record)
      return "";
    std::string Name = Record->getQualifiedNameAsString();
    llvm::StringRef Short = Name;
    if (!Short.consume_front("torch::nn::"))
      return "";
    Short.consume_back("Impl");
    return Modules.contains(Short) ? Short.str() : "";
  };
  const Expr *Object = nullptr;
  unsigned First = 0;
  std::string Module;
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Call)) {
    if (Op->getOperator() == OO_Call && Op->getNumArgs() == 3) {
      Object = Op->getArg(0)->IgnoreImpCasts();
      const CXXRecordDecl *Holder =
          Object->getType().getNonReferenceType()->getAsCXXRecordDecl();
      if (const auto *Specialization =
              dyn_cast_or_null<ClassTemplateSpecializationDecl>(Holder))
        if (Specialization->getTemplateArgs().size() == 1 &&
            Specialization->getTemplateArgs()[0].getKind() ==
                TemplateArgument::Type)
          Holder = Specialization->getTemplateArgs()[0]
                       .getAsType()
                       ->getAsCXXRecordDecl();
      Module = ModuleName(Holder);
      First = 1;
    }
  } else if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call)) {
    const CXXMethodDecl *Method = Member->getMethodDecl();
    if (Method && Method->getIdentifier() && Method->getName() == "forward" &&
        Member->getNumArgs() == 2) {
      Object = Member->getImplicitObjectArgument();
      Module = ModuleName(Method->getParent());
    }
  }
  if (!Module.empty()) {
    Loss.Is = true;
    Loss.Input = Call->getArg(First);
    Loss.Target = Call->getArg(First + 1);
    readOptions(Loss, moduleConfig(Context, Object),
                ClassLosses.contains(Module));
    return Loss;
  }
  const FunctionDecl *Callee = Call->getDirectCallee();
  if (!Callee || !Callee->getIdentifier() || Call->getNumArgs() < 2)
    return Loss;
  std::string Qualified = Callee->getQualifiedNameAsString();
  llvm::StringRef Name = Callee->getName();
  // at:: forms: the index of their class weights and of their reduction.
  static const std::map<std::string, std::pair<int, int>> AtLosses = {
      {"mse_loss", {-1, 2}},
      {"l1_loss", {-1, 2}},
      {"smooth_l1_loss", {-1, 2}},
      {"huber_loss", {-1, 2}},
      {"cross_entropy_loss", {2, 3}},
      {"nll_loss", {2, 3}},
      {"binary_cross_entropy", {2, 3}},
      {"binary_cross_entropy_with_logits", {2, 4}}};
  static const llvm::StringSet<> Functional = {
      "mse_loss",
      "l1_loss",
      "smooth_l1_loss",
      "huber_loss",
      "cross_entropy",
      "nll_loss",
      "binary_cross_entropy",
      "binary_cross_entropy_with_logits"};
  bool Class = ClassLosses.contains(Name);
  if (Qualified == ("torch::nn::functional::" + Name).str() &&
      Functional.contains(Name)) {
    Loss.Is = true;
    Loss.Input = Call->getArg(0);
    Loss.Target = Call->getArg(1);
    if (Call->getNumArgs() > 2 && !isDefaultArgument(Call->getArg(2)))
      readOptions(Loss, textOf(Context, Call->getArg(2)), Class);
    return Loss;
  }
  auto At = AtLosses.find(Name.str());
  if (At == AtLosses.end() ||
      (Qualified != "at::" + Name.str() && Qualified != "torch::" + Name.str()))
    return Loss;
  Loss.Is = true;
  Loss.Input = Call->getArg(0);
  Loss.Target = Call->getArg(1);
  auto [WeightAt, ReductionAt] = At->second;
  for (unsigned I = 2; I < Call->getNumArgs(); ++I) {
    const Expr *Arg = Call->getArg(I);
    if (isDefaultArgument(Arg))
      continue;
    std::string Text = textOf(Context, Arg);
    if (static_cast<int>(I) == ReductionAt) {
      Loss.R = reductionIn(Text);
      int64_t Value = 0;
      if (Loss.R == Reduction::Unknown && integerLiteral(Arg, Value))
        Loss.R = Value == 0   ? Reduction::None
                 : Value == 1 ? Reduction::Mean
                 : Value == 2 ? Reduction::Sum
                              : Reduction::Unknown;
    } else if (static_cast<int>(I) == WeightAt && Text != "{}") {
      Loss.Why = Class ? "its loss weighs the classes, so its mean divides "
                         "by the weights of the whole batch's targets"
                       : "its loss weighs the elements with weights ddpify "
                         "does not shard";
    } else if (Class && static_cast<int>(I) == ReductionAt + 1) {
      Loss.Why = "its loss ignores a target class, so its mean divides by "
                 "the count of the whole batch's other targets";
    }
  }
  return Loss;
}

/// The name of a call's function: a method's own, a function's last part,
/// for at::, torch:: and std:: functions.
std::string shortName(const CallExpr *Call) {
  if (const FunctionDecl *Callee = Call->getDirectCallee())
    if (Callee->getIdentifier())
      return Callee->getName().str();
  return "";
}

bool isTensorMethod(const CallExpr *Call) {
  const auto *Member = dyn_cast<CXXMemberCallExpr>(Call);
  const CXXMethodDecl *Method = Member ? Member->getMethodDecl() : nullptr;
  return Method && isTensorRecord(Method->getParent());
}

/// An at:: or torch:: function whose first argument is a tensor.
bool isTensorFunction(const CallExpr *Call) {
  if (isa<CXXMemberCallExpr, CXXOperatorCallExpr>(Call) ||
      Call->getNumArgs() == 0 || !isTensorType(Call->getArg(0)->getType()))
    return false;
  std::string Name = qualifiedCalleeName(Call);
  return llvm::StringRef(Name).starts_with("at::") ||
         llvm::StringRef(Name).starts_with("torch::");
}

/// The local tensor a forward pass or a loss is fed, through calls that keep
/// its rows (`x.to(device)`, `y.view({-1})`).
const ValueDecl *fedTensor(const Expr *E) {
  for (int Depth = 0; Depth < 8; ++Depth) {
    E = strip(E);
    if (const ValueDecl *Var = tensorDeclOf(E))
      return isTensorType(Var->getType()) && isLocalTensorDecl(Var) ? Var
                                                                    : nullptr;
    const auto *Call = dyn_cast_or_null<CXXMemberCallExpr>(E);
    if (!Call || !isTensorMethod(Call))
      return nullptr;
    std::string Name = shortName(Call);
    if (!KeepsRows.contains(Name) && !Reshapes.contains(Name))
      return nullptr;
    E = Call->getImplicitObjectArgument();
  }
  return nullptr;
}

bool isComparison(const CallExpr *Call) {
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Call))
    return Op->getOperator() == OO_EqualEqual ||
           Op->getOperator() == OO_ExclaimEqual;
  std::string Name = shortName(Call);
  return (isTensorMethod(Call) || isTensorFunction(Call)) &&
         (Name == "eq" || Name == "ne");
}

/// The tensors a stretch of code feeds a model or compares with what the
/// model gives (`criterion(out, y)`, `pred.eq(y)`): the rows to shard.
void collectFedTensors(ASTContext &Context, const Stmt *S,
                       llvm::function_ref<bool(const ValueDecl *)> IsOuter,
                       std::set<const ValueDecl *> &Fed, bool &Forward) {
  if (!S || isa<LambdaExpr>(S))
    return;
  if (const auto *Call = dyn_cast<CallExpr>(S)) {
    auto Add = [&](const Expr *E) {
      if (const ValueDecl *Var = fedTensor(E))
        if (IsOuter(Var))
          Fed.insert(Var);
    };
    LossCall Loss = lossCall(Context, Call);
    if (Loss.Is) {
      Add(Loss.Input);
      Add(Loss.Target);
    } else if (isForwardPass(Call)) {
      size_t Before = Fed.size();
      unsigned First = isa<CXXOperatorCallExpr>(Call) ? 1 : 0;
      for (unsigned I = First; I < Call->getNumArgs(); ++I)
        Add(Call->getArg(I));
      Forward |= Fed.size() > Before;
    } else if (isComparison(Call)) {
      if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
        Add(Member->getImplicitObjectArgument());
      for (const Expr *Arg : Call->arguments())
        Add(Arg);
    }
  }
  for (const Stmt *Child : S->children())
    collectFedTensors(Context, Child, IsOuter, Fed, Forward);
}

enum class Row { Scalar, Rows, Figure, Global, Bad };

struct Value {
  Row K = Row::Scalar;
  /// For a figure: a sum (else a mean).
  bool Sum = false;
  /// A tensor declared outside the stretch that is not sharded.
  bool Outer = false;
  /// For rows: the sharded tensors they come from.
  std::set<const ValueDecl *> From;
};

/// Classifies the expressions of a stretch of code by what they hold of the
/// rows of Seeds (the file comment), and collects the edits of a shard.
class RowClassifier {
public:
  RowClassifier(ASTContext &Context, std::set<const ValueDecl *> Seeds,
                std::function<bool(const ValueDecl *)> IsOuter, RowRegion &Out)
      : Context(Context), Seeds(std::move(Seeds)), IsOuter(std::move(IsOuter)),
        Out(Out) {
    for (const ValueDecl *Seed : this->Seeds)
      Group[Seed] = Seed;
  }

  /// The loss's expression, the backward() call, the local holding the
  /// loss (global once backward() is called).
  const Expr *LossInit = nullptr;
  const CXXMemberCallExpr *Backward = nullptr;
  const VarDecl *LossVar = nullptr;
  Value LossValue;
  std::string LossWhy;
  /// Where the use LossWhy names is.
  SourceLocation LossWhyAt;
  bool LossSeen = false;

  std::string Why;
  /// Where the use Why names is: the expression being classified.
  SourceLocation WhyAt;

  void walk(const Stmt *S) {
    if (!S || !Why.empty())
      return;
    llvm::SaveAndRestore At(Current, S->getBeginLoc());
    if (const auto *Decls = dyn_cast<DeclStmt>(S)) {
      for (const Decl *D : Decls->decls())
        if (const auto *Var = dyn_cast<VarDecl>(D))
          if (const Expr *Init = Var->getInit())
            declare(Var, Init);
      return;
    }
    if (const auto *E = dyn_cast<Expr>(S)) {
      InOutput = isOutputStatement(E);
      Value V = classify(E);
      consume(E, V);
      InOutput = false;
      if (V.K == Row::Rows && !isa<CallExpr>(strip(E)) &&
          !isIncrementOrAssignment(strip(E)))
        bad("'" + textOf(Context, E) + "' holds one value per row");
      return;
    }
    if (const auto *Return = dyn_cast<ReturnStmt>(S)) {
      if (const Expr *Result = Return->getRetValue()) {
        Value V = classify(Result);
        consume(Result, V);
        if (V.K == Row::Rows)
          bad("it returns rows");
      }
      return;
    }
    for (const Stmt *Child : S->children())
      walk(Child);
  }

  /// Whether every sharded tensor is in one group (they meet in one
  /// expression, directly or not).
  bool oneGroup() {
    const ValueDecl *Root = nullptr;
    for (const ValueDecl *Seed : Seeds) {
      const ValueDecl *R = find(Seed);
      if (Root && R != Root)
        return false;
      Root = R;
    }
    return true;
  }

private:
  void declare(const VarDecl *Var, const Expr *Init) {
    Value V = classify(Init);
    consume(Init, V);
    if (V.K == Row::Rows) {
      if (Var->getType()->isReferenceType() || !isTensorType(Var->getType()))
        bad("'" + Var->getNameAsString() + "' holds rows by reference");
      else
        RowLocals[Var].insert(V.From.begin(), V.From.end());
    } else if (V.K == Row::Global) {
      GlobalLocals.insert(Var);
    }
  }

  Value bad(std::string Reason) {
    if (Why.empty()) {
      Why = std::move(Reason);
      WhyAt = Current;
    }
    Value V;
    V.K = Row::Bad;
    return V;
  }

  const ValueDecl *find(const ValueDecl *Var) {
    while (Group[Var] != Var)
      Var = Group[Var];
    return Var;
  }
  void join(const std::set<const ValueDecl *> &From) {
    const ValueDecl *Root = nullptr;
    for (const ValueDecl *Var : From) {
      if (Root)
        Group[find(Var)] = find(Root);
      Root = Var;
    }
  }

  /// A figure used as a value: made global (wrapped) where it is.
  void consume(const Expr *E, Value &V) {
    if (V.K != Row::Figure)
      return;
    if (!Recording) {
      LastFigure = textOf(Context, E);
      LastFigureAt = E->getBeginLoc();
    } else if (InOutput) {
      V = bad("the figure '" + textOf(Context, E) +
              "' over the rows is computed inside output");
      return;
    } else {
      Out.Figures.push_back({E, V.Sum});
    }
    V.K = Row::Global;
    V.From.clear();
    SawGlobal = true;
  }

  /// Values combined element by element (arithmetic, comparisons, a call
  /// that keeps rows with rows as its arguments).
  Value combine(std::vector<std::pair<const Expr *, Value>> Parts) {
    Value Result;
    bool AnyRows = false, AnyOuter = false;
    std::string OuterText;
    for (auto &[E, V] : Parts) {
      consume(E, V);
      if (V.K == Row::Bad)
        return V;
      if (V.K == Row::Rows) {
        AnyRows = true;
        Result.From.insert(V.From.begin(), V.From.end());
      } else if (V.Outer) {
        AnyOuter = true;
        OuterText = textOf(Context, E);
      }
      if (V.K == Row::Global && Result.K == Row::Scalar)
        Result.K = Row::Global;
    }
    if (AnyRows && AnyOuter)
      return bad("the tensor '" + OuterText +
                 "' meets the rows, and ddpify cannot tell whether it holds "
                 "one value per row");
    if (AnyRows) {
      Result.K = Row::Rows;
      join(Result.From);
    }
    Result.Outer = AnyOuter;
    return Result;
  }

  /// Figures combined linearly stay figures: F * s, F / s, F + G, F - G (of
  /// one kind), F + s for a mean.
  bool linearFigure(const Value &L, const Value &R, char Op, Value &Result) {
    auto Plain = [](const Value &V) { return V.K == Row::Scalar && !V.Outer; };
    Result = Value();
    Result.K = Row::Figure;
    Result.From = L.From;
    Result.From.insert(R.From.begin(), R.From.end());
    if (L.K == Row::Figure && Plain(R) && (Op == '*' || Op == '/')) {
      Result.Sum = L.Sum;
      return true;
    }
    if (R.K == Row::Figure && Plain(L) && Op == '*') {
      Result.Sum = R.Sum;
      return true;
    }
    if (L.K == Row::Figure && R.K == Row::Figure && L.Sum == R.Sum &&
        (Op == '+' || Op == '-')) {
      Result.Sum = L.Sum;
      return true;
    }
    if ((Op == '+' || Op == '-') &&
        ((L.K == Row::Figure && !L.Sum && Plain(R)) ||
         (R.K == Row::Figure && !R.Sum && Plain(L)))) {
      Result.Sum = false;
      return true;
    }
    return false;
  }

  Value binary(const Expr *LE, const Expr *RE, char Op) {
    Value L = classify(LE), R = classify(RE);
    Value Result;
    if (L.K != Row::Bad && R.K != Row::Bad && linearFigure(L, R, Op, Result))
      return Result;
    return combine({{LE, L}, {RE, R}});
  }

  Value assign(const Expr *LHS, const Expr *RHS) {
    const ValueDecl *Target = tensorDeclOf(LHS);
    if (Target && Seeds.count(Target))
      return bad("'" + Target->getNameAsString() + "' is re-assigned in it");
    Value V = classify(RHS);
    consume(RHS, V);
    if (V.K == Row::Bad)
      return V;
    if (V.K == Row::Rows) {
      if (Target && RowLocals.count(Target)) {
        RowLocals[Target].insert(V.From.begin(), V.From.end());
        return V;
      }
      return bad("rows are stored in '" + textOf(Context, LHS) + "'");
    }
    Value Left = classify(LHS);
    if (Left.K == Row::Rows || Left.K == Row::Bad)
      return Left.K == Row::Bad ? Left
                                : bad("'" + textOf(Context, LHS) +
                                      "' holding rows is re-assigned");
    if (V.K == Row::Global && Target)
      GlobalLocals.insert(Target);
    return V;
  }

  Value classifyLoss(const Expr *E) {
    std::string Saved = std::move(Why);
    SourceLocation SavedAt = WhyAt;
    Why.clear();
    bool SavedRecording = Recording;
    Recording = false;
    LastFigure.clear();
    const Expr *Init = LossInit;
    LossInit = nullptr;
    Value V = classify(E);
    LossInit = Init;
    Recording = SavedRecording;
    LossSeen = true;
    LossValue = V;
    LossWhyAt = E->getBeginLoc();
    if (V.K == Row::Bad) {
      LossWhy = Why;
      LossWhyAt = WhyAt;
    } else if (V.K == Row::Global ||
               (V.K == Row::Figure && !LastFigure.empty())) {
      LossWhyAt = LastFigureAt;
      LossWhy = "its loss depends on '" + LastFigure +
                "', a figure computed over the whole batch";
    } else if (V.K == Row::Rows) {
      LossWhy = "its loss is not reduced over the rows";
    }
    Why = std::move(Saved);
    WhyAt = SavedAt;
    Value Result;
    Result.K = Row::Global;
    return Result;
  }

  Value classify(const Expr *E) {
    E = strip(E);
    if (!E)
      return Value();
    llvm::SaveAndRestore At(Current, E->getBeginLoc());
    if (LossInit && E == strip(LossInit))
      return classifyLoss(E);
    if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
      const ValueDecl *Var = tensorDeclOf(Ref);
      Value V;
      if (!Var)
        return V;
      if (Seeds.count(Var)) {
        Out.Uses.push_back(Ref);
        V.K = Row::Rows;
        V.From.insert(Var);
      } else if (auto Local = RowLocals.find(Var); Local != RowLocals.end()) {
        V.K = Row::Rows;
        V.From = Local->second;
      } else if (Var == LossVar || GlobalLocals.count(Var)) {
        V.K = Row::Global;
      } else if (isTensorType(Var->getType()) && IsOuter(Var)) {
        V.Outer = true;
      }
      return V;
    }
    if (const auto *Call = dyn_cast<CallExpr>(E))
      return classifyCall(Call);
    if (const auto *Op = dyn_cast<BinaryOperator>(E)) {
      if (Op->isAssignmentOp())
        return assign(Op->getLHS(), Op->getRHS());
      char Sym = Op->getOpcode() == BO_Mul   ? '*'
                 : Op->getOpcode() == BO_Div ? '/'
                 : Op->getOpcode() == BO_Add ? '+'
                 : Op->getOpcode() == BO_Sub ? '-'
                                             : '?';
      return binary(Op->getLHS(), Op->getRHS(), Sym);
    }
    if (const auto *Op = dyn_cast<UnaryOperator>(E)) {
      Value V = classify(Op->getSubExpr());
      consume(Op->getSubExpr(), V);
      return V;
    }
    if (const auto *Cast = dyn_cast<ExplicitCastExpr>(E)) {
      Value V = classify(Cast->getSubExpr());
      consume(Cast->getSubExpr(), V);
      return V;
    }
    if (const auto *Lambda = dyn_cast<LambdaExpr>(E))
      return mentionsRows(Lambda->getBody()) ? bad("a lambda reads the rows")
                                             : Value();
    if (isa<MemberExpr, ArraySubscriptExpr>(E)) {
      for (const Stmt *Child : E->children())
        if (const auto *Sub = dyn_cast<Expr>(Child)) {
          Value V = classify(Sub);
          if (V.K == Row::Rows || V.K == Row::Bad)
            return V.K == Row::Bad ? V
                                   : bad("'" + textOf(Context, E) +
                                         "' picks out of the rows");
        }
      return Value();
    }
    // Anything else: its parts must hold no rows.
    std::vector<std::pair<const Expr *, Value>> Parts;
    for (const Stmt *Child : E->children())
      if (const auto *Sub = dyn_cast_or_null<Expr>(Child))
        Parts.push_back({Sub, classify(Sub)});
    Value V = combine(Parts);
    if (V.K == Row::Rows && !isa<ConditionalOperator, InitListExpr>(E))
      return bad("rows reach '" + textOf(Context, E) + "'");
    if (V.K == Row::Rows && isa<InitListExpr>(E))
      return bad("rows are gathered in '" + textOf(Context, E) + "'");
    return V;
  }

  bool mentionsRows(const Stmt *S) {
    if (!S)
      return false;
    if (const ValueDecl *Var = tensorDeclOf(dyn_cast<Expr>(S)))
      if (Seeds.count(Var) || RowLocals.count(Var))
        return true;
    for (const Stmt *Child : S->children())
      if (mentionsRows(Child))
        return true;
    return false;
  }

  /// A tensor operation Name on Object with Args (the rest of a tensor
  /// function's arguments).
  Value tensorOperation(const CallExpr *Call, const std::string &Name,
                        const Expr *ObjectExpr,
                        llvm::ArrayRef<const Expr *> Args) {
    Value Object = classify(ObjectExpr);
    if (Object.K == Row::Bad)
      return Object;
    if (Object.K != Row::Rows) {
      consume(ObjectExpr, Object);
      if (Object.K == Row::Bad)
        return Object;
      std::vector<std::pair<const Expr *, Value>> Parts = {
          {ObjectExpr, Object}};
      for (const Expr *Arg : Args)
        Parts.push_back({Arg, classify(Arg)});
      Value V = combine(Parts);
      if (V.K == Row::Rows && !KeepsRows.contains(Name))
        return bad("rows reach '" + textOf(Context, Call) + "'");
      return V;
    }
    std::string Text = textOf(Context, Call);
    int64_t Dim = 0;
    bool HasDim = !Args.empty() && integerLiteral(Args[0], Dim);
    if (Name == "size") {
      if (!HasDim)
        return bad("'" + Text + "' reads the rows' sizes");
      if (Dim == 0)
        Out.RowCounts.push_back(Call);
      return Value();
    }
    if (Metadata.contains(Name))
      return Value();
    if (MeanOrSum.contains(Name) && (Args.empty() || (HasDim && Dim == 0))) {
      Object.K = Row::Figure;
      Object.Sum = Name == "sum";
      return Object;
    }
    if (AlongDimension.contains(Name)) {
      if (!HasDim || Dim == 0)
        return bad("'" + Text + "' reduces across the rows");
    } else if (Reshapes.contains(Name)) {
      int64_t Size = 0;
      if (Args.empty() || !firstInteger(Args[0], Size) || Size != -1)
        return bad("'" + Text + "' reshapes the rows");
    } else if (!KeepsRows.contains(Name)) {
      return bad("'" + Text +
                 "' on the rows: ddpify cannot tell whether it keeps them "
                 "apart");
    }
    std::vector<std::pair<const Expr *, Value>> Parts = {{ObjectExpr, Object}};
    if (!AlongDimension.contains(Name) && !Reshapes.contains(Name))
      for (const Expr *Arg : Args)
        Parts.push_back({Arg, classify(Arg)});
    return combine(Parts);
  }

  Value classifyCall(const CallExpr *Call) {
    if (Call == Backward) {
      Value V = classify(Backward->getImplicitObjectArgument());
      return V.K == Row::Bad ? V : Value();
    }
    std::string Name = shortName(Call);
    std::string Qualified = qualifiedCalleeName(Call);
    if (Qualified == "std::get" && Call->getNumArgs() == 1) {
      Value V = classify(Call->getArg(0));
      consume(Call->getArg(0), V);
      return V;
    }
    LossCall Loss = lossCall(Context, Call);
    if (Loss.Is) {
      Value Input = classify(Loss.Input), Target = classify(Loss.Target);
      Value V = combine({{Loss.Input, Input}, {Loss.Target, Target}});
      if (V.K != Row::Rows)
        return V;
      if (!Loss.Why.empty())
        return bad(Loss.Why);
      if (Loss.R == Reduction::Unknown)
        return bad("ddpify cannot tell the reduction of its loss '" +
                   textOf(Context, Call) + "'");
      if (Loss.R == Reduction::None)
        return V;
      V.K = Row::Figure;
      V.Sum = Loss.R == Reduction::Sum;
      return V;
    }
    if (isForwardPass(Call)) {
      std::vector<std::pair<const Expr *, Value>> Parts;
      unsigned First = isa<CXXOperatorCallExpr>(Call) ? 1 : 0;
      for (unsigned I = First; I < Call->getNumArgs(); ++I)
        Parts.push_back({Call->getArg(I), classify(Call->getArg(I))});
      return combine(Parts);
    }
    if (isTensorMethod(Call)) {
      const auto *Member = cast<CXXMemberCallExpr>(Call);
      std::vector<const Expr *> Args;
      for (const Expr *Arg : Call->arguments())
        if (!isDefaultArgument(Arg))
          Args.push_back(Arg);
      return tensorOperation(Call, Name, Member->getImplicitObjectArgument(),
                             Args);
    }
    if (isTensorFunction(Call)) {
      std::vector<const Expr *> Args;
      for (const Expr *Arg : llvm::drop_begin(Call->arguments()))
        if (!isDefaultArgument(Arg))
          Args.push_back(Arg);
      return tensorOperation(Call, Name, Call->getArg(0), Args);
    }
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Call)) {
      OverloadedOperatorKind Kind = Op->getOperator();
      if (Op->isAssignmentOp() && Op->getNumArgs() == 2)
        return assign(Op->getArg(0), Op->getArg(1));
      static const OverloadedOperatorKind Elementwise[] = {
          OO_Star,       OO_Slash,        OO_Plus,     OO_Minus,
          OO_EqualEqual, OO_ExclaimEqual, OO_Less,     OO_Greater,
          OO_LessEqual,  OO_GreaterEqual, OO_Amp,      OO_Pipe,
          OO_Caret,      OO_AmpAmp,       OO_PipePipe, OO_Subscript};
      if (Op->getNumArgs() == 2 && llvm::is_contained(Elementwise, Kind) &&
          (isTensorType(Op->getArg(0)->getType()) ||
           isTensorType(Op->getArg(1)->getType()))) {
        char Sym = Kind == OO_Star    ? '*'
                   : Kind == OO_Slash ? '/'
                   : Kind == OO_Plus  ? '+'
                   : Kind == OO_Minus ? '-'
                                      : '?';
        if (Kind == OO_Subscript) {
          Value V = classify(Op->getArg(0));
          if (V.K == Row::Rows)
            return bad("'" + textOf(Context, Call) + "' picks out of the rows");
        }
        return binary(Op->getArg(0), Op->getArg(1), Sym);
      }
    }
    // Any other call: a function of the program's own, a standard one, a
    // method of another class. Rows may not reach it.
    std::vector<std::pair<const Expr *, Value>> Parts;
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
      Parts.push_back({Member->getImplicitObjectArgument(),
                       classify(Member->getImplicitObjectArgument())});
    for (const Expr *Arg : Call->arguments())
      Parts.push_back({Arg, classify(Arg)});
    bool AnyRows = llvm::any_of(
        Parts, [](const auto &Part) { return Part.second.K == Row::Rows; });
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (AnyRows && Callee &&
        !Context.getSourceManager().isInSystemHeader(Callee->getLocation()))
      return bad("its rows reach '" + Qualified +
                 "', a function of the program's own that ddpify cannot "
                 "prove to be a mean or a sum over rows");
    Value V = combine(Parts);
    if (V.K == Row::Rows)
      return bad("its rows reach '" + textOf(Context, Call) + "'");
    return V;
  }

  ASTContext &Context;
  std::set<const ValueDecl *> Seeds;
  std::function<bool(const ValueDecl *)> IsOuter;
  RowRegion &Out;
  std::map<const ValueDecl *, std::set<const ValueDecl *>> RowLocals;
  std::set<const ValueDecl *> GlobalLocals;
  std::map<const ValueDecl *, const ValueDecl *> Group;
  bool Recording = true;
  bool InOutput = false;
  bool SawGlobal = false;
  std::string LastFigure;
  SourceLocation LastFigureAt;
  /// The statement or expression being classified.
  SourceLocation Current;
};

const Stmt *parentStmt(ASTContext &Context, const Stmt *S) {
  DynTypedNodeList Parents = Context.getParents(*S);
  return Parents.empty() ? nullptr : Parents[0].get<Stmt>();
}

/// The function whose body holds S (null inside a lambda or a loop), and
/// whether a loop encloses S.
const FunctionDecl *enclosingFunction(ASTContext &Context, const Stmt *S,
                                      bool &InLoop) {
  InLoop = false;
  DynTypedNodeList Parents = Context.getParents(*S);
  for (int Steps = 0; Steps < 256 && !Parents.empty(); ++Steps) {
    if (const auto *Function = Parents[0].get<FunctionDecl>())
      return Function;
    const auto *Parent = Parents[0].get<Stmt>();
    if (!Parent || isa<LambdaExpr>(Parent))
      return nullptr;
    InLoop |= isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(Parent);
    Parents = Context.getParents(*Parent);
  }
  return nullptr;
}

bool isRowShardCall(const Expr *E) {
  const auto *Call = dyn_cast_or_null<CXXMemberCallExpr>(strip(E));
  const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
  return Method &&
         Method->getParent()->getQualifiedNameAsString() == "ddp::RowShard";
}

bool before(const SourceManager &SM, SourceLocation A, SourceLocation B) {
  return SM.isBeforeInTranslationUnit(SM.getExpansionLoc(A),
                                      SM.getExpansionLoc(B));
}

/// The evaluation after Loop in its block (the function's body): tensors
/// declared before the loop fed to a model after it, whose figures are sums
/// or means over rows, with nothing else done to their rows.
void analyzeEvaluation(ASTContext &Context, const FunctionDecl *Function,
                       const Stmt *Loop, FullBatchLoop &Result) {
  const auto *Body = dyn_cast_or_null<CompoundStmt>(Function->getBody());
  if (!Body || parentStmt(Context, Loop) != Body)
    return;
  const SourceManager &SM = Context.getSourceManager();
  std::vector<const Stmt *> After;
  bool Seen = false;
  for (const Stmt *S : Body->body()) {
    if (Seen)
      After.push_back(S);
    Seen |= S == Loop;
  }
  auto IsOuter = [&](const ValueDecl *Var) {
    return isLocalTensorDecl(Var) &&
           before(SM, Var->getLocation(), Loop->getBeginLoc());
  };
  std::vector<const CallExpr *> Backwards;
  for (const Stmt *S : After)
    collectBackwardCalls(S, Backwards);
  if (!Backwards.empty())
    return; // It trains again: no evaluation.
  std::set<const ValueDecl *> Fed;
  bool Forward = false;
  for (const Stmt *S : After)
    collectFedTensors(Context, S, IsOuter, Fed, Forward);
  if (Fed.empty() || !Forward)
    return;
  // The evaluation reads the object a reference binding refers into: whole.
  for (const ValueDecl *Var : Fed)
    for (const VarDecl *Holder : referredHolders(Var))
      for (const Stmt *S : After) {
        std::vector<const DeclRefExpr *> Uses;
        collectReferences(S, Holder, Uses);
        if (!Uses.empty())
          return;
      }
  RowRegion Eval;
  RowClassifier Rows(Context, Fed, IsOuter, Eval);
  for (const Stmt *S : After)
    Rows.walk(S);
  if (!Rows.Why.empty() || Eval.Figures.empty() || !Rows.oneGroup())
    return;
  Eval.Tensors.assign(Fed.begin(), Fed.end());
  llvm::sort(Eval.Tensors, [&](const ValueDecl *A, const ValueDecl *B) {
    return before(SM, A->getLocation(), B->getLocation());
  });
  Result.Eval = std::move(Eval);
}

/// Whether Var is only read in Body (never assigned, incremented, bound to
/// a non-const reference or had its address taken there).
bool onlyReadIn(ASTContext &Context, const Stmt *Body, const VarDecl *Var) {
  std::vector<const DeclRefExpr *> Refs;
  collectReferences(Body, Var, Refs);
  for (const DeclRefExpr *Ref : Refs) {
    const auto *Cast =
        dyn_cast_or_null<ImplicitCastExpr>(parentStmt(Context, Ref));
    if (!Cast || Cast->getCastKind() != CK_LValueToRValue)
      return false;
  }
  return true;
}

/// Whether Condition has one value on every rank: integers, booleans and
/// operators on them, and variables of such types that Loop never changes
/// but through its own increment (the loop counter) whose initialisers
/// hold no tensor.
bool sameOnEveryRank(ASTContext &Context, const Expr *Condition,
                     const Stmt *Loop, const Stmt *Body) {
  llvm::SmallVector<const Stmt *, 16> Work{Condition};
  while (!Work.empty()) {
    const Stmt *S = Work.pop_back_val();
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S)) {
      const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
      if (!Var || Var->getType()->isReferenceType())
        return false;
      QualType T = Var->getType().getCanonicalType();
      if (!T->isIntegralOrEnumerationType())
        return false;
      if (!onlyReadIn(Context, Body, Var))
        return false;
      bool Counter = false;
      if (const auto *For = dyn_cast<ForStmt>(Loop))
        if (const auto *Init = dyn_cast_or_null<DeclStmt>(For->getInit()))
          Counter = llvm::is_contained(Init->decls(), Var);
      if (!Counter && !Var->getType().isConstQualified() &&
          !isa<ParmVarDecl>(Var) && !Var->isLocalVarDecl())
        return false; // a global another thread or function may change
      if (!Counter && !isa<ParmVarDecl>(Var)) {
        // A local the loop does not change; also not between its
        // declaration and the loop if it is not const.
        if (!Var->getType().isConstQualified() &&
            !onlyReadIn(Context, Loop, Var))
          return false;
        if (const Expr *Init = Var->getInit()) {
          llvm::SmallVector<const Stmt *, 16> Parts{Init};
          while (!Parts.empty()) {
            const Stmt *Part = Parts.pop_back_val();
            if (const auto *E = dyn_cast<Expr>(Part))
              if (isTensorType(E->getType()))
                return false;
            for (const Stmt *Child : Part->children())
              if (Child)
                Parts.push_back(Child);
          }
        }
      }
      continue;
    }
    if (const auto *Unary = dyn_cast<UnaryOperator>(S)) {
      if (Unary->isIncrementDecrementOp() || Unary->getOpcode() == UO_AddrOf ||
          Unary->getOpcode() == UO_Deref)
        return false;
    } else if (const auto *Binary = dyn_cast<BinaryOperator>(S)) {
      if (Binary->isAssignmentOp())
        return false;
    } else if (!isa<IntegerLiteral, CXXBoolLiteralExpr, ParenExpr,
                    ImplicitCastExpr>(S)) {
      return false; // a call, a member, a tensor: maybe not the same
    }
    for (const Stmt *Child : S->children())
      if (Child)
        Work.push_back(Child);
  }
  return true;
}

/// The condition of the `if` of Body (a statement of its own in it) whose
/// then-branch holds every read of the loss after backward(), when that
/// condition is the same on every rank: the loss need be made global only
/// when it holds. Null otherwise.
const Expr *lossReadCondition(ASTContext &Context, const Stmt *Loop,
                              const Stmt *Body, const Stmt *BackwardStatement,
                              llvm::ArrayRef<const DeclRefExpr *> Reads) {
  const IfStmt *Common = nullptr;
  for (const DeclRefExpr *Read : Reads) {
    const Stmt *Child = Read;
    const Stmt *Parent = parentStmt(Context, Child);
    while (Parent && Parent != Body) {
      Child = Parent;
      Parent = parentStmt(Context, Child);
    }
    const auto *If = dyn_cast_or_null<IfStmt>(Parent ? Child : nullptr);
    if (!If || (Common && If != Common))
      return nullptr;
    Common = If;
    // In the then-branch, not in the condition or the else-branch.
    const Stmt *Branch = Read;
    while (Branch && Branch != If->getThen() && Branch != If)
      Branch = parentStmt(Context, Branch);
    if (Branch != If->getThen())
      return nullptr;
  }
  if (!Common ||
      !before(Context.getSourceManager(), BackwardStatement->getEndLoc(),
              Common->getBeginLoc()) ||
      Common->getInit() || Common->getConditionVariable() ||
      Common->isConstexpr() || Common->getCond()->getBeginLoc().isMacroID())
    return nullptr;
  return sameOnEveryRank(Context, Common->getCond(), Loop, Body)
             ? Common->getCond()
             : nullptr;
}

} // namespace

void collectReferences(const Stmt *S, const ValueDecl *Tensor,
                       std::vector<const DeclRefExpr *> &Out) {
  if (!S)
    return;
  if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
    if (Ref->getDecl() == Tensor)
      Out.push_back(Ref);
  for (const Stmt *Child : S->children())
    collectReferences(Child, Tensor, Out);
}

bool rebindsInPlace(const ValueDecl *Tensor) {
  QualType Type = Tensor->getType();
  if (Type.isConstQualified() || Type->isReferenceType())
    return false;
  // A binding of a by-value `auto [x, y]` names a part of an object of its
  // own: assignable. One of `auto &[x, y]` or `const auto [x, y]` refers
  // into another object, or cannot be assigned.
  if (const auto *Binding = dyn_cast<BindingDecl>(Tensor)) {
    const auto *Whole = dyn_cast_or_null<VarDecl>(Binding->getDecomposedDecl());
    return Whole && !Whole->getType()->isReferenceType() &&
           !Whole->getType().isConstQualified();
  }
  return isa<VarDecl>(Tensor);
}

FullBatchLoop fullBatchLoop(ASTContext &Context, const Stmt *Loop,
                            TrainingOracle &Oracle, std::string *Why,
                            SourceLocation *WhyAt) {
  FullBatchLoop Result;
  // The tensors it feeds whole, named in each reason (once known).
  std::set<const ValueDecl *> Fed;
  auto Fail = [&](std::string Reason, SourceLocation At) {
    if (Why) {
      std::vector<const ValueDecl *> Names(Fed.begin(), Fed.end());
      const SourceManager &SM = Context.getSourceManager();
      llvm::sort(Names, [&](const ValueDecl *A, const ValueDecl *B) {
        return before(SM, A->getLocation(), B->getLocation());
      });
      std::string List;
      for (const ValueDecl *Var : Names)
        List += (List.empty() ? "'" : ", '") + Var->getNameAsString() + "'";
      *Why = List.empty()
                 ? std::move(Reason)
                 : "it feeds " + List +
                       " whole to the model at every step, but " + Reason;
    }
    if (WhyAt)
      *WhyAt = At;
    return FullBatchLoop();
  };
  const Stmt *Body = nullptr;
  if (const auto *For = dyn_cast_or_null<ForStmt>(Loop))
    Body = For->getBody();
  else if (const auto *While = dyn_cast_or_null<WhileStmt>(Loop))
    Body = While->getBody();
  else if (const auto *Do = dyn_cast_or_null<DoStmt>(Loop))
    Body = Do->getBody();
  if (!isa_and_nonnull<CompoundStmt>(Body))
    return Result;
  std::vector<const CallExpr *> Backwards;
  collectBackwardCalls(Body, Backwards);
  if (Backwards.size() != 1 || !isa<CXXMemberCallExpr>(Backwards[0]))
    return Result;
  const auto *Backward = cast<CXXMemberCallExpr>(Backwards[0]);
  const Expr *Receiver = Backward->getImplicitObjectArgument();
  bool InLoop = false;
  const FunctionDecl *Function = enclosingFunction(Context, Loop, InLoop);
  if (!Function || InLoop || !Oracle.stepsOptimizer(Body))
    return Result;
  const SourceManager &SM = Context.getSourceManager();
  auto IsOuter = [&](const ValueDecl *Var) {
    return isLocalTensorDecl(Var) &&
           before(SM, Var->getLocation(), Loop->getBeginLoc());
  };
  if (isRowShardCall(Receiver)) {
    Result.Loop = Loop;
    Result.Migrated = true;
    return Result;
  }
  bool Forward = false;
  collectFedTensors(Context, Body, IsOuter, Fed, Forward);
  if (Fed.empty() || !Forward)
    return Result;

  // The loss: the receiver, or the local holding it.
  const Expr *LossInit = Receiver;
  const VarDecl *LossVar = varOf(Receiver);
  if (LossVar) {
    if (!LossVar->isLocalVarDecl())
      return Fail("its loss '" + LossVar->getNameAsString() +
                      "' is not a local",
                  Receiver->getBeginLoc());
    std::vector<const DeclRefExpr *> Refs;
    collectReferences(Body, LossVar, Refs);
    const Expr *Assigned = nullptr;
    unsigned Assignments = 0;
    SourceLocation Again;
    for (const DeclRefExpr *Ref : Refs)
      if (const auto *Op =
              dyn_cast_or_null<CXXOperatorCallExpr>(parentStmt(Context, Ref)))
        if (Op->getOperator() == OO_Equal && strip(Op->getArg(0)) == Ref) {
          Assigned = Op->getArg(1);
          if (++Assignments == 2)
            Again = Op->getBeginLoc();
        }
    bool Inside = !before(SM, LossVar->getLocation(), Body->getBeginLoc());
    if (Inside && LossVar->getInit() && Assignments == 0)
      LossInit = LossVar->getInit();
    else if (Assignments == 1)
      LossInit = Assigned;
    else
      return Fail("its loss '" + LossVar->getNameAsString() +
                      "' is assigned more than once",
                  Again.isValid() ? Again : LossVar->getLocation());
  }
  // The statement that calls backward().
  const Stmt *Statement = Backward;
  for (const Stmt *Parent = parentStmt(Context, Statement);
       Parent && !isa<CompoundStmt>(Parent);
       Parent = parentStmt(Context, Parent))
    Statement = Parent;
  if (!isa<Expr>(Statement))
    return Fail("its backward() is not a statement of its own",
                Backward->getBeginLoc());

  RowRegion Train;
  RowClassifier Rows(Context, Fed, IsOuter, Train);
  Rows.LossInit = LossInit;
  Rows.Backward = Backward;
  Rows.LossVar = LossVar;
  Rows.walk(Body);
  if (!Rows.LossSeen)
    return Result;
  if (!Rows.LossWhy.empty()) {
    Result.Loop = Loop;
    Result.WholeWhy = Rows.LossWhy;
    Result.WholeAt = Rows.LossWhyAt;
    // The tensors it feeds whole, for the note.
    Result.Train.Tensors.assign(Fed.begin(), Fed.end());
    llvm::sort(Result.Train.Tensors,
               [&](const ValueDecl *A, const ValueDecl *B) {
                 return before(SM, A->getLocation(), B->getLocation());
               });
    return Result;
  }
  if (Rows.LossValue.K != Row::Figure)
    return Fail("its loss does not depend on the rows",
                Receiver->getBeginLoc());
  if (!Rows.Why.empty())
    return Fail(Rows.Why, Rows.WhyAt);
  for (const ValueDecl *Var : Fed)
    if (!Rows.LossValue.From.count(Var)) {
      std::vector<const DeclRefExpr *> Refs;
      collectReferences(Body, Var, Refs);
      return Fail("its loss does not take '" + Var->getNameAsString() + "'",
                  Refs.empty() ? Var->getLocation() : Refs[0]->getBeginLoc());
    }
  for (const ValueDecl *Var : Fed) {
    std::vector<const DeclRefExpr *> Refs;
    collectReferences(Function->getBody(), Var, Refs);
    // Read again after the loop (a final figure on the training set): its
    // shard gets a name of its own, and what follows sees the whole tensor.
    for (const DeclRefExpr *Ref : Refs)
      if (before(SM, Loop->getEndLoc(), Ref->getLocation()))
        Train.WholeAfter.insert(Var);
    if (Var->getType()->isReferenceType() &&
        !Var->getType().getNonReferenceType().isConstQualified())
      return Fail("'" + Var->getNameAsString() +
                      "' is a reference ddpify would change for its caller",
                  Var->getLocation());
    // A binding of `auto &[x, y] = data;` refers into data: its shard gets
    // a name of its own, which the loop must not bypass through data.
    for (const VarDecl *Holder : referredHolders(Var)) {
      std::vector<const DeclRefExpr *> Uses;
      collectReferences(Body, Holder, Uses);
      if (!Uses.empty())
        return Fail("'" + Var->getNameAsString() + "' refers into '" +
                        Holder->getNameAsString() + "', which it also uses",
                    Uses.front()->getBeginLoc());
    }
  }
  // The loss read again after backward(): global from there on.
  if (LossVar) {
    std::vector<const DeclRefExpr *> Refs;
    collectReferences(Function->getBody(), LossVar, Refs);
    bool ReadAfter = false;
    std::vector<const DeclRefExpr *> Reads;
    for (const DeclRefExpr *Ref : Refs) {
      if (strip(Receiver) == Ref ||
          Ref->getLocation() == LossVar->getLocation())
        continue;
      const auto *Op =
          dyn_cast_or_null<CXXOperatorCallExpr>(parentStmt(Context, Ref));
      if (Op && Op->getOperator() == OO_Equal && strip(Op->getArg(0)) == Ref)
        continue;
      if (before(SM, Ref->getLocation(), Statement->getEndLoc()))
        return Fail("its loss '" + LossVar->getNameAsString() +
                        "' is read before backward()",
                    Ref->getBeginLoc());
      ReadAfter = true;
      Reads.push_back(Ref);
    }
    if (ReadAfter && (LossVar->getType().isConstQualified() ||
                      LossVar->getType()->isReferenceType()))
      return Fail("its loss '" + LossVar->getNameAsString() +
                      "' is read after backward() but cannot be re-assigned",
                  Reads.front()->getBeginLoc());
    if (!ReadAfter)
      LossVar = nullptr;
    else
      Result.LossReadWhen =
          lossReadCondition(Context, Loop, Body, Statement, Reads);
  }
  Result.Loop = Loop;
  Result.Loss = Receiver;
  Result.SumLoss = Rows.LossValue.Sum;
  Result.LossVar = LossVar;
  Result.BackwardStatement = Statement;
  Train.Tensors.assign(Fed.begin(), Fed.end());
  llvm::sort(Train.Tensors, [&](const ValueDecl *A, const ValueDecl *B) {
    return before(SM, A->getLocation(), B->getLocation());
  });
  Result.Train = std::move(Train);
  analyzeEvaluation(Context, Function, Loop, Result);
  return Result;
}

} // namespace ddpify
