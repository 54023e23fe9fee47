//===- Overflow.cpp - The statements edits push out of the file's layout --===//
//
// The default --format-style, `overflow`: an edit that lengthens a line past
// the column limit (`if (ddp::is_main_process()) ` before a long print, a
// guarded block indented one step more), or that moves text which the next
// lines are aligned to (`ddp::device(` before a ternary broken over two
// lines, `ddp::DistributedDataLoader<` for a shorter or longer type name),
// leaves code a reviewer sends back. Those statements, and only those, are
// formatted with clang-format: the project's .clang-format where it has one,
// else LLVM's style at the file's own width and indentation. Every other
// line stays as the edits write it.
//
//===----------------------------------------------------------------------===//

#include "ddpify/EditSet.h"
#include "ddpify/SourceLines.h"
#include "clang/Format/Format.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <algorithm>
#include <map>

namespace ddpify {
namespace {

unsigned indentOf(llvm::StringRef Line) {
  return Line.size() - Line.ltrim(" \t").size();
}

bool isCommentLine(llvm::StringRef Line) {
  llvm::StringRef Text = Line.trim();
  return Text.starts_with("//") || Text.starts_with("/*") ||
         Text.starts_with("*");
}

/// A line after which the statement goes on (not `;`, `{` or `}` last, not
/// a preprocessor line).
bool continues(llvm::StringRef Line) {
  llvm::StringRef Text = Line.trim();
  size_t Comment = Text.find("//");
  if (Comment != llvm::StringRef::npos)
    Text = Text.take_front(Comment).rtrim();
  return !Text.empty() && !Text.starts_with("#") && !Text.ends_with(";") &&
         !Text.ends_with("{") && !Text.ends_with("}");
}

/// Whether the line after the one starting at LineBegin continues its
/// statement aligned to a spot of it at or after Column: after an opening
/// bracket, under the same operator (`<<`, `?` and `:`), or a call chained
/// under it (`.f()`).
bool nextLineAligned(llvm::StringRef Code, unsigned LineBegin,
                     unsigned Column) {
  llvm::StringRef Line = lineAt(Code, LineBegin);
  unsigned NextAt = nextLineStart(Code, LineBegin);
  if (!continues(Line) || NextAt >= Code.size())
    return false;
  llvm::StringRef Next = lineAt(Code, NextAt);
  llvm::StringRef Token = Next.trim();
  unsigned At = indentOf(Next);
  if (Token.empty() || At <= Column || At > Line.size())
    return false;
  if (Token.starts_with(".") || Token.starts_with("->"))
    return true;
  if (llvm::StringRef("(<[{").contains(Line[At - 1]))
    return true;
  return At < Line.size() &&
         (Line[At] == Token[0] || (Line[At] == '?' && Token[0] == ':'));
}

/// The width of the last line of Text.
unsigned lastLineWidth(llvm::StringRef Text) {
  size_t Newline = Text.rfind('\n');
  return Newline == llvm::StringRef::npos ? Text.size()
                                          : Text.size() - Newline - 1;
}

bool hasClangFormatFile(llvm::StringRef File) {
  llvm::SmallString<256> Dir(File);
  llvm::sys::fs::make_absolute(Dir);
  llvm::sys::path::remove_filename(Dir);
  while (!Dir.empty()) {
    for (const char *Name : {".clang-format", "_clang-format"}) {
      llvm::SmallString<256> Candidate(Dir);
      llvm::sys::path::append(Candidate, Name);
      if (llvm::sys::fs::exists(Candidate))
        return true;
    }
    llvm::StringRef Parent = llvm::sys::path::parent_path(Dir);
    if (Parent == Dir)
      break;
    Dir = Parent;
  }
  return false;
}

/// The style the file's own lines show: LLVM's, at the file's width (80
/// columns, or its longest line of code) and its indentation step. None
/// for a file indented with tabs.
std::optional<clang::format::FormatStyle> styleOfLines(llvm::StringRef Code) {
  clang::format::FormatStyle Style = clang::format::getLLVMStyle();
  unsigned Longest = 0;
  std::map<unsigned, unsigned> Steps;
  llvm::StringRef Previous;
  for (llvm::StringRef Rest = Code; !Rest.empty();) {
    auto [Line, Tail] = Rest.split('\n');
    Rest = Tail;
    Line = Line.rtrim("\r");
    if (Line.starts_with("\t"))
      return std::nullopt;
    if (!isCommentLine(Line))
      Longest = std::max<unsigned>(Longest, Line.size());
    if (Line.trim().empty())
      continue;
    if (Previous.rtrim().ends_with("{") && indentOf(Line) > indentOf(Previous))
      ++Steps[indentOf(Line) - indentOf(Previous)];
    Previous = Line;
  }
  Style.ColumnLimit = std::max(80u, Longest);
  unsigned Step = 2, Seen = 0;
  for (auto [Width, Count] : Steps)
    if (Count > Seen && Width <= 8) {
      Step = Width;
      Seen = Count;
    }
  Style.IndentWidth = Step;
  Style.DerivePointerAlignment = true;
  return Style;
}

/// The style the statements an edit disturbs are formatted in: the
/// nearest .clang-format's, else the file's own (styleOfLines). None where
/// they are not formatted.
std::optional<clang::format::FormatStyle> overflowStyle(llvm::StringRef File,
                                                        llvm::StringRef Code) {
  if (!hasClangFormatFile(File))
    return styleOfLines(Code);
  llvm::Expected<clang::format::FormatStyle> FromFile =
      clang::format::getStyle("file", File, "LLVM", Code);
  // A .clang-format that does not parse: the edits as they are (only an
  // explicit --format-style=file makes it an error).
  if (!FromFile) {
    llvm::consumeError(FromFile.takeError());
    return std::nullopt;
  }
  if (FromFile->DisableFormat || !FromFile->ColumnLimit)
    return std::nullopt;
  // A file indented with tabs under a style that indents with spaces: its
  // reformatted statements would mix the two, so its edits stay as they are.
  if (FromFile->UseTab == clang::format::FormatStyle::UT_Never &&
      (Code.starts_with("\t") || Code.contains("\n\t")))
    return std::nullopt;
  return *FromFile;
}

} // namespace

unsigned columnLimitOf(llvm::StringRef File, llvm::StringRef Code) {
  if (std::optional<clang::format::FormatStyle> Style =
          overflowStyle(File, Code))
    return Style->ColumnLimit;
  return 0;
}

llvm::Expected<std::string>
applyFormattingOverflow(llvm::StringRef File, llvm::StringRef Code,
                        const clang::tooling::Replacements &Edits) {
  llvm::Expected<std::string> NewCode =
      clang::tooling::applyAllReplacements(Code, Edits);
  if (!NewCode)
    return NewCode.takeError();
  std::optional<clang::format::FormatStyle> Style = overflowStyle(File, Code);
  if (!Style)
    return NewCode;
  // ddpify's report comments stay one line each.
  Style->ReflowComments = false;
  Style->SortIncludes = clang::format::FormatStyle::SI_Never;
  unsigned Limit = Style->ColumnLimit;

  std::vector<clang::tooling::Range> Ranges;
  int Delta = 0;
  for (const clang::tooling::Replacement &Edit : Edits) {
    unsigned Offset = Edit.getOffset(), Length = Edit.getLength();
    llvm::StringRef Text = Edit.getReplacementText();
    unsigned NewBegin = Offset + Delta;
    unsigned NewEnd = NewBegin + Text.size();
    Delta += static_cast<int>(Text.size()) - static_cast<int>(Length);
    if (Offset + Length > Code.size() || NewEnd > NewCode->size())
      continue;
    llvm::StringRef Old = Code.substr(Offset, Length);
    bool Flagged = false;
    // Pushed past the limit: a line of the edit's text longer than the
    // limit, where the lines it replaces were within it.
    unsigned OldWidest = 0;
    for (unsigned At = lineStart(Code, Offset); At <= Offset + Length;) {
      llvm::StringRef Line = lineAt(Code, At);
      OldWidest = std::max<unsigned>(OldWidest, Line.size());
      At = nextLineStart(Code, At);
      if (At > Code.size())
        break;
    }
    if (OldWidest <= Limit)
      for (unsigned At = lineStart(*NewCode, NewBegin); At <= NewEnd;) {
        llvm::StringRef Line = lineAt(*NewCode, At);
        Flagged = Flagged || (Line.size() > Limit && !isCommentLine(Line));
        At = nextLineStart(*NewCode, At);
        if (At > NewCode->size())
          break;
      }
    // Moved out of alignment: the edit starts after the line's indentation
    // and changes the width of text that the next line is aligned to,
    // either inside the edit (a wrapped expression broken over lines) or
    // after it on its last line.
    llvm::StringRef OldLine = lineAt(Code, Offset);
    unsigned Column = Offset - lineStart(Code, Offset);
    if (!Flagged && Column > indentOf(OldLine) && Text != Old) {
      size_t OldNewline = Old.find('\n'), NewNewline = Text.find('\n');
      bool OldMulti = OldNewline != llvm::StringRef::npos;
      bool NewMulti = NewNewline != llvm::StringRef::npos;
      if (OldMulti && NewMulti) {
        Flagged = OldNewline != NewNewline &&
                  nextLineAligned(Code, lineStart(Code, Offset), Column);
      } else if (!NewMulti) {
        unsigned OldEndColumn =
            OldMulti ? lastLineWidth(Old) : Column + Old.size();
        unsigned NewEndColumn =
            OldMulti ? lastLineWidth(Text) : Column + Text.size();
        Flagged = OldEndColumn != NewEndColumn &&
                  nextLineAligned(Code, lineStart(Code, Offset + Length),
                                  OldMulti ? 0 : Column);
      }
    }
    if (Flagged) {
      unsigned Begin = lineStart(*NewCode, NewBegin);
      Ranges.emplace_back(Begin, lineEnd(*NewCode, NewEnd) - Begin);
    }
  }
  if (Ranges.empty())
    return NewCode;
  clang::tooling::Replacements Formatting =
      clang::format::reformat(*Style, *NewCode, Ranges, File);
  return clang::tooling::applyAllReplacements(*NewCode, Formatting);
}

} // namespace ddpify
