//===- Pipeline.cpp - compilation database -> Findings -> edits -----------===//

#include "Pipeline.h"
#include "CompileCommands.h"
#include "CompilerIncludes.h"
#include "HeaderCache.h"
#include "Report.h"
#include "ddpify/EditSet.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTConsumer.h"
#include "clang/AST/ASTContext.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/DiagnosticOptions.h"
#include "clang/Driver/Driver.h"
#include "clang/Driver/Options.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendAction.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/CompilationDatabase.h"
#include "clang/Tooling/JSONCompilationDatabase.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Option/ArgList.h"
#include "llvm/Option/OptTable.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <mutex>
#include <optional>
#include <set>

using namespace clang;
using namespace clang::tooling;

namespace ddpify {
namespace {

/// Prints compiler errors (and their notes) the way clang does, but not
/// warnings: ddpify reports on the program, it does not compile it.
class ErrorPrinter : public TextDiagnosticPrinter {
public:
  ErrorPrinter(llvm::raw_ostream &OS, DiagnosticOptions *Options)
      : TextDiagnosticPrinter(OS, Options) {}

  void HandleDiagnostic(DiagnosticsEngine::Level Level,
                        const Diagnostic &Info) override {
    // Lexer, parser and Sema errors are the code's; the others (driver,
    // frontend, reading a precompiled header) may be the header cache's.
    if (Level >= DiagnosticsEngine::Error &&
        Info.getID() < diag::DIAG_START_LEX)
      NotTheCode = true;
    if (Level == DiagnosticsEngine::Note ? LastWasShown
                                         : Level >= DiagnosticsEngine::Error) {
      LastWasShown = true;
      TextDiagnosticPrinter::HandleDiagnostic(Level, Info);
      return;
    }
    if (Level != DiagnosticsEngine::Note)
      LastWasShown = false;
    // Still counted, so a failed parse is seen as one.
    DiagnosticConsumer::HandleDiagnostic(Level, Info);
  }

  /// Whether an error came from anything but the code itself.
  bool notTheCode() const { return NotTheCode; }

private:
  bool LastWasShown = false;
  bool NotTheCode = false;
};

/// Runs the matchers over the user's code only: declarations in system
/// headers (all of LibTorch and the standard library) are left out of the
/// traversal and of the parent map, which would otherwise cost about as much
/// as the parse. Function bodies outside the project root are not even
/// parsed: no matcher looks at them, and they are most of LibTorch's parse.
class UserCodeConsumer : public ASTConsumer {
public:
  UserCodeConsumer(std::unique_ptr<ASTConsumer> Matchers, llvm::StringRef Root)
      : Matchers(std::move(Matchers)), Root(Root) {}

  void Initialize(ASTContext &Context) override {
    this->Context = &Context;
    Matchers->Initialize(Context);
  }

  bool shouldSkipFunctionBody(Decl *D) override {
    const SourceManager &SM = Context->getSourceManager();
    SourceLocation Location = SM.getExpansionLoc(D->getLocation());
    if (Location.isInvalid())
      return false;
    if (SM.isInSystemHeader(Location))
      return true;
    FileID File = SM.getFileID(Location);
    auto Known = OutsideRoot.find(File);
    if (Known != OutsideRoot.end())
      return Known->second;
    bool Outside = false;
    if (OptionalFileEntryRef Entry = SM.getFileEntryRefForID(File)) {
      llvm::SmallString<256> Real;
      Outside = !SM.getFileManager().getVirtualFileSystem().getRealPath(
                    Entry->getName(), Real) &&
                !isPathUnder(Real, Root);
    }
    OutsideRoot[File] = Outside;
    return Outside;
  }

