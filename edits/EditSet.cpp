//===- EditSet.cpp - Edits merged per file across translation units ------===//

#include "ddpify/EditSet.h"
#include "ddpify/IncludeInserter.h"
#include "clang/Format/Format.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace ddpify {
namespace {

/// Only C and C++ files are formatted: edits also reach CMakeLists.txt.
bool isCOrCxxFile(llvm::StringRef Path) {
  std::string Extension = llvm::sys::path::extension(Path).lower();
  return llvm::is_contained({".c", ".cc", ".cpp", ".cxx", ".c++", ".cu", ".h",
                             ".hh", ".hpp", ".hxx", ".h++", ".cuh", ".inl",
                             ".ipp", ".tpp"},
                            Extension);
}

llvm::Expected<clang::format::FormatStyle>
formatStyleFor(llvm::StringRef Style, llvm::StringRef File,
               llvm::StringRef Code) {
  llvm::Expected<clang::format::FormatStyle> Format =
      clang::format::getStyle(Style, File, /*FallbackStyle=*/"none", Code);
  if (!Format)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "format style '%s' for '%s': %s",
                                   Style.str().c_str(), File.str().c_str(),
                                   llvm::toString(Format.takeError()).c_str());
  return Format;
}

} // namespace

llvm::Error checkFormatStyle(llvm::StringRef Style, llvm::StringRef File) {
  if (Style == "none" || Style == OverflowFormatStyle)
    return llvm::Error::success();
  llvm::Expected<clang::format::FormatStyle> Format =
      formatStyleFor(Style, File, "");
  return Format ? llvm::Error::success() : Format.takeError();
}

llvm::Expected<std::string> readFile(llvm::StringRef Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!Buffer)
    return llvm::createStringError(Buffer.getError(), "cannot read '%s': %s",
                                   Path.str().c_str(),
                                   Buffer.getError().message().c_str());
  return (*Buffer)->getBuffer().str();
}

/// Where an insertion goes among others at the same offset: whole lines of
/// code (a declaration, a wrap) first, then a comment about the statement
/// (a report item's, which stays right above it), then a line that opens a
/// block (a guarded block's `if (...) {`), then text that continues the line
/// up to the statement (a one-line guard, an indentation).
static int insertionRank(llvm::StringRef Text) {
  if (!Text.contains('\n'))
    return 3;
  if (Text.rtrim().ends_with("{"))
    return 2;
  return Text.ltrim().starts_with("//") ? 1 : 0;
}

void EditSet::addMove(llvm::StringRef File, unsigned InsertedAt,
                      unsigned Offset, unsigned Length,
                      llvm::StringRef Replacement) {
  for (const Move &M : Moves)
    if (M.File == File && M.InsertedAt == InsertedAt && M.Offset == Offset &&
        M.Length == Length)
      return;
  Moves.push_back(
      {File.str(), InsertedAt, Offset, Length, Replacement.str(), {}});
}

llvm::Error EditSet::composeMoves() {
  for (Move &M : Moves) {
    if (M.Carried.empty())
      continue;
    clang::tooling::Replacements &Edits = PerFile[M.File];
    llvm::Expected<std::string> Code = readFile(M.File);
    if (!Code)
      return Code.takeError();
    if (M.Offset + M.Length > Code->size())
      continue;
    std::string Original = Code->substr(M.Offset, M.Length);
    // The moved copy, with the carried edits made relative to it.
    clang::tooling::Replacements Inside;
    for (const clang::tooling::Replacement &Carried : M.Carried)
      if (llvm::Error Err = Inside.add(clang::tooling::Replacement(
              "copy", Carried.getOffset() - M.Offset, Carried.getLength(),
              Carried.getReplacementText())))
        return Err;
    llvm::Expected<std::string> Composed =
        clang::tooling::applyAllReplacements(Original, Inside);
    if (!Composed)
      return Composed.takeError();
    clang::tooling::Replacements Rebuilt;
    bool Found = false;
    for (const clang::tooling::Replacement &Edit : Edits) {
      llvm::StringRef Text = Edit.getReplacementText();
      size_t At = Text.find(Original);
      if (!Found && Edit.getOffset() == M.InsertedAt && Edit.getLength() == 0 &&
          At != llvm::StringRef::npos) {
        Found = true;
        std::string New = Text.take_front(At).str() + *Composed +
                          Text.drop_front(At + Original.size()).str();
        llvm::cantFail(Rebuilt.add(
            clang::tooling::Replacement(M.File, Edit.getOffset(), 0, New)));
        continue;
      }
      llvm::cantFail(Rebuilt.add(Edit));
    }
    if (!Found)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "conflicting edits in '%s' at offset %u (a value moved before a "
          "guard holds another rule's edit, and its copy was not found)",
          M.File.c_str(), M.Offset);
    Edits = std::move(Rebuilt);
    // The joined insertion text changed: keep the record in step.
    auto Pieces = Insertions.find({M.File, M.InsertedAt});
    if (Pieces != Insertions.end())
      for (Insertion &I : Pieces->second) {
        size_t At = I.Text.find(Original);
        if (At != std::string::npos) {
          I.Text.replace(At, Original.size(), *Composed);
          break;
        }
      }
    M.Carried.clear();
  }
  return llvm::Error::success();
}

