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
  if (Style == "none")
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

llvm::Error EditSet::add(const clang::tooling::Replacement &Edit,
                         llvm::StringRef Rule) {
  std::string File = Edit.getFilePath().str();
  clang::tooling::Replacements &Edits = PerFile[File];
  for (const clang::tooling::Replacement &Existing : Edits)
    if (Existing == Edit)
      return llvm::Error::success();
  bool Insertion = Edit.getLength() == 0;
  if (llvm::Error Err = Edits.add(Edit)) {
    llvm::consumeError(std::move(Err));
    auto Other = InsertionRules.find({File, Edit.getOffset()});
    if (Insertion && !Rule.empty() && Other != InsertionRules.end() &&
        !Other->second.empty() && Other->second != Rule) {
      // Two rules insert before the same spot: both texts, in order.
      clang::tooling::Replacements Joined;
      std::string Text;
      for (const clang::tooling::Replacement &Existing : Edits) {
        if (Existing.getOffset() == Edit.getOffset() &&
            Existing.getLength() == 0) {
          Text = Existing.getReplacementText().str();
          continue;
        }
        llvm::cantFail(Joined.add(Existing));
      }
      // A whole line (a report comment) goes before text that continues
      // the line (a guard, an indentation).
      llvm::StringRef Added = Edit.getReplacementText();
      if (Added.ends_with("\n") && !llvm::StringRef(Text).ends_with("\n"))
        Text = Added.str() + Text;
      else
        Text += Added.str();
      llvm::cantFail(Joined.add(
          clang::tooling::Replacement(File, Edit.getOffset(), 0, Text)));
      Edits = std::move(Joined);
      return llvm::Error::success();
    }
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "conflicting edits in '%s' at offset %u (the file is seen "
        "differently by two translation units?)",
        Edit.getFilePath().str().c_str(), Edit.getOffset());
  }
  if (Insertion)
    InsertionRules[{File, Edit.getOffset()}] = Rule.str();
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

llvm::Expected<std::string> EditSet::apply(llvm::StringRef File) const {
  llvm::Expected<std::string> Code = readFile(File);
  if (!Code)
    return Code.takeError();
  auto Edits = PerFile.find(File.str());
  if (Edits == PerFile.end())
    return Code;
  if (FormatStyle == "none" || !isCOrCxxFile(File))
    return clang::tooling::applyAllReplacements(*Code, Edits->second);
  llvm::Expected<clang::format::FormatStyle> Style =
      formatStyleFor(FormatStyle, File, *Code);
  if (!Style)
    return Style.takeError();
  // The edits plus the formatting of the lines they touch, nothing else.
  llvm::Expected<clang::tooling::Replacements> Formatted =
      clang::format::formatReplacements(*Code, Edits->second, *Style);
  if (!Formatted)
    return Formatted.takeError();
  return clang::tooling::applyAllReplacements(*Code, *Formatted);
}

} // namespace ddpify
