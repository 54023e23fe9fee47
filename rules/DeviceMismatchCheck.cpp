//===- DeviceMismatchCheck.cpp - ddp-device-mismatch ----------------------===//
//
// A lint-only check: an operation that combines two tensors whose placements
// differ for certain at run time (the placement analysis,
// analyses/PlacementAnalysis.h), with a note at the spot where each got its
// placement.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/PlacementAnalysis.h"
#include "ddpify/Registry.h"

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral CheckName = "ddp-device-mismatch";

class DeviceMismatchCheck : public MatcherModule, public PlacementCheck {
public:
  DeviceMismatchCheck(FindingList &Findings, llvm::StringRef ProjectRoot)
      : PlacementCheck(Findings, ProjectRoot, CheckName) {}

  void registerMatchers(MatchFinder &Finder) override {
    Analysis.registerMatchers(Finder);
  }

  void mismatch(ASTContext &Context, SourceRange At, std::string Message,
                std::vector<PlacementNote> Notes) override {
    Finding F = newFinding(Context, At);
    if (F.FilePath.empty())
      return;
    F.Message = std::move(Message);
    for (auto &[Range, Text] : Notes) {
      Finding Where = Locator.make(Context, Range, "", CheckName);
      if (Where.FilePath.empty())
        continue;
      F.Notes.push_back({Where.FilePath, Where.Offset, Where.Line, Where.Column,
                         std::move(Text)});
    }
    Findings.push_back(std::move(F));
  }
};

const RuleInfo DeviceMismatchCheckRows[] = {
    {"", CheckName, "one operation mixes tensors placed on different devices"},
};
} // namespace

extern const RuleUnit DeviceMismatchCheck{
    DeviceMismatchCheckRows, createModule<class DeviceMismatchCheck>};

} // namespace ddpify
