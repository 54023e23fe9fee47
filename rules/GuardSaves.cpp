//===- GuardSaves.cpp - R8: checkpoints and files on the main process -----===//
//
// R8 guards statements that write checkpoints (`torch::save(...)`,
// `OutputArchive::save_to(...)`, a TorchScript module's `save(path)`) and
// other files (`cv::imwrite`, `std::filesystem::create_directory`) with
// `if (ddp::is_main_process())` (analyses/MainProcessWrites.h plans the
// guards with R7's). A file a stream or fopen opens for writing gets its path
// through `ddp::output_path`. A checkpoint every rank reads back after the
// main process wrote it is read with `ddp::load` (rank 0 reads, every rank
// gets its bytes: no shared disk needed), other reads of it get
// `ddp::barrier();` before them.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MainProcessWrites.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "ddpify/Work.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/StmtCXX.h"
#include "clang/ASTMatchers/ASTMatchers.h"

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

const Expr *strip(const Expr *E) { return stripParensAndImplicit(E); }

/// The path argument of a call or construction that opens a file for
/// writing: a `std::ofstream` (constructed with a path, or `.open(path)`),
/// `fopen(path, "w")` / `"a"` (not `"r"`, not `"+"`: the program reads
/// what the file holds).
const Expr *openedForWriting(const Expr *E) {
  E = E ? E->IgnoreImplicit() : nullptr;
  auto IsOfstream = [](const CXXRecordDecl *Class) {
    return Class && Class->getQualifiedNameAsString() == "std::basic_ofstream";
  };
  if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E)) {
    if (Construct->getNumArgs() >= 1 &&
        IsOfstream(Construct->getConstructor()->getParent()) &&
        !isa<CXXDefaultArgExpr>(Construct->getArg(0)))
      return Construct->getArg(0);
    return nullptr;
  }
  if (const auto *Member = dyn_cast_or_null<CXXMemberCallExpr>(E)) {
    const CXXMethodDecl *Method = Member->getMethodDecl();
    if (Method && Method->getIdentifier() && Method->getName() == "open" &&
        IsOfstream(Method->getParent()) && Member->getNumArgs() >= 1)
      return Member->getArg(0);
    return nullptr;
  }
  if (const auto *Call = dyn_cast_or_null<CallExpr>(E)) {
    llvm::StringRef Name = Call->getDirectCallee()
                               ? Call->getDirectCallee()->getName()
                               : llvm::StringRef();
    if ((Name != "fopen" && Name != "fopen64") || Call->getNumArgs() != 2)
      return nullptr;
    const auto *Mode = dyn_cast<StringLiteral>(strip(Call->getArg(1)));
    if (!Mode)
      return nullptr;
    llvm::StringRef Flags = Mode->getString();
    if ((Flags.contains('w') || Flags.contains('a')) && !Flags.contains('+'))
      return Call->getArg(0);
  }
  return nullptr;
}

/// `ddp::output_path(...)` already (migrated code).
bool isOutputPathCall(const Expr *E) {
  const auto *Call = dyn_cast_or_null<CallExpr>(strip(E));
  return Call && qualifiedCalleeName(Call) == "ddp::output_path";
}

