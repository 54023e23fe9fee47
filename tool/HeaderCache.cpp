//===- HeaderCache.cpp - A precompiled <torch/torch.h> kept between runs --===//

#include "HeaderCache.h"
#include "clang/Basic/Version.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendActions.h"
#include "clang/Frontend/Utils.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

using namespace clang;
using namespace clang::tooling;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral ManifestHeader = "ddpify-pch 1";

std::string hex(uint64_t Value) { return llvm::utohexstr(Value, true, 16); }

/// Every file the header was built from, system headers included (they are
/// the point).
class AllDependencies : public DependencyCollector {
  bool needSystemDependencies() override { return true; }
};

class BuildPchAction : public GeneratePCHAction {
public:
  BuildPchAction(std::string Output,
                 std::shared_ptr<DependencyCollector> Dependencies)
      : Output(std::move(Output)), Dependencies(std::move(Dependencies)) {}

protected:
  bool BeginInvocation(CompilerInstance &Compiler) override {
    Compiler.getFrontendOpts().OutputFile = Output;
    return GeneratePCHAction::BeginInvocation(Compiler);
  }
  std::unique_ptr<ASTConsumer>
  CreateASTConsumer(CompilerInstance &Compiler, llvm::StringRef File) override {
    // The units that use it skip LibTorch's bodies too.
    Compiler.getFrontendOpts().SkipFunctionBodies = true;
    Dependencies->attachToPreprocessor(Compiler.getPreprocessor());
    return GeneratePCHAction::CreateASTConsumer(Compiler, File);
  }

private:
  std::string Output;
  std::shared_ptr<DependencyCollector> Dependencies;
};

class BuildPchFactory : public FrontendActionFactory {
public:
  BuildPchFactory(std::string Output,
                  std::shared_ptr<DependencyCollector> Dependencies)
      : Output(std::move(Output)), Dependencies(std::move(Dependencies)) {}
  std::unique_ptr<FrontendAction> create() override {
    return std::make_unique<BuildPchAction>(Output, Dependencies);
  }

private:
  std::string Output;
  std::shared_ptr<DependencyCollector> Dependencies;
};

std::optional<uint64_t> hashFile(llvm::StringRef Path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> Buffer =
      llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!Buffer)
    return std::nullopt;
  return llvm::xxh3_64bits((*Buffer)->getBuffer());
}

/// Whether every file the manifest lists still has the contents it had.
bool manifestHolds(llvm::StringRef ManifestPath) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> Manifest =
      llvm::MemoryBuffer::getFile(ManifestPath);
  if (!Manifest)
    return false;
  llvm::SmallVector<llvm::StringRef> Lines;
  (*Manifest)->getBuffer().split(Lines, '\n', -1, /*KeepEmpty=*/false);
  if (Lines.empty() || Lines.front() != ManifestHeader)
    return false;
  for (llvm::StringRef Line : llvm::ArrayRef(Lines).drop_front()) {
    auto [Hash, Path] = Line.split(' ');
    std::optional<uint64_t> Now = hashFile(Path);
    if (!Now || hex(*Now) != Hash)
      return false;
  }
  return true;
}

/// Writes Contents to Path through a temporary file and a rename, so another
/// ddpify running at the same time never reads half of it.
bool writeAtomically(llvm::StringRef Path, llvm::StringRef Contents) {
  llvm::SmallString<256> Temp(Path);
  Temp += ".tmp-" + std::to_string(llvm::sys::Process::getProcessId());
  {
    std::error_code EC;
    llvm::raw_fd_ostream OS(Temp, EC);
    if (EC)
      return false;
    OS << Contents;
    OS.close();
    if (OS.has_error()) {
      OS.clear_error();
      llvm::sys::fs::remove(Temp);
      return false;
    }
  }
  if (llvm::sys::fs::rename(Temp, Path)) {
    llvm::sys::fs::remove(Temp);
    return false;
  }
  return true;
}

/// Whether an argument names a path relative to the compile command's
/// folder, which then belongs to the key.
bool hasRelativePath(llvm::ArrayRef<std::string> Arguments) {
  static const char *const PathFlags[] = {
      "-I",       "-isystem",  "-iquote",    "-idirafter", "-include",
      "-imacros", "-isysroot", "--sysroot=", "--sysroot",  "-F"};
  for (size_t I = 1; I < Arguments.size(); ++I) {
    llvm::StringRef Arg = Arguments[I];
    for (llvm::StringRef Flag : PathFlags) {
      if (!Arg.starts_with(Flag))
        continue;
      llvm::StringRef Value = Arg.drop_front(Flag.size());
      if (Value.empty() && I + 1 < Arguments.size())
        Value = Arguments[I + 1];
      if (!Value.empty() && !llvm::sys::path::is_absolute(Value))
        return true;
      break;
    }
  }
  return false;
}

} // namespace

bool startsWithTorchInclude(llvm::StringRef Code) {
  bool InBlockComment = false;
  while (!Code.empty()) {
    auto [Line, Rest] = Code.split('\n');
    Code = Rest;
    Line = Line.trim();
    if (InBlockComment) {
      size_t End = Line.find("*/");
      if (End == llvm::StringRef::npos)
        continue;
      InBlockComment = false;
      Line = Line.drop_front(End + 2).trim();
    }
    if (Line.consume_front("/*")) {
      size_t End = Line.find("*/");
      if (End == llvm::StringRef::npos) {
        InBlockComment = true;
        continue;
      }
      Line = Line.drop_front(End + 2).trim();
    }
    if (Line.empty() || Line.starts_with("//"))
      continue;
    if (!Line.consume_front("#"))
      return false;
    Line = Line.ltrim();
    if (Line.consume_front("pragma") && Line.trim() == "once")
      continue;
    if (!Line.consume_front("include"))
      return false;
    Line = Line.trim();
    if (!Line.starts_with("<"))
      return false;
    if (Line.starts_with("<torch/torch.h>"))
      return true;
  }
  return false;
}

