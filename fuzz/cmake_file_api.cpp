//===- cmake_file_api.cpp - fuzz target: CMake's File API reply -----------===//
//
// The input is a File API reply folder: its index, then the files in the
// order the reader asks for them (the codemodel-v2 object, each target's
// object, the cmakeFiles-v1 object), separated by lines `--` (FuzzFiles.h).
// parseCMakeReply either fails with an error, or gives a code model whose
// indices R10 may follow without a check: every parent and every target's
// directory is one of its directories.
//
//===----------------------------------------------------------------------===//

#include "FuzzCheck.h"
#include "FuzzFiles.h"
#include "ddpify/CMakeFileApi.h"
#include "llvm/ADT/StringMap.h"
#include <cstddef>
#include <cstdint>

using namespace ddpify;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  llvm::SmallVector<llvm::StringRef, 8> Files = splitFuzzFiles(
      llvm::StringRef(reinterpret_cast<const char *>(Data), Size));
  // Each name the reader asks for is the next file of the input.
  llvm::StringMap<size_t> Named;
  auto Read = [&](llvm::StringRef Name) -> llvm::Expected<std::string> {
    size_t File = Named.try_emplace(Name, Named.size()).first->second;
    if (File >= Files.size())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "cannot read " + Name + ": no such file");
    return Files[File].str();
  };
  llvm::Expected<CMakeCodeModel> Model =
      parseCMakeReply("index-2026-01-01T00-00-00-0000.json", Read);
  if (!Model) {
    FUZZ_CHECK(!llvm::toString(Model.takeError()).empty());
    return 0;
  }
  FUZZ_CHECK(!Model->SourceDir.empty() && Model->SourceDir.front() == '/');
  for (const CMakeDirectory &Directory : Model->Directories)
    FUZZ_CHECK(!Directory.Parent ||
               *Directory.Parent < Model->Directories.size());
  for (const CMakeTarget &Target : Model->Targets) {
    FUZZ_CHECK(!Target.Name.empty() && !Target.Type.empty());
    FUZZ_CHECK(Target.Directory < Model->Directories.size());
    // R10 reads a Torch find's first and last frames without a check.
    for (const std::vector<CMakeFrame> &Find : Target.TorchFinds)
      FUZZ_CHECK(!Find.empty() && Find.front().Command == "find_package");
  }
  return 0;
}
