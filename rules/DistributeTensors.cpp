//===- DistributeTensors.cpp - R17: bare trained tensors kept in sync -----===//
//
// A tensor trained outside any module by an optimizer of its own (a soft
// actor-critic's temperature: `torch::Tensor log_alpha = torch::zeros({1},
// torch::requires_grad());` with `torch::optim::Adam alpha_opt({log_alpha},
// ...)`) gets no wrapper: its gradient would stay each rank's own and the
// ranks would train apart (the runtime ends such a job). The optimizer's
// list becomes `ddp::distributed_tensors({log_alpha})`, which broadcasts rank
// 0's values and averages the tensors' gradients at every backward pass, as
// a wrapper does for a module's parameters, and returns the same tensors.
//
// Only a braced list (`{a, b}`, `std::vector<torch::Tensor>{a}`) each of
// whose elements is a local, global or member tensor of the program that is
// made to require grad where it is initialised or assigned
// (`torch::requires_grad()`, `TensorOptions().requires_grad(true)`,
// `.requires_grad_()`) or later (`t.set_requires_grad(true)`,
// `t.requires_grad_()`), and that is no module's registered parameter: the
// parameters of modules are R6's (WrapModels.cpp), whose wrapper already
// averages them.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include <set>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral Rule = "R17";
constexpr llvm::StringLiteral ReportId = "distributed-tensors";

bool isTensorType(QualType Type) {
  const auto *Class =
      Type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
  return Class && Class->getQualifiedNameAsString() == "at::Tensor";
}

/// E without implicit nodes, parentheses and the copies of a tensor or a
/// vector.
const Expr *strip(const Expr *E) {
  for (int Depth = 0; E && Depth < 16; ++Depth) {
    const Expr *Next = stripParensAndImplicit(E);
    if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(Next))
      if (Construct->getNumArgs() == 1 &&
          Construct->getConstructor()->isCopyOrMoveConstructor())
        Next = Construct->getArg(0);
    if (Next == E)
      return E;
    E = Next;
  }
  return E;
}

/// The variable or member a tensor expression names: `log_alpha`,
/// `log_alpha_`, `this->log_alpha_`, `agent.log_alpha`; null for anything
/// else.
const ValueDecl *tensorDeclOf(const Expr *E) {
  E = strip(E);
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E))
    return dyn_cast<VarDecl>(Ref->getDecl());
  if (const auto *Member = dyn_cast_or_null<MemberExpr>(E))
    return dyn_cast<FieldDecl>(Member->getMemberDecl());
  return nullptr;
}

/// The braced list of tensors an optimizer's first argument is written as:
/// `{a, b}` or `std::vector<torch::Tensor>{a, b}`; null for anything else (a
/// variable, a call such as `parameters()` or `ddp::distributed_tensors`).
const InitListExpr *tensorList(const Expr *E) {
  for (int Depth = 0; E && Depth < 16; ++Depth) {
    E = stripParensAndImplicit(E);
    if (const auto *List = dyn_cast_or_null<InitListExpr>(E))
      return List->isSemanticForm() && List->getSyntacticForm()
                 ? List->getSyntacticForm()
                 : List;
    if (const auto *Cast = dyn_cast_or_null<CXXFunctionalCastExpr>(E)) {
      E = Cast->getSubExpr();
      continue;
    }
    if (const auto *Init = dyn_cast_or_null<CXXStdInitializerListExpr>(E)) {
      E = Init->getSubExpr();
      continue;
    }
    if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E)) {
      const auto *Class = Construct->getType()->getAsCXXRecordDecl();
      // `{a, b}` builds the vector from an initializer list (and the
      // default allocator).
      if (!Class || Class->getQualifiedNameAsString() != "std::vector" ||
          Construct->getNumArgs() == 0 ||
          (Construct->getNumArgs() > 1 &&
           !isa<CXXDefaultArgExpr>(Construct->getArg(1))))
        return nullptr;
      E = Construct->getArg(0);
      continue;
    }
    return nullptr;
  }
  return nullptr;
}

/// Whether a requires-grad argument is the literal `false` (through the
/// conversions to c10::optional<bool>).
bool isFalse(const Expr *E) {
  for (int Depth = 0; E && Depth < 8; ++Depth) {
    E = stripParensAndImplicit(E);
    if (const auto *Literal = dyn_cast_or_null<CXXBoolLiteralExpr>(E))
      return !Literal->getValue();
    const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E);
    if (!Construct || Construct->getNumArgs() != 1)
      return false;
    E = Construct->getArg(0);
  }
  return false;
}

