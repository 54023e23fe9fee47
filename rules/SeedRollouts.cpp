//===- SeedRollouts.cpp - R16: rollouts collected per rank (opt-in) -------===//
//
// With `migrate --rollouts-per-rank`: a training loop whose data are no
// batches of a data set but experience the program draws itself (a
// reinforcement-learning agent acting in a simulated environment: actions
// sampled with torch::multinomial, a standard engine's distributions, noise)
// collects the same episodes on every rank by default, which is correct and
// no faster (R12's `non-torch-loader` note). With the option, each rank
// collects its own: right before the loop, `ddp::reseed_per_rank()` gives
// every rank but rank 0 its own torch random streams and
// `ddp::reseed_per_rank(engine)` its own stream of each standard engine the
// loop draws from, while the wrapped models' gradients are averaged as
// always. One optimizer step then learns from N ranks' experience: the
// samples per update are multiplied by N, which changes what one update sees
// (hence opt-in); the report note `rollouts-per-rank` says so. Each rank's
// episodes have lengths of their own, so the ranks may take different
// numbers of steps: `ddp::join();` goes after the episode loop (the
// outermost loop around the one that trains, where the reseeding goes too)
// and before each return inside it. An episode loop that makes a collective
// of the program's own (analyses/UnevenSteps.h) keeps its rollouts.
//
// It applies exactly where R12 notes a training loop whose data are not
// sharded (its note's key `unsharded-loop:`), replaces that note
// (`sharded-loop:`), and only where the loop draws random numbers, directly
// or through the program's functions. A program with BatchNorm layers keeps
// its rollouts: SyncBatchNorm synchronises every forward pass, and episodes
// of different lengths on each rank would hang the job.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/MetricLoops.h"
#include "ddpify/Registry.h"
#include "ddpify/UnevenSteps.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMap.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "llvm/ADT/SmallPtrSet.h"
#include <functional>
#include <memory>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral Rule = "R16";
constexpr llvm::StringLiteral ReportId = "rollouts-per-rank";

class SeedRollouts : public MatcherModule, public MatchFinder::MatchCallback {
public:
  SeedRollouts(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot), Root(ProjectRoot.str()) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(functionDecl(isDefinition()).bind("function"), this);
    // A BatchNorm layer anywhere in the program's code.
    auto BatchNormType = hasType(hasUnqualifiedDesugaredType(
        recordType(hasDeclaration(cxxRecordDecl(matchesName("BatchNorm"))))));
    Finder.addMatcher(expr(BatchNormType).bind("batchnorm"), this);
    Finder.addMatcher(
        declaratorDecl(anyOf(fieldDecl(), varDecl(unless(parmVarDecl()))),
                       BatchNormType)
            .bind("batchnorm"),
        this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Pending.clear();
    HasBatchNorm = false;
  }

  void run(const MatchFinder::MatchResult &Result) override {
    Context = Result.Context;
    if (const auto *E = Result.Nodes.getNodeAs<Expr>("batchnorm")) {
      HasBatchNorm |= Locator.isInRoot(*Context, E->getBeginLoc());
      return;
    }
    if (const auto *D = Result.Nodes.getNodeAs<Decl>("batchnorm")) {
      HasBatchNorm |= Locator.isInRoot(*Context, D->getLocation());
      return;
    }
    const auto *Function = Result.Nodes.getNodeAs<FunctionDecl>("function");
    if (!Function || !Function->getBody() || Function->isDependentContext() ||
        Context->getSourceManager().isInSystemHeader(Function->getLocation()))
      return;
    if (OracleOf != Context) {
      Oracle = std::make_unique<TrainingOracle>(*Context);
      OracleOf = Context;
    }
    ParentMap Parents(Function->getBody());
    std::vector<const CallExpr *> Calls;
    collectTrainingCalls(Function->getBody(), *Oracle, Calls);
    for (const CallExpr *Call : Calls) {
      const Stmt *Loop = nullptr;
      for (const Stmt *S = Parents.getParent(Call); S && !Loop;
           S = Parents.getParent(S))
        if (isLoopStatement(S))
          Loop = S;
      if (Loop)
        consider(Function, Loop, Parents);
    }
  }

  /// The whole unit is matched before the findings count: the BatchNorm
  /// layers of a program make every forward pass a collective.
  void onEndOfTranslationUnit() override {
    for (Finding &F : Pending) {
      if (HasBatchNorm && !F.RuleId.empty())
        continue; // the reseeding edit
      if (HasBatchNorm && !F.Provides.empty())
        keepRollouts(F, "the program has BatchNorm layers, which synchronise "
                        "every forward pass across the ranks, and episodes of "
                        "different lengths on each rank would hang the job");
      Findings.push_back(std::move(F));
    }
    Pending.clear();
  }

private:
  /// The first of the `ddp::reseed_per_rank(...);` statements right before
  /// Loop in its block (a migrated loop's own), or null.
  static const Stmt *reseedsBefore(const Stmt *Loop, ParentMap &Parents) {
    const auto *Block = dyn_cast_or_null<CompoundStmt>(Parents.getParent(Loop));
    if (!Block)
      return nullptr;
    const Stmt *First = nullptr;
    for (const Stmt *S : Block->body()) {
      if (S == Loop)
        return First;
      First = isReseed(S) ? (First ? First : S) : nullptr;
    }
    return nullptr;
  }

