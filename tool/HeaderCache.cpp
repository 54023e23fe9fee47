//===- HeaderCache.cpp - A precompiled <torch/torch.h> kept between runs --===//

#include "HeaderCache.h"
#include "ddpify/AtomicFile.h"
#include "ddpify/MatcherUtil.h"
#include "clang/AST/ASTConsumer.h"
#include "clang/Basic/Version.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendActions.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/Frontend/Utils.h"
#include "clang/Lex/PPCallbacks.h"
#include "clang/Lex/Preprocessor.h"
#include "clang/Serialization/PCHContainerOperations.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"
#include <algorithm>
#include <set>

using namespace clang;
using namespace clang::tooling;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral ManifestHeader = "ddpify-pch 3";

std::string hex(uint64_t Value) { return llvm::utohexstr(Value, true, 16); }

/// Every file the header was built from, system headers included (they are
/// the point); the others are marked, since a project's own header must never
/// be precompiled (its bodies are skipped there).
class AllDependencies : public DependencyCollector {
public:
  std::set<std::string> UserFiles;
  /// Every include as spelled (`c10/core/Device.h`, `vector`): what a
  /// folder left out of the key must not hold (spelledNamesFile).
  std::set<std::string> Spelled;

private:
  bool needSystemDependencies() override { return true; }
  bool sawDependency(llvm::StringRef Filename, bool FromModule, bool IsSystem,
                     bool IsModuleFile, bool IsMissing) override {
    if (!IsSystem)
      UserFiles.insert(Filename.str());
    return DependencyCollector::sawDependency(Filename, FromModule, IsSystem,
                                              IsModuleFile, IsMissing);
  }
};

/// The precompiled header's bytes, kept in memory for ddpify to write itself
/// (AtomicFile.h): Clang's own output stream ends the process when a write
/// fails (a full disk) and could leave half a header behind.
struct PchBytes {
  llvm::SmallVector<char, 0> Data;
  bool Complete = false;
};

/// Clang's "raw" container writer, but into PchBytes. Clang's output file is
/// left empty.
class InMemoryPchWriter : public PCHContainerWriter {
public:
  explicit InMemoryPchWriter(std::shared_ptr<PchBytes> Into)
      : Into(std::move(Into)) {}
  llvm::StringRef getFormat() const override { return "raw"; }
  std::unique_ptr<ASTConsumer> CreatePCHContainerGenerator(
      CompilerInstance &, const std::string &, const std::string &,
      std::unique_ptr<llvm::raw_pwrite_stream>,
      std::shared_ptr<PCHBuffer> Buffer) const override {
    return std::make_unique<Keeper>(Into, std::move(Buffer));
  }

private:
  class Keeper : public ASTConsumer {
  public:
    Keeper(std::shared_ptr<PchBytes> Into, std::shared_ptr<PCHBuffer> Buffer)
        : Into(std::move(Into)), Buffer(std::move(Buffer)) {}
    void HandleTranslationUnit(ASTContext &) override {
      // Complete only when the PCHGenerator before it had no error.
      if (!Buffer->IsComplete)
        return;
      Into->Data = std::move(Buffer->Data);
      Into->Complete = true;
    }

  private:
    std::shared_ptr<PchBytes> Into;
    std::shared_ptr<PCHBuffer> Buffer;
  };
  std::shared_ptr<PchBytes> Into;
};

class BuildPchAction : public GeneratePCHAction {
public:
  BuildPchAction(std::string Output,
                 std::shared_ptr<AllDependencies> Dependencies)
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
    Compiler.getPreprocessor().addPPCallbacks(
        std::make_unique<SpelledIncludes>(*Dependencies));
    return GeneratePCHAction::CreateASTConsumer(Compiler, File);
  }

  class SpelledIncludes : public PPCallbacks {
  public:
    explicit SpelledIncludes(AllDependencies &Into) : Into(Into) {}
    void InclusionDirective(SourceLocation, const Token &,
                            llvm::StringRef FileName, bool, CharSourceRange,
                            OptionalFileEntryRef, llvm::StringRef,
                            llvm::StringRef, const Module *, bool,
                            SrcMgr::CharacteristicKind) override {
      Into.Spelled.insert(FileName.str());
    }

  private:
    AllDependencies &Into;
  };

private:
  std::string Output;
  std::shared_ptr<AllDependencies> Dependencies;
};

class BuildPchFactory : public FrontendActionFactory {
public:
  BuildPchFactory(std::string Output,
                  std::shared_ptr<AllDependencies> Dependencies)
      : Output(std::move(Output)), Dependencies(std::move(Dependencies)) {}
  std::unique_ptr<FrontendAction> create() override {
    return std::make_unique<BuildPchAction>(Output, Dependencies);
  }

private:
  std::string Output;
  std::shared_ptr<AllDependencies> Dependencies;
};