class DistributeTensors : public MatcherModule,
                          public MatchFinder::MatchCallback {
public:
  DistributeTensors(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    auto Optimizer = cxxRecordDecl(isSameOrDerivedFrom(
        cxxRecordDecl(hasName("::torch::optim::Optimizer"))));
    Finder.addMatcher(
        cxxConstructExpr(hasType(Optimizer), argumentCountAtLeast(1))
            .bind("construct"),
        this);
    Finder.addMatcher(
        callExpr(callee(functionDecl(
                     hasAnyName("::std::make_unique", "::std::make_shared"),
                     hasTemplateArgument(
                         0, refersToType(hasDeclaration(Optimizer))))),
                 argumentCountAtLeast(1))
            .bind("made"),
        this);
    // What makes a tensor require grad, and what registers it as a module's
    // parameter.
    Finder.addMatcher(
        callExpr(callee(functionDecl(hasAnyName(
                     "requires_grad", "requires_grad_", "set_requires_grad"))))
            .bind("marker"),
        this);
    Finder.addMatcher(
        cxxMemberCallExpr(callee(cxxMethodDecl(hasName("register_parameter"))))
            .bind("register"),
        this);
  }

  void onStartOfTranslationUnit() override {
    Lists.clear();
    RequiresGrad.clear();
    Registered.clear();
    Done.clear();
    Locator.reset();
  }

  void run(const MatchFinder::MatchResult &Result) override {
    Context = Result.Context;
    if (const auto *Construct =
            Result.Nodes.getNodeAs<CXXConstructExpr>("construct"))
      Lists.push_back(Construct->getArg(0));
    else if (const auto *Made = Result.Nodes.getNodeAs<CallExpr>("made"))
      Lists.push_back(Made->getArg(0));
    else if (const auto *Call = Result.Nodes.getNodeAs<CallExpr>("marker"))
      noteMarker(Call);
    else if (const auto *Call =
                 Result.Nodes.getNodeAs<CXXMemberCallExpr>("register"))
      if (const ValueDecl *Decl = initialised(Call))
        Registered.insert(Decl);
  }

  void onEndOfTranslationUnit() override {
    if (!Context)
      return;
    for (const Expr *List : Lists)
      distribute(List);
    Context = nullptr;
  }

private:
  /// `torch::requires_grad()`, `TensorOptions::requires_grad(true)`,
  /// `t.requires_grad_()`, `t.set_requires_grad(true)`: the tensor it makes
  /// require grad (not the getter `t.requires_grad()`, nor a `false`).
  void noteMarker(const CallExpr *Call) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (!Callee || Callee->getReturnType()->isBooleanType())
      return;
    std::string Name = Callee->getQualifiedNameAsString();
    if (!llvm::StringRef(Name).starts_with("c10::") &&
        !llvm::StringRef(Name).starts_with("at::") &&
        !llvm::StringRef(Name).starts_with("torch::"))
      return;
    unsigned First = isa<CXXOperatorCallExpr>(Call) ? 1 : 0;
    if (Call->getNumArgs() > First && isFalse(Call->getArg(First)))
      return;
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
      if (isTensorType(Member->getImplicitObjectArgument()->getType()))
        if (const ValueDecl *Decl =
                tensorDeclOf(Member->getImplicitObjectArgument())) {
          RequiresGrad.insert(Decl);
          return;
        }
    if (const ValueDecl *Decl = initialised(Call))
      RequiresGrad.insert(Decl);
  }

  /// The variable or member whose initialiser or assigned value holds E
  /// (walking up through expressions; not through a register_parameter
  /// call, whose result is a module's parameter), or null.
  const ValueDecl *initialised(const Expr *E) {
    DynTypedNode Node = DynTypedNode::create(*E);
    for (int Depth = 0; Depth < 32; ++Depth) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty())
        return nullptr;
      DynTypedNode Parent = Parents[0];
      if (const auto *Var = Parent.get<VarDecl>())
        return Var->getInit() && isTensorType(Var->getType()) ? Var : nullptr;
      if (const auto *Field = Parent.get<FieldDecl>())
        return isTensorType(Field->getType()) ? Field : nullptr;
      if (const auto *Init = Parent.get<CXXCtorInitializer>())
        return Init->getMember() && isTensorType(Init->getMember()->getType())
                   ? Init->getMember()
                   : nullptr;
      // The parent map may skip the initializer and name the constructor.
      if (const auto *Ctor = Parent.get<CXXConstructorDecl>()) {
        for (const CXXCtorInitializer *Init : Ctor->inits())
          if (Init->getMember() && Node.get<Expr>() == Init->getInit())
            return isTensorType(Init->getMember()->getType())
                       ? Init->getMember()
                       : nullptr;
        return nullptr;
      }
      const auto *Up = Parent.get<Expr>();
      if (!Up)
        return nullptr;
      if (const auto *Assign = dyn_cast<BinaryOperator>(Up))
        if (Assign->getOpcode() == BO_Assign &&
            Node.get<Expr>() == Assign->getRHS())
          return isTensorType(Assign->getLHS()->getType())
                     ? tensorDeclOf(Assign->getLHS())
                     : nullptr;
      if (const auto *Assign = dyn_cast<CXXOperatorCallExpr>(Up))
        if (Assign->getOperator() == OO_Equal && Assign->getNumArgs() == 2) {
          if (Node.get<Expr>() == Assign->getArg(0))
            return nullptr;
          return isTensorType(Assign->getArg(0)->getType())
                     ? tensorDeclOf(Assign->getArg(0))
                     : nullptr;
        }
      if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Up))
        if (const CXXMethodDecl *Method = Member->getMethodDecl())
          if (Method->getIdentifier() &&
              Method->getName() == "register_parameter")
            return nullptr;
      Node = Parent;
    }
    return nullptr;
  }

  /// A tensor R17 distributes: the program's own, made to require grad, no
  /// module's registered parameter.
  bool isBareTrainedTensor(const ValueDecl *Decl) {
    if (!Decl || !RequiresGrad.count(Decl) || Registered.count(Decl) ||
        !Locator.isInRoot(*Context, Decl->getLocation()))
      return false;
    if (const auto *Var = dyn_cast<VarDecl>(Decl))
      return !isa<ParmVarDecl>(Var) && !Var->getType()->isReferenceType();
    return true;
  }

  void distribute(const Expr *Argument) {
    const InitListExpr *List = tensorList(Argument);
    if (!List || List->getNumInits() == 0)
      return;
    std::vector<std::string> Names;
    for (const Expr *Element : List->inits()) {
      if (!isTensorType(Element->getType()))
        return;
      const ValueDecl *Decl = tensorDeclOf(Element);
      if (!isBareTrainedTensor(Decl))
        return;
      Names.push_back(Decl->getNameAsString());
    }
    const Expr *Written = stripParensAndImplicit(Argument);
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(Written))
      if (!isa<CXXTemporaryObjectExpr>(Construct))
        Written = List; // `{a}` as written: the list itself.
    SourceRange Range = Written->getSourceRange();
    if (Range.getBegin().isMacroID() || Range.getEnd().isMacroID())
      return;
    Finding F = Locator.make(*Context, Range, Rule, "");
    if (F.FilePath.empty() || !Done.insert({F.FilePath, F.Offset}).second)
      return;
    std::string Tensors;
    for (const std::string &Name : Names)
      Tensors += (Tensors.empty() ? "'" : ", '") + Name + "'";
    F.Edits.push_back({F.Offset, 0, "ddp::distributed_tensors(", {}});
    F.Edits.push_back({F.Offset + F.Length, 0, ")", {}});
    F.Message = "tensor(s) " + Tensors +
                " trained outside any module by an optimizer of their own: "
                "ddp::distributed_tensors(...) broadcasts rank 0's values "
                "and averages their gradients across the ranks at every "
                "backward pass";
    Finding Note = reportNoteFor(F, ReportId, F.Message);
    Findings.push_back(std::move(F));
    Findings.push_back(std::move(Note));
  }

  FindingList &Findings;
  FindingLocator Locator;
  ASTContext *Context = nullptr;
  /// The first arguments of the optimizers built in this unit.
  std::vector<const Expr *> Lists;
  std::set<const ValueDecl *> RequiresGrad;
  std::set<const ValueDecl *> Registered;
  std::set<std::pair<std::string, unsigned>> Done;
};

const RuleInfo DistributeTensorsRows[] = {
    {Rule, "",
     "tensors trained by an optimizer of their own, outside any module (a "
     "temperature log_alpha): its list becomes ddp::distributed_tensors(...), "
     "their gradients averaged across the ranks"},
};
} // namespace

extern const RuleUnit DistributeTensors{DistributeTensorsRows,
                                        createModule<class DistributeTensors>};

} // namespace ddpify
