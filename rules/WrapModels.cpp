//===- WrapModels.cpp - R6: every trained model wrapped in DDP ------------===//
//
// A model is trained when its parameters() reach a torch::optim optimizer
// (its construction, make_unique/new of one, add_param_group), directly or
// through a local vector. It is placed by `x.to(<torch::Device>)` on the
// model itself or, when it has no placement of its own, on a helper's
// parameter or a class member it was handed to. The wrap goes after the
// placement and the model's later conversions before training (a dtype
// change, a load; out of branches that do not train it): a named local
// wrapper when that point is in the block declaring the model (it dies just
// before the model), else ddp::distribute(...), which lasts until exit and
// is idempotent at run time (a helper called every epoch, several models
// through one helper). A module class whose constructor builds an optimizer
// over its own parameters() (reinforcement-learning networks) ends that
// constructor with ddp::distribute(*this): every instance is wrapped.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "ddpify/SourceLines.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/SmallPtrSet.h"
#include <algorithm>
#include <functional>
#include <map>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

const Expr *skipImplicit(const Expr *E) {
  while (E) {
    const Expr *Next = E->IgnoreImplicit()->IgnoreParens();
    if (const auto *Cleanups = dyn_cast<ExprWithCleanups>(Next))
      Next = Cleanups->getSubExpr();
    if (Next == E)
      return E;
    E = Next;
  }
  return E;
}

/// The variable, parameter or member an expression naming a model refers to:
/// `model`, `model->`, `*net`, `std::move(model)`, `model.ptr()`, `model_`,
/// `this->model_`, copies of them; nullptr for anything else.
const ValueDecl *modelDeclOf(const Expr *E) {
  for (int Depth = 0; E && Depth < 12; ++Depth) {
    E = skipImplicit(E);
    if (const auto *Ref = dyn_cast<DeclRefExpr>(E))
      return dyn_cast<VarDecl>(Ref->getDecl());
    if (const auto *Member = dyn_cast<MemberExpr>(E))
      return dyn_cast<FieldDecl>(Member->getMemberDecl());
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E)) {
      OverloadedOperatorKind Kind = Op->getOperator();
      if ((Kind != OO_Arrow && Kind != OO_Star) || Op->getNumArgs() != 1)
        return nullptr;
      E = Op->getArg(0);
      continue;
    }
    if (const auto *Unary = dyn_cast<UnaryOperator>(E)) {
      if (Unary->getOpcode() != UO_Deref && Unary->getOpcode() != UO_AddrOf)
        return nullptr;
      E = Unary->getSubExpr();
      continue;
    }
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E)) {
      const CXXMethodDecl *Method = Member->getMethodDecl();
      if (!Method || Member->getNumArgs() != 0 ||
          !(Method->getName() == "ptr" || Method->getName() == "get"))
        return nullptr;
      E = Member->getImplicitObjectArgument();
      continue;
    }
    if (const auto *Call = dyn_cast<CallExpr>(E)) {
      const FunctionDecl *Callee = Call->getDirectCallee();
      if (!Callee || Call->getNumArgs() != 1 ||
          Callee->getQualifiedNameAsString() != "std::move")
        return nullptr;
      E = Call->getArg(0);
      continue;
    }
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(E)) {
      // Copies and moves of holders and shared_ptrs share the module.
      if (Construct->getNumArgs() != 1 ||
          !Construct->getConstructor()->isCopyOrMoveConstructor())
        return nullptr;
      E = Construct->getArg(0);
      continue;
    }
    return nullptr;
  }
  return nullptr;
}

/// The node of E that names a model, as modelDeclOf walks to it: the
/// DeclRefExpr or MemberExpr of `model`, `model->`, `*net`, `model.ptr()`,
/// ...; nullptr where modelDeclOf finds none.
const Expr *modelNameOf(const Expr *E) {
  for (int Depth = 0; E && Depth < 12; ++Depth) {
    E = skipImplicit(E);
    if (isa<DeclRefExpr>(E) || isa<MemberExpr>(E))
      return modelDeclOf(E) ? E : nullptr;
    const Expr *Next = nullptr;
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E))
      Next = Op->getNumArgs() == 1 ? Op->getArg(0) : nullptr;
    else if (const auto *Unary = dyn_cast<UnaryOperator>(E))
      Next = Unary->getSubExpr();
    else if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E))
      Next = Member->getImplicitObjectArgument();
    else if (const auto *Call = dyn_cast<CallExpr>(E))
      Next = Call->getNumArgs() == 1 ? Call->getArg(0) : nullptr;
    else if (const auto *Construct = dyn_cast<CXXConstructExpr>(E))
      Next = Construct->getNumArgs() == 1 ? Construct->getArg(0) : nullptr;
    if (!Next || !modelDeclOf(E))
      return nullptr;
    E = Next;
  }
  return nullptr;
}

bool isModuleType(QualType Type);

/// The model whose parameters() (or a part's) a call's object names: for a
/// part reached through a named model (`network->fc1`, `model.fc1`,
/// `agent.net->fc1`: a module member of a module), the whole named model
/// (`network`, `model`, `agent.net`), with Part set; else the object's own
/// name (modelNameOf). A part of `this` stays the part: the class's own
/// constructors wrap it.
const Expr *trainedModelName(const Expr *Object, bool &Part) {
  Part = false;
  const Expr *Name = modelNameOf(Object);
  for (int Depth = 0; Name && Depth < 8; ++Depth) {
    const auto *Member = dyn_cast<MemberExpr>(Name);
    if (!Member || !Member->getBase() ||
        !isModuleType(Member->getBase()->getType()))
      break;
    const Expr *Whole = modelNameOf(Member->getBase());
    if (!Whole)
      break;
    Name = Whole;
    Part = true;
  }
  return Name;
}

/// The `this` a member call on the module itself is made on: `parameters()`,
/// `this->parameters()`, `(*this).parameters()`; nullptr for anything else.
const CXXThisExpr *thisOf(const Expr *E) {
  E = skipImplicit(E);
  if (const auto *Unary = dyn_cast_or_null<UnaryOperator>(E))
    if (Unary->getOpcode() == UO_Deref)
      E = skipImplicit(Unary->getSubExpr());
  return dyn_cast_or_null<CXXThisExpr>(E);
}

/// The class a value of Type is, or points or refers to.
const CXXRecordDecl *classOf(QualType Type) {
  // A dependent or erroneous initialiser (a ParenListExpr) has no type.
  if (Type.isNull())
    return nullptr;
  Type = Type.getNonReferenceType();
  if (Type->isPointerType())
    Type = Type->getPointeeType();
  return Type.getCanonicalType()->getAsCXXRecordDecl();
}

/// Whether Class is one of the class templates Wrappers instantiated for a
/// class deriving from Base (std::shared_ptr<NetImpl>, ...).
bool wrapsDerived(const CXXRecordDecl *Class,
                  llvm::ArrayRef<llvm::StringRef> Wrappers,
                  llvm::StringRef Base) {
  const auto *Spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(Class);
  if (!Spec || Spec->getTemplateArgs().size() == 0 ||
      !llvm::is_contained(Wrappers, Spec->getQualifiedNameAsString()))
    return false;
  const TemplateArgument &Arg = Spec->getTemplateArgs()[0];
  return Arg.getKind() == TemplateArgument::Type &&
         derivesFrom(Arg.getAsType()->getAsCXXRecordDecl(), Base);
}

/// An optimizer, a pointer or reference to one, or a smart pointer to one.
bool isOptimizerType(QualType Type) {
  const CXXRecordDecl *Class = classOf(Type);
  return derivesFrom(Class, "torch::optim::Optimizer") ||
         wrapsDerived(Class, {"std::unique_ptr", "std::shared_ptr"},
                      "torch::optim::Optimizer");
}

bool isModuleType(QualType Type) {
  const CXXRecordDecl *Class = classOf(Type);
  if (!Class)
    return false;
  if (derivesFrom(Class, "torch::nn::Module"))
    return true;
  // TORCH_MODULE holders (Net derives from ModuleHolder<NetImpl>) and
  // std::shared_ptr<NetImpl>.
  if (!isa<ClassTemplateSpecializationDecl>(Class) &&
      derivesFrom(Class, "torch::nn::ModuleHolder"))
    for (const CXXBaseSpecifier &Base : Class->bases())
      if (isModuleType(Base.getType()))
        return true;
  return wrapsDerived(Class, {"std::shared_ptr", "torch::nn::ModuleHolder"},
                      "torch::nn::Module");
}

/// The module class a value of Type is or holds: Net for `Net`, `NetImpl`
/// for a TORCH_MODULE holder or a std::shared_ptr<NetImpl>; nullptr else.
const CXXRecordDecl *moduleClassOf(QualType Type, int Depth = 0) {
  const CXXRecordDecl *Class = classOf(Type);
  if (!Class || Depth > 8)
    return nullptr;
  if (derivesFrom(Class, "torch::nn::Module"))
    return Class;
  if (const auto *Spec = dyn_cast<ClassTemplateSpecializationDecl>(Class)) {
    std::string Name = Spec->getQualifiedNameAsString();
    if ((Name == "std::shared_ptr" || Name == "torch::nn::ModuleHolder") &&
        Spec->getTemplateArgs().size() > 0 &&
        Spec->getTemplateArgs()[0].getKind() == TemplateArgument::Type)
      return moduleClassOf(Spec->getTemplateArgs()[0].getAsType(), Depth + 1);
    return nullptr;
  }
  if (!Class->hasDefinition())
    return nullptr;
  for (const CXXBaseSpecifier &Base : Class->bases())
    if (const CXXRecordDecl *Held = moduleClassOf(Base.getType(), Depth + 1))
      return Held;
  return nullptr;
}

