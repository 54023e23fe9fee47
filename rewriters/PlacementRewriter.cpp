//===- PlacementRewriter.cpp - fix-its of the lint-only checks ------------===//
//
// ddp-cpu-factory-in-forward: a factory call `torch::zeros({n})` becomes
// `torch::zeros({n}, torch::TensorOptions().device(x.device()))`. The edit
// replaces the whole call (the finding's range) so lint shows the new call
// under the old one; the matcher put the `)` offset in SecondOffset and the
// inserted argument in Names[0]. ddp-device-mismatch has no fix-it: which
// operand should move is the user's decision.
//
//===----------------------------------------------------------------------===//

#include "ddpify/EditSet.h"
#include "ddpify/Rewriter.h"

namespace ddpify {

std::vector<clang::tooling::Replacement>
rewritePlacementFinding(const Finding &F) {
  if (F.CheckName != "ddp-cpu-factory-in-forward" || !F.HasSecondRange ||
      F.Names.empty())
    return {};
  unsigned End = F.Offset + F.Length;
  if (F.SecondOffset < F.Offset || F.SecondOffset >= End)
    return {};
  llvm::Expected<std::string> Code = readFile(F.FilePath);
  if (!Code) {
    llvm::consumeError(Code.takeError());
    return {};
  }
  // The file must still hold the call the matcher saw, ending in `)`.
  if (End > Code->size() || (*Code)[F.SecondOffset] != ')')
    return {};
  std::string Text = Code->substr(F.Offset, F.SecondOffset - F.Offset) +
                     F.Names.front() +
                     Code->substr(F.SecondOffset, End - F.SecondOffset);
  return {clang::tooling::Replacement(F.FilePath, F.Offset, F.Length, Text)};
}

} // namespace ddpify
