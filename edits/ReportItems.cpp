//===- ReportItems.cpp - Report items and their comments ------------------===//

#include "ddpify/ReportItems.h"
#include "ddpify/EditSet.h"
#include "ddpify/SourceLines.h"
#include "llvm/Support/Path.h"
#include <map>
#include <set>

namespace ddpify {
namespace {

constexpr llvm::StringLiteral CommentPrefix = "// ddpify: ";

/// One line: newlines become spaces; no trailing backslash (it would carry
/// the comment onto the next line).
std::string oneLine(llvm::StringRef Text) {
  std::string Line;
  for (char C : Text)
    Line += (C == '\n' || C == '\r') ? ' ' : C;
  while (!Line.empty() && (Line.back() == '\\' || Line.back() == ' '))
    Line.pop_back();
  return Line;
}

/// The ids of the `// ddpify: <id>:` comments right above the line at
/// LineStart.
std::set<std::string> idsAbove(llvm::StringRef Text, size_t LineStart) {
  std::set<std::string> Ids;
  while (LineStart > 0) {
    size_t Above = lineStart(Text, LineStart - 1);
    llvm::StringRef Line = lineAt(Text, Above).ltrim(" \t");
    if (!Line.consume_front(CommentPrefix))
      break;
    size_t Colon = Line.find(':');
    if (Colon != llvm::StringRef::npos)
      Ids.insert(Line.take_front(Colon).str());
    LineStart = Above;
  }
  return Ids;
}

} // namespace

bool isReportItem(const Finding &F) {
  return F.InMacro || !F.NotRewrittenReason.empty() || !F.ReportId.empty();
}

std::string reportItemId(const Finding &F) {
  if (!F.ReportId.empty())
    return F.ReportId;
  if (F.InMacro)
    return "macro-expansion";
  return "not-rewritten";
}

std::string reportItemReason(const Finding &F) {
  std::string What =
      !F.NotRewrittenReason.empty() ? F.NotRewrittenReason : F.Message;
  if (!F.InMacro)
    return oneLine(What.empty() ? "migrate this spot by hand" : What);
  std::string Reason = "inside the expansion of macro";
  if (!F.MacroName.empty())
    Reason += " '" + F.MacroName + "'";
  Reason += ", which ddpify never rewrites: migrate it by hand";
  if (!What.empty())
    Reason += " (" + What + ")";
  return oneLine(Reason);
}

namespace {

/// The `// ddpify: <id>: <reason>` comment migrate and diff put above a
/// report item; empty when it is already there.
std::vector<clang::tooling::Replacement> reportCommentFor(const Finding &F) {
  // Build files have no C++ comments: their items are in the report only.
  if (!isReportItem(F) || F.FilePath.empty() || F.RuleId == "R10" ||
      llvm::sys::path::filename(F.FilePath) == "CMakeLists.txt")
    return {};
  llvm::Expected<std::string> Code = readFile(F.FilePath);
  if (!Code) {
    llvm::consumeError(Code.takeError());
    return {};
  }
  llvm::StringRef Text = *Code;
  size_t LineStart = lineStart(Text, F.Offset);
  // A line continued from the one above (a backslash) belongs to it: the
  // comment goes above the first line of the whole.
  while (LineStart > 0) {
    size_t Above = lineStart(Text, LineStart - 1);
    if (!lineAt(Text, Above).ends_with("\\"))
      break;
    LineStart = Above;
  }
  std::string Id = reportItemId(F);
  if (idsAbove(Text, LineStart).count(Id))
    return {};
  llvm::StringRef Line = lineAt(Text, LineStart);
  std::string Indent = indentationAt(Text, LineStart).str();
  bool Crlf = Text.substr(LineStart + Line.size()).starts_with("\r\n");
  std::string Comment = Indent + CommentPrefix.str() + Id + ": " +
                        reportItemReason(F) + (Crlf ? "\r\n" : "\n");
  if (LineStart == 0)
    return {clang::tooling::Replacement(F.FilePath, 0, 0, Comment)};
  // The newline before the line becomes newline + comment: an edit that
  // inserts at the start of the line (a guard) stays after the comment, one
  // that ends the line above (main's ddp::init) stays before it.
  return {clang::tooling::Replacement(F.FilePath, LineStart - 1, 1,
                                      "\n" + Comment)};
}

} // namespace

std::vector<clang::tooling::Replacement>
reportComments(llvm::ArrayRef<Finding> Findings) {
  // Items above the same line: one edit holding each comment once.
  struct Group {
    std::string Prefix;
    std::vector<std::string> Comments;
  };
  std::map<std::tuple<std::string, unsigned, unsigned>, Group> Groups;
  for (const Finding &F : Findings)
    for (const clang::tooling::Replacement &Edit : reportCommentFor(F)) {
      Group &G = Groups[{Edit.getFilePath().str(), Edit.getOffset(),
                         Edit.getLength()}];
      llvm::StringRef Text = Edit.getReplacementText();
      if (Edit.getLength() == 1) {
        G.Prefix = "\n";
        Text = Text.drop_front();
      }
      if (!llvm::is_contained(G.Comments, Text.str()))
        G.Comments.push_back(Text.str());
    }
  std::vector<clang::tooling::Replacement> Edits;
  for (const auto &[Key, G] : Groups) {
    const auto &[File, Offset, Length] = Key;
    std::string Text = G.Prefix;
    for (const std::string &Comment : G.Comments)
      Text += Comment;
    Edits.emplace_back(File, Offset, Length, Text);
  }
  return Edits;
}

} // namespace ddpify