bool isLoop(const Stmt *S) {
  return isa<ForStmt>(S) || isa<WhileStmt>(S) || isa<DoStmt>(S) ||
         isa<CXXForRangeStmt>(S);
}

/// The names declared in a function, so a new wrapper shadows none.
struct NameCollector : RecursiveASTVisitor<NameCollector> {
  std::set<std::string> *Names = nullptr;
  bool VisitNamedDecl(NamedDecl *D) {
    if (D->getIdentifier())
      Names->insert(D->getName().str());
    return true;
  }
};

class WrapMatchers : public MatcherModule, public MatchFinder::MatchCallback {
public:
  WrapMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    auto OnModule = cxxMethodDecl(ofClass(cxxRecordDecl(
        isSameOrDerivedFrom(cxxRecordDecl(hasName("::torch::nn::Module"))))));
    Finder.addMatcher(cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName(
                                            "parameters", "named_parameters"))),
                                        callee(OnModule))
                          .bind("params"),
                      this);
    Finder.addMatcher(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("to"))),
                                        callee(OnModule))
                          .bind("placement"),
                      this);
    // Already wrapped: a DistributedDataParallel built from the model, or
    // ddp::distribute (or ddp::distributed_parameters) called on it.
    Finder.addMatcher(
        cxxConstructExpr(
            hasDeclaration(cxxConstructorDecl(
                ofClass(cxxRecordDecl(isSameOrDerivedFrom(cxxRecordDecl(
                    hasName("::ddp::DistributedDataParallelBase"))))))))
            .bind("wrapper"),
        this);
    Finder.addMatcher(
        callExpr(callee(functionDecl(hasAnyName(
                     "::ddp::distribute", "::ddp::distributed_parameters"))))
            .bind("distribute"),
        this);
    Finder.addMatcher(functionDecl(isMain(), isDefinition()).bind("main"),
                      this);
    // A program that initialises DDP: lint reports its unwrapped models.
    Finder.addMatcher(
        callExpr(callee(functionDecl(hasName("::ddp::init")))).bind("init"),
        this);
    // Where a model goes: call arguments, member initialisers, assignments.
    Finder.addMatcher(callExpr().bind("call"), this);
    Finder.addMatcher(cxxConstructExpr().bind("construct"), this);
    Finder.addMatcher(
        cxxCtorInitializer(isMemberInitializer()).bind("memberInit"), this);
    Finder.addMatcher(binaryOperator(hasOperatorName("=")).bind("assign"),
                      this);
    Finder.addMatcher(
        cxxOperatorCallExpr(hasOverloadedOperatorName("=")).bind("assignOp"),
        this);
    Finder.addMatcher(varDecl(hasInitializer(expr())).bind("var"), this);
    Finder.addMatcher(declRefExpr(to(varDecl())).bind("ref"), this);
    Finder.addMatcher(
        stmt(anyOf(forStmt(), whileStmt(), doStmt(), cxxForRangeStmt()))
            .bind("loop"),
        this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    ParamCalls.clear();
    Placements.clear();
    Wrapped.clear();
    WrappedClasses.clear();
    Edges.clear();
    VarRefs.clear();
    Opaque.clear();
    Loops.clear();
    Steps.clear();
    InitialisesDdp = false;
    HasMain = false;
    Trains = false;
  }

  void run(const MatchFinder::MatchResult &Result) override {
    Context = Result.Context;
    const BoundNodes &Nodes = Result.Nodes;
    if (const auto *Call = Nodes.getNodeAs<CXXMemberCallExpr>("params")) {
      ParamCalls.push_back(Call);
    } else if (const auto *Call =
                   Nodes.getNodeAs<CXXMemberCallExpr>("placement")) {
      const CXXMethodDecl *Method = Call->getMethodDecl();
      if (Method && Method->getNumParams() > 0 &&
          isRecordNamed(Method->getParamDecl(0)->getType(), "c10::Device"))
        Placements.push_back(Call);
    } else if (const auto *Wrapper =
                   Nodes.getNodeAs<CXXConstructExpr>("wrapper")) {
      for (const Expr *Arg : Wrapper->arguments()) {
        if (const ValueDecl *Decl = modelDeclOf(Arg))
          Wrapped.insert(canonical(Decl));
        else if (const CXXThisExpr *This = thisOf(Arg))
          WrappedClasses.insert(classOf(This->getType()));
      }
    } else if (const auto *Main = Nodes.getNodeAs<FunctionDecl>("main")) {
      HasMain |= Locator.isInRoot(*Context, Main->getLocation());
    } else if (Nodes.getNodeAs<CallExpr>("init")) {
      InitialisesDdp = true;
    } else if (const auto *Call = Nodes.getNodeAs<CallExpr>("distribute")) {
      if (Call->getNumArgs() > 0) {
        if (const ValueDecl *Decl = modelDeclOf(Call->getArg(0)))
          Wrapped.insert(canonical(Decl));
        else if (const CXXThisExpr *This = thisOf(Call->getArg(0)))
          WrappedClasses.insert(classOf(This->getType()));
      }
    } else if (const auto *Call = Nodes.getNodeAs<CallExpr>("call")) {
      noteTraining(Call);
      if (!isa<CXXOperatorCallExpr>(Call))
        if (const FunctionDecl *Callee = Call->getDirectCallee())
          noteArguments(Callee, Call->getArgs(), Call->getNumArgs(), Call);
    } else if (const auto *Construct =
                   Nodes.getNodeAs<CXXConstructExpr>("construct")) {
      Trains |= isOptimizerType(Construct->getType()) &&
                Locator.isInRoot(*Context, Construct->getBeginLoc());
      noteArguments(Construct->getConstructor(), Construct->getArgs(),
                    Construct->getNumArgs(), Construct);
    } else if (const auto *Init =
                   Nodes.getNodeAs<CXXCtorInitializer>("memberInit")) {
      noteCopy(Init->getMember(), Init->getInit(), nullptr);
    } else if (const auto *Assign = Nodes.getNodeAs<BinaryOperator>("assign")) {
      noteCopy(modelDeclOf(Assign->getLHS()), Assign->getRHS(), Assign);
    } else if (const auto *Assign =
                   Nodes.getNodeAs<CXXOperatorCallExpr>("assignOp")) {
      if (Assign->getNumArgs() == 2)
        noteCopy(modelDeclOf(Assign->getArg(0)), Assign->getArg(1), Assign);
    } else if (const auto *Var = Nodes.getNodeAs<VarDecl>("var")) {
      // `auto &m = model;`, `auto net = model;` (a holder copy shares it).
      noteCopy(Var, Var->getInit(), Var->getInit());
    } else if (const auto *Ref = Nodes.getNodeAs<DeclRefExpr>("ref")) {
      VarRefs.push_back(Ref);
    } else if (const auto *Loop = Nodes.getNodeAs<Stmt>("loop")) {
      Loops.push_back(Loop->getSourceRange());
    }
  }

  void onEndOfTranslationUnit() override {
    if (!Context)
      return;
    collectRoots();
    decide();
    if (HasMain)
      addFact("program:main");
    if (Trains)
      addFact("program:trains");
    Context = nullptr;
  }

