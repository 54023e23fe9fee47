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
// (hence opt-in); the report note `rollouts-per-rank` says so.
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
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMap.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "llvm/ADT/SmallPtrSet.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral Rule = "R16";
constexpr llvm::StringLiteral ReportId = "rollouts-per-rank";

bool isLoop(const Stmt *S) {
  return isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(S);
}

/// A standard random engine (std::mt19937, std::default_random_engine, ...).
bool isStandardEngine(QualType T) {
  const auto *Record = T.getNonReferenceType()->getAsCXXRecordDecl();
  if (!Record)
    return false;
  std::string Name = Record->getQualifiedNameAsString();
  return Name == "std::mersenne_twister_engine" ||
         Name == "std::linear_congruential_engine" ||
         Name == "std::subtract_with_carry_engine" ||
         Name == "std::discard_block_engine" ||
         Name == "std::independent_bits_engine" ||
         Name == "std::shuffle_order_engine";
}

bool isStandardDistribution(QualType T) {
  const auto *Record = T.getNonReferenceType()->getAsCXXRecordDecl();
  if (!Record)
    return false;
  std::string Name = Record->getQualifiedNameAsString();
  return llvm::StringRef(Name).starts_with("std::") &&
         llvm::StringRef(Name).ends_with("_distribution");
}

/// What a loop draws: whether it samples random numbers at all, and the
/// standard engines (locals and globals) it draws from by name.
struct Draws {
  bool Random = false;
  std::vector<const VarDecl *> Engines;
  std::set<std::string> MemberEngines;
  std::set<std::string> ReferencedEngines;
};

class DrawFinder {
public:
  DrawFinder(const SourceManager &SM, Draws &Found) : SM(SM), Found(Found) {}

  void visit(const Stmt *S) {
    if (!S || isa<LambdaExpr>(S))
      return;
    if (const auto *Call = dyn_cast<CallExpr>(S))
      visitCall(Call);
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
        noteVariable(Var);
    if (const auto *Member = dyn_cast<MemberExpr>(S))
      if (isStandardEngine(Member->getType())) {
        // A reference member is bound to an engine the program made (an
        // environment holding the program's generator), a value member is
        // the object's own.
        if (Member->getMemberDecl()->getType()->isReferenceType())
          Found.ReferencedEngines.insert(
              Member->getMemberDecl()->getNameAsString());
        else
          Found.MemberEngines.insert(
              Member->getMemberDecl()->getNameAsString());
      }
    for (const Stmt *Child : S->children())
      visit(Child);
  }

private:
  void noteVariable(const VarDecl *Var) {
    if (!(Var->hasGlobalStorage() || Var->isLocalVarDecl()))
      return;
    if (isStandardEngine(Var->getType())) {
      if (llvm::find(Found.Engines, Var) == Found.Engines.end())
        Found.Engines.push_back(Var);
      return;
    }
    // An object the loop uses that was built from an engine
    // (`CartPole env(rng);`): it may draw from that engine.
    if (!Var->getType()->getAsCXXRecordDecl() || !Seen.insert(Var).second)
      return;
    if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(
            stripParensAndImplicit(Var->getInit())))
      for (const Expr *Argument : Construct->arguments())
        if (const auto *Ref =
                dyn_cast<DeclRefExpr>(stripParensAndImplicit(Argument)))
          if (const auto *Engine = dyn_cast<VarDecl>(Ref->getDecl()))
            if (isStandardEngine(Engine->getType()))
              noteVariable(Engine);
  }

  void visitCall(const CallExpr *Call) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Call))
      if (Op->getOperator() == OO_Call &&
          (isStandardDistribution(Op->getArg(0)->getType()) ||
           isStandardEngine(Op->getArg(0)->getType())))
        Found.Random = true;
    if (!Callee || !Callee->getIdentifier())
      return;
    llvm::StringRef Short = Callee->getName();
    std::string Qualified = Callee->getQualifiedNameAsString();
    llvm::StringRef Name = Qualified;
    // torch::multinomial, torch::rand*, torch::normal, torch::bernoulli,
    // torch::poisson, and the same as Tensor methods (x.uniform_(), ...).
    bool TorchName = Name.starts_with("torch::") || Name.starts_with("at::");
    if (TorchName &&
        (Short.starts_with("rand") || Short == "normal" ||
         Short == "bernoulli" || Short == "multinomial" || Short == "poisson"))
      Found.Random = true;
    if (isa<CXXMethodDecl>(Callee) && TorchName &&
        (Short == "uniform_" || Short == "normal_" || Short == "bernoulli_" ||
         Short == "random_" || Short == "exponential_" ||
         Short == "geometric_" || Short == "cauchy_" || Short == "log_normal_"))
      Found.Random = true;
    if (Name == "rand" || Name == "std::rand" || Name == "random")
      Found.Random = true;
    // The program's own functions (an environment's step(), a policy's
    // act()): what they draw, the loop draws.
    const FunctionDecl *Definition = nullptr;
    if (Callee->hasBody(Definition) && Definition &&
        !SM.isInSystemHeader(Definition->getLocation()) &&
        Visited.insert(Definition).second && Visited.size() < 64)
      visit(Definition->getBody());
  }

  const SourceManager &SM;
  Draws &Found;
  llvm::SmallPtrSet<const FunctionDecl *, 16> Visited;
  llvm::SmallPtrSet<const VarDecl *, 16> Seen;
};