  void HandleTranslationUnit(ASTContext &Context) override {
    // A unit with errors is not matched at all: its AST holds recovery
    // nodes (invalid declarations, expressions without a type) that no
    // matcher is written for, and nothing is written for it anyway.
    if (Context.getDiagnostics().hasErrorOccurred())
      return;
    const SourceManager &SM = Context.getSourceManager();
    std::vector<Decl *> Scope;
    // noload: what a precompiled header holds is LibTorch, never loaded.
    for (Decl *D : Context.getTranslationUnitDecl()->noload_decls()) {
      SourceLocation Location = SM.getExpansionLoc(D->getLocation());
      if (Location.isValid() && SM.isInSystemHeader(Location))
        continue;
      Scope.push_back(D);
    }
    Context.setTraversalScope(Scope);
    Matchers->HandleTranslationUnit(Context);
  }

private:
  std::unique_ptr<ASTConsumer> Matchers;
  std::string Root;
  ASTContext *Context = nullptr;
  llvm::DenseMap<FileID, bool> OutsideRoot;
};

class MatchUserCodeAction : public ASTFrontendAction {
public:
  MatchUserCodeAction(ast_matchers::MatchFinder &Finder, llvm::StringRef Root,
                      llvm::raw_ostream &Messages)
      : Finder(Finder), Root(Root), Messages(Messages) {}

  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance &Compiler,
                                                 llvm::StringRef) override {
    // Read by ExecuteAction, after this: the consumer decides which bodies.
    Compiler.getFrontendOpts().SkipFunctionBodies = true;
    // "2 errors generated." goes with the unit's errors, not straight to
    // stderr (units run on several threads, and some are parsed again).
    Compiler.setVerboseOutputStream(Messages);
    return std::make_unique<UserCodeConsumer>(Finder.newASTConsumer(), Root);
  }

private:
  ast_matchers::MatchFinder &Finder;
  std::string Root;
  llvm::raw_ostream &Messages;
};

class MatchUserCodeFactory : public FrontendActionFactory {
public:
  MatchUserCodeFactory(ast_matchers::MatchFinder &Finder, llvm::StringRef Root,
                       llvm::raw_ostream &Messages)
      : Finder(Finder), Root(Root), Messages(Messages) {}
  std::unique_ptr<FrontendAction> create() override {
    return std::make_unique<MatchUserCodeAction>(Finder, Root, Messages);
  }

private:
  ast_matchers::MatchFinder &Finder;
  std::string Root;
  llvm::raw_ostream &Messages;
};

std::string absoluteRealPath(llvm::StringRef Path) {
  llvm::SmallString<256> Real;
  if (llvm::sys::fs::real_path(Path, Real))
    return "";
  return Real.str().str();
}

std::unique_ptr<CompilationDatabase>
loadCompilationDatabase(const ToolOptions &Options, llvm::StringRef FirstSource,
                        std::string &Error) {
  if (Options.HasFixedArgs) {
    llvm::SmallString<256> Cwd;
    llvm::sys::fs::current_path(Cwd);
    return std::make_unique<FixedCompilationDatabase>(Cwd, Options.FixedArgs);
  }
  std::unique_ptr<CompilationDatabase> Database;
  if (!Options.BuildPath.empty()) {
    llvm::StringRef Dir = Options.BuildPath;
    if (llvm::sys::path::filename(Dir) == "compile_commands.json")
      Dir = llvm::sys::path::parent_path(Dir);
    std::string LoadError;
    Database = CompilationDatabase::loadFromDirectory(Dir, LoadError);
    if (!Database) {
      Error = "cannot load a compilation database from '" + Options.BuildPath +
              "': " + LoadError;
      return nullptr;
    }
  } else {
    std::string LoadError;
    Database =
        CompilationDatabase::autoDetectFromSource(FirstSource, LoadError);
    if (!Database) {
      Error = "no compilation database found for '" + FirstSource.str() +
              "' (no compile_commands.json in its folder or above); pass -p "
              "<build-path>, or the compiler arguments after `--`";
      return nullptr;
    }
  }
  // Headers and new files get the command of their closest sibling.
  return inferMissingCompileCommands(
      expandResponseFiles(std::move(Database), llvm::vfs::getRealFileSystem()));
}

/// Whether the units' program facts (Finding::Provides) show a main and
/// nothing that trains.
bool trainsNothing(const FindingList &Findings) {
  bool HasMain = false, Trains = false;
  for (const Finding &F : Findings) {
    HasMain |= F.Provides == "program:main";
    Trains |= F.Provides == "program:trains";
  }
  return HasMain && !Trains;
}

/// Hands ClangTool the commands fetched up front: compilation databases are
/// not safe to share between the worker threads.
class PrefetchedDatabase : public CompilationDatabase {
public:
  PrefetchedDatabase(llvm::StringRef File, std::vector<CompileCommand> Commands)
      : File(File), Commands(std::move(Commands)) {}
  std::vector<CompileCommand>
  getCompileCommands(llvm::StringRef FilePath) const override {
    if (FilePath == File)
      return Commands;
    return {};
  }
  std::vector<std::string> getAllFiles() const override { return {File}; }

private:
  std::string File;
  std::vector<CompileCommand> Commands;
};

/// What parsing one translation unit produced; merged in source order.
struct UnitResult {
  FindingList Findings;
  std::string Errors; ///< Compiler errors and ddpify's own, as printed.
  bool Failed = false;
  /// Failed on errors in the code alone (none from the driver, the frontend
  /// or a precompiled header): a parse without the header cache fails too.
  bool CodeErrorsOnly = false;
};

/// The file system a unit is parsed on: a physical one of its own (the real
/// one shares the process's working directory, which ClangTool changes to
/// the command's, so units on other threads would resolve relative paths
/// against the wrong folder), under the command's `-ivfsoverlay` files, which
/// ClangTool does not apply itself (its file manager is made before it reads
/// the command): a user's overlays and the header cache's (HeaderCache.h).
/// Null, with Error set, where an overlay cannot be read.
llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem>
unitFileSystem(const std::vector<std::string> &CommandLine,
               llvm::StringRef Directory, std::string &Error) {
  llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> FS(
      llvm::vfs::createPhysicalFileSystem().release());
  for (const std::string &Spelled :
       driverArguments(CommandLine)
           .getAllArgValues(driver::options::OPT_ivfsoverlay)) {
    // Relative to the command's folder, where the compiler runs.
    llvm::SmallString<256> Overlay(Spelled);
    llvm::sys::fs::make_absolute(Directory, Overlay);
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> Buffer =
        FS->getBufferForFile(Overlay);
    if (Buffer)
      FS = llvm::vfs::getVFSFromYAML(std::move(*Buffer), nullptr, Overlay,
                                     nullptr, FS);
    if (!Buffer || !FS) {
      Error = "cannot read the file system overlay '" + Spelled + "'";
      return nullptr;
    }
  }
  return FS;
}

/// Parses one translation unit with its own MatchFinder and matcher modules,
/// so units can run on several threads.
UnitResult parseUnit(const ToolOptions &Options, llvm::StringRef Root,
                     const std::string &Source, llvm::StringRef ShownName,
                     std::vector<CompileCommand> Commands) {
  UnitResult Unit;
  llvm::raw_string_ostream Errors(Unit.Errors);
  if (Commands.empty()) {
    Errors << "ddpify: error: no compile command for '" << Source
           << "' in the compilation database\n";
    Unit.Failed = true;
    return Unit;
  }
  std::vector<std::string> Arguments = Commands.front().CommandLine;

  clang::ast_matchers::MatchFinder Finder;
  std::vector<std::unique_ptr<MatcherModule>> Modules =
      createMatcherModules(Unit.Findings, Root, Options.OptInRules);
  for (auto &Module : Modules)
    Module->registerMatchers(Finder);
  MatchUserCodeFactory Factory(Finder, Root, Errors);

  llvm::IntrusiveRefCntPtr<DiagnosticOptions> DiagOptions =
      new DiagnosticOptions();
  DiagOptions->ShowColors = false;
  ErrorPrinter Diagnostics(Errors, DiagOptions.get());

  std::string FileSystemError;
  llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> FileSystem =
      unitFileSystem(Arguments, Commands.front().Directory, FileSystemError);
  if (!FileSystem) {
    Errors << "ddpify: error: '" << ShownName << "': " << FileSystemError
           << "\n";
    Unit.Failed = true;
    return Unit;
  }
  PrefetchedDatabase Database(Source, std::move(Commands));
  ClangTool Tool(Database, {Source}, std::make_shared<PCHContainerOperations>(),
                 FileSystem);
  Tool.setDiagnosticConsumer(&Diagnostics);
  Tool.setPrintErrorMessage(false); // ddpify says so below.
  if (Tool.run(&Factory) == 0)
    return Unit;

  Unit.Failed = true;
  Unit.CodeErrorsOnly =
      Diagnostics.getNumErrors() > 0 && !Diagnostics.notTheCode();
  Errors << "ddpify: error: '" << ShownName << "' does not parse\n";
  Arguments.insert(Arguments.end(), Options.ExtraArgs.begin(),
                   Options.ExtraArgs.end());
  if (usesCxx20OrLater(Arguments))
    Errors << "ddpify: note: it is compiled as C++20 or later, and "
              "Clang cannot parse LibTorch 1.13's headers in that "
              "mode; try --extra-arg=-std=c++17\n";
  return Unit;
}

/// `[12/32] src/train.cpp` on one line of a terminal, rewritten in place;
/// nothing at all when stderr is not a terminal.
class Progress {
public:
  Progress(size_t Total, bool Enabled) : Total(Total), Enabled(Enabled) {}

