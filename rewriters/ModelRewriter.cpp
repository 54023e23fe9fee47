//===- ModelRewriter.cpp - R5 edits ---------------------------------------===//

#include "ddpify/Rewriter.h"

namespace ddpify {

std::vector<clang::tooling::Replacement> rewriteModelFinding(const Finding &F) {
  if (F.Form != FindingForm::BatchNormType || F.NewName.empty())
    return {};
  return {
      clang::tooling::Replacement(F.FilePath, F.Offset, F.Length, F.NewName)};
}

} // namespace ddpify