std::vector<std::string> headerArguments(const CompileCommand &Command) {
  std::vector<std::string> Arguments = getClangStripDependencyFileAdjuster()(
      getClangStripOutputAdjuster()(Command.CommandLine, Command.Filename),
      Command.Filename);
  // The source may be spelled relative to the command's folder.
  auto Resolved = [&](llvm::StringRef Path) {
    llvm::SmallString<256> Absolute(Path);
    llvm::sys::fs::make_absolute(Command.Directory, Absolute);
    llvm::sys::path::remove_dots(Absolute, /*remove_dot_dot=*/true);
    return Absolute.str().str();
  };
  std::string Source = Resolved(Command.Filename);
  std::vector<std::string> Kept;
  for (size_t I = 0; I < Arguments.size(); ++I) {
    const std::string &Arg = Arguments[I];
    if (I > 0 &&
        (Arg == "-c" || Arg == "--" ||
         (!llvm::StringRef(Arg).starts_with("-") && Resolved(Arg) == Source)))
      continue;
    Kept.push_back(Arg);
  }
  return Kept;
}

std::string HeaderCache::pchFor(const CompileCommand &Command) {
  std::vector<std::string> Arguments = headerArguments(Command);
  // The folder matters only to relative paths: units of one project built in
  // several folders share the header.
  std::string KeyText = getClangFullVersion() + '\0';
  if (hasRelativePath(Arguments))
    KeyText += Command.Directory;
  for (const std::string &Arg : llvm::ArrayRef(Arguments).drop_front())
    KeyText += '\0' + Arg;
  std::string Key = hex(llvm::xxh3_64bits(KeyText));
  auto Found = Known.find(Key);
  if (Found != Known.end())
    return Found->second;

  llvm::SmallString<256> KeyDir(Dir);
  llvm::sys::path::append(KeyDir, Key);
  llvm::SmallString<256> Pch(KeyDir), Manifest(KeyDir);
  llvm::sys::path::append(Pch, "torch.pch");
  llvm::sys::path::append(Manifest, "manifest");
  std::string Result;
  if (llvm::sys::fs::exists(Pch) && manifestHolds(Manifest)) {
    Result = Pch.str().str();
    Events.push_back("hit " + Key);
  } else {
    Result = build(Command, KeyDir);
    Events.push_back((Result.empty() ? "none " : "built ") + Key);
  }
  Known[Key] = Result;
  return Result;
}

std::string HeaderCache::build(const CompileCommand &Command,
                               llvm::StringRef KeyDir) {
  if (llvm::sys::fs::create_directories(KeyDir))
    return "";
  llvm::SmallString<256> Header(KeyDir), Pch(KeyDir), Manifest(KeyDir);
  llvm::sys::path::append(Header, "torch.hpp");
  llvm::sys::path::append(Pch, "torch.pch");
  llvm::sys::path::append(Manifest, "manifest");
  if (!writeAtomically(Header, "#include <torch/torch.h>\n"))
    return "";

  // FixedCompilationDatabase adds its own argv[0] and the file.
  std::vector<std::string> Arguments = headerArguments(Command);
  Arguments.erase(Arguments.begin());
  // Without timestamps clang checks only sizes; the manifest checks contents.
  Arguments.insert(Arguments.end(),
                   {"-Xclang", "-fno-pch-timestamp", "-xc++-header"});
  FixedCompilationDatabase Database(Command.Directory, Arguments);
  ClangTool Tool(Database, {Header.str().str()},
                 std::make_shared<PCHContainerOperations>(),
                 llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem>(
                     llvm::vfs::createPhysicalFileSystem().release()));
  IgnoringDiagConsumer Quiet; // A unit that cannot use it says why itself.
  Tool.setDiagnosticConsumer(&Quiet);
  Tool.setPrintErrorMessage(false);
  auto Dependencies = std::make_shared<AllDependencies>();
  std::string Temp =
      (Pch + ".tmp-" + std::to_string(llvm::sys::Process::getProcessId()))
          .str();
  BuildPchFactory Factory(Temp, Dependencies);
  if (Tool.run(&Factory) != 0 || !llvm::sys::fs::exists(Temp)) {
    llvm::sys::fs::remove(Temp);
    return "";
  }

  std::string ManifestText = ManifestHeader.str() + "\n";
  for (const std::string &Dependency : Dependencies->getDependencies()) {
    llvm::SmallString<256> Path(Dependency);
    llvm::sys::fs::make_absolute(Command.Directory, Path);
    std::optional<uint64_t> Hash = hashFile(Path);
    if (!Hash) {
      llvm::sys::fs::remove(Temp);
      return "";
    }
    ManifestText += hex(*Hash) + " " + Path.str().str() + "\n";
  }
  // The PCH first: a manifest never vouches for a PCH that is not there.
  if (llvm::sys::fs::rename(Temp, Pch) ||
      !writeAtomically(Manifest, ManifestText)) {
    llvm::sys::fs::remove(Temp);
    return "";
  }
  return Pch.str().str();
}

} // namespace ddpify