  void start(llvm::StringRef Name) {
    if (!Enabled)
      return;
    std::lock_guard<std::mutex> Lock(Mutex);
    Current = Name.str();
    draw();
  }
  void finish() {
    if (!Enabled)
      return;
    std::lock_guard<std::mutex> Lock(Mutex);
    ++Done;
    draw();
  }
  void clear() {
    if (Enabled)
      llvm::errs() << "\r\x1b[K";
  }

private:
  void draw() {
    llvm::errs() << "\r\x1b[K[" << Done << "/" << Total << "] " << Current;
  }

  size_t Total;
  bool Enabled;
  size_t Done = 0;
  std::string Current;
  std::mutex Mutex;
};

/// The folder of the compilation database: -p, else the compile_commands.json
/// found in the first source's folder or above (through a symlink, its
/// target's folder); empty with `--` and no -p, or when there is none.
std::string compilationDatabaseFolder(const ToolOptions &Options,
                                      llvm::StringRef FirstSource) {
  llvm::SmallString<256> Json;
  if (!Options.BuildPath.empty()) {
    Json = Options.BuildPath;
    if (llvm::sys::path::filename(Json) != "compile_commands.json")
      llvm::sys::path::append(Json, "compile_commands.json");
  } else if (!Options.HasFixedArgs) {
    for (llvm::StringRef Dir = llvm::sys::path::parent_path(FirstSource);
         !Dir.empty(); Dir = llvm::sys::path::parent_path(Dir)) {
      llvm::SmallString<256> Candidate(Dir);
      llvm::sys::path::append(Candidate, "compile_commands.json");
      if (llvm::sys::fs::exists(Candidate)) {
        Json = Candidate;
        break;
      }
    }
  }
  if (Json.empty())
    return "";
  if (std::string Real = absoluteRealPath(Json); !Real.empty())
    return llvm::sys::path::parent_path(Real).str();
  // -p with `--`: the folder need not hold a database.
  return absoluteRealPath(llvm::sys::path::parent_path(Json));
}

/// Where the header cache lives: --cache-dir, else $DDPIFY_CACHE_DIR, else
/// the user's cache folder (`$XDG_CACHE_HOME/ddpify`, else
/// `~/.cache/ddpify`), never inside the project's own tree; empty for none.
/// One folder serves every project and run: an entry's key holds the
/// compiler arguments and the headers it was built from.
std::string cacheDirectory(const ToolOptions &Options, llvm::StringRef Root) {
  if (Options.NoCache)
    return "";
  if (!Options.CacheDir.empty())
    return Options.CacheDir;
  // Set but empty turns the cache off, as --no-cache does.
  if (std::optional<std::string> FromEnv =
          llvm::sys::Process::GetEnv("DDPIFY_CACHE_DIR"))
    return *FromEnv;
  llvm::SmallString<256> Cache;
  if (!llvm::sys::path::cache_directory(Cache) || Cache.empty())
    return "";
  llvm::sys::path::append(Cache, "ddpify");
  std::string Real = absoluteRealPath(Cache);
  if (isPathUnder(Real.empty() ? Cache.str() : llvm::StringRef(Real), Root))
    return "";
  return Cache.str().str();
}

/// One run of the pipeline, in the order runPipeline() takes its steps.
/// Each step returns ExitOk to go on, or the exit status it ends the run
/// with (its error already printed).
class PipelineRun {
public:
  PipelineRun(const ToolOptions &Options, PipelineResult &Result)
      : Options(Options), Result(Result) {}

