//===- SharedSeed.cpp - R13: seeds drawn at run time, shared --------------===//
//
// A program that seeds a generator from a source that differs by process —
// `std::random_device` (named or a temporary), `time()`, a `std::chrono`
// clock, `getpid()`, `clock()` — shuffles (or makes) its data, or plays its
// episodes, in another order on each rank: an epoch is no longer a partition
// of the data, the ranks of a reinforcement-learning program play other
// episodes and take other numbers of steps, silently. R13 wraps the seed in
// `ddp::shared_seed(...)`, whose n-th call returns the same value on every
// rank (no collective: derived from a job seed ddp::init shares), as a
// PyTorch DDP job seeds every rank alike:
//
//   std::mt19937 gen(std::random_device{}());
//   std::mt19937 gen(ddp::shared_seed(std::random_device{}()));
//
// Seeds are what is given to torch::manual_seed (and its CUDA forms),
// srand, a standard engine's constructor or seed(), and each element of a
// `std::seed_seq{...}`. A seed's source is followed through local variables
// (`auto seed = rd(); ... gen(seed)`) and into a helper of the unit that
// returns it (`gen(make_seed())`, wrapped at the call).
//
// Since the n-th call is the same on every rank, a seed is wrapped wherever
// the ranks draw it alike: in any function of any unit (an environment's
// reset() called every episode, a replay buffer's constructor in its own
// .cpp, a function-local static, a member initialiser or a default member
// initialiser), in loops that are not data loops. Left alone, each rank's
// own: seeds drawn per sample or per batch, whose count may differ by rank
// (a torch dataset's, transform's or module's methods but their
// constructors, a lambda, code inside a loop over a loader or over batches R4
// shards, a function such a loop or method calls: the fact `batch-fn:`).
// A generator seeded at namespace scope runs before ddp::init: where main is
// in the unit it is seeded again right after ddp::init, else a report note
// (`rank-seed`) says so.
//
// With --rollouts-per-rank (R16 provides `option:rollouts-per-rank`), the
// seeds that feed the rollouts are each rank's own, ddp::rollout_seed(...):
// those drawn inside a training loop whose data are not sharded, in the
// functions it calls and the classes whose objects it uses (constructors and
// member initialisers of an environment, a replay buffer, an agent, and of
// the classes of their fields), and an srand in the function that holds the
// loop. The unit of the loop provides the facts `rollout-fn:`,
// `rollout-class:` and `rollout-holder:` that a seed of another unit reads.
//
//===----------------------------------------------------------------------===//

#include "ddpify/HandBatches.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/MetricLoops.h"
#include "ddpify/Registry.h"
#include "ddpify/UnevenSteps.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/SmallPtrSet.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral Check = "ddp-divergent-seed";
constexpr llvm::StringLiteral RolloutsOption = "option:rollouts-per-rank";

auto standardEngine() {
  return cxxRecordDecl(hasAnyName(
      "::std::mersenne_twister_engine", "::std::linear_congruential_engine",
      "::std::subtract_with_carry_engine", "::std::discard_block_engine",
      "::std::independent_bits_engine", "::std::shuffle_order_engine"));
}

