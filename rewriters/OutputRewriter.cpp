//===- OutputRewriter.cpp - R7/R8 edits -----------------------------------===//

#include "ddpify/Rewriter.h"

namespace ddpify {

std::vector<clang::tooling::Replacement> rewriteGuardFinding(const Finding &F) {
  std::vector<clang::tooling::Replacement> Edits;
  // The statement itself stays as written: only the guard is inserted.
  if (F.Form == FindingForm::GuardStatement) {
    Edits.emplace_back(F.FilePath, F.Offset, 0,
                       std::string(MainProcessGuard) + " ");
  } else if (F.Form == FindingForm::GuardStatementBraced && F.HasSecondRange) {
    Edits.emplace_back(F.FilePath, F.Offset, 0,
                       "{ " + std::string(MainProcessGuard) + " ");
    Edits.emplace_back(F.FilePath, F.SecondOffset, 0, " }");
  }
  return Edits;
}

} // namespace ddpify