std::optional<uint64_t> hashFile(llvm::StringRef Path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> Buffer =
      llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!Buffer)
    return std::nullopt;
  return llvm::xxh3_64bits((*Buffer)->getBuffer());
}

enum class ManifestState {
  Stale,         ///< Missing, or a file it lists has changed.
  Holds,         ///< Every file it lists has the contents it had.
  ProjectHeader, ///< It holds, and lists one of the project's headers.
  OtherBase,     ///< Built under another base, from files under it.
  Moved,         ///< Holds with a gone base's folder read as Base.
};

/// A manifest as written by HeaderCache::build: its format line, the base
/// folder the header was built under (empty for none), and a line per file
/// the header was built from (`HASH KIND PATH`).
struct ManifestText {
  std::unique_ptr<llvm::MemoryBuffer> Buffer; ///< What the fields point into.
  llvm::StringRef Format;
  std::optional<llvm::StringRef> BuiltBase; ///< None without a `base` line.
  struct File {
    llvm::StringRef Hash, Kind, Path;
  };
  std::vector<File> Files;
};

std::optional<ManifestText> readManifest(llvm::StringRef Path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> Buffer =
      llvm::MemoryBuffer::getFile(Path);
  if (!Buffer)
    return std::nullopt;
  ManifestText Manifest;
  Manifest.Buffer = std::move(*Buffer);
  llvm::SmallVector<llvm::StringRef> Lines;
  Manifest.Buffer->getBuffer().split(Lines, '\n', -1, /*KeepEmpty=*/false);
  if (Lines.size() < 2)
    return std::nullopt;
  Manifest.Format = Lines[0];
  if (Lines[1].starts_with("base"))
    Manifest.BuiltBase = Lines[1].drop_front(4).ltrim();
  for (llvm::StringRef Line : llvm::ArrayRef(Lines).drop_front(2)) {
    auto [Hash, KindAndPath] = Line.split(' ');
    auto [Kind, FilePath] = KindAndPath.split(' ');
    Manifest.Files.push_back({Hash, Kind, FilePath});
  }
  return Manifest;
}

/// Path under From (a checkout's folder) spelled under To (another's).
std::string counterpart(llvm::StringRef Path, llvm::StringRef From,
                        llvm::StringRef To) {
  llvm::SmallString<256> Ours(Path);
  llvm::sys::path::replace_path_prefix(Ours, From, To);
  return Ours.str().str();
}

/// Whether every file the manifest lists still has the contents it had, and
/// whether one of its user (non-system) headers is one of the project's.
/// A header built under a base folder other than Base from files under that
/// folder is shared where each such file's counterpart under Base (the same
/// path below it) has the same contents (a fresh clone of the same commit):
/// while that folder exists, clang reads its files (Holds); once it is gone,
/// through an overlay that reads it as Base (Moved, with BuiltBase set). A
/// counterpart with other contents makes the header another checkout's
/// (OtherBase).
ManifestState manifestState(llvm::StringRef ManifestPath, llvm::StringRef Root,
                            llvm::StringRef Base,
                            std::string *MovedFrom = nullptr) {
  std::optional<ManifestText> Manifest = readManifest(ManifestPath);
  if (!Manifest || Manifest->Format != ManifestHeader || !Manifest->BuiltBase)
    return ManifestState::Stale;
  llvm::StringRef BuiltBase = *Manifest->BuiltBase;
  // The cache's own prefix file may lie anywhere: it is no checkout's.
  auto UnderBuiltBase = [&](const ManifestText::File &File) {
    return File.Kind != "prefix" && isPathUnder(File.Path, BuiltBase);
  };
  bool FromBuiltBase = !BuiltBase.empty() && BuiltBase != Base &&
                       llvm::any_of(Manifest->Files, UnderBuiltBase);
  bool Moved = false;
  if (FromBuiltBase) {
    // Folders inside one another cannot be told apart by an overlay.
    if (Base.empty() || isPathUnder(Base, BuiltBase) ||
        isPathUnder(BuiltBase, Base))
      return ManifestState::OtherBase;
    Moved = !llvm::sys::fs::is_directory(BuiltBase);
    if (!Moved &&
        llvm::any_of(Manifest->Files, [&](const ManifestText::File &File) {
          if (!UnderBuiltBase(File))
            return false;
          std::optional<uint64_t> Ours =
              hashFile(counterpart(File.Path, BuiltBase, Base));
          return !Ours || hex(*Ours) != File.Hash;
        }))
      return ManifestState::OtherBase;
  }
  bool IsProjectHeader = false;
  for (const ManifestText::File &File : Manifest->Files) {
    bool UnderGoneBase = Moved && UnderBuiltBase(File);
    std::string Read = UnderGoneBase ? counterpart(File.Path, BuiltBase, Base)
                                     : File.Path.str();
    std::optional<uint64_t> Now = hashFile(Read);
    if (!Now || hex(*Now) != File.Hash)
      // A gone checkout's files that differ from ours: its header, kept
      // for it (pruneGoneCheckouts), not built over.
      return UnderGoneBase ? ManifestState::OtherBase : ManifestState::Stale;
    IsProjectHeader |= File.Kind == "user" && isPathUnder(Read, Root);
  }
  if (IsProjectHeader)
    return ManifestState::ProjectHeader;
  if (!Moved)
    return ManifestState::Holds;
  if (MovedFrom)
    *MovedFrom = BuiltBase.str();
  return ManifestState::Moved;
}

