//===- ProcessDevice.cpp - R2/R3: CUDA devices chosen by hand -------------===//
//
// R2 finds a device chosen as CUDA (kCUDA, "cuda:0", a ternary on
// torch::cuda::is_available(), a DeviceType variable that may hold kCUDA)
// wherever it turns into a torch::Device or a TensorOptions. R3 finds
// `.cuda()` and `.to(<CUDA device>)` on tensors and modules, and names the
// torch::Device variable visible at that point so the rewriter can say
// `.to(device)`; where a function has none and several such edits, they
// share one `torch::Device device = ddp::device();`.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <algorithm>
#include <cstring>
#include <map>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

/// What migrated code says for "this process's device".
constexpr const char *ProcessDeviceExpr = "ddp::device()";

// --- What a device expression is -------------------------------------------

const Expr *strip(const Expr *E) {
  return E ? E->IgnoreUnlessSpelledInSource()->IgnoreParens() : nullptr;
}

bool isRecordNamed(QualType Type, llvm::StringRef QualifiedName) {
  const auto *Record =
      Type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
  return Record && Record->getQualifiedNameAsString() == QualifiedName;
}

bool isDeviceTypeEnum(QualType Type) {
  const auto *Enum =
      Type.getNonReferenceType().getCanonicalType()->getAs<EnumType>();
  return Enum &&
         Enum->getDecl()->getQualifiedNameAsString() == "c10::DeviceType";
}

/// `torch::kCUDA`, `at::kCUDA`, `c10::DeviceType::CUDA`; with Kind "CPU" the
/// CPU spellings.
bool isDeviceTypeConstant(const Expr *E, llvm::StringRef Kind) {
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(strip(E));
  if (!Ref)
    return false;
  std::string Name = Ref->getDecl()->getQualifiedNameAsString();
  return Name == ("c10::k" + Kind).str() ||
         Name == ("c10::DeviceType::" + Kind).str();
}

/// A string literal naming a device, e.g. "cuda:0" (Prefix "cuda").
bool isDeviceString(const Expr *E, llvm::StringRef Prefix) {
  E = strip(E);
  if (const auto *Cast = dyn_cast_or_null<CXXFunctionalCastExpr>(E))
    E = strip(Cast->getSubExpr());
  if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E))
    if (Construct->getNumArgs() >= 1)
      E = strip(Construct->getArg(0));
  const auto *Literal = dyn_cast_or_null<StringLiteral>(E);
  return Literal && Literal->isOrdinary() &&
         Literal->getString().starts_with(Prefix);
}

/// The explicit `torch::Device(...)` construction in E, if E is one.
const CXXConstructExpr *explicitDeviceConstruction(const Expr *E) {
  E = strip(E);
  if (const auto *Cast = dyn_cast_or_null<CXXFunctionalCastExpr>(E))
    E = Cast->getSubExpr()->IgnoreImplicit();
  const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E);
  if (!Construct || !isRecordNamed(Construct->getType(), "c10::Device") ||
      Construct->getNumArgs() == 0)
    return nullptr;
  return Construct;
}

/// kCUDA, "cuda...", or torch::Device(kCUDA[, i]) / torch::Device("cuda:i").
bool isCudaDevice(const Expr *E) {
  if (isDeviceTypeConstant(E, "CUDA") || isDeviceString(E, "cuda"))
    return true;
  if (const CXXConstructExpr *Construct = explicitDeviceConstruction(E))
    return isDeviceTypeConstant(Construct->getArg(0), "CUDA") ||
           isDeviceString(Construct->getArg(0), "cuda");
  return false;
}

bool isCpuDevice(const Expr *E) {
  if (isDeviceTypeConstant(E, "CPU") || isDeviceString(E, "cpu"))
    return true;
  if (const CXXConstructExpr *Construct = explicitDeviceConstruction(E))
    return isDeviceTypeConstant(Construct->getArg(0), "CPU") ||
           isDeviceString(Construct->getArg(0), "cpu");
  return false;
}

