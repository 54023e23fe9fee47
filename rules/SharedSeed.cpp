//===- SharedSeed.cpp - R13: seeds drawn at run time, shared --------------===//
//
// A program that seeds a generator from a source that differs by process —
// `std::random_device`, `time()`, a `std::chrono` clock, `getpid()`, `clock()`
// — shuffles (or makes) its data in another order on each rank. Where the
// ranks then take every N-th batch of "the" order (R4's hand batches), an
// epoch is no longer a partition of the data: some samples are seen twice,
// others never, silently. R13 wraps the seed in `ddp::shared_seed(...)`, the
// main process's value on every rank (a broadcast), as a PyTorch DDP job
// seeds every rank alike:
//
//   std::mt19937 gen(std::random_device{}());
//   std::mt19937 gen(ddp::shared_seed(std::random_device{}()));
//
// Seeds are what is given to torch::manual_seed (and its CUDA forms),
// srand, a standard engine's constructor or seed(). A seed's source is
// followed through local variables (`auto seed = rd(); ... gen(seed)`).
//
// The broadcast is a collective, so only seeds every rank draws at the same
// point are wrapped: in main, in a function that trains (or a method of a
// class with one), and not inside a loop over a loader or over batches.
// Seeds drawn per sample or per batch (a dataset's augmentation, a module's
// forward, a helper) stay each rank's own, which is harmless for them. A
// generator seeded at start-up, outside any function, cannot be shared before
// ddp::init: a report note (`rank-seed`) says so.
//
//===----------------------------------------------------------------------===//

#include "ddpify/HandBatches.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/MetricLoops.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Lex/Lexer.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral Check = "ddp-divergent-seed";

auto standardEngine() {
  return cxxRecordDecl(hasAnyName(
      "::std::mersenne_twister_engine", "::std::linear_congruential_engine",
      "::std::subtract_with_carry_engine", "::std::discard_block_engine",
      "::std::independent_bits_engine", "::std::shuffle_order_engine"));
}

/// A call whose value differs by process: a draw from std::random_device,
/// the time, a clock, the process id.
bool isRunTimeSource(const Expr *E) {
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E)) {
    if (Op->getOperator() != OO_Call || Op->getNumArgs() < 1)
      return false;
    const CXXRecordDecl *Record =
        Op->getArg(0)->getType().getNonReferenceType()->getAsCXXRecordDecl();
    return Record && Record->getQualifiedNameAsString() == "std::random_device";
  }
  const auto *Call = dyn_cast<CallExpr>(E);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee || !Callee->getIdentifier())
    return false;
  std::string Name = Callee->getQualifiedNameAsString();
  if (Name == "time" || Name == "std::time" || Name == "clock" ||
      Name == "std::clock" || Name == "getpid")
    return true;
  // std::chrono::system_clock::now() and the other clocks.
  return Callee->getName() == "now" &&
         llvm::StringRef(Name).starts_with("std::chrono::");
}

/// Whether E draws a value that differs by process, directly or through the
/// initialisers of the local variables it reads; Shared when it already goes
/// through ddp::shared_seed.
bool drawsRunTimeSeed(const Expr *E, bool &Shared, int Depth = 0) {
  if (!E || Depth > 4)
    return false;
  if (const auto *Call = dyn_cast<CallExpr>(E))
    if (const FunctionDecl *Callee = Call->getDirectCallee())
      if (Callee->getQualifiedNameAsString() == "ddp::shared_seed") {
        Shared = true;
        return false;
      }
  if (isRunTimeSource(E))
    return true;
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E))
    if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
      if (Var->isLocalVarDecl() && Var->getInit())
        return drawsRunTimeSeed(Var->getInit(), Shared, Depth + 1);
  if (isa<LambdaExpr>(E))
    return false;
  for (const Stmt *Child : E->children())
    if (const auto *ChildExpr = dyn_cast_or_null<Expr>(Child))
      if (drawsRunTimeSeed(ChildExpr, Shared, Depth))
        return true;
  return false;
}