  /// The sources the user named, as real paths, and the project root.
  int resolveSourcesAndRoot() {
    for (const std::string &Source : Options.Sources) {
      std::string Real = absoluteRealPath(Source);
      if (Real.empty() || !llvm::sys::fs::is_regular_file(Real)) {
        llvm::errs() << "ddpify: error: no such source file '" << Source
                     << "'\n";
        return ExitError;
      }
      Sources.push_back(Real);
      Shown.push_back(Source);
    }
    if (Options.Root.empty()) {
      // The whole codebase: the git top-level of the current folder.
      llvm::SmallString<256> Here;
      llvm::sys::fs::current_path(Here);
      std::string Cwd = absoluteRealPath(Here);
      Result.Root = defaultProjectRoot(
          Sources.empty() ? (Cwd.empty() ? Here.str().str() : Cwd) + "/-"
                          : Sources.front());
    } else {
      Result.Root = absoluteRealPath(Options.Root);
      if (Result.Root.empty() || !llvm::sys::fs::is_directory(Result.Root)) {
        llvm::errs() << "ddpify: error: --root '" << Options.Root
                     << "' is not a directory\n";
        return ExitError;
      }
    }
    for (size_t I = 0; I < Sources.size(); ++I)
      if (!isPathUnder(Sources[I], Result.Root)) {
        llvm::errs() << "ddpify: error: source '" << Options.Sources[I]
                     << "' is outside the project root '" << Result.Root
                     << "'; nothing outside the root is rewritten (see "
                        "--root)\n";
        return ExitError;
      }
    return ExitOk;
  }