  /// Whether S is `ddp::reseed_per_rank(...);` (a migrated loop's own).
  static bool isReseed(const Stmt *S) {
    const auto *Call = dyn_cast_or_null<CallExpr>(S);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    return Callee &&
           Callee->getQualifiedNameAsString() == "ddp::reseed_per_rank";
  }

  /// Loop: the innermost loop around a backward pass (R12's note is on it);
  /// the reseeding goes before the outermost loop around it (the episodes),
  /// and every rank leaves that one through ddp::join(): each rank's
  /// episodes have lengths of their own, so the ranks may take different
  /// numbers of steps.
  void consider(const FunctionDecl *Function, const Stmt *Loop,
                ParentMap &Parents) {
    const SourceManager &SM = Context->getSourceManager();
    Finding F =
        Locator.make(*Context, SourceRange(Loop->getBeginLoc()), Rule, "");
    if (F.FilePath.empty() || F.InMacro ||
        !Done.insert({F.FilePath, F.Offset}).second)
      return;
    const Stmt *Outer = outermostLoop(Loop, Parents);
    Finding Edit =
        Locator.make(*Context, SourceRange(Outer->getBeginLoc()), Rule, "");
    if (Edit.FilePath != F.FilePath || Edit.InMacro)
      return;
    Draws Found = drawsOf(SM, Outer);
    if (!Found.Random)
      return;
    std::string Where = locationKey(F);
    F.Requires = {"unsharded-loop:" + Where};
    Edit.Requires = F.Requires;
    bool FirstOfOuter = DoneOuter.insert({Edit.FilePath, Edit.Offset}).second;

    // Already migrated: the reseeding statements stand right before it, and
    // the note above them.
    std::vector<std::string> Statements;
    const Stmt *Reseeds = reseedsBefore(Outer, Parents);
    // Engines local to another function (a static engine inside the
    // environment's step()) cannot be named here: one seeded at run time
    // draws per rank through R13's ddp::rollout_seed, one seeded alike on
    // every rank is named in the note.
    std::vector<const VarDecl *> InScope;
    std::string Unnamed;
    for (const VarDecl *Engine : Found.Engines) {
      const DeclContext *Owner = Engine->getParentFunctionOrMethod();
      if (!Owner || Owner == Function) {
        InScope.push_back(Engine);
        continue;
      }
      bool Shared = false;
      if ((Engine->getInit() && drawsRunTimeSeed(Engine->getInit(), Shared)) ||
          Shared)
        continue;
      const auto *OwnerFunction = dyn_cast<FunctionDecl>(Owner);
      Unnamed +=
          std::string(Unnamed.empty() ? "" : ", ") + "'" +
          Engine->getNameAsString() + "'" +
          (OwnerFunction ? " (in '" + OwnerFunction->getNameAsString() + "')"
                         : std::string());
    }
    if (!Reseeds) {
      Statements.push_back("ddp::reseed_per_rank();");
      for (const VarDecl *Engine : InScope)
        if (SM.isBeforeInTranslationUnit(Engine->getLocation(),
                                         Outer->getBeginLoc()))
          Statements.push_back("ddp::reseed_per_rank(" +
                               Engine->getNameAsString() + ");");
    }
    Finding Note = reportNoteFor(
        Reseeds ? Locator.make(*Context, SourceRange(Reseeds->getBeginLoc()),
                               Rule, "")
                : Edit,
        ReportId, "");
    Note.Provides = "sharded-loop:" + Where;
    Note.Requires = F.Requires;

    // A collective of the program's own whose count would differ by rank
    // once each rank plays its own episodes: the rollouts stay as they are.
    bool Returns = false;
    std::function<void(const Stmt *)> FindReturns = [&](const Stmt *S) {
      if (!S || isa<LambdaExpr>(S))
        return;
      Returns |= isa<ReturnStmt>(S);
      for (const Stmt *Child : S->children())
        FindReturns(Child);
    };
    FindReturns(Outer);
    CollectiveFinder Collectives(*Context, *Oracle, Locator, Root,
                                 /*HasBatchNorm=*/false);
    std::string Blocker;
    if (!Reseeds || !followedByJoin(Outer, Parents)) {
      if (ProgramCollective Found =
              Collectives.find(Function, Outer, Parents, Returns))
        Blocker = "the loop makes a collective of the program's own, " +
                  Found.What + " at " +
                  placeOf(*Context, Locator, Root, Found.At->getBeginLoc()) +
                  Found.Through + ", whose number would then differ by rank";
      else if (const Stmt *Goto = gotoOutOf(Outer))
        Blocker = "a 'goto' at " +
                  placeOf(*Context, Locator, Root, Goto->getBeginLoc()) +
                  " leaves the loop past the ddp::join() it would need";
    }
    if (!Blocker.empty()) {
      keepRollouts(Note, "episodes of different lengths on each rank take "
                         "different numbers of steps, and " +
                             Blocker);
      Pending.push_back(std::move(Note));
      return;
    }

    // Reference members stand for engines the program passed in; without
    // one passed in, they are engines ddpify cannot name either.
    if (Found.Engines.empty())
      Found.MemberEngines.insert(Found.ReferencedEngines.begin(),
                                 Found.ReferencedEngines.end());
    std::string Members;
    for (const std::string &Name : Found.MemberEngines)
      Members += (Members.empty() ? "'" : ", '") + Name + "'";
    Note.NotRewrittenReason =
        "each rank collects its own rollouts (--rollouts-per-rank): "
        "ddp::reseed_per_rank() before this loop gives every rank but rank 0 "
        "its own random streams, so each rank collects its own experience "
        "and each optimizer step averages the gradients of N ranks' "
        "minibatches: the samples per update are multiplied by the number of "
        "processes, and what the loop counts and prints is rank 0's own "
        "experience; each rank's episodes have lengths of their own, so the "
        "ranks may take different numbers of steps: the ranks that finish "
        "first wait in ddp::join() after the loop, and each update averages "
        "the ranks that took it" +
        (Members.empty()
             ? std::string()
             : "; the standard engine(s) " + Members +
                   " inside the program's objects keep one stream on every "
                   "rank: seed them with ddp::rank() by hand") +
        (Unnamed.empty()
             ? std::string()
             : "; the standard engine(s) " + Unnamed +
                   ", local to another function, keep one stream on every "
                   "rank: seed them with ddp::rank() by hand");
    Note.Message = Note.NotRewrittenReason;
    if (FirstOfOuter) {
      if (!Statements.empty()) {
        bool StartsLine = false;
        std::string Indent =
            indentationOf(SM, Outer->getBeginLoc(), StartsLine);
        std::string Text;
        for (const std::string &Statement : Statements)
          Text += StartsLine ? Statement + "\n" + Indent : Statement + " ";
        Edit.Length = 0;
        Edit.replaceRangeWith(Text);
        Edit.Message = "the rollouts of this loop are drawn per rank: '" +
                       Statements.front() + "' before it";
      }
      if (!joinEdits(*Context, Locator, Edit, Outer, Parents, Edit.Edits))
        return;
      if (Edit.Message.empty())
        Edit.Message = "each rank's episodes have lengths of their own: "
                       "'ddp::join();' after the loop";
      if (!Edit.Edits.empty())
        Pending.push_back(std::move(Edit));
    }
    Pending.push_back(std::move(Note));
    // The fact R13 reads (rules/SharedSeed.cpp): the seeds that feed this
    // program's rollouts become per rank (ddp::rollout_seed). A rule id, so
    // that a program with BatchNorm, whose rollouts stay, drops it too.
    Finding Fact;
    Fact.RuleId = Rule.str();
    Fact.Provides = "option:rollouts-per-rank";
    Pending.push_back(std::move(Fact));
  }

  /// The note of a loop whose rollouts stay as they are; R12's note on the
  /// loop stays too.
  static void keepRollouts(Finding &F, const std::string &Why) {
    F.Provides.clear();
    F.NotRewrittenReason =
        "the rollouts stay the same on every rank (--rollouts-per-rank): " +
        Why;
    F.Message = F.NotRewrittenReason;
  }

  FindingList &Findings;
  FindingLocator Locator;
  std::string Root;
  ASTContext *Context = nullptr;
  const ASTContext *OracleOf = nullptr;
  std::unique_ptr<TrainingOracle> Oracle;
  bool HasBatchNorm = false;
  std::vector<Finding> Pending;
  std::set<std::pair<std::string, unsigned>> Done, DoneOuter;
};

const RuleInfo SeedRolloutsRows[] = {
    {Rule, "",
     "with --rollouts-per-rank: each rank collects its own rollouts "
     "(ddp::reseed_per_rank before a training loop that draws its own "
     "experience, ddp::join() after it)"},
};
} // namespace

extern const RuleUnit SeedRollouts{
    SeedRolloutsRows, createModule<class SeedRollouts>, /*OptIn=*/true};

} // namespace ddpify