/// Whether Cond is exactly "CUDA is available" (Polarity true) or its
/// negation (Polarity false): `torch::cuda::is_available()`, a bool variable
/// initialised from it, `!` of either.
bool isPureCudaAvailability(const Expr *Cond, bool &Polarity) {
  Cond = Cond->IgnoreParenImpCasts();
  if (const auto *Not = dyn_cast<UnaryOperator>(Cond)) {
    if (Not->getOpcode() != UO_LNot ||
        !isPureCudaAvailability(Not->getSubExpr(), Polarity))
      return false;
    Polarity = !Polarity;
    return true;
  }
  if (const auto *Call = dyn_cast<CallExpr>(Cond)) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    Polarity = true;
    return Callee &&
           Callee->getQualifiedNameAsString() == "torch::cuda::is_available";
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(Cond))
    if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
      if (Var->hasInit() && Var->getType()->isBooleanType())
        return isPureCudaAvailability(Var->getInit(), Polarity);
  return false;
}

const ValueDecl *referencedDeviceTypeDecl(const Expr *E) {
  E = strip(E);
  const ValueDecl *Decl = nullptr;
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E))
    Decl = Ref->getDecl();
  else if (const auto *Member = dyn_cast_or_null<MemberExpr>(E))
    Decl = Member->getMemberDecl();
  if (!Decl || !(isa<VarDecl>(Decl) || isa<FieldDecl>(Decl)) ||
      !isDeviceTypeEnum(Decl->getType()))
    return nullptr;
  // The constants kCUDA/kCPU themselves are DeviceType variables too.
  if (Decl->getQualifiedNameAsString().rfind("c10::", 0) == 0)
    return nullptr;
  return Decl;
}

/// An expression that may store CUDA into a DeviceType variable.
bool mayBeCuda(const Expr *E) {
  E = strip(E);
  if (!E)
    return false;
  if (isDeviceTypeConstant(E, "CUDA"))
    return true;
  if (const auto *Ternary = dyn_cast<ConditionalOperator>(E))
    return mayBeCuda(Ternary->getTrueExpr()) ||
           mayBeCuda(Ternary->getFalseExpr());
  return false;
}

// --- The matcher module ----------------------------------------------------

class DeviceMatchers : public MatcherModule, public MatchFinder::MatchCallback {
public:
  DeviceMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(
        cxxConstructExpr(hasDeclaration(cxxConstructorDecl(ofClass(hasAnyName(
                             "::c10::Device", "::c10::TensorOptions")))))
            .bind("construct"),
        this);
    Finder.addMatcher(callExpr(callee(functionDecl(hasName("device"))),
                               argumentCountAtLeast(1))
                          .bind("deviceOption"),
                      this);
    Finder.addMatcher(
        cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("cuda", "to"))))
            .bind("memberCall"),
        this);
    Finder.addMatcher(varDecl(hasInitializer(expr())).bind("var"), this);
    Finder.addMatcher(fieldDecl(hasInClassInitializer(expr())).bind("field"),
                      this);
    Finder.addMatcher(
        cxxCtorInitializer(isMemberInitializer()).bind("ctorInit"), this);
    Finder.addMatcher(binaryOperator(hasOperatorName("=")).bind("assign"),
                      this);
  }

  void onStartOfTranslationUnit() override {
    CudaCapableDecls.clear();
    PendingConversions.clear();
    TUFindings.clear();
    DeviceSites.clear();
    Locator.reset();
  }

  void run(const MatchFinder::MatchResult &Result) override {
    Context = Result.Context;
    if (const auto *Construct =
            Result.Nodes.getNodeAs<CXXConstructExpr>("construct"))
      handleConstruct(Construct);
    else if (const auto *Call =
                 Result.Nodes.getNodeAs<CallExpr>("deviceOption"))
      handleDeviceOption(Call);
    else if (const auto *Member =
                 Result.Nodes.getNodeAs<CXXMemberCallExpr>("memberCall"))
      handleMemberCall(Member);
    else if (const auto *Var = Result.Nodes.getNodeAs<VarDecl>("var"))
      noteDeviceTypeValue(Var, Var->getInit());
    else if (const auto *Field = Result.Nodes.getNodeAs<FieldDecl>("field"))
      noteDeviceTypeValue(Field, Field->getInClassInitializer());
    else if (const auto *Init =
                 Result.Nodes.getNodeAs<CXXCtorInitializer>("ctorInit"))
      noteDeviceTypeValue(Init->getMember(), Init->getInit());
    else if (const auto *Assign =
                 Result.Nodes.getNodeAs<BinaryOperator>("assign"))
      if (const ValueDecl *Target = referencedDeviceTypeDecl(Assign->getLHS()))
        noteDeviceTypeValue(Target, Assign->getRHS());
  }

  void onEndOfTranslationUnit() override {
    // A DeviceType variable turned into a Device is a CUDA choice only once
    // we know some path stores kCUDA into it, which may come later in the TU.
    for (auto &[Decl, Pending] : PendingConversions)
      if (CudaCapableDecls.count(Decl))
        TUFindings.push_back(Pending);
    dropNestedFindings();
    shareProcessDevice();
    Findings.insert(Findings.end(), TUFindings.begin(), TUFindings.end());
  }