/// Whether Record derives from a torch class whose methods run per sample
/// or per batch (a module, a dataset, a sampler, a transform).
bool isTorchCallback(const CXXRecordDecl *Record) {
  if (!Record || !Record->hasDefinition())
    return false;
  bool Found = false;
  Record->forallBases([&](const CXXRecordDecl *Base) {
    std::string Name = Base->getQualifiedNameAsString();
    if (llvm::StringRef(Name).starts_with("torch::nn::") ||
        llvm::StringRef(Name).starts_with("torch::data::"))
      Found = true;
    return true;
  });
  return Found;
}

class SeedMatchers : public MatcherModule, public MatchFinder::MatchCallback {
public:
  SeedMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    auto Seed = expr().bind("seed");
    Finder.addMatcher(callExpr(callee(functionDecl(hasAnyName(
                                   "::torch::manual_seed", "::at::manual_seed",
                                   "::torch::cuda::manual_seed",
                                   "::torch::cuda::manual_seed_all", "::srand",
                                   "::std::srand"))),
                               hasArgument(0, Seed))
                          .bind("sink"),
                      this);
    Finder.addMatcher(cxxConstructExpr(hasDeclaration(cxxConstructorDecl(
                                           ofClass(standardEngine()))),
                                       argumentCountIs(1), hasArgument(0, Seed))
                          .bind("sink"),
                      this);
    Finder.addMatcher(
        cxxMemberCallExpr(
            callee(cxxMethodDecl(hasName("seed"), ofClass(standardEngine()))),
            hasArgument(0, Seed))
            .bind("sink"),
        this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Oracle.reset();
    OracleOf = nullptr;
  }

  void run(const MatchFinder::MatchResult &Result) override {
    const auto *Seed = Result.Nodes.getNodeAs<Expr>("seed");
    const auto *Sink = Result.Nodes.getNodeAs<Expr>("sink");
    if (!Seed || !Sink || isa<CXXDefaultArgExpr>(Seed))
      return;
    ASTContext &Context = *Result.Context;
    if (!Locator.isInRoot(Context, Seed->getBeginLoc()))
      return;
    bool Shared = false;
    if (!drawsRunTimeSeed(Seed, Shared) || Shared)
      return;
    if (OracleOf != &Context) {
      Oracle = std::make_unique<TrainingOracle>(Context);
      OracleOf = &Context;
    }
    const FunctionDecl *Function = enclosingFunction(Context, Sink);
    if (!Function) {
      if (reseedInMain(Context, Seed, Sink))
        return;
      noteUnshared(Context, Sink,
                   "this generator is seeded at start-up from a value that "
                   "differs by process, before ddp::init can share it");
      return;
    }
    if (!drawnOnceByEveryRank(Context, Function, Sink))
      return;
    if (!Seed->getType()->isIntegerType()) {
      noteUnshared(Context, Sink,
                   "this generator is seeded from values that differ by "
                   "process (a std::seed_seq of them), which ddpify does not "
                   "share");
      return;
    }
    Finding F = Locator.make(Context, Seed->getSourceRange(), "R13", Check);
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    F.Message = "a seed drawn at run time differs by process, so ranks that "
                "shuffle or make their data with it would each see another "
                "order; every rank uses the main process's seed "
                "(ddp::shared_seed)";
    if (!F.InMacro && !Seed->getBeginLoc().isMacroID() &&
        !Seed->getEndLoc().isMacroID()) {
      F.Edits.push_back({F.Offset, 0, "ddp::shared_seed("});
      F.Edits.push_back({F.Offset + F.Length, 0, ")"});
    }
    Findings.push_back(std::move(F));
  }

private:
  /// The function whose body holds S (a lambda's body counts as its own
  /// function); null for a namespace-scope initialiser.
  static const FunctionDecl *enclosingFunction(ASTContext &Context,
                                               const Stmt *S) {
    DynTypedNodeList Parents = Context.getParents(*S);
    for (int Steps = 0; Steps < 256 && !Parents.empty(); ++Steps) {
      if (const auto *Function = Parents[0].get<FunctionDecl>())
        return Function;
      if (const auto *Lambda = Parents[0].get<LambdaExpr>())
        return Lambda->getCallOperator();
      if (Parents[0].get<TranslationUnitDecl>() ||
          Parents[0].get<NamespaceDecl>())
        return nullptr;
      if (const auto *Field = Parents[0].get<FieldDecl>()) {
        // An in-class initialiser runs in the class's constructors.
        const auto *Record = dyn_cast<CXXRecordDecl>(Field->getParent());
        if (Record && Record->hasDefinition())
          for (const CXXConstructorDecl *Ctor : Record->ctors())
            if (Ctor->doesThisDeclarationHaveABody())
              return Ctor;
        return nullptr;
      }
      Parents = Context.getParents(Parents[0]);
    }
    return nullptr;
  }