bool isSeedSeq(QualType T) {
  const CXXRecordDecl *Record = T.getNonReferenceType()->getAsCXXRecordDecl();
  return Record && Record->getQualifiedNameAsString() == "std::seed_seq";
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

bool isLoop(const Stmt *S) {
  return isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(S);
}

/// The name a fact gives a function or a class, the same in every unit.
std::string keyOf(const NamedDecl *D) {
  return cast<NamedDecl>(D->getCanonicalDecl())->getQualifiedNameAsString();
}

/// Where a seed is drawn: in a function (a lambda's call operator, a
/// constructor for its member initialisers), in a default member initialiser
/// of a class (run by its constructors), or at namespace scope (neither).
struct Place {
  const FunctionDecl *Function = nullptr;
  const CXXRecordDecl *Record = nullptr;
  /// The class whose method (or member initialiser) holds the seed.
  const CXXRecordDecl *Class = nullptr;
  bool Lambda = false;
};

/// What a loop runs, through the program's functions whose bodies this unit
/// shows: the functions it calls and, with Classes, the classes of the
/// objects it uses and of their fields.
class Reach {
public:
  Reach(ASTContext &Context, FindingLocator &Locator, bool Classes)
      : Context(Context), Locator(Locator), TrackClasses(Classes) {}

  void visit(const Stmt *S) {
    if (!S)
      return;
    if (const auto *Lambda = dyn_cast<LambdaExpr>(S)) {
      visit(Lambda->getBody());
      return;
    }
    if (const auto *Call = dyn_cast<CallExpr>(S))
      if (const FunctionDecl *Callee = Call->getDirectCallee())
        function(Callee);
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(S))
      if (const CXXConstructorDecl *Ctor = Construct->getConstructor())
        function(Ctor);
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
        classOf(Var->getType());
    if (const auto *Member = dyn_cast<MemberExpr>(S))
      classOf(Member->getType());
    for (const Stmt *Child : S->children())
      visit(Child);
  }

  std::set<std::string> Functions, Classes;

private:
  void function(const FunctionDecl *Function) {
    if (!Locator.isInRoot(Context, Function->getLocation()))
      return;
    Functions.insert(keyOf(Function));
    if (const auto *Method = dyn_cast<CXXMethodDecl>(Function))
      record(Method->getParent());
    const FunctionDecl *Definition = nullptr;
    if (!Function->hasBody(Definition) || !Definition ||
        !Visited.insert(Definition).second || Visited.size() > 128)
      return;
    if (const auto *Ctor = dyn_cast<CXXConstructorDecl>(Definition))
      for (const CXXCtorInitializer *Init : Ctor->inits())
        if (Init->isWritten())
          visit(Init->getInit());
    visit(Definition->getBody());
  }

  void classOf(QualType T) {
    T = T.getNonReferenceType();
    if (T->isPointerType())
      T = T->getPointeeType();
    record(T->getAsCXXRecordDecl());
  }

  void record(const CXXRecordDecl *Record) {
    if (!TrackClasses || !Record || !Record->hasDefinition())
      return;
    Record = Record->getDefinition();
    if (Record->isLambda() ||
        !Locator.isInRoot(Context, Record->getLocation()) ||
        !Classes.insert(keyOf(Record)).second)
      return;
    // An agent's replay buffer, an environment's own engine holder: the
    // objects a used object holds are used too.
    for (const FieldDecl *Field : Record->fields())
      classOf(Field->getType());
  }

  ASTContext &Context;
  FindingLocator &Locator;
  bool TrackClasses;
  llvm::SmallPtrSet<const FunctionDecl *, 32> Visited;
};

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
    // `std::seed_seq seq{rd(), rd(), rd()}`: each element is a seed.
    Finder.addMatcher(
        cxxConstructExpr(hasDeclaration(cxxConstructorDecl(
                             ofClass(hasName("::std::seed_seq")))))
            .bind("seedseq"),
        this);
    // Every function's loops: which code runs per batch, which per rollout.
    Finder.addMatcher(functionDecl(isDefinition()).bind("function"), this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Oracle.reset();
    OracleOf = nullptr;
    Analysed.clear();
    RolloutLoops.clear();
    CallersOf.clear();
    Facts.clear();
  }

  void run(const MatchFinder::MatchResult &Result) override {
    ASTContext &Context = *Result.Context;
    if (OracleOf != &Context) {
      Oracle = std::make_unique<TrainingOracle>(Context);
      OracleOf = &Context;
    }
    if (const auto *Function =
            Result.Nodes.getNodeAs<FunctionDecl>("function")) {
      analyseFunction(Context, Function);
      return;
    }
    if (const auto *SeedSeq =
            Result.Nodes.getNodeAs<CXXConstructExpr>("seedseq")) {
      for (const Expr *Element : seedSeqElements(SeedSeq))
        considerSeed(Context, Element, SeedSeq, /*Srand=*/false);
      return;
    }
    const auto *Seed = Result.Nodes.getNodeAs<Expr>("seed");
    const auto *Sink = Result.Nodes.getNodeAs<Expr>("sink");
    if (!Seed || !Sink)
      return;
    bool Srand = false;
    if (const auto *Call = dyn_cast<CallExpr>(Sink))
      if (const FunctionDecl *Callee = Call->getDirectCallee())
        Srand = Callee->getIdentifier() && Callee->getName() == "srand";
    considerSeed(Context, Seed, Sink, Srand);
  }