class GuardSaves : public MatcherModule, public MatchFinder::MatchCallback {
public:
  GuardSaves(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Writes(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    // Every statement-level expression: the planner decides what it writes.
    Finder.addMatcher(expr(isStatementLevel()).bind("stmt"), this);
    // Files opened for writing.
    Finder.addMatcher(
        cxxConstructExpr(hasDeclaration(cxxConstructorDecl(
                             ofClass(hasName("::std::basic_ofstream")))))
            .bind("open"),
        this);
    Finder.addMatcher(
        cxxMemberCallExpr(
            callee(cxxMethodDecl(hasName("open"),
                                 ofClass(hasName("::std::basic_ofstream")))))
            .bind("open"),
        this);
    Finder.addMatcher(
        callExpr(callee(functionDecl(hasAnyName("::fopen", "::fopen64"))))
            .bind("open"),
        this);
    // Reads of what a checkpoint write may have written.
    Finder.addMatcher(callExpr(callee(functionDecl(hasAnyName(
                                   "::torch::load", "::torch::jit::load"))))
                          .bind("load"),
                      this);
    Finder.addMatcher(
        cxxMemberCallExpr(
            callee(cxxMethodDecl(
                hasName("load_from"),
                ofClass(hasName("::torch::serialize::InputArchive")))))
            .bind("load"),
        this);
  }

  void onStartOfTranslationUnit() override {
    Writes.startTranslationUnit();
    Loads.clear();
  }

  void onEndOfTranslationUnit() override {
    // Barriers take the spots no guard took; both look at the unit's
    // checkpoint writes.
    FindingList Barriers;
    emitReadBarriers(Barriers);
    Writes.finishTranslationUnit(Findings, "R8");
    Findings.insert(Findings.end(), Barriers.begin(), Barriers.end());
    Loads.clear();
  }

  void run(const MatchFinder::MatchResult &Result) override {
    Context = Result.Context;
    Writes.enter(*Context);
    if (const auto *Open = Result.Nodes.getNodeAs<Expr>("open"))
      recordOpenedFile(Open);
    else if (const auto *Load = Result.Nodes.getNodeAs<CallExpr>("load"))
      recordLoad(Load);
    else if (const auto *E = Result.Nodes.getNodeAs<Expr>("stmt"))
      Writes.noteStatement(E);
  }

private:
  static const Expr *checkpointPath(const Expr *E) {
    return MainProcessWrites::checkpointPath(E);
  }

  const Stmt *parentStmt(const Stmt *S) {
    DynTypedNodeList Parents = Context->getParents(*S);
    return Parents.empty() ? nullptr : Parents[0].get<Stmt>();
  }

  /// R8 for a file a stream or fopen opens for writing: its path becomes
  /// `ddp::output_path(path)`, which is the null device on every process
  /// but the main one. Every process still runs the same code (its checks of
  /// the stream included); only the main process's bytes reach the file.
  void recordOpenedFile(const Expr *Open) {
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(Open))
      if (Construct->getConstructor()->isCopyOrMoveConstructor())
        return;
    const Expr *Path = openedForWriting(Open);
    if (!Path || isOutputPathCall(Path) || Writes.isGuarded(Open))
      return;
    Finding F = Writes.locator().make(*Context, Path->getSourceRange(), "R8",
                                      "ddp-unguarded-save");
    if (F.FilePath.empty() || !Writes.claimSpot(F))
      return;
    F.Message = "every process of a DDP program writes this file; open it "
                "as 'ddp::output_path(...)' so that only the main process "
                "writes it";
    if (!F.InMacro) {
      F.Edits.push_back({F.Offset, 0, "ddp::output_path("});
      F.Edits.push_back({F.Offset + F.Length, 0, ")"});
    }
    Findings.push_back(std::move(F));
  }

  void recordLoad(const CallExpr *Load) {
    // A stream, not a file (`torch::load(x, stream)`).
    const Expr *Path = checkpointPath(Load);
    if (!Path || isOstreamOrIstream(Path->getType()))
      return;
    Loads.push_back(Load);
  }

  static bool isOstreamOrIstream(QualType T) {
    std::string Name = T.getNonReferenceType().getAsString();
    return llvm::StringRef(Name).contains("istream") ||
           llvm::StringRef(Name).contains("stringbuf");
  }

