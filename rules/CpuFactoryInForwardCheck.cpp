//===- CpuFactoryInForwardCheck.cpp - ddp-cpu-factory-in-forward ----------===//
//
// A lint-only check: a tensor factory without a device inside a
// torch::nn::Module's `forward` creates a CPU tensor that meets the module's
// GPU tensors on a GPU rank. The placement analysis
// (analyses/PlacementAnalysis.h) finds the factories that get no device and
// are not moved at once; the fix-it replaces the call with one that adds the
// device of forward's first tensor parameter as an option.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/PlacementAnalysis.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/Basic/SourceManager.h"

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral CheckName = "ddp-cpu-factory-in-forward";

/// `torch::tensor(1.0)`: a CPU scalar combines with GPU tensors.
bool makesScalar(const CallExpr *Call, llvm::StringRef Name) {
  if (Name == "scalar_tensor")
    return true;
  if (Name != "tensor" || Call->getNumArgs() < 1)
    return false;
  const auto *Construct =
      dyn_cast<CXXConstructExpr>(Call->getArg(0)->IgnoreImplicit());
  return Construct && Construct->getNumArgs() == 1 &&
         Construct->getArg(0)
             ->IgnoreUnlessSpelledInSource()
             ->IgnoreParens()
             ->getType()
             ->isArithmeticType();
}

class CpuFactoryInForwardCheck : public MatcherModule, public PlacementCheck {
public:
  CpuFactoryInForwardCheck(FindingList &Findings, llvm::StringRef ProjectRoot)
      : PlacementCheck(Findings, ProjectRoot, CheckName) {}

  void registerMatchers(MatchFinder &Finder) override {
    Analysis.registerMatchers(Finder);
  }

  void factoryWithoutDevice(ASTContext &Context, const CallExpr *Call,
                            const FunctionDecl *Callee, const FunctionDecl *In,
                            unsigned OptionsArg) override {
    const auto *Method = dyn_cast<CXXMethodDecl>(In);
    if (!Method || Method->getName() != "forward" ||
        !isModuleClass(Method->getParent()))
      return;
    llvm::StringRef Name = Callee->getName();
    // from_blob wraps memory the caller placed; `*_like` copy a device.
    if (Name == "from_blob" || Name.ends_with("_like") ||
        makesScalar(Call, Name))
      return;
    Finding F = newFinding(Context, Call->getSourceRange());
    if (F.FilePath.empty())
      return;
    std::string Written = text(Context, Call->getCallee()->getSourceRange());
    if (Written.empty())
      Written = Callee->getQualifiedNameAsString();
    // The tensor parameter whose device the new tensor should share.
    const ParmVarDecl *Input = nullptr;
    for (const ParmVarDecl *Param : Method->parameters())
      if (isTensorType(Param->getType()) && !Param->getName().empty()) {
        Input = Param;
        break;
      }
    bool HasOptions = !isa<CXXDefaultArgExpr>(Call->getArg(OptionsArg));
    std::string Option;
    if (Input)
      Option = "torch::TensorOptions().device(" + Input->getNameAsString() +
               ".device())";
    F.Message = "'" + Written +
                "' without a device creates a CPU tensor in 'forward'; "
                "on a GPU rank it meets the module's GPU tensors "
                "(\"Expected all tensors to be on the same device\")";
    if (HasOptions)
      F.Message +=
          Input ? "; the call already has tensor options: add '.device(" +
                      Input->getNameAsString() +
                      ".device())' to them (no automatic fix)"
                : "; the call already has tensor options: give them the "
                  "input's device (no automatic fix)";
    else if (Input)
      F.Message += "; create it on the input's device: '" + Option + "'";
    else
      F.Message += "; pass the input's device as an option (no automatic fix: "
                   "'forward' has no tensor parameter to take it from)";
    if (Input && !HasOptions)
      addOption(Context, F, Call->getRParenLoc(), Option);
    Findings.push_back(std::move(F));
  }

private:
  /// The fix-it: the whole call again, with Option before its `)`, so that
  /// lint shows the new call under the old one.
  void addOption(ASTContext &Context, Finding &F, SourceLocation RParen,
                 const std::string &Option) {
    unsigned Offset;
    if (RParen.isInvalid() || RParen.isMacroID() || F.InMacro ||
        !Locator.offsetIn(Context, F, RParen, Offset))
      return;
    const SourceManager &SM = Context.getSourceManager();
    bool Invalid = false;
    llvm::StringRef Code = SM.getBufferData(SM.getFileID(RParen), &Invalid);
    unsigned End = F.Offset + F.Length;
    if (Invalid || Offset < F.Offset || Offset >= End || End > Code.size() ||
        Code[Offset] != ')')
      return;
    F.replaceRangeWith(Code.slice(F.Offset, Offset).str() + ", " + Option +
                       Code.slice(Offset, End).str());
  }

  static std::string text(ASTContext &Context, SourceRange R) {
    if (R.isInvalid() || R.getBegin().isMacroID() || R.getEnd().isMacroID())
      return "";
    return sourceText(Context, R);
  }
};

const RuleInfo CpuFactoryInForwardCheckRows[] = {
    {"", CheckName,
     "a tensor factory without a device inside a module's forward"},
};
} // namespace

extern const RuleUnit CpuFactoryInForwardCheck{
    CpuFactoryInForwardCheckRows, createModule<class CpuFactoryInForwardCheck>};

} // namespace ddpify