class SeedRollouts : public MatcherModule, public MatchFinder::MatchCallback {
public:
  SeedRollouts(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

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
    ParentMap Parents(Function->getBody());
    std::vector<const CallExpr *> Calls;
    collectBackwardCalls(Function->getBody(), Calls);
    for (const CallExpr *Call : Calls) {
      const Stmt *Loop = nullptr;
      for (const Stmt *S = Parents.getParent(Call); S && !Loop;
           S = Parents.getParent(S))
        if (isLoop(S))
          Loop = S;
      if (Loop)
        consider(Loop, Parents);
    }
  }

  /// The whole unit is matched before the findings count: the BatchNorm
  /// layers of a program make every forward pass a collective.
  void onEndOfTranslationUnit() override {
    for (Finding &F : Pending) {
      if (HasBatchNorm && !F.RuleId.empty())
        continue; // the reseeding edit
      if (HasBatchNorm)
        keepRollouts(F);
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

  void consider(const Stmt *Loop, ParentMap &Parents) {
    const SourceManager &SM = Context->getSourceManager();
    Finding F =
        Locator.make(*Context, SourceRange(Loop->getBeginLoc()), Rule, "");
    if (F.FilePath.empty() || F.InMacro ||
        !Done.insert({F.FilePath, F.Offset}).second)
      return;
    Draws Found;
    DrawFinder(SM, Found).visit(Loop);
    if (!Found.Random)
      return;
    std::string Where = locationKey(F);
    F.Requires = {"unsharded-loop:" + Where};

    // Already migrated: the reseeding statements stand right before it, and
    // the note above them.
    std::vector<std::string> Statements;
    const Stmt *Reseeds = reseedsBefore(Loop, Parents);
    if (!Reseeds) {
      Statements.push_back("ddp::reseed_per_rank();");
      for (const VarDecl *Engine : Found.Engines)
        if (SM.isBeforeInTranslationUnit(Engine->getLocation(),
                                         Loop->getBeginLoc()) &&
            !SM.isBeforeInTranslationUnit(Loop->getBeginLoc(),
                                          Engine->getLocation()))
          Statements.push_back("ddp::reseed_per_rank(" +
                               Engine->getNameAsString() + ");");
    }
    // Reference members stand for engines the program passed in; without
    // one passed in, they are engines ddpify cannot name either.
    if (Found.Engines.empty())
      Found.MemberEngines.insert(Found.ReferencedEngines.begin(),
                                 Found.ReferencedEngines.end());
    std::string Members;
    for (const std::string &Name : Found.MemberEngines)
      Members += (Members.empty() ? "'" : ", '") + Name + "'";
    std::string Reason =
        "each rank collects its own rollouts (--rollouts-per-rank): "
        "ddp::reseed_per_rank() before this loop gives every rank but rank 0 "
        "its own random streams, so each optimizer step averages the "
        "gradients of every rank's episodes: the samples per update are "
        "multiplied by the number of processes, and what the loop counts "
        "and prints is rank 0's own experience" +
        (Members.empty()
             ? std::string()
             : "; the standard engine(s) " + Members +
                   " inside the program's objects keep one stream on every "
                   "rank: seed them with ddp::rank() by hand");
    Finding Note = reportNoteFor(
        Reseeds ? Locator.make(*Context, SourceRange(Reseeds->getBeginLoc()),
                               Rule, "")
                : F,
        ReportId, Reason);
    Note.Provides = "sharded-loop:" + Where;
    Note.Requires = F.Requires;
    if (!Statements.empty()) {
      bool StartsLine = false;
      std::string Indent = indentationOf(SM, Loop->getBeginLoc(), StartsLine);
      std::string Text;
      for (const std::string &Statement : Statements)
        Text += StartsLine ? Statement + "\n" + Indent : Statement + " ";
      F.Length = 0;
      F.replaceRangeWith(Text);
      F.Message = "the rollouts of this loop are drawn per rank: '" +
                  Statements.front() + "' before it";
      Pending.push_back(std::move(F));
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
  static void keepRollouts(Finding &F) {
    F.Provides.clear();
    F.NotRewrittenReason =
        "the rollouts stay the same on every rank (--rollouts-per-rank): the "
        "program has BatchNorm layers, which synchronise every forward pass "
        "across the ranks, and episodes of different lengths on each rank "
        "would hang the job";
    F.Message = F.NotRewrittenReason;
  }

  FindingList &Findings;
  FindingLocator Locator;
  ASTContext *Context = nullptr;
  bool HasBatchNorm = false;
  std::vector<Finding> Pending;
  std::set<std::pair<std::string, unsigned>> Done;
};

const RuleInfo SeedRolloutsRows[] = {
    {Rule, "",
     "with --rollouts-per-rank: each rank collects its own rollouts "
     "(ddp::reseed_per_rank before a training loop that draws its own "
     "experience)"},
};
} // namespace

extern const RuleUnit SeedRollouts{
    SeedRolloutsRows, createModule<class SeedRollouts>, /*OptIn=*/true};

} // namespace ddpify