  int loadDatabase() {
    std::string Error;
    Database = loadCompilationDatabase(
        Options, Sources.empty() ? "" : Sources.front(), Error);
    if (!Database) {
      llvm::errs() << "ddpify: error: " << Error << "\n";
      return ExitError;
    }
    return ExitOk;
  }

  /// The translation units to process: those named, or every C++ unit of
  /// the database under the root; less those --exclude names.
  int selectUnits() {
    if (Options.Sources.empty())
      selectWholeCodebase();
    else if (!Options.Excludes.empty())
      for (size_t I = Sources.size(); I-- > 0;)
        if (excluded(Sources[I])) {
          Sources.erase(Sources.begin() + I);
          Shown.erase(Shown.begin() + I);
        }
    if (Sources.empty()) {
      llvm::errs() << "ddpify: error: no translation unit to process";
      if (Options.Sources.empty())
        llvm::errs() << ": none of the compilation database's is a C++ "
                        "source under the root '"
                     << Result.Root << "'";
      if (!Options.Excludes.empty())
        llvm::errs() << " (or --exclude leaves every one out)";
      llvm::errs() << "\n";
      return ExitError;
    }
    Result.Units = Sources;
    return ExitOk;
  }

  /// Each unit's commands, with the extra arguments already in: the database
  /// is not shared with the workers.
  void buildCommands() {
    CommandAdditions Additions{Options.ExtraArgsBefore, Options.ExtraArgs,
                               Options.ResourceDir, Options.RuntimeIncludeDir};
    std::set<std::string> Dropped;
    for (size_t I = 0; I < Sources.size(); ++I) {
      std::vector<CompileCommand> Unit =
          Database->getCompileCommands(Sources[I]);
      // Nothing to parse with (parseUnit says there is no command).
      auto NoCompiler = [](const CompileCommand &Command) {
        return !namesCompiler(Command);
      };
      if (llvm::any_of(Unit, NoCompiler)) {
        llvm::errs() << "ddpify: error: the compilation database's command "
                        "for '"
                     << Shown[I]
                     << "' names no compiler (an empty command or argument "
                        "list)\n";
        llvm::erase_if(Unit, NoCompiler);
      }
      for (CompileCommand &Command : Unit)
        Command.CommandLine = argumentsForParse(Command, Additions, Dropped);
      Commands.push_back(std::move(Unit));
    }
    if (!Dropped.empty()) {
      llvm::errs() << "ddpify: note: dropped compiler option(s) Clang does "
                      "not accept (GCC's):";
      for (const std::string &Option : Dropped)
        llvm::errs() << " '" << Option << "'";
      llvm::errs() << "\n";
    }
    WithoutCache = Commands;
  }

