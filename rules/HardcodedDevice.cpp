//===- HardcodedDevice.cpp - R2: a CUDA device chosen by hand -------------===//
//
// R2 finds a device chosen as CUDA (kCUDA, "cuda:0", a ternary on
// torch::cuda::is_available(), a DeviceType variable that may hold kCUDA)
// wherever it turns into a torch::Device or a TensorOptions, and replaces it
// with `ddp::device()`. Inside the argument of a `.to(...)` that R3
// (rules/CudaCalls.cpp) rewrites whole, R3's edit wins.
//
//===----------------------------------------------------------------------===//

#include "ddpify/DeviceExpressions.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/SmallPtrSet.h"
#include <algorithm>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

using namespace devices;

/// What a program's own choice of device kind is placed with.
constexpr const char *ProcessDeviceFunction = "ddp::device";

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

class HardcodedDevice : public MatcherModule,
                        public MatchFinder::MatchCallback {
public:
  HardcodedDevice(FindingList &Findings, llvm::StringRef ProjectRoot)
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
    Finder.addMatcher(conditionalOperator().bind("ternary"), this);
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
    else if (const auto *Ternary =
                 Result.Nodes.getNodeAs<ConditionalOperator>("ternary"))
      handleDeviceTernary(Ternary);
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
    keepOutermostFindings(TUFindings);
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
      addFinding(hardcodedDevice(Range, Construct));
      return;
    }
    if (const ValueDecl *Decl = referencedDeviceTypeDecl(First))
      deferUntilEndOfTU(Decl, Range, Construct,
                        writtenArgumentCount(Construct) == 1 ? nullptr
                                                             : Construct);
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
      addFinding(hardcodedDevice(Range, Call));
    else if (const ValueDecl *Decl = referencedDeviceTypeDecl(First))
      deferUntilEndOfTU(Decl, Range, Call, nullptr,
                        /*KeepChoice=*/Call->getNumArgs() == 1);
  }

  void handleTernary(const ConditionalOperator *Ternary,
                     const CXXConstructExpr *Construct) {
    const Expr *True = Ternary->getTrueExpr();
    const Expr *False = Ternary->getFalseExpr();
    bool Polarity = true;
    bool Pure = isPureCudaAvailability(Ternary->getCond(), Polarity);
    const Expr *CudaBranch = Polarity ? True : False;
    const Expr *CpuBranch = Polarity ? False : True;
    // A choice between the kinds CUDA and CPU (on CUDA's availability, a
    // user's flag): it stays, on this process's device of the kind it
    // picks, `ddp::device(choice)`.
    if (isDeviceTypeEnum(Ternary->getType()) &&
        writtenArgumentCount(Construct) == 1 &&
        ((isCudaDevice(True) && isCpuDevice(False)) ||
         (isCpuDevice(True) && isCudaDevice(False)))) {
      addFinding(hardcodedDevice(argumentRange(Construct), Construct,
                                 /*KeepChoice=*/true));
      return;
    }
    if (Pure && isCudaDevice(CudaBranch) && isCpuDevice(CpuBranch) &&
        writtenArgumentCount(Construct) == 1) {
      // "CUDA when available, else CPU", spelled with Devices: exactly what
      // ddp::device() does.
      Finding F = hardcodedDevice(argumentRange(Construct), Construct);
      keepLocalsRead(F, Construct);
      addFinding(std::move(F));
      return;
    }
    // Another condition (a --no-cuda flag, ...) keeps deciding; only the
    // CUDA branch becomes the process's device.
    for (const Expr *Branch : {True, False})
      if (isCudaDevice(Branch) && !explicitDeviceConstruction(Branch))
        addFinding(hardcodedDevice(strip(Branch)->getSourceRange(), Branch));
  }

  /// `torch::cuda::is_available() ? torch::Device("cuda:0") :
  /// torch::Device("cpu")` where no Device is constructed from it (`auto d
  /// = ...;`, `return ...;`): "CUDA when available, else CPU" is exactly
  /// what ddp::device() does, and the whole ternary becomes it. Only on a
  /// direct call: a variable the condition reads would be left unread.
  void handleDeviceTernary(const ConditionalOperator *Ternary) {
    if (!isRecordNamed(Ternary->getType(), "c10::Device"))
      return;
    const Expr *Cond = Ternary->getCond()->IgnoreParenImpCasts();
    bool Polarity = true;
    if (!isPureCudaAvailability(Cond, Polarity) || readsVariable(Cond))
      return;
    const Expr *CudaBranch =
        Polarity ? Ternary->getTrueExpr() : Ternary->getFalseExpr();
    const Expr *CpuBranch =
        Polarity ? Ternary->getFalseExpr() : Ternary->getTrueExpr();
    if (isCudaDevice(CudaBranch) && isCpuDevice(CpuBranch))
      addFinding(hardcodedDevice(Ternary->getSourceRange(), Ternary));
  }

  static bool readsVariable(const Stmt *S) {
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
      if (isa<VarDecl>(Ref->getDecl()))
        return true;
    for (const Stmt *Child : S->children())
      if (Child && readsVariable(Child))
        return true;
    return false;
  }

  std::string sourceText(SourceRange Range) {
    return ddpify::sourceText(*Context, Range);
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

  /// R2's finding for Range, a CUDA device Node spells (or its arguments).
  /// KeepChoice: Range is the program's own choice of device kind (a
  /// ternary on CUDA's availability, a DeviceType variable), kept and placed
  /// on this process's device of that kind, `ddp::device(choice)`; else
  /// Range becomes `ddp::device()`.
  Finding hardcodedDevice(SourceRange Range, const Expr *Node,
                          bool KeepChoice = false) {
    Finding F = makeFinding(Range, "R2", "ddp-hardcoded-device");
    yieldToEnclosingRewrite(F, Node);
    std::string Original = F.InMacro ? "" : sourceText(Range);
    std::string Replacement =
        KeepChoice && !Original.empty()
            ? std::string(ProcessDeviceFunction) + "(" + Original + ")"
            : std::string(ProcessDeviceExpr);
    F.replaceRangeWith(Replacement);
    std::string Text = Original;
    if (Text.size() > 48 || Text.find('\n') != std::string::npos)
      Text = Text.substr(0, std::min<size_t>(Text.find('\n'), 45)) + "...";
    if (KeepChoice && !Original.empty())
      F.Message = "'" + Text +
                  "' chooses CUDA's first device for every process; each "
                  "process of a DDP program must use its own device of the "
                  "kind chosen: use '" +
                  ProcessDeviceFunction + "(" +
                  (Text == Original ? Original : std::string("...")) + ")'";
    else
      F.Message =
          (Text.empty() ? std::string("a CUDA device") : "'" + Text + "'") +
          " hard-codes a CUDA device; each process of a DDP program "
          "must use its own: use '" +
          ProcessDeviceExpr + "'";
    return F;
  }

  /// R3 rewrites the argument of `.to(...)` whole: F, at Node or inside an
  /// expression around it, yields to that edit (R3's finding provides the
  /// key of its spot).
  void yieldToEnclosingRewrite(Finding &F, const Expr *Node) {
    if (F.FilePath.empty() || F.InMacro)
      return;
    F.Excludes.push_back(replacedSpotKey(F.FilePath, F.Offset, F.Length));
    DynTypedNodeList Parents = Context->getParents(*Node);
    while (!Parents.empty()) {
      const auto *Around = Parents[0].get<Expr>();
      if (!Around)
        break;
      Finding Spot = makeFinding(Around->getSourceRange(), "", "");
      if (!Spot.FilePath.empty() && !Spot.InMacro)
        F.Excludes.push_back(
            replacedSpotKey(Spot.FilePath, Spot.Offset, Spot.Length));
      Parents = Context->getParents(*Around);
    }
  }

  /// Construct: a construction with a device index besides the variable
  /// (`torch::Device(device_type, 0)`), whose arguments become
  /// `ddp::device()`; otherwise the variable stays, `ddp::device(variable)`.
  void deferUntilEndOfTU(const ValueDecl *Decl, SourceRange Range,
                         const Expr *Node,
                         const CXXConstructExpr *Construct = nullptr,
                         bool KeepChoice = true) {
    KeepChoice = KeepChoice && !Construct;
    Finding F = hardcodedDevice(Range, Node, KeepChoice);
    if (Construct)
      keepLocalsRead(F, Construct);
    F.Message = "'" + Decl->getName().str() +
                "' may hold torch::kCUDA; each process of a DDP program must "
                "use its own device: use '" +
                (KeepChoice ? std::string(ProcessDeviceFunction) + "(" +
                                  sourceText(Range) + ")"
                            : std::string(ProcessDeviceExpr)) +
                "'";
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

  FindingList &Findings;
  FindingLocator Locator;
  ASTContext *Context = nullptr;
  llvm::SmallPtrSet<const ValueDecl *, 8> CudaCapableDecls;
  std::vector<std::pair<const ValueDecl *, Finding>> PendingConversions;
  FindingList TUFindings;
};

const RuleInfo HardcodedDeviceRows[] = {
    {"R2", "ddp-hardcoded-device",
     "a device chosen as CUDA becomes ddp::device() (cuda:LOCAL_RANK or "
     "cpu)",
     CheckLevel::RewriteUntilDistributed},
};
} // namespace

extern const RuleUnit HardcodedDevice{HardcodedDeviceRows,
                                      createModule<class HardcodedDevice>};

} // namespace ddpify
