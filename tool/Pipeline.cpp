//===- Pipeline.cpp - compilation database -> Findings -> edits -----------===//

#include "Pipeline.h"
#include "ddpify/Registry.h"
#include "ddpify/Rewriter.h"
#include "clang/AST/ASTConsumer.h"
#include "clang/AST/ASTContext.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/DiagnosticOptions.h"
#include "clang/Frontend/FrontendAction.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/CompilationDatabase.h"
#include "clang/Tooling/JSONCompilationDatabase.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>

using namespace clang;
using namespace clang::tooling;

namespace ddpify {
namespace {

/// Prints compiler errors (and their notes) the way clang does, but not
/// warnings: ddpify reports on the program, it does not compile it.
class ErrorPrinter : public TextDiagnosticPrinter {
public:
  ErrorPrinter(DiagnosticOptions *Options)
      : TextDiagnosticPrinter(llvm::errs(), Options) {}

  void HandleDiagnostic(DiagnosticsEngine::Level Level,
                        const Diagnostic &Info) override {
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

private:
  bool LastWasShown = false;
};

/// Runs the matchers over the user's code only: declarations in system
/// headers (all of LibTorch and the standard library) are left out of the
/// traversal and of the parent map, which would otherwise cost about as much
/// as the parse.
class UserCodeConsumer : public ASTConsumer {
public:
  explicit UserCodeConsumer(std::unique_ptr<ASTConsumer> Matchers)
      : Matchers(std::move(Matchers)) {}