/// A key of the contents, under Base, of the files that the manifest's entry
/// was built from under its own base folder (another checkout's): the same
/// for every checkout whose copies of them are the same. Empty when the
/// entry names no such file.
std::string contentsKey(llvm::StringRef ManifestPath, llvm::StringRef Base) {
  std::optional<ManifestText> Manifest = readManifest(ManifestPath);
  if (!Manifest || !Manifest->BuiltBase || Base.empty())
    return "";
  llvm::StringRef BuiltBase = *Manifest->BuiltBase;
  if (BuiltBase.empty() || BuiltBase == Base)
    return "";
  std::string Text;
  for (const ManifestText::File &File : Manifest->Files) {
    if (File.Kind == "prefix" || !isPathUnder(File.Path, BuiltBase))
      continue;
    std::optional<uint64_t> Hash =
        hashFile(counterpart(File.Path, BuiltBase, Base));
    Text += File.Path.drop_front(BuiltBase.size()).str() + '\0' +
            (Hash ? hex(*Hash) : "-") + '\n';
  }
  return Text.empty() ? "" : hex(llvm::xxh3_64bits(Text));
}

/// Text with each path under Base (Base itself, or Base followed by a
/// separator) spelled relative to it.
std::string relativeToBase(llvm::StringRef Text, llvm::StringRef Base) {
  if (Base.empty())
    return Text.str();
  std::string Out;
  while (true) {
    size_t At = Text.find(Base);
    if (At == llvm::StringRef::npos)
      break;
    size_t End = At + Base.size();
    bool Whole = End == Text.size() || Text[End] == '/';
    Out += Text.take_front(At);
    Out += Whole ? llvm::StringRef("\x02") : Base;
    Text = Text.drop_front(End);
  }
  return Out + Text.str();
}