  /// Precompiled LibTorch headers in front of the units that start with
  /// them.
  void useHeaderCache() {
    Prefixes.resize(Sources.size());
    Result.BuildDir = compilationDatabaseFolder(Options, Sources.front());
    std::string CacheDir = cacheDirectory(Options, Result.Root);
    if (CacheDir.empty())
      return;
    // As ccache's CCACHE_BASEDIR: checkouts in other folders share headers.
    std::string Base;
    if (std::optional<std::string> FromEnv =
            llvm::sys::Process::GetEnv("DDPIFY_CACHE_BASEDIR");
        FromEnv && !FromEnv->empty())
      Base = absoluteRealPath(*FromEnv);
    Cache.emplace(CacheDir, Result.Root, Base);
    for (size_t I = 0; I < Sources.size(); ++I) {
      if (Commands[I].empty())
        continue;
      llvm::Expected<std::string> Code = readFile(Sources[I]);
      if (!Code) {
        llvm::consumeError(Code.takeError());
        continue;
      }
      Prefixes[I] = precompilablePrefix(Sources[I], *Code, Commands[I].front(),
                                        Result.Root);
      Commands[I] = withCache(I, std::move(Commands[I]));
    }
  }

  /// Parses every unit (in parallel with --jobs) and runs the rules over
  /// it; its findings in source order, whatever order the workers finished
  /// in.
  int parseUnits() {
    Units.resize(Sources.size());
    unsigned Jobs = std::min<unsigned>(
        llvm::hardware_concurrency(Options.Jobs).compute_thread_count(),
        Sources.size());
    Progress Bar(Sources.size(), !Options.Quiet && llvm::errs().is_displayed());
    auto ParseOne = [&](size_t I) {
      Bar.start(Shown[I]);
      parseWithRetries(I);
      Bar.finish();
    };
    if (Jobs <= 1) {
      for (size_t I = 0; I < Sources.size(); ++I)
        ParseOne(I);
    } else {
      llvm::DefaultThreadPool Pool(llvm::hardware_concurrency(Jobs));
      for (size_t I = 0; I < Sources.size(); ++I)
        Pool.async([&ParseOne, I] { ParseOne(I); });
      Pool.wait();
    }
    Bar.clear();
    if (Cache && Options.CacheTrace)
      for (const std::string &Event : Cache->events())
        llvm::errs() << "ddpify: cache: " << Event << "\n";

    bool Failed = false;
    for (UnitResult &Unit : Units) {
      llvm::errs() << Unit.Errors;
      Failed |= Unit.Failed;
      Result.Findings.insert(Result.Findings.end(),
                             std::make_move_iterator(Unit.Findings.begin()),
                             std::make_move_iterator(Unit.Findings.end()));
    }
    if (Failed) {
      llvm::errs() << "ddpify: error: nothing written: "
                   << "a translation unit failed to parse\n";
      return ExitError;
    }
    return ExitOk;
  }

  /// The findings of all units as one program's: facts checked, each spot
  /// once, lint-only checks left to lint.
  void mergeFindings() {
    FindingList &Findings = Result.Findings;
    dropUnmetRequirements(Findings);
    // A header included by several translation units is found several
    // times.
    mergeSameSpots(Findings);
    // Lint-only checks have no migration rule: migrate and diff neither
    // apply their fix-its nor report them (report items carry a ReportId).
    if (Options.RunMode != Mode::Lint)
      Findings.erase(std::remove_if(Findings.begin(), Findings.end(),
                                    [](const Finding &F) {
                                      return F.RuleId.empty() &&
                                             F.ReportId.empty();
                                    }),
                     Findings.end());
  }

  /// The edits of every finding, composed per file, with R9's include.
  int collectEdits() {
    Result.Edits.setFormatStyle(Options.FormatStyle);
    // Values moved before a guard carry the edits of other rules inside
    // them.
    for (const Finding &F : Result.Findings)
      if (isRewritten(F))
        for (const FindingEdit &Edit : F.Edits)
          for (const FindingEdit::Moved &Move : Edit.Moves)
            Result.Edits.addMove(F.FilePath, Edit.Offset, Move.Offset,
                                 Move.Length, Move.Replacement);
    for (const Finding &F : Result.Findings)
      for (const Replacement &Edit : editsFor(F))
        if (llvm::Error Err = Result.Edits.add(Edit, F.RuleId))
          return printError(std::move(Err));
    if (llvm::Error Err = Result.Edits.composeMoves())
      return printError(std::move(Err));
    if (Options.RunMode != Mode::Lint)
      if (llvm::Error Err = Result.Edits.addRuntimeIncludes())
        return printError(std::move(Err));
    return ExitOk;
  }

private:
  static int printError(llvm::Error Err) {
    llvm::errs() << "ddpify: error: " << llvm::toString(std::move(Err)) << "\n";
    return ExitError;
  }