  /// R8: a checkpoint the main process writes (guarded) and every rank reads
  /// back later, in this unit: the other ranks must wait for the write, so
  /// `ddp::barrier();` goes before the statement that reads it (before the
  /// `if`/`try` around the read, whose test may look at the file too). A read
  /// of a file whose name differs for certain from every written one (two
  /// string literals) is left alone.
  void emitReadBarriers(FindingList &Findings) {
    llvm::ArrayRef<std::string> SavedPaths = Writes.savedPaths();
    if (SavedPaths.empty())
      return;
    for (const CallExpr *Load : Loads) {
      std::string Key = Writes.pathKey(checkpointPath(Load));
      bool Literal = llvm::StringRef(Key).starts_with("\"");
      if (Literal && llvm::all_of(SavedPaths, [&](const std::string &Saved) {
            return llvm::StringRef(Saved).starts_with("\"") && Saved != Key;
          }))
        continue;
      const Stmt *Site = barrierSite(Load);
      if (!Site)
        continue;
      if (qualifiedCalleeName(Load) == "torch::load") {
        emitLoadFromMain(Load, Site, Key, Findings);
        continue;
      }
      Finding F =
          Writes.locator().make(*Context, SourceRange(Site->getBeginLoc()),
                                "R8", "ddp-unguarded-save");
      if (F.FilePath.empty() || F.InMacro || !Writes.claimSpot(F))
        continue;
      F.Length = 0;
      bool StartsLine = false;
      std::string Indent = indentationOf(Context->getSourceManager(),
                                         Site->getBeginLoc(), StartsLine);
      F.Edits.push_back({F.Offset, 0,
                         StartsLine ? "ddp::barrier();\n" + Indent
                                    : std::string("ddp::barrier(); ")});
      F.Message = "this reads a file the main process may have written "
                  "(only the main process writes checkpoints): every rank "
                  "waits for it at 'ddp::barrier()' first";
      Finding Note = reportNoteFor(
          F, "read-after-save",
          "every rank reads a file here that only the main process writes: "
          "ddp::barrier() before it makes the ranks wait for the write; ranks "
          "on other hosts need the file on a shared filesystem (or skip the "
          "load where it restores state the ranks already share: a wrapped "
          "model is identical on every rank)");
      Findings.push_back(std::move(F));
      Findings.push_back(std::move(Note));
    }
  }

  /// R8 for `torch::load(value, path)` of a file the main process writes:
  /// `ddp::load`, which reads it on rank 0 and hands its bytes to every rank
  /// (runtime/include/ddp/checkpoint.h), so ranks on hosts without a shared
  /// disk, or in working directories of their own, load what rank 0 saved;
  /// and in the `if` around it (`Site`), a test of whether that file exists
  /// becomes `ddp::exists_on_main`, so that every rank takes rank 0's branch.
  void emitLoadFromMain(const CallExpr *Load, const Stmt *Site,
                        const std::string &Key, FindingList &Findings) {
    const Expr *Callee = strip(Load->getCallee());
    Finding F = Writes.locator().make(*Context, Callee->getSourceRange(), "R8",
                                      "ddp-unguarded-save");
    if (F.FilePath.empty() || F.InMacro || !Writes.claimSpot(F))
      return;
    F.Edits.push_back({F.Offset, F.Length, "ddp::load"});
    F.Message = "this reads a file only the main process writes: "
                "'ddp::load' reads it on rank 0 and hands its bytes to every "
                "rank";
    // The note above the statement that holds the read (its `if`, its
    // `try`), not inside a branch without braces.
    Finding At = Writes.locator().make(
        *Context, SourceRange(Site->getBeginLoc()), "R8", "ddp-unguarded-save");
    Finding Note = reportNoteFor(
        At.FilePath.empty() ? F : At, "read-after-save",
        "every rank reads a file here that only the main process writes: "
        "ddp::load reads it on rank 0 and broadcasts its bytes, so the "
        "other ranks need no copy of it (no shared filesystem)");
    Findings.push_back(std::move(F));
    Findings.push_back(std::move(Note));
    emitExistsOnMain(Site, Key, Findings);
  }