  /// Whether every rank runs Sink as often, at the same point: it is in main,
  /// in a function that trains, or in a method of a class with one that does
  /// (not a module, dataset or lambda, whose code runs per sample or batch),
  /// and not inside a loop over a loader or over batches.
  bool drawnOnceByEveryRank(ASTContext &Context, const FunctionDecl *Function,
                            const Stmt *Sink) {
    if (isa<CXXMethodDecl>(Function) &&
        cast<CXXMethodDecl>(Function)->getParent()->isLambda())
      return false;
    bool Trusted = Function->isMain() || Oracle->functionTrains(Function);
    // A helper every rank calls once: a seed drawn in a loop of its own
    // would be drawn as often as that loop runs, which may differ by rank.
    if (!Trusted && calledOnceByEveryRank(Context, Function)) {
      if (insideLoop(Context, Sink))
        return false;
      Trusted = true;
    }
    if (const auto *Method = dyn_cast<CXXMethodDecl>(Function)) {
      const CXXRecordDecl *Record = Method->getParent();
      if (isTorchCallback(Record) && !Trusted)
        return false;
      for (const CXXMethodDecl *Other : Record->methods())
        Trusted |= Other->hasBody() && Oracle->functionTrains(Other);
    }
    if (!Trusted)
      return false;
    return outsideBatchLoops(Context, Sink);
  }

  /// Whether Function (a helper that makes the data, a dataset's
  /// constructor) is only called straight from main or a function that
  /// trains, outside any loop, by code of this file that no other unit
  /// sees: every rank then calls it as often, at the same point.
  bool calledOnceByEveryRank(ASTContext &Context,
                             const FunctionDecl *Function) {
    const SourceManager &SM = Context.getSourceManager();
    const FunctionDecl *Canonical = Function->getCanonicalDecl();
    if (!SM.isInMainFile(SM.getExpansionLoc(Canonical->getLocation())))
      return false;
    // A virtual method (a dataset's get(), a module's forward()) is also
    // called by the library, where no call of this file shows it.
    if (const auto *Method = dyn_cast<CXXMethodDecl>(Function))
      if (Method->isVirtual())
        return false;
    class Sites : public RecursiveASTVisitor<Sites> {
    public:
      explicit Sites(const FunctionDecl *Target) : Target(Target) {}
      bool VisitCallExpr(CallExpr *Call) {
        if (const FunctionDecl *Callee = Call->getDirectCallee())
          if (Callee->getCanonicalDecl() == Target)
            Found.push_back(Call);
        return true;
      }
      bool VisitCXXConstructExpr(CXXConstructExpr *Construct) {
        if (Construct->getConstructor() &&
            Construct->getConstructor()->getCanonicalDecl() == Target)
          Found.push_back(Construct);
        return true;
      }
      bool VisitDeclRefExpr(DeclRefExpr *Ref) {
        // Its address taken, or named for a call that is not direct.
        if (Ref->getDecl()->getCanonicalDecl() == Target)
          ++Named;
        return true;
      }
      const FunctionDecl *Target;
      std::vector<const Expr *> Found;
      unsigned Named = 0;
    } Visitor(Canonical);
    for (Decl *TopLevel : Context.getTranslationUnitDecl()->decls())
      if (SM.isInMainFile(SM.getExpansionLoc(TopLevel->getLocation())))
        Visitor.TraverseDecl(TopLevel);
    unsigned DirectCalls = 0;
    for (const Expr *Site : Visitor.Found)
      DirectCalls += isa<CallExpr>(Site) && !isa<CXXMemberCallExpr>(Site);
    if (Visitor.Found.empty() || Visitor.Named > DirectCalls)
      return false;
    for (const Expr *Site : Visitor.Found) {
      const FunctionDecl *Caller = enclosingFunction(Context, Site);
      if (!Caller || Caller == Function ||
          !(Caller->isMain() || Oracle->functionTrains(Caller)))
        return false;
      if (insideLoop(Context, Site))
        return false;
    }
    return true;
  }

