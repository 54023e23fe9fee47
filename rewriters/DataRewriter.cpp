//===- DataRewriter.cpp - R4 edits ----------------------------------------===//

#include "ddpify/Rewriter.h"

namespace ddpify {

std::vector<clang::tooling::Replacement> rewriteDataFinding(const Finding &F) {
  // The written callee or loader template (qualifier included) becomes ddp's;
  // the template and call arguments after it stay as written.
  if ((F.Form != FindingForm::DataLoaderCall &&
       F.Form != FindingForm::DataLoaderType) ||
      F.NewName.empty())
    return {};
  return {
      clang::tooling::Replacement(F.FilePath, F.Offset, F.Length, F.NewName)};
}

} // namespace ddpify
