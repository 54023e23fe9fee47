//===- compile_commands.cpp - fuzz target: a database's argument lists ----===//
//
// The input is a compile_commands.json, then response files /fuzz/1.rsp,
// /fuzz/2.rsp, ... that its commands may name with @ (FuzzFiles.h). It is
// loaded as ddpify loads one (response files expanded, headers given their
// closest unit's command), and each command goes through what ddpify does to
// it before a parse (CompileCommands.h) and what its header cache reads of it
// (HeaderCache.h). None of it may crash, and the compiler stays first.
//
//===----------------------------------------------------------------------===//

#include "CompileCommands.h"
#include "CompilerIncludes.h"
#include "FuzzCheck.h"
#include "FuzzFiles.h"
#include "HeaderCache.h"
#include "clang/Driver/Options.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/JSONCompilationDatabase.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/VirtualFileSystem.h"
#include <cstddef>
#include <cstdint>

using namespace clang::tooling;
using namespace ddpify;

namespace {

constexpr llvm::StringLiteral Root = "/fuzz/project";
// A unit's start as the header cache reads it: LibTorch, then a project
// header looked up through the command's -iquote and -I folders.
constexpr llvm::StringLiteral UnitCode =
    "#include <torch/torch.h>\n#include \"model.h\"\nint main() {}\n";

void readAsTheHeaderCacheDoes(const CompileCommand &Command) {
  std::vector<std::string> Prefix =
      precompilablePrefix(Command.Filename, UnitCode, Command, Root);
  std::vector<std::string> Arguments = headerArguments(Command);
  FUZZ_CHECK(Arguments.size() <= Command.CommandLine.size());
  std::vector<std::string> Dropped;
  keyArguments(Command, Root, Prefix, /*KeepFolders=*/false, Dropped);
  keyArguments(Command, Root, Prefix, /*KeepFolders=*/true, Dropped);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  llvm::SmallVector<llvm::StringRef, 8> Files = splitFuzzFiles(
      llvm::StringRef(reinterpret_cast<const char *>(Data), Size));
  std::string Error;
  std::unique_ptr<CompilationDatabase> Json =
      JSONCompilationDatabase::loadFromBuffer(Files.front(), Error,
                                              JSONCommandLineSyntax::Gnu);
  if (!Json) {
    FUZZ_CHECK(!Error.empty());
    return 0;
  }
  auto FS = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
  for (size_t I = 1; I < Files.size(); ++I)
    FS->addFile("/fuzz/" + std::to_string(I) + ".rsp", 0,
                llvm::MemoryBuffer::getMemBufferCopy(Files[I]));
  std::unique_ptr<CompilationDatabase> Database =
      inferMissingCompileCommands(expandResponseFiles(std::move(Json), FS));

  const CommandAdditions Additions{
      {"-DBEFORE"}, {"-std=c++17"}, "/fuzz/resource", "/fuzz/runtime/include"};
  std::set<std::string> Dropped;
  std::vector<std::string> Units = Database->getAllFiles();
  // A header of the project gets the command of its closest unit.
  Units.push_back(std::string(Root) + "/model.h");
  for (const std::string &Unit : Units) {
    std::vector<CompileCommand> Commands = Database->getCompileCommands(Unit);
    // As the pipeline's buildCommands: a command without a compiler is
    // left out, every other one gets ddpify's additions.
    llvm::erase_if(Commands, [](const CompileCommand &Command) {
      return !namesCompiler(Command);
    });
    for (CompileCommand &Command : Commands) {
      std::string Compiler = Command.CommandLine.front();
      Command.CommandLine = argumentsForParse(Command, Additions, Dropped);
      FUZZ_CHECK(Command.CommandLine.front() == Compiler);
      usesCxx20OrLater(Command.CommandLine);
      isGccLikeCompiler(Command.CommandLine.front());
      driverArguments(Command.CommandLine)
          .getAllArgValues(clang::driver::options::OPT_ivfsoverlay);
      readAsTheHeaderCacheDoes(Command);
    }
    std::string From, To;
    std::vector<CompileCommand> Retry = atCxx20(Commands, From, To);
    FUZZ_CHECK(Retry.empty() || Retry.size() == Commands.size());
    for (const CompileCommand &Command : Retry)
      FUZZ_CHECK(usesCxx20OrLater(Command.CommandLine));
  }
  return 0;
}