  llvm::StringRef relativeToRoot(llvm::StringRef Real) const {
    llvm::StringRef Relative = Real.drop_front(Result.Root.size());
    Relative.consume_front("/");
    return Relative;
  }

  bool excluded(llvm::StringRef Real) const {
    llvm::StringRef Relative = relativeToRoot(Real);
    return llvm::any_of(Options.Excludes,
                        [&](const llvm::GlobPattern &Pattern) {
                          return Pattern.match(Relative) || Pattern.match(Real);
                        });
  }

  /// The whole codebase, as run-clang-tidy takes it: every C++ unit of the
  /// database under the root, but not those generated into the build folder.
  void selectWholeCodebase() {
    std::string BuildDir = absoluteRealPath(Options.BuildPath);
    if (llvm::sys::path::filename(BuildDir) == "compile_commands.json")
      BuildDir = llvm::sys::path::parent_path(BuildDir).str();
    std::vector<std::string> All;
    for (const std::string &File : Database->getAllFiles())
      if (std::string Real = absoluteRealPath(File); !Real.empty())
        All.push_back(Real);
    std::sort(All.begin(), All.end());
    All.erase(std::unique(All.begin(), All.end()), All.end());
    unsigned Outside = 0, NotCxx = 0, InBuild = 0;
    for (const std::string &Real : All) {
      llvm::StringRef Extension = llvm::sys::path::extension(Real);
      if (!isPathUnder(Real, Result.Root))
        ++Outside;
      else if (!llvm::is_contained({".cpp", ".cc", ".cxx", ".c++", ".cp", ".C",
                                    ".CPP", ".cppm", ".ixx"},
                                   Extension))
        ++NotCxx;
      else if (BuildDir != Result.Root && isPathUnder(Real, BuildDir))
        ++InBuild;
      else if (!excluded(Real)) {
        Sources.push_back(Real);
        Shown.push_back(relativeToRoot(Real).str());
      }
    }
    if (Options.Quiet)
      return;
    llvm::errs() << "ddpify: " << Sources.size()
                 << " translation unit(s) of the compilation database";
    std::vector<std::string> Left;
    if (unsigned Out = All.size() - Sources.size() - Outside - NotCxx - InBuild)
      Left.push_back(std::to_string(Out) + " excluded");
    if (Outside)
      Left.push_back(std::to_string(Outside) + " outside the root");
    if (InBuild)
      Left.push_back(std::to_string(InBuild) + " in the build folder");
    if (NotCxx)
      Left.push_back(std::to_string(NotCxx) + " not C++ sources");
    for (size_t I = 0; I < Left.size(); ++I)
      llvm::errs() << (I ? ", " : " (left out: ") << Left[I];
    llvm::errs() << (Left.empty() ? "" : ")") << "\n";
  }

  /// Unit with the precompiled header of unit I's prefix in front; Unit
  /// itself when there is none.
  std::vector<CompileCommand> withCache(size_t I,
                                        std::vector<CompileCommand> Unit) {
    if (!Cache || Unit.empty() || Prefixes[I].empty())
      return Unit;
    std::lock_guard<std::mutex> Lock(CacheMutex);
    std::vector<std::string> Precompiled =
        Cache->argumentsFor(Unit.front(), Prefixes[I]);
    if (!Precompiled.empty())
      for (CompileCommand &Command : Unit)
        Command.CommandLine = getInsertArgumentAdjuster(
            Precompiled, ArgumentInsertPosition::BEGIN)(Command.CommandLine,
                                                        Command.Filename);
    return Unit;
  }

  /// Parses with the header cache; again without it only when the failure
  /// may be the cache's (an error that is not the code's), so the cache can
  /// only make a run faster.
  UnitResult parseCached(size_t I, const std::vector<CompileCommand> &Cached,
                         const std::vector<CompileCommand> &Uncached) {
    UnitResult Unit =
        parseUnit(Options, Result.Root, Sources[I], Shown[I], Cached);
    if (Unit.Failed && !Unit.CodeErrorsOnly && Cached != Uncached) {
      {
        std::lock_guard<std::mutex> Lock(CacheMutex);
        Cache->noteUnused(Shown[I]);
      }
      Unit = parseUnit(Options, Result.Root, Sources[I], Shown[I], Uncached);
    }
    return Unit;
  }

