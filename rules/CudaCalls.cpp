//===- CudaCalls.cpp - R3: .cuda() and .to(<a CUDA device>) --------------===//
//
// R3 finds `.cuda()` and `.to(<CUDA device>)` on tensors and modules, and
// names the torch::Device variable visible at that point so that the edit
// says `.to(device)`; where a function has none and several such edits, they
// share one `torch::Device device = ddp::device();`. Its finding provides
// the key of the argument it replaces: R2 (rules/HardcodedDevice.cpp) yields
// to it there.
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
#include <algorithm>
#include <cstring>
#include <map>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

using namespace devices;

class CudaCalls : public MatcherModule, public MatchFinder::MatchCallback {
public:
  CudaCalls(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(
        cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("cuda", "to"))))
            .bind("memberCall"),
        this);
  }

  void onStartOfTranslationUnit() override {
    TUFindings.clear();
    DeviceSites.clear();
    Locator.reset();
  }

  void run(const MatchFinder::MatchResult &Result) override {
    Context = Result.Context;
    if (const auto *Member =
            Result.Nodes.getNodeAs<CXXMemberCallExpr>("memberCall"))
      handleMemberCall(Member);
  }

  void onEndOfTranslationUnit() override {
    keepOutermostFindings(TUFindings);
    shareProcessDevice();
    for (Finding &F : TUFindings)
      if (!F.InMacro)
        F.Provides = replacedSpotKey(F.FilePath, F.Offset, F.Length);
    Findings.insert(Findings.end(), TUFindings.begin(), TUFindings.end());
  }

private:
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
    return ddpify::sourceText(*Context, Range);
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
      if (F.InMacro)
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
  FindingList TUFindings;
};

const RuleInfo CudaCallsRows[] = {
    {"R3", "ddp-cuda-call",
     ".cuda() and .to(torch::kCUDA) become .to(device) (or "
     ".to(ddp::device()))",
     CheckLevel::RewriteUntilDistributed},
};
} // namespace

extern const RuleUnit CudaCalls{CudaCallsRows, createModule<class CudaCalls>};

} // namespace ddpify