  /// Whether S is inside a loop (or a lambda) of its function.
  static bool insideLoop(ASTContext &Context, const Stmt *S) {
    DynTypedNodeList Parents = Context.getParents(*S);
    for (int Steps = 0; Steps < 256 && !Parents.empty(); ++Steps) {
      if (Parents[0].get<FunctionDecl>())
        return false;
      if (const auto *Parent = Parents[0].get<Stmt>())
        if (isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt, LambdaExpr>(
                Parent))
          return true;
      Parents = Context.getParents(Parents[0]);
    }
    return false;
  }

  /// Whether Sink is outside every loop over a loader or over batches of
  /// its function.
  bool outsideBatchLoops(ASTContext &Context, const Stmt *Sink) {
    DynTypedNodeList Parents = Context.getParents(*Sink);
    for (int Steps = 0; Steps < 256 && !Parents.empty(); ++Steps) {
      if (Parents[0].get<FunctionDecl>())
        return true;
      const auto *S = Parents[0].get<Stmt>();
      if (!S) { // A declaration (of the generator): go on above it.
        Parents = Context.getParents(Parents[0]);
        continue;
      }
      if (const auto *Range = dyn_cast<CXXForRangeStmt>(S)) {
        const Expr *Init = Range->getRangeInit();
        if (Init &&
            (isDataLoaderType(Init->getType()) || isShardedBatchLoop(Range) ||
             handBatchList(Context, Range, *Oracle)))
          return false;
      } else if (isa<ForStmt, WhileStmt>(S) &&
                 handBatchLoop(Context, S, *Oracle).Loop) {
        return false;
      }
      Parents = Context.getParents(*S);
    }
    return true;
  }

  /// A standard engine defined at namespace scope, seeded at start-up: it
  /// is seeded again in this unit's main, right after ddp::init, with the
  /// main process's value of the same seed expression (before any rank
  /// draws from it in main). True when that is (or was already) done.
  bool reseedInMain(ASTContext &Context, const Expr *Seed, const Expr *Sink) {
    // The variable the engine's construction initialises (through the
    // full-expression's cleanups of a `std::random_device{}` temporary).
    DynTypedNodeList Parents = Context.getParents(*Sink);
    while (!Parents.empty() && Parents[0].get<Expr>() &&
           isa<ExprWithCleanups, ImplicitCastExpr, MaterializeTemporaryExpr,
               CXXBindTemporaryExpr>(Parents[0].get<Expr>()))
      Parents = Context.getParents(Parents[0]);
    const auto *Engine = Parents.empty() ? nullptr : Parents[0].get<VarDecl>();
    if (!Engine || !Engine->hasGlobalStorage() ||
        Engine->isStaticDataMember() ||
        !Engine->getType()->getAsCXXRecordDecl() || !Engine->getIdentifier())
      return false;
    const FunctionDecl *Main = nullptr;
    for (const Decl *TopLevel : Context.getTranslationUnitDecl()->decls())
      if (const auto *Function = dyn_cast<FunctionDecl>(TopLevel))
        if (Function->isMain() && Function->doesThisDeclarationHaveABody() &&
            Locator.isInRoot(Context, Function->getLocation()))
          Main = Function;
    const auto *Body = Main ? dyn_cast<CompoundStmt>(Main->getBody()) : nullptr;
    if (!Body)
      return false;
    const SourceManager &SM = Context.getSourceManager();
    CharSourceRange SeedRange =
        CharSourceRange::getTokenRange(Seed->getSourceRange());
    if (Seed->getBeginLoc().isMacroID() || Seed->getEndLoc().isMacroID())
      return false;
    std::string SeedText =
        Lexer::getSourceText(SeedRange, SM, Context.getLangOpts()).str();
    if (SeedText.empty())
      return false;
    // Reseeded already (a second run), or by the user.
    for (const Stmt *S : Body->body())
      if (reseeds(S, Engine))
        return true;
    // After ddp::init where main calls it, else right after `{`, where R1
    // puts the call (same offset, R1's edit first).
    SourceLocation After = Body->getLBracLoc();
    for (const Stmt *S : Body->body())
      if (callsFunction(S, "ddp::init")) {
        // Its `;`, the last token of the statement.
        SourceLocation Semi = Lexer::findLocationAfterToken(
            S->getEndLoc(), tok::semi, SM, Context.getLangOpts(),
            /*SkipTrailingWhitespaceAndNewLine=*/false);
        if (Semi.isInvalid())
          return false;
        After = Semi.getLocWithOffset(-1);
        break;
      }
    Finding F = Locator.make(Context, SourceRange(After, After), "R13", Check);
    if (F.FilePath.empty() || F.InMacro ||
        !Seen.insert({F.FilePath, F.Offset}).second)
      return false;
    F.Offset += F.Length;
    F.Length = 0;
    bool StartsLine = true;
    std::string Indent =
        Body->body_empty()
            ? "  "
            : indentationOf(SM, Body->body_front()->getBeginLoc(), StartsLine);
    std::string Name = Engine->getName().str();
    for (const DeclContext *Scope = Engine->getDeclContext(); Scope;
         Scope = Scope->getParent())
      if (const auto *Namespace = dyn_cast<NamespaceDecl>(Scope))
        if (!Namespace->isAnonymousNamespace())
          Name = Namespace->getName().str() + "::" + Name;
    F.Message = "the generator '" + Engine->getNameAsString() +
                "' is seeded at start-up from a value that differs by "
                "process, so ranks that shuffle or make their data with it "
                "would each see another order; main seeds it again after "
                "ddp::init with the main process's value (ddp::shared_seed)";
    F.Edits.push_back(
        {F.Offset, 0,
         "\n" + Indent + Name + ".seed(ddp::shared_seed(" + SeedText + "));"});
    Findings.push_back(std::move(F));
    return true;
  }