private:
  /// The elements of `std::seed_seq{a, b, c}` (none for another
  /// constructor: from iterators, the default).
  static std::vector<const Expr *>
  seedSeqElements(const CXXConstructExpr *Construct) {
    std::vector<const Expr *> Elements;
    for (const Expr *Argument : Construct->arguments()) {
      const auto *List =
          dyn_cast<CXXStdInitializerListExpr>(Argument->IgnoreImplicit());
      const auto *Init =
          List ? dyn_cast<InitListExpr>(List->getSubExpr()->IgnoreImplicit())
               : nullptr;
      if (Init)
        for (const Expr *Element : Init->inits())
          Elements.push_back(Element);
    }
    return Elements;
  }

  /// Whether Seed names a local std::seed_seq made from a list of values,
  /// whose elements are seeds of their own.
  static bool isListSeedSeq(const Expr *Seed) {
    const auto *Ref = dyn_cast<DeclRefExpr>(Seed->IgnoreParenImpCasts());
    const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
    if (!Var || !Var->isLocalVarDecl() || !isSeedSeq(Var->getType()))
      return false;
    const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(
        stripParensAndImplicit(Var->getInit()));
    return Construct && !seedSeqElements(Construct).empty();
  }

  void considerSeed(ASTContext &Context, const Expr *Seed, const Expr *Sink,
                    bool Srand) {
    if (!Seed || isa<CXXDefaultArgExpr>(Seed))
      return;
    if (!Locator.isInRoot(Context, Seed->getBeginLoc()))
      return;
    bool Shared = false;
    if (!drawsRunTimeSeed(Seed, Shared) || Shared)
      return;
    Place Where = placeOf(Context, Sink);
    if (!Where.Function && !Where.Record) {
      if (reseedInMain(Context, Seed, Sink))
        return;
      noteUnshared(Context, Sink,
                   "this generator is seeded at start-up from a value that "
                   "differs by process, before ddp::init can share it");
      return;
    }
    // Per sample or per batch: each rank's own, as data augmentation wants
    // (and a count that may differ by rank would put the ranks' shared
    // seeds out of step).
    if (Where.Lambda)
      return;
    if (Where.Function && isTorchCallback(Where.Class) &&
        !isa<CXXConstructorDecl>(Where.Function))
      return;
    if (Where.Function && !outsideBatchLoops(Context, Sink))
      return;
    if (!Seed->getType()->isIntegerType()) {
      if (isSeedSeq(Seed->getType()) && isListSeedSeq(Seed))
        return; // Its elements are wrapped where the std::seed_seq is made.
      noteUnshared(Context, Sink,
                   "this generator is seeded from values that differ by "
                   "process (a std::seed_seq made from them), which ddpify "
                   "does not share");
      return;
    }
    Finding F = Locator.make(Context, Seed->getSourceRange(), "R13", Check);
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    bool Editable = !F.InMacro && !Seed->getBeginLoc().isMacroID() &&
                    !Seed->getEndLoc().isMacroID();
    // The functions whose code draws the seed: its own, and those of this
    // unit that call it (an environment's step() calling a noise helper).
    std::vector<const FunctionDecl *> Callers;
    if (Where.Function)
      Callers = callersOf(Context, Where.Function);
    // Per batch through a function that a sharded loop calls (in any unit).
    for (const FunctionDecl *Caller : Callers)
      F.Excludes.push_back("batch-fn:" + keyOf(Caller));

    // The seeds that feed the rollouts, with --rollouts-per-rank: inside a
    // rollout loop of this unit, or in what one calls or uses (facts of any
    // unit).
    bool InRollout = Where.Function && insideRolloutLoop(Context, Sink);
    std::vector<std::string> Keys;
    if (!InRollout) {
      for (const FunctionDecl *Caller : Callers) {
        Keys.push_back("rollout-fn:" + keyOf(Caller));
        if (const auto *Method = dyn_cast<CXXMethodDecl>(Caller))
          Keys.push_back("rollout-class:" + keyOf(Method->getParent()));
      }
      if (Where.Record)
        Keys.push_back("rollout-class:" + keyOf(Where.Record));
      if (Srand && Where.Function)
        Keys.push_back("rollout-holder:" + keyOf(Where.Function));
      std::sort(Keys.begin(), Keys.end());
      Keys.erase(std::unique(Keys.begin(), Keys.end()), Keys.end());
    }

    Finding SharedSeed = F;
    SharedSeed.Message =
        "a seed drawn at run time differs by process, so ranks that shuffle "
        "or make their data (or play their episodes) with it would each see "
        "another order; every rank draws the same seed (ddp::shared_seed)";
    wrapIn(SharedSeed, "ddp::shared_seed", Editable);
    Finding RolloutSeed = F;
    RolloutSeed.Message =
        "a seed drawn at run time feeds the rollouts, which each rank plays "
        "on its own (--rollouts-per-rank): rank 0 draws the shared seed, "
        "every other rank one of its own (ddp::rollout_seed)";
    wrapIn(RolloutSeed, "ddp::rollout_seed", Editable);

    // Shared without the option; with it, unless one of Keys holds (every
    // kept variant makes the same edit: one remains).
    Finding Plain = SharedSeed;
    Plain.Excludes.push_back(RolloutsOption.str());
    Findings.push_back(std::move(Plain));
    if (InRollout) {
      RolloutSeed.Requires = {RolloutsOption.str()};
      Findings.push_back(std::move(RolloutSeed));
      return;
    }
    SharedSeed.Requires = {RolloutsOption.str()};
    SharedSeed.Excludes.insert(SharedSeed.Excludes.end(), Keys.begin(),
                               Keys.end());
    Findings.push_back(std::move(SharedSeed));
    for (const std::string &Key : Keys) {
      Finding Variant = RolloutSeed;
      Variant.Requires = {RolloutsOption.str(), Key};
      Findings.push_back(std::move(Variant));
    }
  }

  static void wrapIn(Finding &F, llvm::StringRef Function, bool Editable) {
    if (!Editable)
      return;
    F.Edits.push_back({F.Offset, 0, (Function + "(").str(), {}});
    F.Edits.push_back({F.Offset + F.Length, 0, ")", {}});
  }

  /// Where S is: the function whose body holds it (a lambda's body counts
  /// as its own function), the class of a default member initialiser, or
  /// neither at namespace scope.
  static Place placeOf(ASTContext &Context, const Stmt *S) {
    Place P;
    DynTypedNodeList Parents = Context.getParents(*S);
    for (int Steps = 0; Steps < 256 && !Parents.empty(); ++Steps) {
      if (const auto *Function = Parents[0].get<FunctionDecl>()) {
        P.Function = Function;
        if (const auto *Method = dyn_cast<CXXMethodDecl>(Function))
          P.Class = Method->getParent();
        return P;
      }
      if (const auto *Lambda = Parents[0].get<LambdaExpr>()) {
        P.Function = Lambda->getCallOperator();
        P.Lambda = true;
        return P;
      }
      if (Parents[0].get<TranslationUnitDecl>() ||
          Parents[0].get<NamespaceDecl>())
        return P;
      if (const auto *Field = Parents[0].get<FieldDecl>()) {
        // An in-class initialiser runs in the class's constructors.
        P.Record = P.Class = dyn_cast<CXXRecordDecl>(Field->getParent());
        return P;
      }
      Parents = Context.getParents(Parents[0]);
    }
    return P;
  }

  /// A loop over a loader or over batches (R4's, migrated or not).
  bool isBatchLoop(ASTContext &Context, const Stmt *S) {
    if (const auto *Range = dyn_cast<CXXForRangeStmt>(S)) {
      const Expr *Init = Range->getRangeInit();
      return Init &&
             (isDataLoaderType(Init->getType()) || isShardedBatchLoop(Range) ||
              handBatchList(Context, Range, *Oracle));
    }
    return isa<ForStmt, WhileStmt>(S) &&
           handBatchLoop(Context, S, *Oracle).Loop;
  }

  bool containsBatchLoop(ASTContext &Context, const Stmt *S) {
    if (!S || isa<LambdaExpr>(S))
      return false;
    for (const Stmt *Child : S->children())
      if (Child && ((isLoop(Child) && isBatchLoop(Context, Child)) ||
                    containsBatchLoop(Context, Child)))
        return true;
    return false;
  }

  /// A loop that trains on experience it draws itself: it trains, it is no
  /// loop over batches and holds none, and none holds it (R12's
  /// `non-torch-loader` loops, whose rollouts R16 makes per rank).
  bool isRolloutLoop(ASTContext &Context, const Stmt *Loop) {
    auto Known = RolloutLoops.find(Loop);
    if (Known != RolloutLoops.end())
      return Known->second;
    bool Rollout = Oracle->trains(Loop) && !isBatchLoop(Context, Loop) &&
                   !containsBatchLoop(Context, Loop) &&
                   !enclosingBatchLoop(Context, Loop, *Oracle);
    RolloutLoops[Loop] = Rollout;
    return Rollout;
  }

  bool insideRolloutLoop(ASTContext &Context, const Stmt *S) {
    DynTypedNodeList Parents = Context.getParents(*S);
    for (int Steps = 0; Steps < 256 && !Parents.empty(); ++Steps) {
      if (Parents[0].get<FunctionDecl>() || Parents[0].get<LambdaExpr>())
        return false;
      if (const auto *Parent = Parents[0].get<Stmt>())
        if (isLoop(Parent) && isRolloutLoop(Context, Parent))
          return true;
      Parents = Context.getParents(Parents[0]);
    }
    return false;
  }

  static const Stmt *loopBody(const Stmt *Loop) {
    if (const auto *For = dyn_cast<ForStmt>(Loop))
      return For->getBody();
    if (const auto *While = dyn_cast<WhileStmt>(Loop))
      return While->getBody();
    if (const auto *Do = dyn_cast<DoStmt>(Loop))
      return Do->getBody();
    return cast<CXXForRangeStmt>(Loop)->getBody();
  }

  /// The facts of Function's loops: what a loop over batches calls runs per
  /// batch (`batch-fn:`), what a rollout loop calls and uses feeds the
  /// rollouts (`rollout-fn:`, `rollout-class:`, and `rollout-holder:` for
  /// Function itself); so does what a torch dataset's or module's method
  /// calls (per sample or per batch).
  void analyseFunction(ASTContext &Context, const FunctionDecl *Function) {
    if (!Function->getBody() || Function->isDependentContext() ||
        !Locator.isInRoot(Context, Function->getLocation()) ||
        !Analysed.insert(Function).second)
      return;
    if (const auto *Method = dyn_cast<CXXMethodDecl>(Function))
      if (isTorchCallback(Method->getParent()) &&
          !isa<CXXConstructorDecl>(Method)) {
        Reach PerBatch(Context, Locator, /*Classes=*/false);
        PerBatch.visit(Function->getBody());
        for (const std::string &Key : PerBatch.Functions)
          addFact("batch-fn:" + Key);
        return;
      }
    visitLoops(Context, Function, Function->getBody());
  }

  void visitLoops(ASTContext &Context, const FunctionDecl *Function,
                  const Stmt *S) {
    if (!S || isa<LambdaExpr>(S))
      return;
    if (isLoop(S)) {
      if (isBatchLoop(Context, S)) {
        Reach PerBatch(Context, Locator, /*Classes=*/false);
        PerBatch.visit(loopBody(S));
        for (const std::string &Key : PerBatch.Functions)
          addFact("batch-fn:" + Key);
        return;
      }
      if (isRolloutLoop(Context, S)) {
        Reach Rollouts(Context, Locator, /*Classes=*/true);
        Rollouts.visit(S);
        for (const std::string &Key : Rollouts.Functions)
          addFact("rollout-fn:" + Key);
        for (const std::string &Key : Rollouts.Classes)
          addFact("rollout-class:" + Key);
        addFact("rollout-holder:" + keyOf(Function));
        return;
      }
    }
    for (const Stmt *Child : S->children())
      visitLoops(Context, Function, Child);
  }

  /// Function and the functions of this unit that call it, directly or
  /// through others (a lambda's calls count as its function's).
  std::vector<const FunctionDecl *> callersOf(ASTContext &Context,
                                              const FunctionDecl *Function) {
    if (CallersOf.empty()) {
      class Calls : public RecursiveASTVisitor<Calls> {
      public:
        Calls(llvm::DenseMap<const FunctionDecl *,
                             std::vector<const FunctionDecl *>> &Callers)
            : Callers(Callers) {}
        using Base = RecursiveASTVisitor<Calls>;
        bool TraverseFunctionDecl(FunctionDecl *D) {
          return within(D, [&] { return Base::TraverseFunctionDecl(D); });
        }
        bool TraverseCXXMethodDecl(CXXMethodDecl *D) {
          return within(D, [&] { return Base::TraverseCXXMethodDecl(D); });
        }
        bool TraverseCXXConstructorDecl(CXXConstructorDecl *D) {
          return within(D, [&] { return Base::TraverseCXXConstructorDecl(D); });
        }
        bool TraverseCXXDestructorDecl(CXXDestructorDecl *D) {
          return within(D, [&] { return Base::TraverseCXXDestructorDecl(D); });
        }
        bool VisitCallExpr(CallExpr *Call) {
          if (const FunctionDecl *Callee = Call->getDirectCallee())
            edge(Callee);
          return true;
        }
        bool VisitCXXConstructExpr(CXXConstructExpr *Construct) {
          if (Construct->getConstructor())
            edge(Construct->getConstructor());
          return true;
        }
        bool shouldVisitTemplateInstantiations() const { return true; }

      private:
        bool within(const FunctionDecl *Function,
                    llvm::function_ref<bool()> Traverse) {
          const FunctionDecl *Outer = Current;
          if (Function->doesThisDeclarationHaveABody() &&
              !(isa<CXXMethodDecl>(Function) &&
                cast<CXXMethodDecl>(Function)->getParent()->isLambda()))
            Current = Function->getCanonicalDecl();
          bool Result = Traverse();
          Current = Outer;
          return Result;
        }
        void edge(const FunctionDecl *Callee) {
          if (Current && Callee->getCanonicalDecl() != Current)
            Callers[Callee->getCanonicalDecl()].push_back(Current);
        }
        llvm::DenseMap<const FunctionDecl *, std::vector<const FunctionDecl *>>
            &Callers;
        const FunctionDecl *Current = nullptr;
      } Visitor(CallersOf);
      Visitor.TraverseDecl(Context.getTranslationUnitDecl());
      CallersOf[nullptr]; // Built.
    }
    std::vector<const FunctionDecl *> Found = {Function->getCanonicalDecl()};
    for (size_t I = 0; I < Found.size() && Found.size() < 64; ++I) {
      auto Known = CallersOf.find(Found[I]);
      if (Known == CallersOf.end())
        continue;
      for (const FunctionDecl *Caller : Known->second)
        if (llvm::find(Found, Caller) == Found.end())
          Found.push_back(Caller);
    }
    return Found;
  }

  void addFact(std::string Key) {
    if (!Facts.insert(Key).second)
      return;
    Finding F;
    F.RuleId = "R13";
    F.Provides = std::move(Key);
    Findings.push_back(std::move(F));
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
      if (isLoop(S) && isBatchLoop(Context, S))
        return false;
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
  llvm::SmallPtrSet<const FunctionDecl *, 32> Analysed;
  llvm::DenseMap<const Stmt *, bool> RolloutLoops;
  std::set<std::string> Facts;
  llvm::DenseMap<const FunctionDecl *, std::vector<const FunctionDecl *>>
      CallersOf;
};

const RuleInfo SharedSeedRows[] = {
    {"R13", "ddp-divergent-seed",
     "a seed drawn at run time (random_device, time, a clock), in any "
     "spelling and unit, is the same on every rank (ddp::shared_seed), or "
     "each rank's own where it feeds the rollouts with --rollouts-per-rank "
     "(ddp::rollout_seed); seeds drawn per sample or per batch stay",
     CheckLevel::RewriteUntilDistributed},
};
} // namespace

extern const RuleUnit SharedSeed{SharedSeedRows, createModule<SeedMatchers>};

} // namespace ddpify
