//===- ModelRewriter.cpp - R5 and R6 edits --------------------------------===//

#include "ddpify/Rewriter.h"

namespace ddpify {

namespace {

/// R6: Names = {"local" or "distribute", the model as written, the wrapper's
/// name, the wrapper's class}, or {"insert", the text} for an unplaced model.
/// OwnLine: the rest of the placement's line is free, the wrap goes on the next
/// line; otherwise the range covers the blanks after the `;` and the code that
/// followed moves to a line of its own after the wrap.
std::vector<clang::tooling::Replacement> wrapModel(const Finding &F) {
  // A model with no placement: its placement and wrapper, as spelled.
  if (F.Names.size() == 2 && F.Names[0] == "insert")
    return {clang::tooling::Replacement(F.FilePath, F.Offset, 0, F.Names[1])};
  if (F.Names.size() < 3 || F.Names[1].empty())
    return {};
  std::string Statement;
  if (F.Names[0] == "distribute")
    Statement = "ddp::distribute(" + F.Names[1] + ");";
  else if (F.Names[0] == "local" && !F.Names[2].empty())
    Statement =
        (F.Names.size() > 3 ? F.Names[3]
                            : std::string("ddp::DistributedDataParallel")) +
        " " + F.Names[2] + "(" + F.Names[1] + ");";
  else
    return {};
  std::string Text = "\n" + F.Indent + Statement;
  if (!F.OwnLine)
    Text += "\n" + F.Indent;
  return {clang::tooling::Replacement(F.FilePath, F.Offset, F.Length, Text)};
}

} // namespace

std::vector<clang::tooling::Replacement> rewriteModelFinding(const Finding &F) {
  if (F.Form == FindingForm::ModelWrap)
    return wrapModel(F);
  if (F.Form != FindingForm::BatchNormType || F.NewName.empty())
    return {};
  return {
      clang::tooling::Replacement(F.FilePath, F.Offset, F.Length, F.NewName)};
}

} // namespace ddpify
