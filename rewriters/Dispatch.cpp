//===- Dispatch.cpp - The rewriter that owns each rule --------------------===//

#include "ddpify/EditSet.h"
#include "ddpify/Rewriter.h"
#include <algorithm>

namespace ddpify {

std::vector<clang::tooling::Replacement> editsFor(const Finding &F) {
  if (F.InMacro || F.FilePath.empty() || !F.NotRewrittenReason.empty())
    return {};
  if (!F.Edits.empty()) {
    std::vector<clang::tooling::Replacement> Edits;
    for (const FindingEdit &Edit : F.Edits)
      Edits.emplace_back(F.FilePath, Edit.Offset, Edit.Length, Edit.Text);
    return Edits;
  }
  if (F.RuleId == "R2" || F.RuleId == "R3") {
    if (std::optional<clang::tooling::Replacement> Edit =
            rewriteDeviceFinding(F))
      return {*Edit};
    return {};
  }
  if (F.RuleId == "R1")
    return rewriteEntryFinding(F);
  if (F.RuleId == "R5" || F.RuleId == "R6")
    return rewriteModelFinding(F);
  if (F.RuleId == "R4")
    return rewriteDataFinding(F);
  if (F.RuleId == "R11")
    return rewriteMetricsFinding(F);
  if (F.RuleId.empty())
    return rewritePlacementFinding(F);
  return {};
}

std::optional<clang::tooling::Replacement> editFor(const Finding &F) {
  std::vector<clang::tooling::Replacement> Edits = editsFor(F);
  if (Edits.empty())
    return std::nullopt;
  if (Edits.size() == 1)
    return Edits.front();
  // Several edits (main's parameters and the init call; a guard's `{` and
  // `}`): one replacement spanning them, the text between kept as it is.
  std::sort(Edits.begin(), Edits.end());
  unsigned Begin = Edits.front().getOffset();
  unsigned End = Edits.back().getOffset() + Edits.back().getLength();
  llvm::Expected<std::string> Code = readFile(F.FilePath);
  if (!Code) {
    llvm::consumeError(Code.takeError());
    return std::nullopt;
  }
  if (End > Code->size())
    return std::nullopt;
  std::string Text;
  unsigned At = Begin;
  for (const clang::tooling::Replacement &Edit : Edits) {
    Text += Code->substr(At, Edit.getOffset() - At);
    Text += Edit.getReplacementText().str();
    At = Edit.getOffset() + Edit.getLength();
  }
  return clang::tooling::Replacement(F.FilePath, Begin, End - Begin, Text);
}

std::string replacementText(const Finding &F) {
  std::optional<clang::tooling::Replacement> Edit = editFor(F);
  return Edit ? Edit->getReplacementText().str() : std::string();
}

} // namespace ddpify
