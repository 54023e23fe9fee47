//===- DdpTidyModule.cpp - ddpify's lint checks as a clang-tidy module ----===//
//
// `clang-tidy --load=libddpifyTidy.so --checks='-*,ddp-*'` runs the checks of
// `ddpify lint` inside clang-tidy, configured from a `.clang-tidy` like any
// other check. Each ddp-* check is the check name of a ddpify rule or
// lint-only check (rules/Rules.def); their matchers are ddpify's own: the
// first ddp-* check clang-tidy runs on a translation unit runs every rule
// unit over it once (a MatchFinder of its own, so each unit sees its whole
// unit, start and end, as under ddpify), the facts one unit gives another
// applied (Finding::Requires), and each check then reports the findings of
// its name with their fix-its: the diagnostics and fix-its of `ddpify lint
// --show-migration` on the same unit. What only the whole program decides
// (a loader type respelled in every unit, a model built in one unit and
// trained in another) is ddpify's alone: docs/clang-tidy.md.
//
//===----------------------------------------------------------------------===//

#include "clang-tidy/ClangTidyCheck.h"
#include "clang-tidy/ClangTidyModule.h"
#include "clang-tidy/ClangTidyModuleRegistry.h"
#include "ddpify/EditSet.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/SourceManager.h"
#include "llvm/Support/FileSystem.h"
#include <map>
#include <memory>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

using clang::tidy::ClangTidyCheck;
using clang::tidy::ClangTidyCheckFactories;
using clang::tidy::ClangTidyContext;
using clang::tidy::ClangTidyModule;

/// Every rule unit's findings on one translation unit, computed once for
/// all the ddp-* checks clang-tidy runs on it.
class UnitRun {
public:
  /// The findings of CheckName, in ddpify's order; computed on first use.
  const FindingList &findings(ASTContext &Context) {
    if (!Done) {
      Done = true;
      run(Context);
    }
    return Findings;
  }

  /// Whether F's fix-it carries the runtime's #include for its file (the
  /// first finding with a fix-it there that needs it, as ddpify lint
  /// exports its fixes), and that include's edit.
  std::optional<tooling::Replacement> includeFor(const Finding &F) const {
    auto It = IncludeCarrier.find(F.FilePath);
    if (It == IncludeCarrier.end() || It->second != &F)
      return std::nullopt;
    return Includes.at(F.FilePath);
  }

  void setEnabled(std::function<bool(llvm::StringRef)> IsEnabled) {
    Enabled = std::move(IsEnabled);
  }

private:
  void run(ASTContext &Context) {
    const SourceManager &SM = Context.getSourceManager();
    std::string Root;
    if (OptionalFileEntryRef Main = SM.getFileEntryRefForID(SM.getMainFileID()))
      Root = defaultProjectRoot(Main->getFileEntry().tryGetRealPathName());
    MatchFinder Finder;
    std::vector<std::unique_ptr<MatcherModule>> Modules =
        createMatcherModules(Findings, Root);
    for (auto &Module : Modules)
      Module->registerMatchers(Finder);
    Finder.matchAST(Context);
    dropUnmetRequirements(Findings);
    mergeSameSpots(Findings);
    llvm::erase_if(Findings,
                   [&](const Finding &F) { return F.CheckName.empty(); });
    findIncludeCarriers();
  }

  /// As ddpify lint's fixes: a migration rule's fix-it needs the runtime's
  /// header, a lint-only check's only when it names ddp::; the include
  /// rides on the first enabled finding with such a fix-it in each file.
  void findIncludeCarriers() {
    EditSet Edits;
    for (const Finding &F : Findings) {
      std::optional<tooling::Replacement> Edit = editFor(F);
      if (!Edit || !Enabled(F.CheckName) ||
          (F.RuleId.empty() && !Edit->getReplacementText().contains("ddp::")))
        continue;
      for (const tooling::Replacement &Part : editsFor(F))
        if (llvm::Error Err = Edits.add(Part, F.RuleId))
          llvm::consumeError(std::move(Err));
      IncludeCarrier.try_emplace(F.FilePath, &F);
    }
    if (llvm::Error Err = Edits.addRuntimeIncludes()) {
      llvm::consumeError(std::move(Err));
      IncludeCarrier.clear();
      return;
    }
    for (const auto &[File, Replacements] : Edits.files())
      for (const tooling::Replacement &Edit : Replacements)
        if (Edit.getReplacementText().contains("#include <ddp/ddp.h>"))
          Includes.emplace(File, Edit);
    for (auto It = IncludeCarrier.begin(); It != IncludeCarrier.end();)
      It = Includes.count(It->first) ? std::next(It) : IncludeCarrier.erase(It);
  }

