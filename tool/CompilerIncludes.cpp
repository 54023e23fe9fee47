//===- CompilerIncludes.cpp - the database compiler's include folders -----===//

#include "CompilerIncludes.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include <map>
#include <mutex>
#include <optional>

namespace ddpify {

bool isGccLikeCompiler(llvm::StringRef Compiler) {
  llvm::StringRef Name = llvm::sys::path::filename(Compiler);
  if (Name.contains("clang"))
    return false;
  // A version or target affix around the driver's name.
  return Name.contains("g++") || Name.contains("gcc") || Name == "c++" ||
         Name == "cc" || Name.ends_with("-c++") || Name.ends_with("-cc");
}

namespace {

std::vector<std::string> ask(llvm::StringRef Compiler) {
  std::string Program = Compiler.str();
  if (!llvm::sys::path::is_absolute(Program)) {
    llvm::ErrorOr<std::string> Found = llvm::sys::findProgramByName(Program);
    if (!Found)
      return {};
    Program = *Found;
  }
  llvm::SmallString<128> Listing;
  if (llvm::sys::fs::createTemporaryFile("ddpify-includes", "txt", Listing))
    return {};
  llvm::StringRef Args[] = {Program, "-x", "c++", "-E", "-v", "-"};
  // Empty stdin and stdout; the search list goes to stderr.
  std::optional<llvm::StringRef> Redirects[] = {
      llvm::StringRef(""), llvm::StringRef(""), llvm::StringRef(Listing)};
  int Status = llvm::sys::ExecuteAndWait(Program, Args, std::nullopt, Redirects,
                                         /*SecondsToWait=*/30);
  auto Text = llvm::MemoryBuffer::getFile(Listing);
  llvm::sys::fs::remove(Listing);
  if (Status != 0 || !Text)
    return {};
  std::vector<std::string> Folders;
  bool InList = false;
  llvm::SmallVector<llvm::StringRef, 32> Lines;
  (*Text)->getBuffer().split(Lines, '\n');
  for (llvm::StringRef Line : Lines) {
    if (Line.starts_with("#include <...> search starts here:")) {
      InList = true;
      continue;
    }
    if (Line.starts_with("End of search list."))
      break;
    if (!InList)
      continue;
    llvm::StringRef Folder = Line.trim();
    // Darwin's framework folders are marked; none on Linux.
    Folder.consume_back(" (framework directory)");
    if (!Folder.empty() && llvm::sys::fs::is_directory(Folder)) {
      llvm::SmallString<256> Real;
      Folders.push_back(llvm::sys::fs::real_path(Folder, Real)
                            ? Folder.str()
                            : Real.str().str());
    }
  }
  return Folders;
}

} // namespace

std::vector<std::string> compilerIncludeFolders(llvm::StringRef Compiler) {
  static std::mutex Lock;
  static std::map<std::string, std::vector<std::string>> Known;
  std::lock_guard<std::mutex> Guard(Lock);
  auto Found = Known.find(Compiler.str());
  if (Found == Known.end())
    Found = Known.emplace(Compiler.str(), ask(Compiler)).first;
  return Found->second;
}

std::vector<std::string> addCompilerIncludeFolders(
    std::vector<clang::tooling::CompileCommand> &Commands) {
  std::vector<std::string> Folders;
  for (clang::tooling::CompileCommand &Command : Commands) {
    if (Command.CommandLine.empty() ||
        !isGccLikeCompiler(Command.CommandLine.front()))
      continue;
    std::vector<std::string> Added;
    for (const std::string &Folder :
         compilerIncludeFolders(Command.CommandLine.front())) {
      Added.push_back("-idirafter");
      Added.push_back(Folder);
      if (!llvm::is_contained(Folders, Folder))
        Folders.push_back(Folder);
    }
    Command.CommandLine = clang::tooling::getInsertArgumentAdjuster(
        Added, clang::tooling::ArgumentInsertPosition::END)(Command.CommandLine,
                                                            Command.Filename);
  }
  return Folders;
}

} // namespace ddpify