  /// `std::filesystem::exists(path)` of the checkpoint `Key` inside `Site`
  /// (the `if` or `try` around a load): `ddp::exists_on_main(path)`.
  void emitExistsOnMain(const Stmt *Site, const std::string &Key,
                        FindingList &Findings) {
    auto Matches =
        match(stmt(forEachDescendant(
                  callExpr(callee(functionDecl(hasAnyName(
                               "::std::filesystem::exists",
                               "::std::experimental::filesystem::exists"))),
                           argumentCountIs(1))
                      .bind("exists"))),
              *Site, *Context);
    for (const auto &Match : Matches) {
      const auto *Exists = Match.getNodeAs<CallExpr>("exists");
      if (Writes.pathKey(Exists->getArg(0)) != Key)
        continue;
      const Expr *Callee = strip(Exists->getCallee());
      Finding F = Writes.locator().make(*Context, Callee->getSourceRange(),
                                        "R8", "ddp-unguarded-save");
      if (F.FilePath.empty() || F.InMacro || !Writes.claimSpot(F))
        continue;
      F.Edits.push_back({F.Offset, F.Length, "ddp::exists_on_main"});
      F.Message = "whether the main process's checkpoint exists: "
                  "'ddp::exists_on_main' answers rank 0's answer on every "
                  "rank, so every rank takes the same branch";
      Findings.push_back(std::move(F));
    }
  }

  /// The statement around S, also through a declaration
  /// (`auto module = torch::jit::load(path);`).
  const Stmt *enclosingStmt(const Stmt *S) {
    DynTypedNodeList Parents = Context->getParents(*S);
    while (!Parents.empty()) {
      if (const auto *Parent = Parents[0].get<Stmt>())
        return Parent;
      const auto *Var = Parents[0].get<VarDecl>();
      if (!Var)
        return nullptr;
      Parents = Context->getParents(*Var);
    }
    return nullptr;
  }

  /// The statement `ddp::barrier();` goes before for a read: the read's own
  /// statement in its block, or the outermost `if`/`try` around it inside
  /// the enclosing loop or function (every rank runs it the same number of
  /// times). Null where no such place exists (a lambda, a loop body without
  /// braces, a read only the main process makes) or a barrier is already
  /// there.
  const Stmt *barrierSite(const Stmt *Read) {
    const Stmt *Site = nullptr;
    const Stmt *S = Read;
    while (const Stmt *Parent = enclosingStmt(S)) {
      if (isa<LambdaExpr>(Parent))
        return nullptr;
      if (const auto *If = dyn_cast<IfStmt>(Parent))
        if (MainProcessWrites::mentionsMainProcessCheck(If->getCond()))
          return nullptr;
      if (const auto *Block = dyn_cast<CompoundStmt>(Parent)) {
        Site = S;
        const Stmt *Owner = parentStmt(Block);
        if (Owner && isa<IfStmt, CXXTryStmt, CXXCatchStmt>(Owner)) {
          S = isa<CXXCatchStmt>(Owner) ? parentStmt(Owner) : Owner;
          if (!S)
            return nullptr;
          continue;
        }
        // The statement right before: a barrier of an earlier run.
        const Stmt *Previous = nullptr;
        for (const Stmt *Child : Block->body()) {
          if (Child == Site)
            break;
          Previous = Child;
        }
        if (const auto *Call = dyn_cast_or_null<CallExpr>(
                Previous ? strip(dyn_cast<Expr>(Previous)) : nullptr))
          if (qualifiedCalleeName(Call) == "ddp::barrier")
            return nullptr;
        return Site;
      }
      if (isa<ForStmt, CXXForRangeStmt, WhileStmt, DoStmt>(Parent))
        return nullptr; // A loop body without braces.
      S = Parent;
    }
    return nullptr;
  }

  FindingList &Findings;
  MainProcessWrites Writes;
  ASTContext *Context = nullptr;
  /// The unit's checkpoint reads.
  std::vector<const CallExpr *> Loads;
};

const RuleInfo GuardSavesRows[] = {
    {"R8", "ddp-unguarded-save",
     "torch::save and checkpoint writes happen on the main process only",
     CheckLevel::RewriteUntilDistributed},
};
} // namespace

extern const RuleUnit GuardSaves{GuardSavesRows,
                                 createModule<class GuardSaves>};

} // namespace ddpify