/// Writes Contents to Path through a temporary file and a rename, so another
/// ddpify running at the same time never reads half of it and a full disk
/// leaves no half-written entry file a later run would read.
bool writeAtomically(llvm::StringRef Path, llvm::StringRef Contents) {
  if (llvm::Error Err = writeFileAtomically(Path, Contents)) {
    llvm::consumeError(std::move(Err));
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

namespace {

/// Splits off the next directive line of Code (comments and blank lines
/// skipped, line continuations joined); empty when Code holds no more, Other
/// set when the next thing is not a directive.
llvm::StringRef nextDirective(llvm::StringRef &Code, bool &Other) {
  Other = false;
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
    while (Line.consume_front("/*")) {
      size_t End = Line.find("*/");
      if (End == llvm::StringRef::npos) {
        InBlockComment = true;
        Line = "";
        break;
      }
      Line = Line.drop_front(End + 2).trim();
    }
    if (Line.empty() || Line.starts_with("//"))
      continue;
    if (!Line.starts_with("#") || Line.ends_with("\\")) {
      Other = true;
      return "";
    }
    return Line.drop_front().ltrim();
  }
  return "";
}

/// The spelling of an include directive's header (`<h>` or `"h"`); empty
/// when Directive is not an include of a spelled header.
llvm::StringRef includedHeader(llvm::StringRef Directive) {
  if (!Directive.consume_front("include"))
    return "";
  Directive = Directive.ltrim();
  char Close = Directive.starts_with("<") ? '>' : '"';
  if (!Directive.starts_with("<") && !Directive.starts_with("\""))
    return "";
  size_t End = Directive.find(Close, 1);
  if (End == llvm::StringRef::npos)
    return "";
  llvm::StringRef After = Directive.drop_front(End + 1).trim();
  if (!After.empty() && !After.starts_with("//") && !After.starts_with("/*"))
    return "";
  return Directive.take_front(End + 1);
}

bool isLibTorchHeader(llvm::StringRef Spelling) {
  llvm::StringRef Name = Spelling.drop_front().drop_back();
  return Name.starts_with("torch/") || Name.starts_with("ATen/") ||
         Name.starts_with("c10/");
}

/// The folders a quoted include is looked up in after the includer's own
/// (-iquote, then -I), absolute.
std::vector<std::string> quoteSearchPath(const CompileCommand &Command) {
  std::vector<std::string> Quote, Angle;
  const std::vector<std::string> &Args = Command.CommandLine;
  for (size_t I = 1; I < Args.size(); ++I) {
    llvm::StringRef Arg = Args[I];
    for (auto [Flag, List] : {std::pair{llvm::StringRef("-iquote"), &Quote},
                              std::pair{llvm::StringRef("-I"), &Angle}}) {
      if (!Arg.starts_with(Flag))
        continue;
      llvm::StringRef Value = Arg.drop_front(Flag.size());
      if (Value.empty() && I + 1 < Args.size())
        Value = Args[++I];
      llvm::SmallString<256> Absolute(Value);
      llvm::sys::fs::make_absolute(Command.Directory, Absolute);
      List->push_back(Absolute.str().str());
      break;
    }
  }
  Quote.insert(Quote.end(), Angle.begin(), Angle.end());
  return Quote;
}

class PrefixScan {
public:
  PrefixScan(const CompileCommand &Command, llvm::StringRef Root)
      : SearchPath(quoteSearchPath(Command)), Root(Root) {}

  /// Scans File (Code), following the project headers it includes first.
  /// Returns whether the whole of File was include directives.
  bool scan(llvm::StringRef File, llvm::StringRef Code, bool IsHeader,
            unsigned Depth) {
    bool Other = false;
    bool First = true;
    while (true) {
      llvm::StringRef Directive = nextDirective(Code, Other);
      if (Directive.empty())
        return !Other;
      bool WasFirst = First;
      First = false;
      if (Directive.consume_front("pragma") && Directive.trim() == "once")
        continue;
      // A header's include guard defines only its own macro.
      if (IsHeader && WasFirst && Directive.consume_front("ifndef")) {
        llvm::StringRef Guard = Directive.trim();
        bool Defined = false;
        llvm::StringRef Next = nextDirective(Code, Other);
        if (Next.consume_front("define"))
          Defined = Next.trim() == Guard;
        if (!Defined || Guard.empty())
          return false;
        continue;
      }
      if (IsHeader && Directive.starts_with("endif") && Code.trim().empty())
        return true;
      llvm::StringRef Header = includedHeader(Directive);
      if (Header.empty())
        return false;
      if (Header.starts_with("\"")) {
        std::string Found = resolveQuoted(File, Header);
        if (Found.empty())
          return false;
        // A project header is read on, never precompiled; any other goes
        // into the prefix as written (the precompiled header finds it
        // through the same -iquote/-I folders: only the includer's own
        // folder, which is the project's, differs).
        if (isPathUnder(Found, Root)) {
          if (Depth >= 8 || !Visited.insert(Found).second)
            return false;
          llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> Buffer =
              llvm::MemoryBuffer::getFile(Found);
          if (!Buffer || !scan(Found, (*Buffer)->getBuffer(), /*IsHeader=*/true,
                               Depth + 1))
            return false;
          continue;
        }
      }
      Prefix.push_back(Header.str());
    }
  }

  std::vector<std::string> Prefix;

private:
  std::string resolveQuoted(llvm::StringRef Includer, llvm::StringRef Header) {
    llvm::StringRef Name = Header.drop_front().drop_back();
    auto Existing = [&](llvm::StringRef Dir) -> std::string {
      llvm::SmallString<256> Path(Dir);
      llvm::sys::path::append(Path, Name);
      llvm::sys::path::remove_dots(Path, /*remove_dot_dot=*/true);
      return llvm::sys::fs::is_regular_file(Path) ? Path.str().str() : "";
    };
    if (std::string Found = Existing(llvm::sys::path::parent_path(Includer));
        !Found.empty())
      return Found;
    for (const std::string &Dir : SearchPath)
      if (std::string Found = Existing(Dir); !Found.empty())
        return Found;
    return "";
  }

  std::vector<std::string> SearchPath;
  std::string Root;
  std::set<std::string> Visited;
};

} // namespace

std::vector<std::string> precompilablePrefix(llvm::StringRef File,
                                             llvm::StringRef Code,
                                             const CompileCommand &Command,
                                             llvm::StringRef Root) {
  PrefixScan Scan(Command, Root);
  Scan.scan(File, Code, /*IsHeader=*/false, 0);
  std::vector<std::string> &Prefix = Scan.Prefix;
  // Up to the last LibTorch header: what follows it is cheap to parse, and
  // units that differ only there share one precompiled header.
  auto LastTorch = std::find_if(
      Prefix.rbegin(), Prefix.rend(),
      [](const std::string &Header) { return isLibTorchHeader(Header); });
  Prefix.erase(LastTorch.base(), Prefix.end());
  return Prefix;
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

/// A file system overlay, in the entry's folder, that reads the gone folder
/// From (where the header was built) as To, so that clang finds the files
/// the header names; "" when it cannot be written.
static std::string writeOverlay(llvm::StringRef KeyDir, llvm::StringRef From,
                                llvm::StringRef To) {
  llvm::json::Object Remap{
      {"type", "directory-remap"}, {"name", From}, {"external-contents", To}};
  // External names: diagnostics and the matchers see this checkout's paths.
  llvm::json::Object Overlay{{"version", 0},
                             {"use-external-names", true},
                             {"roots", llvm::json::Array{std::move(Remap)}}};
  std::string Text;
  llvm::raw_string_ostream(Text) << llvm::json::Value(std::move(Overlay));
  llvm::SmallString<256> Path(KeyDir);
  llvm::sys::path::append(
      Path,
      "overlay-" +
          hex(llvm::xxh3_64bits((From + llvm::StringRef("\0", 1) + To).str())) +
          ".yaml");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> Existing =
      llvm::MemoryBuffer::getFile(Path);
  if ((Existing && (*Existing)->getBuffer() == Text) ||
      writeAtomically(Path, Text))
    return Path.str().str();
  return "";
}

/// The entry's lock file, touched on each use: when it was last used.
static void markUsed(llvm::StringRef KeyDir) {
  llvm::SmallString<256> Lock(KeyDir);
  llvm::sys::path::append(Lock, "lock");
  int FD = -1;
  if (llvm::sys::fs::openFileForWrite(Lock, FD, llvm::sys::fs::CD_OpenAlways))
    return;
  auto Now = std::chrono::system_clock::now();
  (void)llvm::sys::fs::setLastAccessAndModificationTime(FD, Now, Now);
  llvm::sys::Process::SafelyCloseFileDescriptor(FD);
}

/// Removes the entries that no run used for a week and that name a file this
/// machine no longer has: a deleted clone's, of its exact paths or built from
/// its files, would otherwise stay. An entry of LibTorch's headers only,
/// which any checkout uses, stays.
static void pruneGoneCheckouts(llvm::StringRef Dir) {
  std::error_code EC;
  auto WeekAgo = std::chrono::system_clock::now() - std::chrono::hours(24 * 7);
  for (llvm::sys::fs::directory_iterator It(Dir, EC), End; !EC && It != End;
       It.increment(EC)) {
    llvm::SmallString<256> Manifest(It->path()), Lock(It->path());
    llvm::sys::path::append(Manifest, "manifest");
    llvm::sys::path::append(Lock, "lock");
    llvm::sys::fs::file_status Status;
    if (llvm::sys::fs::status(Lock, Status) ||
        Status.getLastModificationTime() > WeekAgo)
      continue;
    std::optional<ManifestText> Text = readManifest(Manifest);
    if (!Text)
      continue;
    bool Gone = llvm::any_of(Text->Files, [](const ManifestText::File &File) {
      return File.Kind != "prefix" && !llvm::sys::fs::exists(File.Path);
    });
    if (Gone)
      (void)llvm::sys::fs::remove_directories(It->path());
  }
}

/// The arguments that shape a precompiled header, so normalised that the
/// units of a project whose commands differ only where the header cannot
/// see it share one: warning options dropped (they declare nothing, and
/// clang does not check them against a precompiled header), a -D repeated
/// with the same value dropped, and, unless KeepFolders, the project's own
/// include folders (under Root) moved to Dropped: the header is built
/// without them, and is used only where none holds a file that one of its
/// includes names (see shadowsIncludes).
std::vector<std::string> keyArguments(const CompileCommand &Command,
                                      llvm::StringRef Root,
                                      llvm::ArrayRef<std::string> Prefix,
                                      bool KeepFolders,
                                      std::vector<std::string> &Dropped) {
  // A folder that holds a header of the prefix itself is where it is found.
  auto HoldsPrefixHeader = [&](llvm::StringRef Folder) {
    return llvm::any_of(Prefix, [&](const std::string &Header) {
      llvm::SmallString<256> Path(Folder);
      llvm::sys::path::append(Path,
                              llvm::StringRef(Header).drop_front().drop_back());
      return llvm::sys::fs::exists(Path);
    });
  };
  std::vector<std::string> Arguments = headerArguments(Command);
  std::vector<std::string> Kept;
  std::set<std::string> Defined;
  for (size_t I = 0; I < Arguments.size(); ++I) {
    llvm::StringRef Arg = Arguments[I];
    if (I == 0) {
      Kept.push_back(Arg.str());
      continue;
    }
    if (Arg == "-w" || (Arg.starts_with("-W") && !Arg.starts_with("-Wp,")))
      continue;
    // Joined or separate forms of -D, -U, -I and -iquote.
    llvm::StringRef Value;
    llvm::StringRef Flag;
    for (llvm::StringRef Known : {"-D", "-U", "-I", "-iquote"})
      if (Arg.starts_with(Known)) {
        Flag = Known;
        Value = Arg.drop_front(Known.size());
        if (Value.empty() && I + 1 < Arguments.size())
          Value = Arguments[++I];
        break;
      }
    if (Flag.empty()) {
      Kept.push_back(Arg.str());
      continue;
    }
    if (Flag == "-U")
      Defined.clear(); // What it undoes: a -D after it counts again.
    if (Flag == "-D" && !Defined.insert(Value.str()).second)
      continue;
    if ((Flag == "-I" || Flag == "-iquote") && !KeepFolders && !Root.empty()) {
      llvm::SmallString<256> Folder(Value);
      llvm::sys::fs::make_absolute(Command.Directory, Folder);
      llvm::sys::path::remove_dots(Folder, /*remove_dot_dot=*/true);
      if (isPathUnder(Folder, Root) && !HoldsPrefixHeader(Folder)) {
        Dropped.push_back(Folder.str().str());
        continue;
      }
    }
    Kept.push_back((Flag + Value).str());
  }
  return Kept;
}

/// The file of an entry listing the names its includes spell.
constexpr llvm::StringLiteral SpelledNamesFile = "spelled";

/// Whether one of Folders holds a file an include of the header KeyDir
/// holds spells (`Folder/c10/core/Device.h`): with that folder on the
/// include path the header could mean something else. True when the entry
/// does not say.
bool shadowsIncludes(llvm::StringRef KeyDir,
                     llvm::ArrayRef<std::string> Folders) {
  if (Folders.empty())
    return false;
  llvm::SmallString<256> Path(KeyDir);
  llvm::sys::path::append(Path, SpelledNamesFile);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> Names =
      llvm::MemoryBuffer::getFile(Path);
  if (!Names)
    return true;
  llvm::SmallVector<llvm::StringRef> Lines;
  (*Names)->getBuffer().split(Lines, '\n', -1, /*KeepEmpty=*/false);
  for (const std::string &Folder : Folders)
    for (llvm::StringRef Name : Lines) {
      llvm::SmallString<256> Candidate(Folder);
      llvm::sys::path::append(Candidate, Name);
      if (llvm::sys::fs::exists(Candidate))
        return true;
    }
  return false;
}

std::vector<std::string>
HeaderCache::argumentsFor(const CompileCommand &Command,
                          llvm::ArrayRef<std::string> Prefix) {
  std::string Pch = pchFor(Command, Prefix);
  if (Pch.empty())
    return {};
  auto Overlay = Overlays.find(Pch);
  if (Overlay != Overlays.end())
    return {"-ivfsoverlay", Overlay->second, "-include-pch", Pch};
  return {"-include-pch", Pch};
}

std::string HeaderCache::pchFor(const CompileCommand &Command,
                                llvm::ArrayRef<std::string> Prefix) {
  if (Prefix.empty())
    return "";
  std::vector<std::string> Dropped;
  std::string Pch = pchFor(
      Command, keyArguments(Command, Root, Prefix, false, Dropped), Prefix);
  if (Dropped.empty() ||
      (!Pch.empty() &&
       !shadowsIncludes(llvm::sys::path::parent_path(Pch), Dropped)))
    return Pch;
  // A project folder holds a file one of its includes names (or the header
  // could not be built without them): a header of the full command's own.
  Dropped.clear();
  return pchFor(Command, keyArguments(Command, Root, Prefix, true, Dropped),
                Prefix);
}

std::string HeaderCache::pchFor(const CompileCommand &Command,
                                const std::vector<std::string> &Arguments,
                                llvm::ArrayRef<std::string> Prefix) {
  // The folder matters only to relative paths: units of one project built in
  // several folders share the header.
  auto KeyUnder = [&](llvm::StringRef KeyBase) {
    std::string KeyText = getClangFullVersion() + '\0';
    if (hasRelativePath(Arguments))
      KeyText += relativeToBase(Command.Directory, KeyBase);
    for (const std::string &Arg : llvm::ArrayRef(Arguments).drop_front())
      KeyText += '\0' + relativeToBase(Arg, KeyBase);
    KeyText += '\1';
    for (const std::string &Header : Prefix)
      KeyText += '\0' + Header;
    return hex(llvm::xxh3_64bits(KeyText));
  };
  // Under the base first (another checkout may have built it). Where that
  // entry is another checkout's own, from files whose copies here differ,
  // under a key of those copies' contents, which the next clone of this
  // commit shares; failing that, under a key of this folder's exact paths.
  std::string BaseKey = KeyUnder(Base);
  if (std::optional<std::string> Pch =
          pchUnder(BaseKey, Base, Command, Arguments, Prefix))
    return *Pch;
  llvm::SmallString<256> BaseManifest(Dir);
  llvm::sys::path::append(BaseManifest, BaseKey, "manifest");
  if (std::string Contents = contentsKey(BaseManifest, Base); !Contents.empty())
    if (std::optional<std::string> Pch = pchUnder(
            BaseKey + "-" + Contents, Base, Command, Arguments, Prefix))
      return *Pch;
  return pchUnder(KeyUnder("") + "-exact", "", Command, Arguments, Prefix)
      .value_or("");
}

std::optional<std::string>
HeaderCache::pchUnder(llvm::StringRef Key, llvm::StringRef KeyBase,
                      const CompileCommand &Command,
                      const std::vector<std::string> &Arguments,
                      llvm::ArrayRef<std::string> Prefix) {
  auto Found = Known.find(Key);
  if (Found != Known.end())
    return Found->second;

  llvm::SmallString<256> KeyDir(Dir);
  llvm::sys::path::append(KeyDir, Key);
  llvm::SmallString<256> Pch(KeyDir), Manifest(KeyDir);
  llvm::sys::path::append(Pch, "prefix.pch");
  llvm::sys::path::append(Manifest, "manifest");
  std::optional<std::string> Result;
  std::string MovedFrom;
  ManifestState State = manifestState(Manifest, Root, KeyBase, &MovedFrom);
  // Processes sharing the folder (parallel test runs, builds) build a
  // header once: the others wait on the key's lock, then find it built.
  // Bounded, so a stuck builder only costs a second build.
  int LockFD = -1;
  bool Built =
      (State == ManifestState::Holds || State == ManifestState::Moved) &&
      llvm::sys::fs::exists(Pch);
  if (!Built && State != ManifestState::ProjectHeader &&
      State != ManifestState::OtherBase &&
      !llvm::sys::fs::create_directories(KeyDir)) {
    llvm::SmallString<256> LockPath(KeyDir);
    llvm::sys::path::append(LockPath, "lock");
    if (!llvm::sys::fs::openFileForWrite(LockPath, LockFD,
                                         llvm::sys::fs::CD_OpenAlways) &&
        !llvm::sys::fs::tryLockFile(LockFD, std::chrono::minutes(5)))
      State = manifestState(Manifest, Root, KeyBase, &MovedFrom);
  }
  std::string Overlay;
  if (State == ManifestState::Moved && llvm::sys::fs::exists(Pch) &&
      (Overlay = writeOverlay(KeyDir, MovedFrom, KeyBase)).empty())
    State = ManifestState::OtherBase;
  if (State == ManifestState::OtherBase) {
    // Another checkout's: not a hit, not built over.
  } else if (State == ManifestState::Moved && llvm::sys::fs::exists(Pch)) {
    Result = Pch.str().str();
    Overlays[*Result] = Overlay;
    Events.push_back("hit " + Key.str() + " built in " + MovedFrom);
    markUsed(KeyDir);
  } else if (State == ManifestState::Holds && llvm::sys::fs::exists(Pch)) {
    Result = Pch.str().str();
    Events.push_back("hit " + Key.str());
    markUsed(KeyDir);
  } else if (State == ManifestState::ProjectHeader) {
    // Known from an earlier run: not built again.
    Result = "";
    Events.push_back("refused " + Key.str());
  } else {
    FailureReason.clear();
    Result = build(Command, Arguments, Prefix, KeyDir, KeyBase);
    markUsed(KeyDir);
    Events.push_back(
        Result->empty()
            ? "none " + Key.str() +
                  (FailureReason.empty() ? "" : ": " + FailureReason)
            : "built " + Key.str());
  }
  if (LockFD >= 0) {
    llvm::sys::fs::unlockFile(LockFD);
    llvm::sys::Process::SafelyCloseFileDescriptor(LockFD);
  }
  if (Result)
    Known[Key] = *Result;
  return Result;
}

std::string HeaderCache::build(const CompileCommand &Command,
                               std::vector<std::string> Arguments,
                               llvm::ArrayRef<std::string> Prefix,
                               llvm::StringRef KeyDir,
                               llvm::StringRef KeyBase) {
  if (llvm::sys::fs::create_directories(KeyDir))
    return "";
  pruneGoneCheckouts(Dir);
  llvm::SmallString<256> Header(KeyDir), Pch(KeyDir), Manifest(KeyDir);
  llvm::sys::path::append(Header, "prefix.hpp");
  llvm::sys::path::append(Pch, "prefix.pch");
  llvm::sys::path::append(Manifest, "manifest");
  std::string HeaderText;
  for (const std::string &Included : Prefix)
    HeaderText += "#include " + Included + "\n";
  // An entry file that cannot be written (a full disk): no header, the
  // reason in --cache-trace.
  auto writeEntryFile = [&](llvm::StringRef Path, llvm::StringRef Contents) {
    if (llvm::Error Err = writeFileAtomically(Path, Contents)) {
      FailureReason = llvm::toString(std::move(Err));
      return false;
    }
    return true;
  };
  if (!writeEntryFile(Header, HeaderText))
    return "";

  // FixedCompilationDatabase adds its own argv[0] and the file.
  Arguments.erase(Arguments.begin());
  // Without timestamps clang checks only sizes; the manifest checks contents.
  Arguments.insert(Arguments.end(),
                   {"-Xclang", "-fno-pch-timestamp", "-xc++-header"});
  FixedCompilationDatabase Database(Command.Directory, Arguments);
  auto Bytes = std::make_shared<PchBytes>();
  auto ContainerOperations = std::make_shared<PCHContainerOperations>();
  ContainerOperations->registerWriter(
      std::make_unique<InMemoryPchWriter>(Bytes));
  ClangTool Tool(Database, {Header.str().str()}, ContainerOperations,
                 llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem>(
                     llvm::vfs::createPhysicalFileSystem().release()));
  // A unit that cannot use it says why itself; --cache-trace shows why the
  // header was not built.
  std::string Diagnostics;
  llvm::raw_string_ostream DiagnosticsStream(Diagnostics);
  auto DiagOptions = llvm::makeIntrusiveRefCnt<DiagnosticOptions>();
  TextDiagnosticPrinter Printer(DiagnosticsStream, DiagOptions.get());
  Tool.setDiagnosticConsumer(&Printer);
  Tool.setPrintErrorMessage(false);
  auto Dependencies = std::make_shared<AllDependencies>();
  // Clang's output file, left empty (InMemoryPchWriter): removed whatever
  // happens, on a signal too.
  std::string ClangOutput =
      (Pch + ".tmp-" + std::to_string(llvm::sys::Process::getProcessId()))
          .str();
  llvm::sys::RemoveFileOnSignal(ClangOutput);
  auto RemoveClangOutput = llvm::make_scope_exit([&] {
    llvm::sys::fs::remove(ClangOutput);
    llvm::sys::DontRemoveFileOnSignal(ClangOutput);
  });
  BuildPchFactory Factory(ClangOutput, Dependencies);
  if (Tool.run(&Factory) != 0 || !Bytes->Complete) {
    llvm::StringRef FirstError = Diagnostics;
    size_t At = FirstError.find("error: ");
    FailureReason = At == llvm::StringRef::npos
                        ? "it does not compile"
                        : FirstError.drop_front(At).split('\n').first.str();
    return "";
  }

  // Real paths: `..` after a symlink (merged /usr: /lib/gcc/.../../include)
  // cannot be removed by hand.
  auto Absolute = [&](llvm::StringRef Dependency) {
    llvm::SmallString<256> Path(Dependency), Real;
    llvm::sys::fs::make_absolute(Command.Directory, Path);
    if (!llvm::sys::fs::real_path(Path, Real))
      return Real.str().str();
    return Path.str().str();
  };
  // LibTorch unpacked into the project and found with -I is no project code:
  // its include folders are the ones holding its marker headers.
  std::vector<std::string> LibTorchDirs;
  for (const std::string &Dependency : Dependencies->getDependencies()) {
    std::string Path = Absolute(Dependency);
    for (llvm::StringRef Marker :
         {"/c10/macros/Macros.h", "/torch/torch.h", "/ATen/ATen.h"})
      if (llvm::StringRef(Path).ends_with(Marker))
        LibTorchDirs.push_back(Path.substr(0, Path.size() - Marker.size()));
  }
  std::string HeaderPath = Absolute(Header);
  std::string ManifestText =
      ManifestHeader.str() + "\nbase " + KeyBase.str() + "\n";
  bool ProjectHeader = false;
  for (const std::string &Dependency : Dependencies->getDependencies()) {
    std::string Path = Absolute(Dependency);
    llvm::StringRef Kind = "system";
    if (Path == HeaderPath)
      Kind = "prefix";
    else if (Dependencies->UserFiles.count(Dependency))
      Kind = llvm::any_of(
                 LibTorchDirs,
                 [&](const std::string &Dir) { return isPathUnder(Path, Dir); })
                 ? "libtorch"
                 : "user";
    std::optional<uint64_t> Hash = hashFile(Path);
    if (!Hash) {
      FailureReason = "cannot read '" + Path + "'";
      return "";
    }
    ProjectHeader |= Kind == "user" && isPathUnder(Path, Root);
    ManifestText += hex(*Hash) + " " + Kind.str() + " " + Path + "\n";
  }
  // A project header reached through an angle include: the unit parses
  // without a precompiled header (its bodies would be skipped there); the
  // manifest remembers that until one of those files changes.
  if (ProjectHeader) {
    writeEntryFile(Manifest, ManifestText);
    return "";
  }
  std::string Spelled;
  for (const std::string &Name : Dependencies->Spelled)
    Spelled += Name + "\n";
  llvm::SmallString<256> SpelledPath(KeyDir);
  llvm::sys::path::append(SpelledPath, SpelledNamesFile);
  // The PCH first: a manifest never vouches for a PCH that is not there.
  llvm::Expected<PendingFile> PchFile = writePending(
      Pch, llvm::StringRef(Bytes->Data.data(), Bytes->Data.size()));
  if (!PchFile) {
    FailureReason = llvm::toString(PchFile.takeError());
    return "";
  }
  if (!writeEntryFile(SpelledPath, Spelled)) {
    discard(*PchFile);
    return "";
  }
  if (llvm::Error Err = commit(*PchFile)) {
    FailureReason = llvm::toString(std::move(Err));
    return "";
  }
  if (!writeEntryFile(Manifest, ManifestText))
    return "";
  return Pch.str().str();
}

} // namespace ddpify
