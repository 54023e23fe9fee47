//===- EntryRewriter.cpp - R1 edits ---------------------------------------===//

#include "ddpify/Rewriter.h"

namespace ddpify {

std::vector<clang::tooling::Replacement> rewriteEntryFinding(const Finding &F) {
  std::vector<clang::tooling::Replacement> Edits;
  if (F.Form != FindingForm::EntryInit)
    return Edits;
  std::string Call = F.ArgvName.empty()
                         ? std::string("ddp::init();")
                         : "ddp::init(" + F.ArgcName + ", " + F.ArgvName + ");";
  // After main's `{`: on a line of its own, indented as the first statement,
  // or on the brace's line.
  std::string Text = F.OwnLine ? "\n" + F.Indent + Call : " " + Call;
  Edits.emplace_back(F.FilePath, F.Offset, 0, Text);
  if (F.HasSecondRange)
    Edits.emplace_back(F.FilePath, F.SecondOffset, F.SecondLength,
                       "int argc, char** argv");
  return Edits;
}

} // namespace ddpify
