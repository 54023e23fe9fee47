//===- EditSet.cpp - Edits merged per file across translation units ------===//

#include "ddpify/EditSet.h"
#include "ddpify/IncludeInserter.h"
#include "llvm/Support/MemoryBuffer.h"

namespace ddpify {

llvm::Expected<std::string> readFile(llvm::StringRef Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!Buffer)
    return llvm::createStringError(Buffer.getError(), "cannot read '%s': %s",
                                   Path.str().c_str(),
                                   Buffer.getError().message().c_str());
  return (*Buffer)->getBuffer().str();
}

llvm::Error EditSet::add(const clang::tooling::Replacement &Edit) {
  clang::tooling::Replacements &Edits = PerFile[Edit.getFilePath().str()];
  for (const clang::tooling::Replacement &Existing : Edits)
    if (Existing == Edit)
      return llvm::Error::success();
  if (llvm::Error Err = Edits.add(Edit)) {
    llvm::consumeError(std::move(Err));
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "conflicting edits in '%s' at offset %u (the file is seen "
        "differently by two translation units?)",
        Edit.getFilePath().str().c_str(), Edit.getOffset());
  }
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
  return clang::tooling::applyAllReplacements(*Code, Edits->second);
}

} // namespace ddpify