private:
  void noteDeviceTypeValue(const ValueDecl *Decl, const Expr *Value) {
    if (Decl && isDeviceTypeEnum(Decl->getType()) && mayBeCuda(Value))
      CudaCapableDecls.insert(Decl);
  }

  // R2: kCUDA / "cuda:0" / a ternary / a DeviceType variable becoming a
  // Device or TensorOptions.
  void handleConstruct(const CXXConstructExpr *Construct) {
    if (Construct->getNumArgs() == 0)
      return;
    const Expr *First = Construct->getArg(0);
    bool IsDevice = isRecordNamed(Construct->getType(), "c10::Device");
    // Copies and moves carry a choice made elsewhere.
    if (isRecordNamed(First->getType(), "c10::Device") ||
        isRecordNamed(First->getType(), "c10::TensorOptions"))
      return;
    if (const auto *Ternary = dyn_cast<ConditionalOperator>(strip(First))) {
      handleTernary(Ternary, Construct);
      return;
    }
    SourceRange Range = argumentRange(Construct);
    if (IsDevice && isa<CXXTemporaryObjectExpr>(Construct))
      Range = Construct->getSourceRange();
    if (IsDevice)
      if (const auto *Cast = parentAs<CXXFunctionalCastExpr>(Construct))
        Range = Cast->getSourceRange();
    if (isDeviceTypeConstant(First, "CUDA") || isDeviceString(First, "cuda")) {
      addFinding(hardcodedDevice(Range));
      return;
    }
    if (const ValueDecl *Decl = referencedDeviceTypeDecl(First))
      deferUntilEndOfTU(Decl, Range, Construct);
  }

  // R2: `TensorOptions().device(torch::kCUDA)`, `torch::device(kCUDA)`.
  void handleDeviceOption(const CallExpr *Call) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (!Callee)
      return;
    const auto *Method = dyn_cast<CXXMethodDecl>(Callee);
    bool IsOption = Method
                        ? Method->getParent()->getQualifiedNameAsString() ==
                              "c10::TensorOptions"
                        : Callee->getQualifiedNameAsString() == "c10::device";
    if (!IsOption)
      return;
    const Expr *First = Call->getArg(0);
    SourceRange Range = argumentRange(Call);
    if (isDeviceTypeConstant(First, "CUDA") || isDeviceString(First, "cuda"))
      addFinding(hardcodedDevice(Range));
    else if (const ValueDecl *Decl = referencedDeviceTypeDecl(First))
      deferUntilEndOfTU(Decl, Range);
  }

  void handleTernary(const ConditionalOperator *Ternary,
                     const CXXConstructExpr *Construct) {
    const Expr *True = Ternary->getTrueExpr();
    const Expr *False = Ternary->getFalseExpr();
    bool Polarity = true;
    bool Pure = isPureCudaAvailability(Ternary->getCond(), Polarity);
    const Expr *CudaBranch = Polarity ? True : False;
    const Expr *CpuBranch = Polarity ? False : True;
    if (Pure && isCudaDevice(CudaBranch) && isCpuDevice(CpuBranch) &&
        writtenArgumentCount(Construct) == 1) {
      // "CUDA when available, else CPU" is exactly what ddp::device() does.
      Finding F = hardcodedDevice(argumentRange(Construct));
      keepLocalsRead(F, Construct);
      addFinding(std::move(F));
      return;
    }
    // Another condition (a --no-cuda flag, ...) keeps deciding; only the
    // CUDA branch becomes the process's device.
    for (const Expr *Branch : {True, False})
      if (isCudaDevice(Branch) && !explicitDeviceConstruction(Branch))
        addFinding(hardcodedDevice(strip(Branch)->getSourceRange()));
  }

  // R3: `x.cuda()`, `x.to(torch::kCUDA)`, `model->to(torch::Device("cuda:0"))`.
  void handleMemberCall(const CXXMemberCallExpr *Call) {
    const CXXMethodDecl *Method = Call->getMethodDecl();
    if (!Method)
      return;
    const CXXRecordDecl *Class = Method->getParent();
    bool OnTensor = isTensorClass(Class);
    bool OnModule = isModuleClass(Class);
    if (!OnTensor && !OnModule)
      return;
    const auto *Callee =
        dyn_cast<MemberExpr>(Call->getCallee()->IgnoreParens());
    if (!Callee)
      return;
    if (Method->getName() == "cuda" && OnTensor) {
      SourceRange Range(Callee->getMemberLoc(), Call->getRParenLoc());
      Finding F = makeFinding(Range, "R3", "ddp-cuda-call");
      std::string Device = deviceVariableInScope(Call);
      if (Device.empty()) {
        noteDeviceSite(F, Call, /*MemberCall=*/true);
        Device = ProcessDeviceExpr;
      }
      F.replaceRangeWith("to(" + Device + ")");
      F.Message = "'.cuda()' moves the tensor to the current CUDA device, "
                  "not this process's device; use '.to(" +
                  Device + ")'";
      addFinding(std::move(F));
      return;
    }
    if (Method->getName() != "to" || Call->getNumArgs() == 0 ||
        !isCudaDevice(Call->getArg(0)))
      return;
    Finding F = makeFinding(strip(Call->getArg(0))->getSourceRange(), "R3",
                            "ddp-cuda-call");
    std::string Device = deviceVariableInScope(Call);
    if (Device.empty()) {
      noteDeviceSite(F, Call, /*MemberCall=*/false);
      Device = ProcessDeviceExpr;
    }
    F.replaceRangeWith(Device);
    F.Message = "'.to(" + sourceText(strip(Call->getArg(0))->getSourceRange()) +
                ")' puts the " + (OnModule ? "module" : "tensor") +
                " on a fixed CUDA device, not this process's device; use "
                "'.to(" +
                Device + ")'";
    addFinding(std::move(F));
  }

  std::string sourceText(SourceRange Range) {
    return Lexer::getSourceText(CharSourceRange::getTokenRange(Range),
                                Context->getSourceManager(),
                                Context->getLangOpts())
        .str();
  }

  static bool isTensorClass(const CXXRecordDecl *Class) {
    std::string Name = Class->getQualifiedNameAsString();
    return Name == "at::Tensor" || Name == "at::TensorBase";
  }

  static bool isModuleClass(const CXXRecordDecl *Class) {
    if (Class->getQualifiedNameAsString() == "torch::nn::Module")
      return true;
    if (!Class->hasDefinition())
      return false;
    for (const CXXBaseSpecifier &Base : Class->bases())
      if (const CXXRecordDecl *BaseClass = Base.getType()->getAsCXXRecordDecl())
        if (isModuleClass(BaseClass))
          return true;
    return false;
  }

  // --- The device variable visible at a point --------------------------

  /// Names the torch::Device the code at Site can use (MatcherUtil's
  /// deviceVariableInScope), skipping devices that are plainly the CPU.
  std::string deviceVariableInScope(const Stmt *Site) {
    return ddpify::deviceVariableInScope(
        *Context, Site, [](const Expr *Init) { return !isPlainlyCpu(Init); });
  }

  /// `torch::Device cpu(torch::kCPU)`: not where the process's tensors go.
  static bool isPlainlyCpu(const Expr *Init) {
    if (!Init)
      return false;
    Init = strip(Init);
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(Init)) {
      if (Construct->getNumArgs() == 0)
        return false;
      Init = strip(Construct->getArg(0));
    }
    // `torch::Device d(cpu_type)` with `torch::DeviceType cpu_type = kCPU`.
    if (const auto *Ref = dyn_cast<DeclRefExpr>(Init))
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
        if (isDeviceTypeEnum(Var->getType()) &&
            !llvm::StringRef(Var->getQualifiedNameAsString())
                 .starts_with("c10::"))
          return Var->hasInit() && isCpuDevice(Var->getInit());
    return isCpuDevice(Init);
  }

  // --- Findings ----------------------------------------------------------

  template <typename T> const T *parentAs(const Expr *E) {
    DynTypedNodeList Parents = Context->getParents(*E);
    return Parents.empty() ? nullptr : Parents[0].get<T>();
  }

  static unsigned writtenArgumentCount(const CXXConstructExpr *Construct) {
    unsigned Count = 0;
    for (const Expr *Arg : Construct->arguments())
      Count += !isa<CXXDefaultArgExpr>(Arg);
    return Count;
  }

  static SourceRange argumentRange(const CallExpr *Call) {
    return argumentRange(Call->arguments());
  }
  static SourceRange argumentRange(const CXXConstructExpr *Construct) {
    return argumentRange(Construct->arguments());
  }
  template <typename Args> static SourceRange argumentRange(Args Arguments) {
    SourceLocation Begin, End;
    for (const Expr *Arg : Arguments) {
      if (isa<CXXDefaultArgExpr>(Arg))
        break;
      if (Begin.isInvalid())
        Begin = Arg->getBeginLoc();
      End = Arg->getEndLoc();
    }
    return SourceRange(Begin, End);
  }

  Finding hardcodedDevice(SourceRange Range) {
    Finding F = makeFinding(Range, "R2", "ddp-hardcoded-device");
    F.replaceRangeWith(ProcessDeviceExpr);
    std::string Text = F.InMacro ? "" : sourceText(Range);
    if (Text.size() > 48 || Text.find('\n') != std::string::npos)
      Text = Text.substr(0, std::min<size_t>(Text.find('\n'), 45)) + "...";
    F.Message =
        (Text.empty() ? std::string("a CUDA device") : "'" + Text + "'") +
        " hard-codes a CUDA device; each process of a DDP program "
        "must use its own: use 'ddp::device()'";
    return F;
  }

  void deferUntilEndOfTU(const ValueDecl *Decl, SourceRange Range,
                         const CXXConstructExpr *Construct = nullptr) {
    Finding F = hardcodedDevice(Range);
    if (Construct)
      keepLocalsRead(F, Construct);
    F.Message = "'" + Decl->getName().str() +
                "' may hold torch::kCUDA; each process of a DDP program must "
                "use its own device: use 'ddp::device()'";
    PendingConversions.emplace_back(Decl, std::move(F));
  }

  /// The locals the arguments of Construct read (`cuda_available`, a
  /// `device_type` set by an if/else) that nothing else reads: once R2
  /// replaces the arguments with ddp::device(), -Wunused-variable and
  /// -Wunused-but-set-variable would fail a -Werror build. F's edits then
  /// replace the arguments and read each after the declaration,
  /// `static_cast<void>(device_type);`.
  void keepLocalsRead(Finding &F, const CXXConstructExpr *Construct) {
    if (F.InMacro || F.FilePath.empty())
      return;
    DynTypedNodeList Parents = Context->getParents(*Construct);
    const DeclStmt *Statement = nullptr;
    for (int Steps = 0; Steps < 8 && !Parents.empty() && !Statement; ++Steps) {
      Statement = Parents[0].get<DeclStmt>();
      Parents = Context->getParents(Parents[0]);
    }
    const FunctionDecl *Function = nullptr;
    for (int Steps = 0; Steps < 256 && !Parents.empty() && !Function; ++Steps) {
      Function = Parents[0].get<FunctionDecl>();
      Parents = Context->getParents(Parents[0]);
    }
    if (!Statement || !Function || !Function->getBody() ||
        Statement->getEndLoc().isMacroID())
      return;
    std::vector<const VarDecl *> Read;
    collectLocalReads(Construct, Read);
    std::string Reads;
    const SourceManager &SM = Context->getSourceManager();
    unsigned Column = SM.getSpellingColumnNumber(Statement->getBeginLoc());
    std::string Indent(Column > 0 ? Column - 1 : 0, ' ');
    std::vector<const VarDecl *> Elsewhere;
    collectLocalReads(Function->getBody(), Elsewhere, Construct);
    for (const VarDecl *Var : Read) {
      if (llvm::is_contained(Elsewhere, Var))
        continue;
      Reads +=
          "\n" + Indent + "static_cast<void>(" + Var->getName().str() + ");";
    }
    if (Reads.empty())
      return;
    F.Edits.push_back(
        {SM.getFileOffset(SM.getSpellingLoc(Statement->getEndLoc())) + 1, 0,
         Reads});
  }

  /// The local variables S reads (not as an assignment's target), outside
  /// Except.
  static void collectLocalReads(const Stmt *S,
                                std::vector<const VarDecl *> &Out,
                                const Stmt *Except = nullptr) {
    if (!S || S == Except)
      return;
    if (const auto *Assign = dyn_cast<BinaryOperator>(S))
      if (Assign->isAssignmentOp()) {
        // The target of a plain assignment is written, not read.
        if (Assign->getOpcode() != BO_Assign)
          collectLocalReads(Assign->getLHS(), Out, Except);
        else if (!isa<DeclRefExpr>(Assign->getLHS()->IgnoreParenImpCasts()))
          collectLocalReads(Assign->getLHS(), Out, Except);
        collectLocalReads(Assign->getRHS(), Out, Except);
        return;
      }
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
        if (Var->isLocalVarDecl() && !llvm::is_contained(Out, Var))
          Out.push_back(Var);
    for (const Stmt *Child : S->children())
      collectLocalReads(Child, Out, Except);
  }

  /// Fills in the location of Range; an empty FilePath means "not ours"
  /// (system header, outside the root, invalid location).
  Finding makeFinding(SourceRange Range, llvm::StringRef RuleId,
                      llvm::StringRef CheckName) {
    return Locator.make(*Context, Range, RuleId, CheckName);
  }

  void addFinding(Finding F) {
    if (!F.FilePath.empty())
      TUFindings.push_back(std::move(F));
  }

  /// One edit per spot: a finding inside another (the kCUDA inside the
  /// `.to(torch::kCUDA)` R3 rewrites, the branch of a ternary R2 replaces
  /// whole) is dropped; at the same spot R3 wins over R2.
  void dropNestedFindings() {
    auto Contains = [](const Finding &Outer, const Finding &Inner) {
      return Outer.FilePath == Inner.FilePath && !Outer.InMacro &&
             !Inner.InMacro && Outer.Offset <= Inner.Offset &&
             Inner.Offset + Inner.Length <= Outer.Offset + Outer.Length;
    };
    std::vector<Finding> Kept;
    for (size_t I = 0; I < TUFindings.size(); ++I) {
      const Finding &F = TUFindings[I];
      bool Drop = false;
      for (size_t J = 0; J < TUFindings.size() && !Drop; ++J) {
        const Finding &Other = TUFindings[J];
        if (I == J || !Contains(Other, F))
          continue;
        bool SameRange = Other.Offset == F.Offset && Other.Length == F.Length;
        if (!SameRange)
          Drop = true;
        else if (Other.RuleId != F.RuleId)
          Drop = F.RuleId == "R2";
        else
          Drop = J < I; // identical spot: keep the first
      }
      if (!Drop)
        Kept.push_back(F);
    }
    TUFindings = std::move(Kept);
  }

  // --- One device variable for a function's R3 edits -------------------

  /// Where a function's `torch::Device device = ddp::device();` would go for
  /// an R3 edit with no device in scope: before the statement of the
  /// function's body that holds it.
  struct DeviceSite {
    unsigned BodyOffset = 0;      ///< The body's `{`: one site per function.
    unsigned StatementOffset = 0; ///< The body's statement holding the edit.
    std::string Indent;
    const FunctionDecl *Function = nullptr; ///< Its names are taken.
    bool MemberCall = false; ///< `x.cuda()`, not the argument of `x.to(...)`.
  };

  /// Notes where an R3 edit with no device in scope could share a declared
  /// device (shareProcessDevice).
  void noteDeviceSite(const Finding &F, const Stmt *Call, bool MemberCall) {
    if (F.FilePath.empty() || F.InMacro)
      return;
    DynTypedNode Node = DynTypedNode::create(*Call);
    const Stmt *Last = Call, *BeforeLast = nullptr;
    while (true) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty())
        return;
      Node = Parents[0];
      // A lambda sees a local only through its captures.
      if (Node.get<LambdaExpr>())
        return;
      if (const auto *S = Node.get<Stmt>()) {
        BeforeLast = Last;
        Last = S;
        continue;
      }
      const auto *Function = Node.get<FunctionDecl>();
      if (!Function)
        continue;
      const auto *Body = dyn_cast_or_null<CompoundStmt>(Function->getBody());
      if (!Body || Last != Body || !BeforeLast)
        return;
      const SourceManager &SM = Context->getSourceManager();
      DeviceSite Site;
      bool StartsLine = false;
      Site.Indent = indentationOf(SM, BeforeLast->getBeginLoc(), StartsLine);
      if (!StartsLine ||
          !Locator.offsetIn(*Context, F, Body->getLBracLoc(),
                            Site.BodyOffset) ||
          !Locator.offsetIn(*Context, F, BeforeLast->getBeginLoc(),
                            Site.StatementOffset))
        return;
      Site.Function = Function;
      Site.MemberCall = MemberCall;
      DeviceSites[{F.FilePath, F.Offset}] = std::move(Site);
      return;
    }
  }

  /// Several R3 edits of one function with no device in scope share one
  /// `torch::Device device = ddp::device();`, declared before the first;
  /// a single one says `ddp::device()` itself.
  void shareProcessDevice() {
    std::map<std::pair<std::string, unsigned>, std::vector<Finding *>> Groups;
    for (Finding &F : TUFindings) {
      if (F.RuleId != "R3" || F.InMacro)
        continue;
      auto Site = DeviceSites.find({F.FilePath, F.Offset});
      if (Site != DeviceSites.end())
        Groups[{F.FilePath, Site->second.BodyOffset}].push_back(&F);
    }
    for (auto &[Function, Group] : Groups) {
      if (Group.size() < 2)
        continue;
      std::sort(Group.begin(), Group.end(),
                [](const Finding *A, const Finding *B) {
                  return A->Offset < B->Offset;
                });
      Finding &First = *Group.front();
      const DeviceSite &Site = DeviceSites[{First.FilePath, First.Offset}];
      std::string FunctionText = sourceText(Site.Function->getSourceRange());
      std::string Name;
      for (const char *Candidate : {"device", "process_device"})
        if (!mentionsIdentifier(FunctionText, Candidate)) {
          Name = Candidate;
          break;
        }
      if (Name.empty())
        continue;
      for (Finding *F : Group) {
        bool MemberCall = DeviceSites[{F->FilePath, F->Offset}].MemberCall;
        F->replaceRangeWith(MemberCall ? "to(" + Name + ")" : Name);
        size_t At = F->Message.find("ddp::device()");
        if (At != std::string::npos)
          F->Message.replace(At, strlen("ddp::device()"), Name);
      }
      First.Message += " (declared once before the function's first use: "
                       "'torch::Device " +
                       Name + " = ddp::device();')";
      // At the end of the line above: a report comment about the statement
      // goes between the two and stays right above the statement.
      First.Edits.insert(
          First.Edits.begin(),
          {Site.StatementOffset - static_cast<unsigned>(Site.Indent.size()) - 1,
           0,
           "\n" + Site.Indent + "torch::Device " + Name + " = ddp::device();"});
    }
  }

  FindingList &Findings;
  FindingLocator Locator;
  ASTContext *Context = nullptr;
  std::map<std::pair<std::string, unsigned>, DeviceSite> DeviceSites;
  llvm::SmallPtrSet<const ValueDecl *, 8> CudaCapableDecls;
  std::vector<std::pair<const ValueDecl *, Finding>> PendingConversions;
  FindingList TUFindings;
};

const RuleInfo ProcessDeviceRows[] = {
    {"R2", "ddp-hardcoded-device",
     "a device chosen as CUDA becomes ddp::device() (cuda:LOCAL_RANK or "
     "cpu)",
     CheckLevel::RewriteUntilDistributed},
    {"R3", "ddp-cuda-call",
     ".cuda() and .to(torch::kCUDA) become .to(device) (or "
     ".to(ddp::device()))",
     CheckLevel::RewriteUntilDistributed},
};
} // namespace

extern const RuleUnit ProcessDevice{ProcessDeviceRows,
                                    createModule<DeviceMatchers>};

} // namespace ddpify