  /// Unit I, parsed as its command says; where that fails, as g++ would
  /// have taken it (C++20, the compiler's own include folders).
  void parseWithRetries(size_t I) {
    Units[I] = parseCached(I, Commands[I], WithoutCache[I]);
    retryAtCxx20(I);
    retryWithCompilerIncludes(I);
  }

  /// g++ builds C++20 code at -std=c++17 (`void train(auto &model)`, with a
  /// warning); Clang does not: a unit that fails before C++20 is tried again
  /// at C++20, with a precompiled header of that standard. Its own errors
  /// are the ones shown if that fails too.
  void retryAtCxx20(size_t I) {
    std::string From, To;
    std::vector<CompileCommand> Later;
    if (Units[I].Failed && !WithoutCache[I].empty())
      Later = atCxx20(WithoutCache[I], From, To);
    if (Later.empty())
      return;
    UnitResult Retry = parseCached(I, withCache(I, Later), Later);
    if (Retry.Failed) {
      Units[I].Errors +=
          "ddpify: note: it does not parse at " + To + " either\n";
      return;
    }
    Retry.Errors = "ddpify: note: '" + Shown[I] + "' does not parse at " +
                   From + " but does at " + To +
                   " (GCC accepts C++20 code such as 'void f(auto &x)' "
                   "before C++20, Clang does not): parsed at " +
                   To + "\n" + Retry.Errors;
    Units[I] = std::move(Retry);
  }

  /// A header Clang lacks that the database's g++ has (<omp.h> under
  /// -fopenmp): the compiler's own include folders, after Clang's.
  void retryWithCompilerIncludes(size_t I) {
    if (!Units[I].Failed || WithoutCache[I].empty() ||
        !llvm::StringRef(Units[I].Errors).contains("file not found"))
      return;
    std::vector<CompileCommand> WithGcc = WithoutCache[I];
    std::vector<std::string> Folders = addCompilerIncludeFolders(WithGcc);
    if (Folders.empty())
      return;
    UnitResult Retry =
        parseUnit(Options, Result.Root, Sources[I], Shown[I], WithGcc);
    if (Retry.Failed)
      return;
    Retry.Errors = "ddpify: note: '" + Shown[I] +
                   "' includes a header Clang's own headers lack: "
                   "parsed with the include folders of '" +
                   WithGcc.front().CommandLine.front() + "' after Clang's (" +
                   llvm::join(Folders, ", ") + ")\n" + Retry.Errors;
    Units[I] = std::move(Retry);
  }

  const ToolOptions &Options;
  PipelineResult &Result;
  /// The units as absolute real paths; Shown: as the user gave them (or
  /// relative to the root).
  std::vector<std::string> Sources, Shown;
  std::unique_ptr<CompilationDatabase> Database;
  /// Each unit's commands, with the header cache's arguments where it has a
  /// precompiled prefix; WithoutCache: the same without them.
  std::vector<std::vector<CompileCommand>> Commands, WithoutCache;
  std::optional<HeaderCache> Cache;
  std::mutex CacheMutex; // The C++20 retries ask for headers in parallel.
  /// Each unit's include prefix, scanned once: the C++20 retry changes only
  /// the standard, not the folders its headers are found in.
  std::vector<std::vector<std::string>> Prefixes;
  std::vector<UnitResult> Units;
};

} // namespace

int runPipeline(const ToolOptions &Options, PipelineResult &Result) {
  PipelineRun Run(Options, Result);
  if (int Status = Run.resolveSourcesAndRoot())
    return Status;
  if (int Status = Run.loadDatabase())
    return Status;
  if (int Status = Run.selectUnits())
    return Status;
  Run.buildCommands();
  Run.useHeaderCache();
  if (int Status = Run.parseUnits())
    return Status;
  Run.mergeFindings();
  // A program that trains nothing (a tensor or autograd demo, inference)
  // needs no DDP: migrate and diff make no edit at all.
  if (Options.RunMode != Mode::Lint && trainsNothing(Result.Findings)) {
    Result.Findings.clear();
    Result.Notes.push_back(
        "the program trains nothing (no optimizer is built or stepped in "
        "the code reached from main): it needs no DDP, so ddpify leaves it "
        "as it is");
    return ExitOk;
  }
  if (int Status = Run.collectEdits())
    return Status;
  // R10 and the report items' comments (Report.cpp).
  if (Options.RunMode != Mode::Lint)
    return addBuildAndReportEdits(Options, Result);
  return ExitOk;
}

} // namespace ddpify