llvm::Error EditSet::add(const clang::tooling::Replacement &Edit,
                         llvm::StringRef Rule) {
  std::string File = Edit.getFilePath().str();
  // An edit inside bytes another rule moves goes with them (composeMoves).
  for (Move &M : Moves) {
    unsigned End = M.Offset + M.Length;
    if (M.File != File || Edit.getOffset() < M.Offset ||
        Edit.getOffset() + Edit.getLength() > End)
      continue;
    bool IsVacating = Edit.getOffset() == M.Offset &&
                      Edit.getLength() == M.Length &&
                      Edit.getReplacementText() == M.Replacement;
    if (IsVacating)
      break;
    if (!llvm::is_contained(M.Carried, Edit))
      M.Carried.push_back(Edit);
    return llvm::Error::success();
  }
  clang::tooling::Replacements &Edits = PerFile[File];
  for (const clang::tooling::Replacement &Existing : Edits)
    if (Existing == Edit)
      return llvm::Error::success();
  bool IsInsertion = Edit.getLength() == 0;
  std::pair<std::string, unsigned> Spot{File, Edit.getOffset()};
  if (llvm::Error Err = Edits.add(Edit)) {
    llvm::consumeError(std::move(Err));
    auto Pieces = Insertions.find(Spot);
    bool OtherRule = Pieces != Insertions.end() && !Rule.empty() &&
                     llvm::all_of(Pieces->second, [&](const Insertion &I) {
                       return !I.Rule.empty() && I.Rule != Rule;
                     });
    if (!IsInsertion || !OtherRule)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "conflicting edits in '%s' at offset %u (the file is seen "
          "differently by two translation units?)",
          File.c_str(), Edit.getOffset());
    // Rules inserting before the same spot: all their texts, in order.
    std::vector<Insertion> &Spots = Pieces->second;
    Insertion New{Rule.str(), Edit.getReplacementText().str()};
    auto At = llvm::find_if(Spots, [&](const Insertion &I) {
      return insertionRank(I.Text) > insertionRank(New.Text);
    });
    Spots.insert(At, std::move(New));
    std::string Text;
    for (const Insertion &I : Spots)
      Text += I.Text;
    clang::tooling::Replacements Joined;
    for (const clang::tooling::Replacement &Existing : Edits)
      if (Existing.getOffset() != Edit.getOffset() || Existing.getLength())
        llvm::cantFail(Joined.add(Existing));
    llvm::cantFail(Joined.add(
        clang::tooling::Replacement(File, Edit.getOffset(), 0, Text)));
    Edits = std::move(Joined);
    return llvm::Error::success();
  }
  if (IsInsertion)
    Insertions[Spot] = {{Rule.str(), Edit.getReplacementText().str()}};
  return llvm::Error::success();
}

llvm::Error EditSet::addRuntimeIncludes() {
  for (auto &[File, Edits] : PerFile) {
    if (Edits.empty())
      continue;
    llvm::Expected<std::string> Code = readFile(File);
    if (!Code)
      return Code.takeError();
    if (std::optional<clang::tooling::Replacement> Include =
            runtimeIncludeInsertion(File, *Code)) {
      if (llvm::Error Err = Edits.add(*Include))
        return Err;
      ++IncludesAdded;
    }
  }
  return llvm::Error::success();
}

/// The edits with the file's own line ending: in a file whose lines end
/// with CRLF, a new line an edit makes ends with CRLF too.
static clang::tooling::Replacements
withLineEndingsOf(llvm::StringRef Code,
                  const clang::tooling::Replacements &Edits) {
  size_t FirstNewline = Code.find('\n');
  if (FirstNewline == llvm::StringRef::npos || FirstNewline == 0 ||
      Code[FirstNewline - 1] != '\r')
    return Edits;
  clang::tooling::Replacements Converted;
  for (const clang::tooling::Replacement &Edit : Edits) {
    std::string Text;
    llvm::StringRef Old = Edit.getReplacementText();
    for (size_t I = 0; I < Old.size(); ++I) {
      // A `\n` right after the file's `\r` (an edit that replaces a line's
      // `\n`) already ends with CRLF.
      char Before = I > 0                  ? Old[I - 1]
                    : Edit.getOffset() > 0 ? Code[Edit.getOffset() - 1]
                                           : '\0';
      if (Old[I] == '\n' && Before != '\r')
        Text += '\r';
      Text += Old[I];
    }
    llvm::cantFail(Converted.add(clang::tooling::Replacement(
        Edit.getFilePath(), Edit.getOffset(), Edit.getLength(), Text)));
  }
  return Converted;
}

llvm::Expected<std::string> EditSet::apply(llvm::StringRef File) const {
  llvm::Expected<std::string> Code = readFile(File);
  if (!Code)
    return Code.takeError();
  auto Found = PerFile.find(File.str());
  if (Found == PerFile.end())
    return Code;
  clang::tooling::Replacements Edits = withLineEndingsOf(*Code, Found->second);
  if (FormatStyle == "none" || !isCOrCxxFile(File))
    return clang::tooling::applyAllReplacements(*Code, Edits);
  if (FormatStyle == OverflowFormatStyle)
    return applyFormattingOverflow(File, *Code, Edits);
  llvm::Expected<clang::format::FormatStyle> Style =
      formatStyleFor(FormatStyle, File, *Code);
  if (!Style)
    return Style.takeError();
  // The edits plus the formatting of the lines they touch, nothing else.
  llvm::Expected<clang::tooling::Replacements> Formatted =
      clang::format::formatReplacements(*Code, Edits, *Style);
  if (!Formatted)
    return Formatted.takeError();
  return clang::tooling::applyAllReplacements(*Code, *Formatted);
}

bool isRewritten(const Finding &F) {
  return !F.InMacro && !F.FilePath.empty() && F.NotRewrittenReason.empty();
}

std::vector<clang::tooling::Replacement> editsFor(const Finding &F) {
  std::vector<clang::tooling::Replacement> Edits;
  if (!isRewritten(F))
    return Edits;
  for (const FindingEdit &Edit : F.Edits)
    Edits.emplace_back(F.FilePath, Edit.Offset, Edit.Length, Edit.Text);
  return Edits;
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

} // namespace ddpify