  /// Whether S is `engine.seed(...ddp::shared_seed(...)...)`.
  static bool reseeds(const Stmt *S, const VarDecl *Engine) {
    const auto *E = dyn_cast<Expr>(S);
    const auto *Call =
        E ? dyn_cast<CXXMemberCallExpr>(E->IgnoreImplicit()) : nullptr;
    if (!Call || !Call->getMethodDecl() ||
        !Call->getMethodDecl()->getIdentifier() ||
        Call->getMethodDecl()->getName() != "seed")
      return false;
    const auto *Object = dyn_cast<DeclRefExpr>(
        Call->getImplicitObjectArgument()->IgnoreParenImpCasts());
    return Object && Object->getDecl() == Engine &&
           callsFunction(Call, "ddp::shared_seed");
  }

  static bool callsFunction(const Stmt *S, llvm::StringRef Name) {
    if (!S)
      return false;
    if (const auto *Call = dyn_cast<CallExpr>(S))
      if (const FunctionDecl *Callee = Call->getDirectCallee())
        if (Callee->getQualifiedNameAsString() == Name)
          return true;
    for (const Stmt *Child : S->children())
      if (callsFunction(Child, Name))
        return true;
    return false;
  }

  void noteUnshared(ASTContext &Context, const Expr *Sink,
                    llvm::StringRef Why) {
    Finding F = Locator.make(Context, SourceRange(Sink->getBeginLoc()), "", "");
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    F.Length = 0;
    F.ReportId = "rank-seed";
    F.NotRewrittenReason =
        Why.str() +
        ": if it shuffles or makes data that the ranks share out, seed it "
        "in main after ddp::init with one integer through "
        "ddp::shared_seed(...)";
    F.Message = F.NotRewrittenReason;
    Findings.push_back(std::move(F));
  }

  FindingList &Findings;
  FindingLocator Locator;
  std::unique_ptr<TrainingOracle> Oracle;
  const ASTContext *OracleOf = nullptr;
  std::set<std::pair<std::string, unsigned>> Seen;
};

const RuleInfo SharedSeedRows[] = {
    {"R13", "ddp-divergent-seed",
     "a seed drawn at run time (random_device, time, a clock) becomes the "
     "main process's on every rank (ddp::shared_seed)",
     CheckLevel::RewriteUntilDistributed},
};
} // namespace

extern const RuleUnit SharedSeed{SharedSeedRows, createModule<SeedMatchers>};

} // namespace ddpify