private:
  struct Root {
    const ValueDecl *Decl = nullptr;
    /// A parameters() call reaching its optimizer: where a report goes.
    const CXXMemberCallExpr *Site = nullptr;
    /// The expression naming the model at Site (`network` in
    /// `network->fc1->parameters()`).
    const Expr *Name = nullptr;
    /// Whether Site's parameters() are those of a part of the model.
    bool Part = false;
  };

  /// A module class whose own parameters() reach an optimizer, per function
  /// (constructor) where they do.
  struct SelfRoot {
    const CXXRecordDecl *Class;
    const FunctionDecl *Function;
    const CXXMemberCallExpr *Site;
  };

  /// A chosen wrap point.
  struct Wrap {
    const CXXMemberCallExpr *Placement = nullptr;
    bool Distribute = false;
    /// The model declaration placed there.
    const ValueDecl *Model = nullptr;
  };

  void addFact(llvm::StringRef Fact) {
    Finding F;
    F.RuleId = "R6";
    F.Provides = Fact.str();
    Findings.push_back(std::move(F));
  }

  /// Lint flags an unwrapped model only in a program that is distributed
  /// already; migrate wraps it either way.
  std::string checkName() const {
    return InitialisesDdp ? "ddp-unwrapped-model" : "";
  }

  static bool isRecordNamed(QualType Type, llvm::StringRef QualifiedName) {
    const auto *Record =
        Type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
    return Record && Record->getQualifiedNameAsString() == QualifiedName;
  }

  /// A module class held by value (`struct Net : torch::nn::Module`): a copy
  /// is another module, not an alias.
  static bool isPlainModule(QualType Type) {
    const CXXRecordDecl *Class =
        Type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
    return Class && derivesFrom(Class, "torch::nn::Module");
  }

  /// Parameters of a function declared twice are those of its definition,
  /// where the placements are.
  static const ValueDecl *canonical(const ValueDecl *Decl) {
    const auto *Param = dyn_cast<ParmVarDecl>(Decl);
    if (!Param)
      return Decl;
    const auto *Function =
        dyn_cast_or_null<FunctionDecl>(Param->getDeclContext());
    if (!Function)
      return Decl;
    const FunctionDecl *Definition = Function->getDefinition();
    unsigned Index = Param->getFunctionScopeIndex();
    if (Definition && Index < Definition->getNumParams())
      return Definition->getParamDecl(Index);
    return Decl;
  }

  /// An optimizer step, or a call of the program's own code whose body this
  /// unit does not hold (it may train), in the program's code: it trains.
  void noteTraining(const CallExpr *Call) {
    bool Step = false;
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
      if (const CXXMethodDecl *Method = Member->getMethodDecl())
        Step = Method->getName() == "step" &&
               isOptimizerType(Member->getImplicitObjectArgument()->getType());
    const FunctionDecl *Callee = Call->getDirectCallee();
    bool Unseen = !Step && Callee && !Callee->isDefined() &&
                  !Callee->getBuiltinID() &&
                  Locator.isInRoot(*Context, Callee->getLocation());
    bool InRoot = Locator.isInRoot(*Context, Call->getBeginLoc());
    if (Step && InRoot)
      Steps.push_back(cast<CXXMemberCallExpr>(Call));
    Trains |= (Step || Unseen) && InRoot;
  }

  /// LibTorch and the standard library, which never place a model they are
  /// given (torch::load, clip_grad_norm_, ...): in a system header, or in
  /// their namespaces wherever their headers are found (LibTorch is often
  /// included with -I).
  bool isLibraryFunction(const FunctionDecl *Callee) const {
    const SourceManager &SM = Context->getSourceManager();
    if (SM.isInSystemHeader(SM.getExpansionLoc(Callee->getLocation())))
      return true;
    std::string Qualified = Callee->getQualifiedNameAsString();
    return llvm::any_of(
        std::initializer_list<llvm::StringRef>{
            "torch::", "at::", "c10::", "std::"},
        [&](llvm::StringRef Library) {
          return llvm::StringRef(Qualified).starts_with(Library);
        });
  }

  /// A model passed to a function or constructor of the user's code is an
  /// alias of its parameter there (by reference, holder, shared_ptr or
  /// pointer; a plain module copied by value is another module).
  void noteArguments(const FunctionDecl *Callee, const Expr *const *Args,
                     unsigned NumArgs, const Expr *Site) {
    if (!Callee)
      return;
    const SourceManager &SM = Context->getSourceManager();
    if (isLibraryFunction(Callee))
      return;
    const FunctionDecl *Definition = Callee->getDefinition();
    if (!Definition || !Definition->hasBody()) {
      // A body ddpify does not read (outside the root): it may be where the
      // model is placed; the report says so.
      for (unsigned I = 0; I < NumArgs; ++I)
        if (const ValueDecl *From = modelDeclOf(Args[I]))
          if (isModuleType(From->getType()))
            Opaque.push_back({canonical(From), Callee, Site});
      return;
    }
    if (SM.isInSystemHeader(SM.getExpansionLoc(Definition->getLocation())))
      return;
    for (unsigned I = 0; I < NumArgs && I < Definition->getNumParams(); ++I) {
      const ParmVarDecl *Param = Definition->getParamDecl(I);
      QualType Type = Param->getType();
      if (!isModuleType(Type) ||
          (!Type->isReferenceType() && !Type->isPointerType() &&
           isPlainModule(Type)))
        continue;
      if (const ValueDecl *From = modelDeclOf(Args[I]))
        Edges.push_back({canonical(From), Param, Site});
    }
  }

  void noteCopy(const ValueDecl *To, const Expr *Value, const Expr *Site) {
    if (!To || !Value || !isModuleType(To->getType()))
      return;
    QualType Type = To->getType();
    if (!Type->isReferenceType() && !Type->isPointerType() &&
        isPlainModule(Type))
      return;
    if (const ValueDecl *From = modelDeclOf(Value))
      if (From != To)
        Edges.push_back({canonical(From), canonical(To), Site});
  }

  // --- Which models are trained --------------------------------------------

  /// Whether E is (or reaches, walking up through expressions) an
  /// optimizer. A local initialised from it (`auto params =
  /// model->parameters();`) is returned in Via for a second look.
  bool reachesOptimizer(const Expr *E, const VarDecl *&Via) {
    Via = nullptr;
    DynTypedNode Node = DynTypedNode::create(*E);
    for (int Depth = 0; Depth < 32; ++Depth) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty())
        return false;
      Node = Parents[0];
      if (const auto *Parent = Node.get<Expr>()) {
        if (isOptimizerType(Parent->getType()))
          return true;
        if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Parent))
          if (const Expr *Object = Member->getImplicitObjectArgument())
            if (isOptimizerType(Object->getType()))
              return true; // add_param_group
        continue;
      }
      if (const auto *Var = Node.get<VarDecl>()) {
        if (isOptimizerType(Var->getType()))
          return true;
        Via = Var;
        return false;
      }
      return false;
    }
    return false;
  }

  /// Whether E's value reaches an optimizer: directly, through a local
  /// initialised from it, through a std::vector it is appended to
  /// (`params.insert(params.end(), p.begin(), p.end())`, `push_back`,
  /// `emplace_back`), or through a range-for over it whose element is
  /// (`for (auto &p : dec->parameters()) params.push_back(p);`).
  bool flowsToOptimizer(const Expr *E,
                        llvm::SmallPtrSetImpl<const VarDecl *> &Visited) {
    const VarDecl *Via = nullptr;
    if (reachesOptimizer(E, Via))
      return true;
    if (Via)
      return varFlowsToOptimizer(Via, Visited);
    DynTypedNode Node = DynTypedNode::create(*E);
    for (int Steps = 0; Steps < 32; ++Steps) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty() || !Parents[0].get<Expr>())
        return false;
      if (const auto *Append = Parents[0].get<CXXMemberCallExpr>())
        if (const VarDecl *Target = appendedTo(Append))
          if (Node.get<Expr>() != Append->getImplicitObjectArgument())
            return varFlowsToOptimizer(Target, Visited);
      Node = Parents[0];
    }
    return false;
  }

  /// The local vector `V.insert(...)`, `V.push_back(...)` or
  /// `V.emplace_back(...)` appends to.
  static const VarDecl *appendedTo(const CXXMemberCallExpr *Call) {
    const CXXMethodDecl *Method = Call->getMethodDecl();
    if (!Method || !Method->getIdentifier())
      return nullptr;
    llvm::StringRef Name = Method->getName();
    if ((Name != "insert" && Name != "push_back" && Name != "emplace_back") ||
        Method->getParent()->getQualifiedNameAsString() != "std::vector")
      return nullptr;
    const auto *Ref = dyn_cast_or_null<DeclRefExpr>(
        skipImplicit(Call->getImplicitObjectArgument()));
    return Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
  }

  /// Whether a use of Var flows to an optimizer; for the hidden range of a
  /// range-for, a use of its element in the loop's body.
  bool varFlowsToOptimizer(const VarDecl *Var,
                           llvm::SmallPtrSetImpl<const VarDecl *> &Visited) {
    if (Visited.size() > 16 || !Visited.insert(Var).second)
      return false;
    if (Var->isImplicit()) {
      DynTypedNodeList Parents = Context->getParents(*Var);
      const auto *Decl = Parents.empty() ? nullptr : Parents[0].get<DeclStmt>();
      if (!Decl)
        return false;
      DynTypedNodeList Above = Context->getParents(*Decl);
      const auto *Range =
          Above.empty() ? nullptr : Above[0].get<CXXForRangeStmt>();
      if (!Range || Range->getRangeStmt() != Decl || !Range->getLoopVariable())
        return false;
      return varFlowsToOptimizer(Range->getLoopVariable(), Visited);
    }
    for (const DeclRefExpr *Ref : VarRefs)
      if (Ref->getDecl() == Var && flowsToOptimizer(Ref, Visited))
        return true;
    return false;
  }

  void collectRoots() {
    Roots.clear();
    SelfRoots.clear();
    for (const CXXMemberCallExpr *Call : ParamCalls) {
      bool Part = false;
      const Expr *Name =
          trainedModelName(Call->getImplicitObjectArgument(), Part);
      const ValueDecl *Model = Name ? modelDeclOf(Name) : nullptr;
      // A model a part of which is wrapped by hand is the program's to
      // wrap: a wrapper over the whole would all-reduce that part's
      // gradients twice (an error at run time).
      if (Part && partWrappedByHand(Model))
        continue;
      const CXXThisExpr *This =
          Model ? nullptr : thisOf(Call->getImplicitObjectArgument());
      if (!Model && !This)
        continue;
      llvm::SmallPtrSet<const VarDecl *, 8> Visited;
      if (!flowsToOptimizer(Call, Visited))
        continue;
      if (This) {
        noteSelfRoot(This, Call);
        continue;
      }
      // A template's pattern: its instantiations are followed instead.
      if (Model->getDeclContext()->isDependentContext())
        continue;
      Model = canonical(Model);
      bool Known = false;
      for (const Root &R : Roots)
        Known |= R.Decl == Model;
      if (!Known)
        Roots.push_back({Model, Call, Name, Part});
    }
  }

  /// Whether a wrap written in the program covers a member of Model's module
  /// class (`ddp::distribute(network->fc1)`).
  bool partWrappedByHand(const ValueDecl *Model) const {
    const CXXRecordDecl *Class =
        Model ? moduleClassOf(Model->getType()) : nullptr;
    for (const ValueDecl *Decl : Wrapped)
      if (const auto *Field = dyn_cast<FieldDecl>(Decl))
        if (Class && Field->getParent() == Class)
          return true;
    return false;
  }

  /// A module class that trains its own parameters (`optimizer(parameters(),
  /// ...)` in its constructor, typical of reinforcement-learning networks
  /// that each own an Adam): every instance is a trained model.
  void noteSelfRoot(const CXXThisExpr *This, const CXXMemberCallExpr *Call) {
    const CXXRecordDecl *Class = classOf(This->getType());
    const FunctionDecl *Function = enclosingFunction(Call);
    // A template's pattern: its instantiations are followed instead.
    if (!Class || !Function || Function->isDependentContext())
      return;
    for (const SelfRoot &R : SelfRoots)
      if (R.Function == Function)
        return;
    SelfRoots.push_back({Class, Function, Call});
  }

  /// The function whose body or member initialisers hold S.
  const FunctionDecl *enclosingFunction(const Stmt *S) const {
    DynTypedNode Node = DynTypedNode::create(*S);
    for (int Depth = 0; Depth < 64; ++Depth) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty())
        return nullptr;
      Node = Parents[0];
      if (const auto *Function = Node.get<FunctionDecl>())
        return Function;
    }
    return nullptr;
  }

  /// Decls the model reaches through calls and copies (Forward) or that
  /// reach it (backward).
  std::vector<const ValueDecl *> reachable(const ValueDecl *From,
                                           bool Forward) const {
    std::vector<const ValueDecl *> Seen{From};
    for (size_t I = 0; I < Seen.size() && Seen.size() < 64; ++I)
      for (const Edge &E : Edges) {
        const ValueDecl *Next = nullptr;
        if (Forward && E.From == Seen[I])
          Next = E.To;
        else if (!Forward && E.To == Seen[I])
          Next = E.From;
        if (Next && std::find(Seen.begin(), Seen.end(), Next) == Seen.end())
          Seen.push_back(Next);
      }
    return Seen;
  }

  bool isWrapped(const ValueDecl *Model) const {
    for (bool Forward : {true, false})
      for (const ValueDecl *Decl : reachable(Model, Forward))
        if (Wrapped.count(Decl))
          return true;
    return false;
  }

  std::vector<const CXXMemberCallExpr *>
  placementsOf(const ValueDecl *Decl) const {
    std::vector<const CXXMemberCallExpr *> Found;
    for (const CXXMemberCallExpr *Call : Placements)
      if (const ValueDecl *Target =
              modelDeclOf(Call->getImplicitObjectArgument()))
        if (canonical(Target) == Decl)
          Found.push_back(Call);
    return Found;
  }

  /// A hand-over at Site after a loop that follows Optimizer, e.g. a trained
  /// model given to an evaluation class after training: not where it is
  /// placed for training.
  bool afterTraining(const Expr *Site, const Expr *Optimizer) const {
    const SourceManager &SM = Context->getSourceManager();
    if (!Site)
      return false;
    SourceLocation At = SM.getExpansionLoc(Site->getBeginLoc());
    SourceLocation Trained = SM.getExpansionLoc(Optimizer->getBeginLoc());
    if (SM.getFileID(At) != SM.getFileID(Trained) ||
        !SM.isBeforeInTranslationUnit(Trained, At))
      return false;
    for (SourceRange Loop : Loops) {
      SourceLocation Begin = SM.getExpansionLoc(Loop.getBegin());
      SourceLocation End = SM.getExpansionLoc(Loop.getEnd());
      if (SM.isBeforeInTranslationUnit(Trained, Begin) &&
          SM.isBeforeInTranslationUnit(End, At))
        return true;
    }
    return false;
  }

  bool before(const Stmt *A, const Stmt *B) const {
    const SourceManager &SM = Context->getSourceManager();
    return SM.isBeforeInTranslationUnit(SM.getExpansionLoc(A->getBeginLoc()),
                                        SM.getExpansionLoc(B->getBeginLoc()));
  }

  /// Where the modules that reach Decl through calls and copies were made:
  /// the models among Decl and what reaches it that nothing reaches (a
  /// helper's parameter stands for its callers' models).
  std::vector<const ValueDecl *> ownersOf(const ValueDecl *Decl) const {
    std::vector<const ValueDecl *> Owners;
    for (const ValueDecl *D : reachable(Decl, /*Forward=*/false)) {
      bool Reached = false;
      for (const Edge &E : Edges)
        Reached |= E.To == D && E.From != D;
      if (!Reached)
        Owners.push_back(D);
    }
    return Owners;
  }

  /// The placements of Model's aliases (where it was handed to: a helper's
  /// parameter, a member) before training at R.
  std::vector<const CXXMemberCallExpr *> aliasPlacements(const ValueDecl *Model,
                                                         const Root &R) const {
    std::vector<const CXXMemberCallExpr *> Found;
    std::vector<const ValueDecl *> Seen{Model};
    for (size_t I = 0; I < Seen.size() && Seen.size() < 64; ++I)
      for (const Edge &E : Edges) {
        if (E.From != Seen[I] ||
            std::find(Seen.begin(), Seen.end(), E.To) != Seen.end())
          continue;
        if (I == 0 && afterTraining(E.Site, R.Site))
          continue;
        Seen.push_back(E.To);
        for (const CXXMemberCallExpr *Call : placementsOf(E.To))
          if (std::find(Found.begin(), Found.end(), Call) == Found.end())
            Found.push_back(Call);
      }
    return Found;
  }

  const FunctionDecl *opaqueHandOver(const ValueDecl *Model,
                                     const Root &R) const {
    const FunctionDecl *HandedTo = nullptr;
    for (const OpaqueCall &Call : Opaque)
      if (Call.Model == Model && !afterTraining(Call.Site, R.Site))
        HandedTo = Call.Callee;
    return HandedTo;
  }

  /// Declared in the project: its body, if not here, is in another unit.
  bool isProjectFunction(const FunctionDecl *Function) {
    return Locator.isInRoot(*Context,
                            Function->getCanonicalDecl()->getLocation());
  }

  using DirectWraps = std::vector<std::pair<const Root *, Wrap>>;
  using AliasWraps =
      std::vector<std::pair<const CXXMemberCallExpr *, const Root *>>;

  /// Model's wrap for the training at R: after its first placement (Direct),
  /// after the placements of what it is handed to (ViaAlias), or a report
  /// when it is handed to code ddpify does not read. False when it has none
  /// of these: it is not placed anywhere ddpify sees.
  bool placeOrReport(const ValueDecl *Model, const Root &R, DirectWraps &Direct,
                     AliasWraps &ViaAlias) {
    std::vector<const CXXMemberCallExpr *> Own = placementsOf(Model);
    if (!Own.empty()) {
      const CXXMemberCallExpr *First = Own.front();
      for (const CXXMemberCallExpr *Call : Own)
        if (before(Call, First))
          First = Call;
      Direct.push_back({&R, {First, false, Model}});
      return true;
    }
    std::vector<const CXXMemberCallExpr *> Found = aliasPlacements(Model, R);
    if (!Found.empty()) {
      for (const CXXMemberCallExpr *Call : Found)
        ViaAlias.push_back({Call, &R});
      return true;
    }
    const FunctionDecl *HandedTo = opaqueHandOver(Model, R);
    if (!HandedTo)
      return false;
    // A function of the project defined in another unit: whether or not it
    // places the model, placing and wrapping it before its optimizer is
    // built is right (a second placement on the same device does nothing).
    if (isProjectFunction(HandedTo))
      return false;
    std::string Name = Model->getName().str();
    reportAt(R.Site, "trained model '" + Name + "' is handed to '" +
                         HandedTo->getNameAsString() +
                         "', whose body ddpify does not read (outside the "
                         "project root); if it places the model, wrap the "
                         "model by hand right after that call: "
                         "ddp::DistributedDataParallel " +
                         Name + "_ddp(" + Name + ");");
    return true;
  }

  void decide() {
    // Module classes that wrap each of their instances: the instances are
    // not wrapped again (two wrappers on one module fail at run time).
    std::set<const CXXRecordDecl *> Distributed(WrappedClasses.begin(),
                                                WrappedClasses.end());
    for (const SelfRoot &R : SelfRoots)
      if (!Distributed.count(R.Class) && !instanceWrapped(R.Class))
        wrapSelf(R);
    for (const SelfRoot &R : SelfRoots)
      Distributed.insert(R.Class);
    DirectWraps Direct;
    AliasWraps ViaAlias;
    std::vector<std::pair<const ValueDecl *, const Root *>> Unplaced;
    for (const Root &R : Roots) {
      if (isWrapped(R.Decl) ||
          Distributed.count(moduleClassOf(R.Decl->getType())))
        continue;
      // A helper's parameter stands for its callers' models: the model
      // itself when it has a placement (or a hand-over) of its own, else each
      // model that reaches it, else it is where the module was made.
      if (placeOrReport(R.Decl, R, Direct, ViaAlias))
        continue;
      std::vector<const ValueDecl *> Owners = ownersOf(R.Decl);
      llvm::erase(Owners, R.Decl);
      if (Owners.empty())
        Unplaced.push_back({R.Decl, &R});
      for (const ValueDecl *Owner : Owners)
        if (!placeOrReport(Owner, R, Direct, ViaAlias))
          Unplaced.push_back({Owner, &R});
    }
    // A model that also reaches a helper wrapping with ddp::distribute is
    // wrapped with ddp::distribute too: two wrappers on one module would be
    // an error at run time, two distribute calls are one wrapper.
    for (auto &[Owner, W] : Direct)
      for (const ValueDecl *Alias : reachable(W.Model, /*Forward=*/true))
        for (const auto &[Call, Unused] : ViaAlias)
          if (const ValueDecl *Target =
                  modelDeclOf(Call->getImplicitObjectArgument()))
            if (canonical(Target) == Alias)
              W.Distribute = true;
    std::set<const CXXMemberCallExpr *> Done;
    for (auto &[Owner, W] : Direct)
      if (Done.insert(W.Placement).second)
        wrapAfter(W.Placement, W.Model, W.Distribute, *Owner);
    for (const auto &[Call, Owner] : ViaAlias)
      if (Done.insert(Call).second)
        wrapAfter(Call,
                  canonical(modelDeclOf(Call->getImplicitObjectArgument())),
                  /*ForceDistribute=*/true, *Owner);
    std::set<const ValueDecl *> Made;
    for (const auto &[Model, Owner] : Unplaced)
      if (Made.insert(Model).second)
        wrapWhereMade(Model, *Owner);
    reportUntracedSteps(Distributed);
  }

  /// An optimizer a module class owns, stepped, whose model ddpify found no
  /// way to (its parameters() nowhere reaching it: a default member
  /// initialiser, parameters handed in from outside): an error item, since
  /// every rank would train that model alone. Only where every constructor
  /// of the class is in this unit (else another unit sees how it is built).
  void reportUntracedSteps(const std::set<const CXXRecordDecl *> &Covered) {
    std::set<const FieldDecl *> Reported;
    for (const CXXMemberCallExpr *Step : Steps) {
      const auto *Field = dyn_cast_or_null<FieldDecl>(
          modelDeclOf(Step->getImplicitObjectArgument()));
      const auto *Class =
          Field ? dyn_cast<CXXRecordDecl>(Field->getParent()) : nullptr;
      if (!Class || !derivesFrom(Class, "torch::nn::Module") ||
          Covered.count(Class) || instanceWrapped(Class) ||
          !Reported.insert(Field).second)
        continue;
      bool Traced = false;
      for (const Root &R : Roots)
        Traced |= moduleClassOf(R.Decl->getType()) == Class ||
                  (isa<FieldDecl>(R.Decl) &&
                   cast<FieldDecl>(R.Decl)->getParent() == Class);
      bool Elsewhere = false;
      for (const CXXConstructorDecl *Ctor : Class->ctors())
        Elsewhere |= !Ctor->isImplicit() && !Ctor->isDefined();
      if (Traced || Elsewhere)
        continue;
      std::string Name = Class->getNameAsString();
      reportAt(Step, "optimizer '" + Field->getName().str() +
                         "' of module class '" + Name +
                         "' is stepped, but ddpify cannot tell which model "
                         "it trains (its parameters do not come from a "
                         "parameters() call in a constructor); wrap the "
                         "model it trains by hand once that is placed and "
                         "converted (ddp::distribute(model); for a module "
                         "that trains itself, ddp::distribute(*this); at "
                         "the end of its constructor)");
    }
  }

  /// Whether a model of Class is wrapped by hand somewhere in this unit.
  bool instanceWrapped(const CXXRecordDecl *Class) const {
    for (const ValueDecl *Decl : Wrapped)
      if (moduleClassOf(Decl->getType()) == Class)
        return true;
    return false;
  }

  /// A module that builds its optimizer over its own parameters:
  /// `ddp::distribute(*this);` at the end of that constructor, after its
  /// placement and any conversion there, so every instance is wrapped where
  /// it is built. An instance no optimizer steps (a target network only
  /// copied into) gets no gradient and so no all-reduce: the wrap only
  /// broadcasts rank 0's parameters once, which every rank does in the same
  /// order as it builds the same objects.
  void wrapSelf(const SelfRoot &R) {
    std::string Class = R.Class->getNameAsString();
    std::string How = "; wrap each instance by hand after its last placement "
                      "or conversion (ddp::distribute(*this); at the end of "
                      "its constructor)";
    const auto *Ctor = dyn_cast<CXXConstructorDecl>(R.Function);
    const auto *Body =
        Ctor ? dyn_cast_or_null<CompoundStmt>(Ctor->getBody()) : nullptr;
    if (!Ctor) {
      reportAt(R.Site, "module class '" + Class +
                           "' builds an optimizer over its own parameters in "
                           "'" +
                           R.Function->getNameAsString() +
                           "', not in a constructor: ddpify cannot tell "
                           "where its instances are ready to wrap; wrap each "
                           "by hand once it is placed and converted "
                           "(ddp::distribute(*this); after that optimizer "
                           "is built)");
      return;
    }
    if (!Body || Body->getRBracLoc().isMacroID()) {
      reportAt(R.Site, "module class '" + Class +
                           "' builds an optimizer over its own parameters in "
                           "a constructor with no body ddpify can edit" +
                           How);
      return;
    }
    if (wrapInstancesAfterPlacement(R))
      return;
    Finding F = Locator.make(*Context, SourceRange(Body->getRBracLoc()), "R6",
                             checkName());
    if (F.FilePath.empty()) {
      reportAt(R.Site, "module class '" + Class +
                           "' builds an optimizer over its own parameters in "
                           "a constructor ddpify does not edit" +
                           How);
      return;
    }
    const SourceManager &SM = Context->getSourceManager();
    std::string Wrap = "ddp::distribute(*this);";
    appendToBody(F, SM, Body, {Wrap});
    F.Message = "module class '" + Class +
                "' trains its own parameters with an optimizer it builds: "
                "every instance gets no gradient averaging across processes; "
                "'" +
                Wrap + "' at the end of its constructor wraps each one";
    Findings.push_back(std::move(F));
  }

  /// Instances of a self-training module class placed after they are built
  /// (an agent's constructor calling `actor_.to(device)` for each network it
  /// holds): a wrap at the end of the class's constructor would come before
  /// that placement, which on a GPU gives the parameters new storage under
  /// the wrapper. Each instance is wrapped right after its last placement
  /// instead, `ddp::distribute(actor_);`. Only where every instance declared
  /// beside a placed one (the owner's fields of that class, the function's
  /// locals) is placed by a statement of its own; false otherwise (the wrap
  /// stays in the constructor).
  bool wrapInstancesAfterPlacement(const SelfRoot &R) {
    const SourceManager &SM = Context->getSourceManager();
    std::map<const ValueDecl *, const CXXMemberCallExpr *> Last;
    for (const CXXMemberCallExpr *Call : Placements) {
      // Module::to is called through the base: the object's own type is
      // under the derived-to-base cast.
      const Expr *Object = Call->getImplicitObjectArgument();
      if (Object)
        Object = Object->IgnoreParenImpCasts();
      if (!Object || moduleClassOf(Object->getType()) != R.Class)
        continue;
      const FunctionDecl *Where = enclosingFunction(Call);
      const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Where);
      if (!Where || (Method && Method->getParent() == R.Class))
        continue; // the class placing itself
      const ValueDecl *Instance = modelDeclOf(Object);
      if (!Instance || !isa<FieldDecl, VarDecl>(Instance))
        return false;
      DynTypedNodeList Parents = Context->getParents(*Call);
      if (Parents.empty() || !Parents[0].get<CompoundStmt>())
        return false; // not a statement of its own
      const CXXMemberCallExpr *&Slot = Last[canonical(Instance)];
      if (!Slot || SM.isBeforeInTranslationUnit(Slot->getBeginLoc(),
                                                Call->getBeginLoc()))
        Slot = Call;
    }
    if (Last.empty())
      return false;
    // Every sibling instance of the class is placed: the owner's fields, or
    // the locals of the function that places them.
    for (const auto &[Instance, Call] : Last) {
      if (const auto *Field = dyn_cast<FieldDecl>(Instance)) {
        for (const FieldDecl *Sibling : Field->getParent()->fields())
          if (moduleClassOf(Sibling->getType()) == R.Class &&
              !Last.count(canonical(Sibling)))
            return false;
      } else if (const auto *Function = enclosingFunction(Call)) {
        bool Unplaced = false;
        std::function<void(const Stmt *)> Visit = [&](const Stmt *S) {
          if (!S || Unplaced)
            return;
          if (const auto *Decls = dyn_cast<DeclStmt>(S))
            for (const Decl *D : Decls->decls())
              if (const auto *Var = dyn_cast<VarDecl>(D))
                if (moduleClassOf(Var->getType()) == R.Class &&
                    !Last.count(canonical(Var)))
                  Unplaced = true;
          for (const Stmt *Child : S->children())
            Visit(Child);
        };
        Visit(Function->getBody());
        if (Unplaced)
          return false;
      }
    }
    std::vector<Finding> Edits;
    for (const auto &[Instance, Call] : Last) {
      // Past the conversions that follow (`critic.to(torch::kDouble)`).
      const Stmt *Statement = Call;
      const auto *Block = Context->getParents(*Call)[0].get<CompoundStmt>();
      afterConversions(Instance, Block, Statement, Block);
      unsigned Offset = 0;
      if (!offsetAfterStatement(*Context, Statement, Offset))
        return false;
      Finding F = Locator.make(*Context, SourceRange(Call->getBeginLoc()), "R6",
                               checkName());
      if (F.FilePath.empty() || F.InMacro)
        return false;
      bool StartsLine = false;
      std::string Indent = indentationOf(SM, Call->getBeginLoc(), StartsLine);
      // ddp::distribute takes the module, its holder, a shared_ptr or a
      // pointer alike.
      const Expr *Held =
          Call->getImplicitObjectArgument()->IgnoreParenImpCasts();
      if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Held))
        if (Arrow->getOperator() == OO_Arrow && Arrow->getNumArgs() > 0)
          Held = Arrow->getArg(0); // the holder or shared_ptr itself
      std::string Object = text(Held->IgnoreParenImpCasts()->getSourceRange());
      std::string Wrap = "ddp::distribute(" + Object + ");";
      F.Offset = Offset;
      F.Length = 0;
      F.replaceRangeWith("\n" + Indent + Wrap);
      F.Message = "module class '" + R.Class->getNameAsString() +
                  "' trains its own parameters with an optimizer it builds, "
                  "and '" +
                  Instance->getNameAsString() +
                  "' is placed after it is built: '" + Wrap +
                  "' after its last placement wraps it";
      Edits.push_back(std::move(F));
    }
    for (Finding &F : Edits)
      Findings.push_back(std::move(F));
    return true;
  }

  // --- The wrap point ------------------------------------------------------

  void reportAt(const Stmt *Site, const std::string &Reason) {
    Finding F =
        Locator.make(*Context, Site->getSourceRange(), "R6", checkName());
    if (F.FilePath.empty())
      return;
    F.InMacro = false;
    F.MacroName.clear();
    F.ReportId = "model-not-wrapped";
    // Every rank would train a model of its own: the program is wrong.
    F.Level = ReportLevel::Error;
    F.NotRewrittenReason = Reason;
    F.Message = Reason;
    Findings.push_back(std::move(F));
  }

  std::string text(SourceRange Range) const {
    return Lexer::getSourceText(CharSourceRange::getTokenRange(Range),
                                Context->getSourceManager(),
                                Context->getLangOpts())
        .str();
  }

  /// The object a placement is called on, as the wrapper takes it: `model`
  /// in `model->to(d)` (holder, shared_ptr) and `model.to(d)`, `*net` for a
  /// raw pointer `net->to(d)` (the runtime's reference constructor).
  std::string objectText(const CXXMemberCallExpr *Call) const {
    const auto *Callee =
        dyn_cast<MemberExpr>(Call->getCallee()->IgnoreParens());
    if (!Callee)
      return "";
    const Expr *Base = Callee->getBase()->IgnoreImpCasts();
    bool RawPointer = Callee->isArrow();
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Base))
      if (Op->getOperator() == OO_Arrow && Op->getNumArgs() == 1) {
        Base = Op->getArg(0);
        RawPointer = false;
      }
    Base = Base->IgnoreImpCasts();
    std::string Text = text(Base->getSourceRange());
    if (!RawPointer || Text.empty())
      return Text;
    bool Simple =
        isa<DeclRefExpr>(Base) || isa<MemberExpr>(Base) || isa<ParenExpr>(Base);
    return Simple ? "*" + Text : "*(" + Text + ")";
  }

  /// Wraps Model (Owner's model itself, or where Owner's model was handed
  /// to) after its placement Call, or reports why not.
  void wrapAfter(const CXXMemberCallExpr *Call, const ValueDecl *Model,
                 bool ForceDistribute, const Root &Owner) {
    const SourceManager &SM = Context->getSourceManager();
    std::string Name = Model ? Model->getName().str() : "the model";
    std::string How = "; wrap it by hand right after its placement (ddp::"
                      "DistributedDataParallel for a local, ddp::distribute "
                      "otherwise)";
    if (Call->getBeginLoc().isMacroID() || Call->getEndLoc().isMacroID()) {
      std::string Macro = std::string(Lexer::getImmediateMacroName(
          Call->getBeginLoc().isMacroID() ? Call->getBeginLoc()
                                          : Call->getEndLoc(),
          SM, Context->getLangOpts()));
      reportAt(Call, "the placement of trained model '" + Name +
                         "' is inside the expansion of macro '" + Macro + "'" +
                         How);
      return;
    }
    Finding F =
        Locator.make(*Context, Call->getSourceRange(), "R6", checkName());
    if (F.FilePath.empty()) {
      // Placed in a file ddpify does not edit: report at its optimizer.
      reportAt(
          Owner.Site,
          "trained model '" + Owner.Decl->getName().str() + "' is placed in " +
              SM.getFilename(SM.getExpansionLoc(Call->getBeginLoc())).str() +
              ", which ddpify does not edit" + How);
      return;
    }
    // The statement holding the placement must be one of a block's.
    const Stmt *Statement = Call;
    const CompoundStmt *Block = nullptr;
    DynTypedNode Node = DynTypedNode::create(*Call);
    while (true) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty())
        break;
      Node = Parents[0];
      if (const auto *Parent = Node.get<Expr>()) {
        Statement = Parent;
        continue;
      }
      Block = Node.get<CompoundStmt>();
      break;
    }
    if (!Block) {
      reportAt(Call, "the placement of trained model '" + Name +
                         "' is not a statement of its own in a block (a "
                         "branch without braces, part of an expression)" +
                         How);
      return;
    }
    // A local declared in this very block gets a named wrapper; anything
    // else (a parameter, a member, a global, a nested block) lasts beyond
    // the block: ddp::distribute.
    const auto *Local = dyn_cast_or_null<VarDecl>(Model);
    bool IsLocal = Local && !isa<ParmVarDecl>(Local) &&
                   Local->hasLocalStorage() && !Local->isStaticLocal();
    const CompoundStmt *DeclBlock = nullptr;
    if (IsLocal) {
      DynTypedNodeList Parents = Context->getParents(*Local);
      if (!Parents.empty())
        if (const auto *Decls = Parents[0].get<DeclStmt>()) {
          DynTypedNodeList Up = Context->getParents(*Decls);
          if (!Up.empty())
            DeclBlock = Up[0].get<CompoundStmt>();
        }
    }
    // Loops and lambdas between the placement and the model's scope (or the
    // function's body).
    Node = DynTypedNode::create(*Block);
    const Stmt *Crossed = nullptr;
    while (!(DeclBlock && Node.get<CompoundStmt>() == DeclBlock)) {
      if (const auto *S = Node.get<Stmt>())
        if (isLoop(S) || isa<LambdaExpr>(S)) {
          Crossed = S;
          break;
        }
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty() || Parents[0].get<FunctionDecl>())
        break;
      Node = Parents[0];
    }
    if (Crossed) {
      reportAt(Call, "trained model '" + Name + "' is placed inside " +
                         (isa<LambdaExpr>(Crossed) ? "a lambda" : "a loop") +
                         ", where a wrapper would be built again every "
                         "time" +
                         How);
      return;
    }
    // The wrap comes after the model's last conversion before training
    // (`to(torch::kDouble)`, a load into it), also in a branch: a wrapper
    // built before would hold parameters the conversion replaces.
    bool Moved = afterConversions(Model, DeclBlock, Statement, Block);
    bool Distribute = ForceDistribute || !IsLocal || Block != DeclBlock;
    std::string Object = objectText(Call);
    if (Object.empty()) {
      reportAt(Call, "the placement of trained model '" + Name +
                         "' is not written as 'model->to(...)' or "
                         "'model.to(...)'" +
                         How);
      return;
    }
    // After the statement's `;` (or a block's `}`), on a line of its own.
    SourceLocation AfterSemi = afterStatement(Statement);
    unsigned Offset = 0;
    if (AfterSemi.isInvalid() ||
        !Locator.offsetIn(*Context, F, AfterSemi, Offset)) {
      reportAt(Call, "the placement of trained model '" + Name +
                         "' has no ';' where a wrap can follow" + How);
      return;
    }
    bool Invalid = false;
    llvm::StringRef Buffer =
        SM.getBufferData(SM.getFileID(SM.getExpansionLoc(AfterSemi)), &Invalid);
    if (Invalid)
      return;
    // The rest of the line: nothing or a `//` comment keeps it on this line.
    size_t LineEnd = Buffer.find('\n', Offset);
    if (LineEnd == llvm::StringRef::npos)
      LineEnd = Buffer.size();
    llvm::StringRef Rest = Buffer.slice(Offset, LineEnd).ltrim(" \t");
    bool RestOfLineFree = Rest.empty() || Rest.starts_with("//");
    std::string Indent = indentationAt(Buffer, Offset).str();

    std::string WrapperName;
    if (!Distribute)
      WrapperName = uniqueName(Local->getName().str() + "_ddp", Block);
    F.Offset = RestOfLineFree ? (unsigned)LineEnd : Offset;
    // Code after the `;` moves to its own line: its blanks go.
    F.Length =
        RestOfLineFree
            ? 0
            : (unsigned)(Buffer.slice(Offset, LineEnd).size() - Rest.size());
    // The wrap on a line of its own after the placement's; code that
    // followed the `;` goes on the line after the wrap.
    std::string Wrap =
        Distribute ? "ddp::distribute(" + Object + ");"
                   : wrapperClass() + " " + WrapperName + "(" + Object + ");";
    F.replaceRangeWith("\n" + Indent + Wrap +
                       (RestOfLineFree ? "" : "\n" + Indent));
    F.Message =
        "trained model '" + Name +
        "' gets no gradient averaging across processes; " +
        (Distribute ? "ddp::distribute(" + Object + ")"
                    : wrapperClass() + " " + WrapperName + "(" + Object + ")") +
        (Moved ? " after its last conversion before training wraps it"
               : " after its placement wraps it");
    Findings.push_back(std::move(F));
  }

  /// Where code after S goes: past its `;`, or its `}` when it ends with a
  /// block; invalid when S has neither.
  SourceLocation afterStatement(const Stmt *S) const {
    const SourceManager &SM = Context->getSourceManager();
    SourceLocation End = S->getEndLoc();
    llvm::StringRef Last = Lexer::getSourceText(
        CharSourceRange::getTokenRange(End, End), SM, Context->getLangOpts());
    if (Last == "}" || Last == ";")
      return Lexer::getLocForEndOfToken(End, 0, SM, Context->getLangOpts());
    return Lexer::findLocationAfterToken(
        End, tok::semi, SM, Context->getLangOpts(),
        /*SkipTrailingWhitespaceAndNewLine=*/false);
  }

  bool isModel(const Expr *E, const ValueDecl *Model) const {
    const ValueDecl *Decl = E ? modelDeclOf(E) : nullptr;
    return Decl && canonical(Decl) == Model;
  }

  /// A call that converts or reloads Model in place: `to(...)` of any kind,
  /// `load(archive)`, `torch::load(model, ...)`, or a function of the
  /// program named like a loader that it is handed to.
  bool isConversion(const Stmt *S, const ValueDecl *Model) const {
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(S)) {
      const CXXMethodDecl *Method = Member->getMethodDecl();
      if (Method && Method->getIdentifier() &&
          (Method->getName() == "to" || Method->getName() == "load") &&
          derivesFrom(Method->getParent(), "torch::nn::Module"))
        return isModel(Member->getImplicitObjectArgument(), Model);
    }
    const auto *Call = dyn_cast<CallExpr>(S);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    if (!Callee || !Callee->getIdentifier() || isa<CXXOperatorCallExpr>(Call))
      return false;
    std::string Name = Callee->getQualifiedNameAsString();
    bool Loader =
        Name == "torch::load" ||
        (!isLibraryFunction(Callee) &&
         llvm::StringRef(Callee->getName()).contains_insensitive("load"));
    return Loader && llvm::any_of(Call->arguments(), [&](const Expr *Arg) {
             return isModel(Arg, Model);
           });
  }

  /// Whether S may train Model, or hand it on to what may: a loop or a
  /// lambda, an optimizer step, the model's forward, the model given to a
  /// function or class of the program that is not a loader.
  bool trainsIn(const Stmt *S, const ValueDecl *Model) const {
    if (!S)
      return false;
    if (isLoop(S) || isa<LambdaExpr>(S))
      return true;
    if (isConversion(S, Model))
      return false;
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(S))
      if (const CXXMethodDecl *Method = Member->getMethodDecl())
        if (Method->getIdentifier() &&
            ((Method->getName() == "step" &&
              isOptimizerType(
                  Member->getImplicitObjectArgument()->getType())) ||
             (Method->getName() == "forward" &&
              isModel(Member->getImplicitObjectArgument(), Model))))
          return true;
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(S))
      if (Op->getOperator() == OO_Call && Op->getNumArgs() > 0 &&
          isModel(Op->getArg(0), Model))
        return true;
    const FunctionDecl *Callee = nullptr;
    llvm::ArrayRef<const Expr *> Args;
    if (const auto *Call = dyn_cast<CallExpr>(S)) {
      Callee = Call->getDirectCallee();
      Args = llvm::ArrayRef(Call->getArgs(), Call->getNumArgs());
    } else if (const auto *Construct = dyn_cast<CXXConstructExpr>(S)) {
      Callee = Construct->getConstructor();
      Args = llvm::ArrayRef(Construct->getArgs(), Construct->getNumArgs());
    }
    if (Callee && !isa<CXXOperatorCallExpr>(S) && !isLibraryFunction(Callee) &&
        llvm::any_of(Args,
                     [&](const Expr *Arg) { return isModel(Arg, Model); }))
      return true;
    for (const Stmt *Child : S->children())
      if (trainsIn(Child, Model))
        return true;
    return false;
  }

  bool convertsIn(const Stmt *S, const ValueDecl *Model) const {
    if (!S)
      return false;
    if (isConversion(S, Model))
      return true;
    for (const Stmt *Child : S->children())
      if (convertsIn(Child, Model))
        return true;
    return false;
  }

  /// Moves the wrap point (Statement in Block) past the model's conversions
  /// on the way to training: out of branches and nested blocks that do not
  /// train it (up to the block declaring it, or the function's body), so
  /// every path is wrapped, then past each later statement of that block
  /// that converts or loads it, until one may train it. True when it moved.
  bool afterConversions(const ValueDecl *Model, const CompoundStmt *DeclBlock,
                        const Stmt *&Statement, const CompoundStmt *&Block) {
    bool Moved = false;
    while (Block != DeclBlock) {
      const Stmt *Outer = Block;
      DynTypedNode Node = DynTypedNode::create(*Outer);
      const CompoundStmt *OuterBlock = nullptr;
      while (!OuterBlock) {
        DynTypedNodeList Parents = Context->getParents(Node);
        if (Parents.empty())
          break;
        Node = Parents[0];
        if (const auto *If = Node.get<IfStmt>()) {
          Outer = If;
          continue;
        }
        OuterBlock = Node.get<CompoundStmt>();
        if (!OuterBlock)
          break;
      }
      if (!OuterBlock || trainsIn(Outer, Model) ||
          Outer->getBeginLoc().isMacroID() || Outer->getEndLoc().isMacroID())
        break;
      Statement = Outer;
      Block = OuterBlock;
      Moved = true;
    }
    bool Past = false;
    for (const Stmt *S : Block->body()) {
      if (S == Statement) {
        Past = true;
        continue;
      }
      if (!Past)
        continue;
      if (trainsIn(S, Model) || S->getBeginLoc().isMacroID() ||
          S->getEndLoc().isMacroID())
        break;
      if (convertsIn(S, Model)) {
        Statement = S;
        Moved = true;
      }
    }
    return Moved;
  }

  /// The wrapper's class as this language standard spells it: C++14 has no
  /// class template argument deduction.
  std::string wrapperClass() const {
    return Context->getLangOpts().CPlusPlus17
               ? "ddp::DistributedDataParallel"
               : "ddp::DistributedDataParallel<>";
  }

  bool contains(const Stmt *Outer, const Stmt *Inner) const {
    if (!Outer || !Inner)
      return false;
    const SourceManager &SM = Context->getSourceManager();
    SourceLocation At = SM.getExpansionLoc(Inner->getBeginLoc());
    SourceRange Range(SM.getExpansionLoc(Outer->getBeginLoc()),
                      SM.getExpansionLoc(Outer->getEndLoc()));
    return SM.isPointWithin(At, Range.getBegin(), Range.getEnd());
  }

  /// How the placement and the wrapper name a model declared with Type:
  /// {object for `.to`, `.` or `->`, the wrapper's argument}; empty when
  /// the type is not one a wrapper takes.
  static bool spellModel(QualType Type, const std::string &Name,
                         std::string &Placed, std::string &Wrapped) {
    QualType Value = Type.getNonReferenceType();
    const CXXRecordDecl *Class = Value.getCanonicalType()->getAsCXXRecordDecl();
    if (Value->isPointerType()) {
      if (!isModuleType(Value))
        return false;
      Placed = Name + "->";
      Wrapped = "*" + Name;
      return true;
    }
    if (Class && Class->getQualifiedNameAsString() == "torch::nn::AnyModule") {
      Placed = Name + ".ptr()->";
      Wrapped = Name + ".ptr()";
      return true;
    }
    if (isPlainModule(Value)) {
      Placed = Name + ".";
      Wrapped = Name;
      return true;
    }
    if (isModuleType(Value)) {
      Placed = Name + "->";
      Wrapped = Name;
      return true;
    }
    return false;
  }

  /// A trained model with no placement: placed on the process's device and
  /// wrapped where it was made, before it is handed to training (its
  /// optimizer, or the helper that trains it). A local gets a named wrapper
  /// beside it; a class member gets ddp::distribute at the end of each
  /// constructor.
  void wrapWhereMade(const ValueDecl *Model, const Root &Owner) {
    std::string Name = Model->getName().str();
    std::string How = "; place and wrap it by hand before its optimizer is "
                      "built: " +
                      wrapperClass() + " " + Name + "_ddp(" + Name + ");";
    std::string Placed, Wrapped;
    if (!spellModel(Model->getType(), Name, Placed, Wrapped)) {
      reportAt(Owner.Site, "trained model '" + Name +
                               "' has a type ddpify cannot wrap" + How);
      return;
    }
    if (const auto *Field = dyn_cast<FieldDecl>(Model)) {
      if (!wrapMemberInConstructors(Field, Placed, Wrapped) &&
          !wrapAtOptimizer(Model, Wrapped, Owner))
        reportAt(Owner.Site, "trained member '" + Name +
                                 "' is not placed on a device and its class "
                                 "has no constructor body ddpify can edit" +
                                 How);
      return;
    }
    const auto *Var = dyn_cast<VarDecl>(Model);
    // A global, or a parameter no call of this unit hands a model to (its
    // callers are in other units).
    if (Var && (isa<ParmVarDecl>(Var) || !Var->hasLocalStorage()) &&
        wrapAtOptimizer(Model, Wrapped, Owner))
      return;
    if (!Var || isa<ParmVarDecl>(Var) || !Var->hasLocalStorage()) {
      reportAt(Owner.Site, "trained model '" + Name +
                               "' is not placed on a device and is not a "
                               "local or member ddpify can wrap where it is "
                               "made" +
                               How);
      return;
    }
    const DeclStmt *Declaration = nullptr;
    const CompoundStmt *Block = nullptr;
    DynTypedNodeList Parents = Context->getParents(*Var);
    if (!Parents.empty())
      if ((Declaration = Parents[0].get<DeclStmt>())) {
        DynTypedNodeList Up = Context->getParents(*Declaration);
        if (!Up.empty())
          Block = Up[0].get<CompoundStmt>();
      }
    if (!Block) {
      reportAt(Owner.Site, "trained model '" + Name +
                               "' is not declared as a statement of a block" +
                               How);
      return;
    }
    // The first statement after the declaration that leads to training.
    const Stmt *Before = nullptr;
    bool Past = false;
    for (const Stmt *S : Block->body()) {
      if (S == Declaration) {
        Past = true;
        continue;
      }
      if (!Past)
        continue;
      bool Leads = contains(S, Owner.Site);
      for (const Edge &E : Edges)
        Leads |= E.From == Model && E.Site && contains(S, E.Site);
      if (Leads) {
        Before = S;
        break;
      }
    }
    if (!Before) {
      reportAt(Owner.Site, "trained model '" + Name +
                               "' is not placed on a device, and ddpify "
                               "could not tell where in its block it is "
                               "handed to training" +
                               How);
      return;
    }
    const SourceManager &SM = Context->getSourceManager();
    if (Before->getBeginLoc().isMacroID()) {
      reportAt(Owner.Site, "trained model '" + Name +
                               "' is handed to training inside a macro "
                               "expansion" +
                               How);
      return;
    }
    Finding F =
        Locator.make(*Context, Before->getSourceRange(), "R6", checkName());
    if (F.FilePath.empty())
      return;
    // The device the program already uses (any, CPU included), so the model
    // goes where its data goes.
    std::string Device = deviceVariableInScope(
        *Context, Before, [](const Expr *) { return true; });
    if (Device.empty())
      Device = "ddp::device()";
    std::string WrapperName = uniqueName(Name + "_ddp", Block);
    std::string Place = Placed + "to(" + Device + ");";
    std::string Wrap =
        wrapperClass() + " " + WrapperName + "(" + Wrapped + ");";
    bool StartsLine = false;
    std::string Indent = indentationOf(SM, Before->getBeginLoc(), StartsLine);
    if (StartsLine)
      F.Offset -= Indent.size();
    F.Length = 0;
    F.replaceRangeWith(statementsText({Place, Wrap}, StartsLine, Indent));
    const FunctionDecl *HandedTo = opaqueHandOver(Model, Owner);
    F.Message = "trained model '" + Name +
                "' gets no gradient averaging across processes" +
                (HandedTo && isProjectFunction(HandedTo)
                     ? " and is handed to '" + HandedTo->getNameAsString() +
                           "' of another unit, which may place it"
                     : " and is not placed on a device") +
                "; '" + Place + " " + Wrap + "' before it is trained wraps it";
    Findings.push_back(std::move(F));
  }

  /// Statements to insert: each on a line of its own at Indent (OwnLines),
  /// else one after another on the line they go into.
  static std::string statementsText(llvm::ArrayRef<std::string> Statements,
                                    bool OwnLines, const std::string &Indent) {
    std::string Text;
    for (const std::string &Statement : Statements)
      Text += OwnLines ? Indent + Statement + "\n" : Statement + " ";
    return Text;
  }

  /// Turns F, located at Body's closing brace, into an insertion of
  /// Statements at the end of Body, indented as Body's first statement.
  static void appendToBody(Finding &F, const SourceManager &SM,
                           const CompoundStmt *Body,
                           llvm::ArrayRef<std::string> Statements) {
    bool StartsLine = false;
    std::string Indent = indentationOf(SM, Body->getRBracLoc(), StartsLine);
    std::string Inner = Indent + "  ";
    if (!Body->body_empty()) {
      bool FirstStarts = false;
      std::string First =
          indentationOf(SM, Body->body_front()->getBeginLoc(), FirstStarts);
      if (FirstStarts)
        Inner = First;
    }
    if (StartsLine)
      F.Offset -= Indent.size();
    F.Length = 0;
    F.replaceRangeWith((StartsLine ? "" : " ") +
                       statementsText(Statements, StartsLine, Inner));
  }

  /// A model no statement can place and wrap before its optimizer is built
  /// (a member whose class has no constructor body, its optimizer a member
  /// too; a global): the parameters() that reach the optimizer become
  /// `ddp::distributed_parameters(model, device)`, which places, wraps with
  /// ddp::distribute and returns them. False where Owner's parameters() call
  /// is not on Model itself or comes from a macro.
  bool wrapAtOptimizer(const ValueDecl *Model, std::string Wrapped,
                       const Root &Owner) {
    const CXXMemberCallExpr *Site = Owner.Site;
    const ValueDecl *Object = Owner.Name ? modelDeclOf(Owner.Name) : nullptr;
    if (!Object || Site->getBeginLoc().isMacroID() ||
        Site->getEndLoc().isMacroID() ||
        Owner.Name->getBeginLoc().isMacroID() ||
        Owner.Name->getEndLoc().isMacroID())
      return false;
    // A copy the model was handed on to (a constructor's parameter kept in a
    // member, `encoder_(std::move(encoder))`) is the same module, wrapped at
    // the copy's parameters() call.
    if (canonical(Object) != canonical(Model) &&
        !llvm::is_contained(reachable(canonical(Model), /*Forward=*/true),
                            canonical(Object)))
      return false;
    // The model as the call spells it (`network`, `agent.net`,
    // `this->net_`), so the wrap names what is in scope there.
    std::string Placed;
    if (!spellModel(Object->getType(), text(Owner.Name->getSourceRange()),
                    Placed, Wrapped))
      return false;
    Finding F =
        Locator.make(*Context, Site->getSourceRange(), "R6", checkName());
    if (F.FilePath.empty())
      return false;
    // The program's device where the optimizer is built: a device member
    // initialised before the member holding the optimizer, else a device
    // variable in scope.
    std::string Device;
    DynTypedNode Node = DynTypedNode::create(*static_cast<const Stmt *>(Site));
    const FieldDecl *Holder = nullptr;
    for (int Depth = 0; Depth < 32 && !Holder; ++Depth) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty() || Parents[0].get<FunctionDecl>())
        break;
      Node = Parents[0];
      Holder = Node.get<FieldDecl>();
    }
    if (Holder) {
      Device = deviceMember(Holder->getParent(), Holder);
    } else {
      Device = deviceVariableInScope(*Context, Site,
                                     [](const Expr *) { return true; });
    }
    std::string Call = "ddp::distributed_parameters(" + Wrapped +
                       (Device.empty() ? "" : ", " + Device) + ")";
    std::string Edit = Call;
    // A part's parameters (`network->fc1->parameters()`): the whole model is
    // placed and wrapped, once, and the optimizer still gets the part's.
    if (Owner.Part)
      Edit = "(" + Call + ", " + text(Site->getSourceRange()) + ")";
    F.Message = "trained model '" + Model->getName().str() +
                "' gets no gradient averaging across processes and is not "
                "placed on a device, and no statement can come before its "
                "optimizer is built; '" +
                Call +
                (Owner.Part ? "' places and wraps the whole model before "
                              "the optimizer gets its part's parameters"
                            : "' places it, wraps it and gives the optimizer "
                              "its parameters");
    F.Edits.push_back({F.Offset, F.Length, Edit});
    Findings.push_back(std::move(F));
    return true;
  }

  /// The last torch::Device member of Class (declared before Before, when
  /// given: initialised by then); empty when there is none.
  static std::string deviceMember(const RecordDecl *Class,
                                  const FieldDecl *Before = nullptr) {
    std::string Name;
    for (const FieldDecl *Field : Class->fields()) {
      if (Before && Field->getFieldIndex() >= Before->getFieldIndex())
        break;
      if (isRecordNamed(Field->getType(), "c10::Device"))
        Name = Field->getName().str();
    }
    return Name;
  }

  /// A class member trained with no placement: `ddp::distribute` at the end
  /// of every constructor with a body (where the member is fully built).
  /// False when the class has no constructor body to edit.
  bool wrapMemberInConstructors(const FieldDecl *Field,
                                const std::string &Placed,
                                const std::string &Wrapped) {
    const SourceManager &SM = Context->getSourceManager();
    const auto *Class = dyn_cast<CXXRecordDecl>(Field->getParent());
    unsigned Count = 0;
    if (Class)
      for (const CXXConstructorDecl *Ctor : Class->ctors()) {
        if (!Ctor->doesThisDeclarationHaveABody() || Ctor->isImplicit() ||
            Ctor->isCopyOrMoveConstructor())
          continue;
        const auto *Body = dyn_cast_or_null<CompoundStmt>(Ctor->getBody());
        if (!Body || Body->getRBracLoc().isMacroID())
          continue;
        Finding F = Locator.make(*Context, SourceRange(Body->getRBracLoc()),
                                 "R6", checkName());
        if (F.FilePath.empty())
          continue;
        // A device member of the class, as the trainer uses it.
        std::string Device = deviceMember(Class);
        if (Device.empty())
          Device = "ddp::device()";
        std::string Place = Placed + "to(" + Device + ");";
        std::string Wrap = "ddp::distribute(" + Wrapped + ");";
        appendToBody(F, SM, Body, {Place, Wrap});
        F.Message = "trained model '" + Field->getName().str() +
                    "' gets no gradient averaging across processes and is "
                    "not placed on a device; '" +
                    Place + " " + Wrap +
                    "' at the end of the constructor wraps it";
        Findings.push_back(std::move(F));
        ++Count;
      }
    return Count > 0;
  }

  /// Base, or Base2, Base3, ... when a declaration of the function holding
  /// Block already has that name.
  std::string uniqueName(const std::string &Base, const CompoundStmt *Block) {
    std::set<std::string> Taken;
    DynTypedNode Node = DynTypedNode::create(*Block);
    const Decl *Function = nullptr;
    while (!Function) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty())
        break;
      Node = Parents[0];
      if (Node.get<FunctionDecl>())
        Function = Node.get<FunctionDecl>();
    }
    if (Function) {
      NameCollector Visitor;
      Visitor.Names = &Taken;
      Visitor.TraverseDecl(const_cast<Decl *>(Function));
    }
    std::string Name = Base;
    for (int I = 2; Taken.count(Name); ++I)
      Name = Base + std::to_string(I);
    return Name;
  }

  struct Edge {
    const ValueDecl *From;
    const ValueDecl *To;
    const Expr *Site; ///< The call or copy; null for a member initialiser.
  };

  FindingList &Findings;
  FindingLocator Locator;
  ASTContext *Context = nullptr;
  std::vector<const CXXMemberCallExpr *> ParamCalls;
  std::vector<const CXXMemberCallExpr *> Placements;
  std::set<const ValueDecl *> Wrapped;
  std::vector<Edge> Edges;
  std::vector<const DeclRefExpr *> VarRefs;
  /// Models passed to a function whose body is not parsed.
  struct OpaqueCall {
    const ValueDecl *Model;
    const FunctionDecl *Callee;
    const Expr *Site;
  };
  std::vector<OpaqueCall> Opaque;
  std::vector<SourceRange> Loops;
  std::vector<Root> Roots;
  std::vector<SelfRoot> SelfRoots;
  /// Optimizer step() calls in the program's code.
  std::vector<const CXXMemberCallExpr *> Steps;
  /// Classes that call ddp::distribute(*this) (or wrap *this) themselves.
  std::set<const CXXRecordDecl *> WrappedClasses;
  bool InitialisesDdp = false;
  /// The unit defines main / shows training (ProgramFact).
  bool HasMain = false, Trains = false;
};

const RuleInfo WrapModelsRows[] = {
    {"R6", "ddp-unwrapped-model",
     "every model an optimizer trains gets a ddp::DistributedDataParallel "
     "for as long as it lives, after its last placement or conversion "
     "(placed on the device first when it is not); a module that builds "
     "its own optimizer distributes itself in its constructor"},
};
} // namespace

extern const RuleUnit WrapModels{WrapModelsRows, createModule<WrapMatchers>};

} // namespace ddpify