  bool Done = false;
  FindingList Findings;
  std::function<bool(llvm::StringRef)> Enabled;
  std::map<std::string, const Finding *> IncludeCarrier;
  std::map<std::string, tooling::Replacement> Includes;
};

/// The run of the translation unit clang-tidy matches now, shared by its
/// checks (clang-tidy makes the checks and a MatchFinder for each unit).
std::shared_ptr<UnitRun> runFor(MatchFinder *Finder) {
  static std::map<MatchFinder *, std::weak_ptr<UnitRun>> Runs;
  // The runs of earlier units, whose checks are gone.
  for (auto It = Runs.begin(); It != Runs.end();)
    It = It->second.expired() ? Runs.erase(It) : std::next(It);
  std::shared_ptr<UnitRun> Run = Runs[Finder].lock();
  if (!Run) {
    Run = std::make_shared<UnitRun>();
    Runs[Finder] = Run;
  }
  return Run;
}

class DdpCheck : public ClangTidyCheck {
public:
  DdpCheck(llvm::StringRef Name, ClangTidyContext *Context)
      : ClangTidyCheck(Name, Context), Context(Context) {}

  bool isLanguageVersionSupported(const LangOptions &LangOpts) const override {
    return LangOpts.CPlusPlus;
  }

  void registerMatchers(MatchFinder *Finder) override {
    Run = runFor(Finder);
    ClangTidyContext *Ctx = Context;
    Run->setEnabled(
        [Ctx](llvm::StringRef Name) { return Ctx->isCheckEnabled(Name); });
    Finder->addMatcher(translationUnitDecl().bind("unit"), this);
  }

  void check(const MatchFinder::MatchResult &Result) override {
    const SourceManager &SM = *Result.SourceManager;
    for (const Finding &F : Run->findings(*Result.Context)) {
      if (F.CheckName != getID())
        continue;
      SourceLocation Loc = locationOf(SM, F.FilePath, F.Offset);
      if (Loc.isInvalid())
        continue;
      {
        DiagnosticBuilder Diag = diag(Loc, "%0") << F.diagnosticMessage();
        for (const tooling::Replacement &Part : editsFor(F))
          addFix(Diag, SM, Part);
        if (std::optional<tooling::Replacement> Include = Run->includeFor(F))
          addFix(Diag, SM, *Include);
      } // emitted here, before its notes
      for (const FindingNote &Note : F.Notes) {
        SourceLocation NoteLoc = locationOf(SM, Note.FilePath, Note.Offset);
        if (NoteLoc.isValid())
          diag(NoteLoc, "%0", DiagnosticIDs::Note) << Note.Message;
      }
    }
  }

private:
  static SourceLocation locationOf(const SourceManager &SM,
                                   llvm::StringRef Path, unsigned Offset) {
    llvm::Expected<FileEntryRef> File = SM.getFileManager().getFileRef(Path);
    if (!File) {
      llvm::consumeError(File.takeError());
      return {};
    }
    FileID ID = SM.translateFile(*File);
    if (ID.isInvalid())
      return {};
    return SM.getLocForStartOfFile(ID).getLocWithOffset(Offset);
  }

  static void addFix(DiagnosticBuilder &Diag, const SourceManager &SM,
                     const tooling::Replacement &Edit) {
    SourceLocation Begin = locationOf(SM, Edit.getFilePath(), Edit.getOffset());
    if (Begin.isInvalid())
      return;
    Diag << FixItHint::CreateReplacement(
        CharSourceRange::getCharRange(Begin,
                                      Begin.getLocWithOffset(Edit.getLength())),
        Edit.getReplacementText());
  }

  ClangTidyContext *Context;
  std::shared_ptr<UnitRun> Run;
};

class DdpModule : public ClangTidyModule {
public:
  void addCheckFactories(ClangTidyCheckFactories &Factories) override {
    std::set<std::string> Names;
    for (const RuleInfo &Rule : allRules())
      if (!Rule.CheckName.empty() && Names.insert(Rule.CheckName.str()).second)
        Factories.registerCheckFactory(
            Rule.CheckName,
            [](llvm::StringRef Name, ClangTidyContext *Context) {
              return std::make_unique<DdpCheck>(Name, Context);
            });
  }
};

} // namespace
} // namespace ddpify

static clang::tidy::ClangTidyModuleRegistry::Add<ddpify::DdpModule>
    DdpModuleRegistration("ddp-module",
                          "ddpify's DDP checks: device mismatches and DDP "
                          "hazards (ddp-*)");
