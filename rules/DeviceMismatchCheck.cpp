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
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral CheckName = "ddp-device-mismatch";

class DeviceMismatchCheck : public MatcherModule, public PlacementObserver {
public:
  DeviceMismatchCheck(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    Analysis.registerMatchers(Finder);
  }

  void startTranslationUnit() override {
    Reported.clear();
    Locator.reset();
  }

  void mismatch(ASTContext &Context, SourceRange At, std::string Message,
                std::vector<PlacementNote> Notes) override {
    Finding F = Locator.make(Context, At, "", CheckName);
    // A function analysed in several contexts reports its spot once.
    if (F.FilePath.empty() || !Reported.insert({F.FilePath, F.Offset}).second)
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

private:
  FindingList &Findings;
  FindingLocator Locator;
  PlacementAnalysis Analysis{*this};
  std::set<std::pair<std::string, unsigned>> Reported;
};

const RuleInfo DeviceMismatchCheckRows[] = {
    {"", CheckName, "one operation mixes tensors placed on different devices"},
};
} // namespace

extern const RuleUnit DeviceMismatchCheck{
    DeviceMismatchCheckRows, createModule<class DeviceMismatchCheck>};

} // namespace ddpify