  void HandleTranslationUnit(ASTContext &Context) override {
    const SourceManager &SM = Context.getSourceManager();
    std::vector<Decl *> Scope;
    for (Decl *D : Context.getTranslationUnitDecl()->decls()) {
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
};

class MatchUserCodeAction : public ASTFrontendAction {
public:
  explicit MatchUserCodeAction(ast_matchers::MatchFinder &Finder)
      : Finder(Finder) {}

  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance &,
                                                 llvm::StringRef) override {
    return std::make_unique<UserCodeConsumer>(Finder.newASTConsumer());
  }

private:
  ast_matchers::MatchFinder &Finder;
};

class MatchUserCodeFactory : public FrontendActionFactory {
public:
  explicit MatchUserCodeFactory(ast_matchers::MatchFinder &Finder)
      : Finder(Finder) {}
  std::unique_ptr<FrontendAction> create() override {
    return std::make_unique<MatchUserCodeAction>(Finder);
  }

private:
  ast_matchers::MatchFinder &Finder;
};

std::string absoluteRealPath(llvm::StringRef Path) {
  llvm::SmallString<256> Real;
  if (llvm::sys::fs::real_path(Path, Real))
    return "";
  return Real.str().str();
}

bool isUnder(llvm::StringRef Path, llvm::StringRef Dir) {
  return Path.starts_with(Dir) &&
         (Path.size() == Dir.size() || Dir.ends_with("/") ||
          llvm::sys::path::is_separator(Path[Dir.size()]));
}

/// The git top-level holding Path (a folder with .git), else Path's folder.
std::string defaultRoot(llvm::StringRef SourcePath) {
  llvm::StringRef Folder = llvm::sys::path::parent_path(SourcePath);
  for (llvm::StringRef Dir = Folder; !Dir.empty();
       Dir = llvm::sys::path::parent_path(Dir)) {
    llvm::SmallString<256> Git(Dir);
    llvm::sys::path::append(Git, ".git");
    if (llvm::sys::fs::exists(Git))
      return Dir.str();
  }
  return Folder.str();
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

/// LibTorch 1.13's headers do not parse with Clang at C++20 and later.
bool usesCxx20OrLater(const std::vector<std::string> &Arguments) {
  bool Later = false;
  for (llvm::StringRef Arg : Arguments) {
    if (!Arg.consume_front("-std=") && !Arg.consume_front("--std="))
      continue;
    Arg.consume_front("gnu++") || Arg.consume_front("c++");
    Later = Arg == "20" || Arg == "2a" || Arg == "23" || Arg == "2b" ||
            Arg == "26" || Arg == "2c";
  }
  return Later;
}

} // namespace

int runPipeline(const ToolOptions &Options, PipelineResult &Result) {
  // Sources and root, as absolute real paths.
  std::vector<std::string> Sources;
  for (const std::string &Source : Options.Sources) {
    std::string Real = absoluteRealPath(Source);
    if (Real.empty() || !llvm::sys::fs::is_regular_file(Real)) {
      llvm::errs() << "ddpify: error: no such source file '" << Source << "'\n";
      return ExitError;
    }
    Sources.push_back(Real);
  }
  if (Options.Root.empty()) {
    Result.Root = defaultRoot(Sources.front());
  } else {
    Result.Root = absoluteRealPath(Options.Root);
    if (Result.Root.empty() || !llvm::sys::fs::is_directory(Result.Root)) {
      llvm::errs() << "ddpify: error: --root '" << Options.Root
                   << "' is not a directory\n";
      return ExitError;
    }
  }
  for (size_t I = 0; I < Sources.size(); ++I)
    if (!isUnder(Sources[I], Result.Root)) {
      llvm::errs() << "ddpify: error: source '" << Options.Sources[I]
                   << "' is outside the project root '" << Result.Root
                   << "'; nothing outside the root is rewritten (see "
                      "--root)\n";
      return ExitError;
    }

  std::string Error;
  std::unique_ptr<CompilationDatabase> Database =
      loadCompilationDatabase(Options, Sources.front(), Error);
  if (!Database) {
    llvm::errs() << "ddpify: error: " << Error << "\n";
    return ExitError;
  }

  clang::ast_matchers::MatchFinder Finder;
  std::vector<std::unique_ptr<MatcherModule>> Modules =
      createMatcherModules(Result.Findings, Result.Root);
  for (auto &Module : Modules)
    Module->registerMatchers(Finder);
  auto Factory = std::make_unique<MatchUserCodeFactory>(Finder);

  llvm::IntrusiveRefCntPtr<DiagnosticOptions> DiagOptions =
      new DiagnosticOptions();
  DiagOptions->ShowColors = false;
  ErrorPrinter Diagnostics(DiagOptions.get());

  bool Failed = false;
  for (size_t I = 0; I < Sources.size(); ++I) {
    const std::string &Source = Sources[I];
    if (!Options.Quiet)
      llvm::errs() << "ddpify: [" << I + 1 << "/" << Sources.size()
                   << "] parsing " << Options.Sources[I] << "\n";
    ClangTool Tool(*Database, {Source});
    Tool.setDiagnosticConsumer(&Diagnostics);
    Tool.appendArgumentsAdjuster(getInsertArgumentAdjuster(
        Options.ExtraArgsBefore, ArgumentInsertPosition::BEGIN));
    Tool.appendArgumentsAdjuster(getInsertArgumentAdjuster(
        Options.ExtraArgs, ArgumentInsertPosition::END));
    // ClangTool would look for builtin headers next to this binary.
    Tool.appendArgumentsAdjuster(getInsertArgumentAdjuster(
        {"-resource-dir", Options.ResourceDir}, ArgumentInsertPosition::BEGIN));
    int Status = Tool.run(Factory.get());
    if (Status == 0)
      continue;
    Failed = true;
    std::vector<CompileCommand> Commands = Database->getCompileCommands(Source);
    if (Commands.empty()) {
      llvm::errs() << "ddpify: error: no compile command for '" << Source
                   << "' in the compilation database\n";
      continue;
    }
    llvm::errs() << "ddpify: error: '" << Options.Sources[I]
                 << "' does not parse\n";
    std::vector<std::string> Arguments = Commands.front().CommandLine;
    Arguments.insert(Arguments.end(), Options.ExtraArgs.begin(),
                     Options.ExtraArgs.end());
    if (usesCxx20OrLater(Arguments))
      llvm::errs() << "ddpify: note: it is compiled as C++20 or later, and "
                      "Clang cannot parse LibTorch 1.13's headers in that "
                      "mode; try --extra-arg=-std=c++17\n";
  }
  if (Failed) {
    llvm::errs() << "ddpify: error: nothing written: "
                 << "a translation unit failed to parse\n";
    return ExitError;
  }

  // A header included by several translation units is found several times.
  FindingList &Findings = Result.Findings;
  std::stable_sort(Findings.begin(), Findings.end());
  Findings.erase(std::unique(Findings.begin(), Findings.end(),
                             [](const Finding &A, const Finding &B) {
                               return A.sameSpot(B);
                             }),
                 Findings.end());

  for (const Finding &F : Findings)
    for (const Replacement &Edit : editsFor(F))
      if (llvm::Error Err = Result.Edits.add(Edit)) {
        llvm::errs() << "ddpify: error: " << llvm::toString(std::move(Err))
                     << "\n";
        return ExitError;
      }
  if (Options.RunMode != Mode::Lint)
    if (llvm::Error Err = Result.Edits.addRuntimeIncludes()) {
      llvm::errs() << "ddpify: error: " << llvm::toString(std::move(Err))
                   << "\n";
      return ExitError;
    }
  return ExitOk;
}

} // namespace ddpify
