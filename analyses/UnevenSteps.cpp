//===- UnevenSteps.cpp - Training loops whose steps differ by rank --------===//

#include "ddpify/UnevenSteps.h"
#include "ddpify/FullBatches.h"
#include "ddpify/SourceLines.h"
#include "ddpify/Work.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/Support/Path.h"
#include <functional>

using namespace clang;

namespace ddpify {

bool isLoopStatement(const Stmt *S) {
  return isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(S);
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

/// Whether E draws a value that differs by process, directly, through the
/// initialisers of the local variables it reads, or through what a helper
/// of the program returns (`make_seed()`); Shared when it already goes
/// through ddp::shared_seed or ddp::rollout_seed.
bool drawsRunTimeSeed(const Expr *E, bool &Shared, int Depth) {
  if (!E || Depth > 4)
    return false;
  if (const auto *Call = dyn_cast<CallExpr>(E))
    if (const FunctionDecl *Callee = Call->getDirectCallee()) {
      std::string Name = Callee->getQualifiedNameAsString();
      if (Name == "ddp::shared_seed" || Name == "ddp::rollout_seed") {
        Shared = true;
        return false;
      }
    }
  if (isRunTimeSource(E))
    return true;
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E))
    if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
      if (Var->isLocalVarDecl() && Var->getInit())
        return drawsRunTimeSeed(Var->getInit(), Shared, Depth + 1);
  if (isa<LambdaExpr>(E))
    return false;
  // A helper of the program that returns a seed it draws: wrapped at the
  // call (`gen(ddp::shared_seed(make_seed()))`).
  if (const auto *Call = dyn_cast<CallExpr>(E)) {
    const FunctionDecl *Definition = nullptr;
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (Callee && !isa<CXXMethodDecl>(Callee) && Callee->hasBody(Definition) &&
        Definition->getReturnType()->isIntegerType() &&
        !Definition->getASTContext().getSourceManager().isInSystemHeader(
            Definition->getLocation())) {
      class Returns : public RecursiveASTVisitor<Returns> {
      public:
        bool VisitReturnStmt(ReturnStmt *Return) {
          if (Return->getRetValue())
            Values.push_back(Return->getRetValue());
          return true;
        }
        bool TraverseLambdaExpr(LambdaExpr *) { return true; }
        std::vector<const Expr *> Values;
      } Visitor;
      Visitor.TraverseStmt(Definition->getBody());
      bool InnerShared = false;
      for (const Expr *Value : Visitor.Values)
        if (drawsRunTimeSeed(Value, InnerShared, Depth + 1))
          return true;
      return false;
    }
  }
  for (const Stmt *Child : E->children())
    if (const auto *ChildExpr = dyn_cast_or_null<Expr>(Child))
      if (drawsRunTimeSeed(ChildExpr, Shared, Depth))
        return true;
  return false;
}

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

namespace {

bool isStandardDistribution(QualType T) {
  const auto *Record = T.getNonReferenceType()->getAsCXXRecordDecl();
  if (!Record)
    return false;
  std::string Name = Record->getQualifiedNameAsString();
  return llvm::StringRef(Name).starts_with("std::") &&
         llvm::StringRef(Name).ends_with("_distribution");
}

std::string calleeName(const CallExpr *Call) {
  const FunctionDecl *Callee = Call->getDirectCallee();
  return Callee ? Callee->getQualifiedNameAsString() : "";
}

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

/// Whether E is an integer constant (a seed the same on every run).
bool isConstantSeed(ASTContext &Context, const Expr *E) {
  E = E ? E->IgnoreParenImpCasts() : nullptr;
  return E && !E->isValueDependent() && E->getType()->isIntegerType() &&
         E->isIntegerConstantExpr(Context);
}

std::string flatText(ASTContext &Context, SourceRange Range) {
  std::string Text = sourceText(Context, Range);
  std::string Flat;
  for (char C : Text)
    if (!(C == ' ' && !Flat.empty() && Flat.back() == ' ') && C != '\n')
      Flat += C == '\t' ? ' ' : C;
  if (Flat.size() > 60)
    Flat = Flat.substr(0, 57) + "...";
  return Flat;
}

/// The fixed seed calls of S and of the program's functions it calls:
/// torch::manual_seed(42), srand(7), engine.seed(3).
const CallExpr *
fixedSeedCall(ASTContext &Context, FindingLocator &Locator, const Stmt *S,
              llvm::SmallPtrSetImpl<const FunctionDecl *> &Seen) {
  if (!S)
    return nullptr;
  if (const auto *Call = dyn_cast<CallExpr>(S)) {
    std::string Name = calleeName(Call);
    bool Seeds = Name == "torch::manual_seed" || Name == "at::manual_seed" ||
                 Name == "torch::cuda::manual_seed" ||
                 Name == "torch::cuda::manual_seed_all" || Name == "srand" ||
                 Name == "std::srand";
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
      if (const CXXMethodDecl *Method = Member->getMethodDecl())
        Seeds |=
            Method->getIdentifier() && Method->getName() == "seed" &&
            isStandardEngine(Member->getImplicitObjectArgument()->getType());
    if (Seeds && Call->getNumArgs() == 1 &&
        isConstantSeed(Context, Call->getArg(0)) &&
        Locator.isInRoot(Context, Call->getBeginLoc()))
      return Call;
    const FunctionDecl *Definition = nullptr;
    if (const FunctionDecl *Callee = Call->getDirectCallee())
      if (Callee->hasBody(Definition) && Definition &&
          Locator.isInRoot(Context, Definition->getLocation()) &&
          Seen.insert(Definition).second && Seen.size() < 32)
        if (const CallExpr *Found =
                fixedSeedCall(Context, Locator, Definition->getBody(), Seen))
          return Found;
  }
  for (const Stmt *Child : S->children())
    if (const CallExpr *Found = fixedSeedCall(Context, Locator, Child, Seen))
      return Found;
  return nullptr;
}

} // namespace

Draws drawsOf(const SourceManager &SM, const Stmt *S) {
  Draws Found;
  DrawFinder(SM, Found).visit(S);
  return Found;
}

std::string placeOf(ASTContext &Context, FindingLocator &Locator,
                    llvm::StringRef Root, SourceLocation Loc) {
  Finding Where = Locator.make(Context, SourceRange(Loc), "", "");
  if (Where.FilePath.empty())
    return "";
  llvm::StringRef Path = Where.FilePath;
  std::string Prefix = Root.rtrim('/').str() + "/";
  if (!Root.empty() && Path.starts_with(Prefix))
    Path = Path.drop_front(Prefix.size());
  return Path.str() + ":" + std::to_string(Where.Line);
}

std::string fixedSeedOf(ASTContext &Context, FindingLocator &Locator,
                        llvm::StringRef Root, const Draws &Found) {
  // An engine the loop draws from, built from a constant.
  for (const VarDecl *Engine : Found.Engines)
    if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(
            stripParensAndImplicit(Engine->getInit())))
      if (Construct->getNumArgs() >= 1 &&
          isConstantSeed(Context, Construct->getArg(0)) &&
          Locator.isInRoot(Context, Engine->getLocation()))
        return "'" + flatText(Context, Engine->getSourceRange()) + "' at " +
               placeOf(Context, Locator, Root, Engine->getLocation());
  // A constant seed of torch's generator, rand()'s or an engine's anywhere
  // in main or the functions it calls (the order of the program's own
  // setup), else in this unit's functions.
  llvm::SmallPtrSet<const FunctionDecl *, 32> Seen;
  const TranslationUnitDecl *Unit = Context.getTranslationUnitDecl();
  for (const Decl *D : Unit->decls())
    if (const auto *Function = dyn_cast<FunctionDecl>(D))
      if (Function->isMain() && Function->hasBody())
        if (const CallExpr *Call =
                fixedSeedCall(Context, Locator, Function->getBody(), Seen))
          return "'" + flatText(Context, Call->getSourceRange()) + "' at " +
                 placeOf(Context, Locator, Root, Call->getBeginLoc());
  return "";
}

const Stmt *outermostLoop(const Stmt *S, const ParentMap &Parents) {
  const Stmt *Found = isLoopStatement(S) ? S : nullptr;
  for (const Stmt *P = Parents.getParent(S); P; P = Parents.getParent(P)) {
    if (isa<LambdaExpr>(P))
      break;
    if (isLoopStatement(P))
      Found = P;
  }
  return Found;
}

std::string loopHeader(ASTContext &Context, const Stmt *Loop) {
  SourceLocation RParen;
  if (const auto *For = dyn_cast<ForStmt>(Loop))
    RParen = For->getRParenLoc();
  else if (const auto *While = dyn_cast<WhileStmt>(Loop))
    RParen = While->getRParenLoc();
  else if (const auto *Range = dyn_cast<CXXForRangeStmt>(Loop))
    RParen = Range->getRParenLoc();
  if (RParen.isInvalid())
    return "the do-while loop";
  return "'" + flatText(Context, SourceRange(Loop->getBeginLoc(), RParen)) +
         "'";
}

bool isJoinCall(const Stmt *S) {
  const auto *Call = dyn_cast_or_null<CallExpr>(S);
  return Call && calleeName(Call) == "ddp::join";
}

namespace {

/// Loop with the labels around it: the statement its block holds.
const Stmt *statementOf(const Stmt *Loop, const ParentMap &Parents) {
  const Stmt *S = Loop;
  while (const Stmt *P = Parents.getParent(S)) {
    if (!isa<LabelStmt, AttributedStmt>(P))
      break;
    S = P;
  }
  return S;
}

/// The statement after (Next) or before S in its block, or null.
const Stmt *sibling(const Stmt *S, const ParentMap &Parents, bool Next) {
  const auto *Block = dyn_cast_or_null<CompoundStmt>(Parents.getParent(S));
  if (!Block)
    return nullptr;
  const Stmt *Previous = nullptr;
  bool Found = false;
  for (const Stmt *Child : Block->body()) {
    if (Found)
      return Child;
    if (Child == S) {
      if (!Next)
        return Previous;
      Found = true;
    }
    Previous = Child;
  }
  return nullptr;
}

} // namespace

bool followedByJoin(const Stmt *Loop, const ParentMap &Parents) {
  return isJoinCall(sibling(statementOf(Loop, Parents), Parents, true));
}

const Stmt *joinRightBefore(const Stmt *S, const ParentMap &Parents) {
  const Stmt *Previous = sibling(S, Parents, false);
  return isJoinCall(Previous) ? Previous : nullptr;
}

ProgramCollective CollectiveFinder::find(const FunctionDecl *Function,
                                         const Stmt *Loop,
                                         const ParentMap &Parents,
                                         bool AfterToo) {
  if (ProgramCollective Found = walk(Loop, 0))
    return Found;
  // R11's all-reduces after metric loops inside Loop (the loop itself: its
  // sums are reduced after it, after the join).
  if (ProgramCollective Found = insertedIn(Function, Loop, false, nullptr))
    return Found;
  if (!AfterToo)
    return {};
  if (ProgramCollective Found = insertedIn(Function, nullptr, false, Loop))
    return Found;
  // The rest of the function after Loop, block by block outwards.
  for (const Stmt *Child = Loop, *Parent = Parents.getParent(Loop); Parent;
       Child = Parent, Parent = Parents.getParent(Parent)) {
    if (isa<LambdaExpr>(Parent))
      break;
    const auto *Block = dyn_cast<CompoundStmt>(Parent);
    if (!Block)
      continue;
    bool After = false;
    for (const Stmt *S : Block->body()) {
      if (After)
        if (ProgramCollective Found = walk(S, 0))
          return Found;
      After |= S == Child;
    }
  }
  return {};
}

std::string CollectiveFinder::text(const Stmt *S) {
  return flatText(Context, S->getSourceRange());
}

ProgramCollective CollectiveFinder::insertedIn(const FunctionDecl *Function,
                                               const Stmt *Region,
                                               bool Inclusive,
                                               const Stmt *After) {
  if (!Function)
    return {};
  auto Known = Metrics.find(Function);
  if (Known == Metrics.end())
    Known =
        Metrics.insert({Function, analyzeMetricLoops(Context, Function)}).first;
  const SourceManager &SM = Context.getSourceManager();
  std::function<bool(const Stmt *, const Stmt *)> Inside =
      [&](const Stmt *S, const Stmt *Outer) {
        if (S == Outer)
          return true;
        for (const Stmt *Child : Outer->children())
          if (Child && Inside(S, Child))
            return true;
        return false;
      };
  for (const MetricLoop &Loop : Known->second) {
    if (Loop.Accumulators.empty())
      continue;
    bool Counts;
    if (After)
      Counts = Loop.Loop == After ||
               SM.isBeforeInTranslationUnit(After->getEndLoc(),
                                            Loop.Loop->getBeginLoc());
    else if (Region)
      Counts = (Inclusive || Loop.Loop != Region) && Inside(Loop.Loop, Region);
    else
      Counts = true;
    if (!Counts)
      continue;
    std::string Names;
    for (const VarDecl *Var : Loop.Accumulators)
      Names += (Names.empty() ? "'" : ", '") + Var->getNameAsString() + "'";
    return {Loop.Loop,
            "the all-reduce of " + Names + " that R11 inserts after the loop"};
  }
  return {};
}

ProgramCollective CollectiveFinder::inFunction(const FunctionDecl *Definition,
                                               unsigned Depth) {
  auto Known = Functions.find(Definition);
  if (Known != Functions.end())
    return Known->second;
  Functions[Definition] = {}; // a recursion finds nothing more
  ProgramCollective Found = walk(Definition->getBody(), Depth + 1);
  if (!Found)
    Found = insertedIn(Definition, nullptr, false, nullptr);
  Functions[Definition] = Found;
  return Found;
}

ProgramCollective CollectiveFinder::walk(const Stmt *S, unsigned Depth) {
  if (!S || isa<LambdaExpr>(S))
    return {};
  if (const auto *Call = dyn_cast<CallExpr>(S)) {
    std::string Name = calleeName(Call);
    llvm::StringRef Ref = Name;
    if (Name == "ddp::all_reduce" || Name == "ddp::all_reduce_elements" ||
        Name == "ddp::all_gather" || Name == "ddp::broadcast" ||
        Name == "ddp::barrier" || Name == "ddp::RowShard::global_mean" ||
        Name == "ddp::RowShard::global_sum" ||
        Name == "ddp::file_bytes_from_main" || Name == "ddp::exists_on_main" ||
        Name == "ddp::load" || Name == "ddp::process_group" ||
        Ref.starts_with("c10d::") ||
        Ref.starts_with("ddp::ZeroRedundancyOptimizer::step"))
      return {Call, "'" + text(Call) + "'"};
    if (Name == "torch::load")
      return {Call, "'" + text(Call) +
                        "' (ddpify makes it ddp::load, which broadcasts rank "
                        "0's bytes)"};
    if (HasBatchNorm && isForwardPass(Call))
      return {Call, "the forward pass '" + text(Call) +
                        "' (the program's BatchNorm layers become "
                        "SyncBatchNorm, whose forward pass is a collective)"};
    const FunctionDecl *Definition = nullptr;
    if (const FunctionDecl *Callee = Call->getDirectCallee())
      if (Callee->hasBody(Definition) && Definition &&
          !Definition->isDependentContext() && Depth < 6 &&
          Locator.isInRoot(Context, Definition->getLocation()))
        if (ProgramCollective Found = inFunction(Definition, Depth)) {
          // Named where it is made, and the call of the loop that reaches
          // it.
          if (Depth == 0)
            Found.Through =
                ", through '" + text(Call) + "' at " +
                placeOf(Context, Locator, Root, Call->getBeginLoc());
          return Found;
        }
  }
  if (isLoopStatement(S) && !isa<CXXForRangeStmt>(S)) {
    FullBatchLoop Full = fullBatchLoop(Context, S, Oracle);
    if (Full.Loop && !Full.Migrated && Full.WholeWhy.empty())
      return {S, "the figures over all rows that R15 makes global in the "
                 "loop (ddp::RowShard's global_mean/global_sum)"};
  }
  for (const Stmt *Child : S->children())
    if (ProgramCollective Found = walk(Child, Depth))
      return Found;
  return {};
}

const Stmt *gotoOutOf(const Stmt *Loop) {
  llvm::SmallPtrSet<const LabelDecl *, 4> Inside;
  std::vector<const GotoStmt *> Gotos;
  std::function<void(const Stmt *)> Walk = [&](const Stmt *S) {
    if (!S || isa<LambdaExpr>(S))
      return;
    if (const auto *Label = dyn_cast<LabelStmt>(S))
      Inside.insert(Label->getDecl());
    if (const auto *Goto = dyn_cast<GotoStmt>(S))
      Gotos.push_back(Goto);
    for (const Stmt *Child : S->children())
      Walk(Child);
  };
  Walk(Loop);
  for (const GotoStmt *Goto : Gotos)
    if (!Inside.count(Goto->getLabel()))
      return Goto;
  return nullptr;
}

namespace {

/// The file offset right after S's last token (its `;` or `}`), or false.
bool offsetRightAfter(ASTContext &Context, FindingLocator &Locator,
                      const Finding &F, const Stmt *S, unsigned &Offset) {
  const SourceManager &SM = Context.getSourceManager();
  SourceLocation End = S->getEndLoc();
  if (End.isInvalid() || End.isMacroID())
    return false;
  SourceLocation After;
  if (*SM.getCharacterData(End) == '}')
    After = End.getLocWithOffset(1);
  else
    After = Lexer::findLocationAfterToken(End, tok::semi, SM,
                                          Context.getLangOpts(), false);
  return After.isValid() && Locator.offsetIn(Context, F, After, Offset);
}

/// `ddp::join();` right before S: on a line of its own where S starts one,
/// in braces with S where S is no statement of a block.
bool joinBefore(ASTContext &Context, FindingLocator &Locator, const Finding &F,
                const Stmt *S, const ParentMap &Parents,
                std::vector<FindingEdit> &Edits) {
  const SourceManager &SM = Context.getSourceManager();
  unsigned Begin = 0;
  if (!Locator.offsetIn(Context, F, S->getBeginLoc(), Begin))
    return false;
  if (isa<CompoundStmt>(Parents.getParent(S))) {
    bool StartsLine = false;
    std::string Indent = indentationOf(SM, S->getBeginLoc(), StartsLine);
    Edits.push_back(
        {Begin,
         0,
         StartsLine ? "ddp::join();\n" + Indent : std::string("ddp::join(); "),
         {}});
    return true;
  }
  unsigned End = 0;
  if (!offsetRightAfter(Context, Locator, F, S, End))
    return false;
  // The body of an `if`, an `else` or a loop on a line of its own: braces
  // from the end of its header to a line after it.
  const Stmt *Parent = Parents.getParent(S);
  SourceLocation Header;
  if (const auto *If = dyn_cast_or_null<IfStmt>(Parent))
    Header = If->getThen() == S ? If->getRParenLoc() : If->getElseLoc();
  else if (const auto *For = dyn_cast_or_null<ForStmt>(Parent))
    Header = For->getRParenLoc();
  else if (const auto *While = dyn_cast_or_null<WhileStmt>(Parent))
    Header = While->getRParenLoc();
  else if (const auto *Range = dyn_cast_or_null<CXXForRangeStmt>(Parent))
    Header = Range->getRParenLoc();
  bool StartsLine = false;
  std::string Indent = indentationOf(SM, S->getBeginLoc(), StartsLine);
  unsigned Open = 0;
  bool Invalid = false;
  llvm::StringRef Buffer = SM.getBufferData(
      SM.getFileID(SM.getExpansionLoc(S->getBeginLoc())), &Invalid);
  if (StartsLine && Header.isValid() && !Invalid &&
      Locator.offsetIn(
          Context, F,
          Lexer::getLocForEndOfToken(Header, 0, SM, Context.getLangOpts()),
          Open) &&
      Open < Begin) {
    Edits.push_back({Open, 0, " {", {}});
    Edits.push_back({Begin, 0, "ddp::join();\n" + Indent, {}});
    Edits.push_back(
        {End, 0, "\n" + indentationAt(Buffer, Open).str() + "}", {}});
    return true;
  }
  Edits.push_back({Begin, 0, "{ ddp::join(); ", {}});
  Edits.push_back({End, 0, " }", {}});
  return true;
}

} // namespace

bool joinEdits(ASTContext &Context, FindingLocator &Locator, const Finding &F,
               const Stmt *Loop, const ParentMap &Parents,
               std::vector<FindingEdit> &Edits) {
  const SourceManager &SM = Context.getSourceManager();
  const Stmt *Statement = statementOf(Loop, Parents);
  if (!followedByJoin(Loop, Parents)) {
    if (isa_and_nonnull<CompoundStmt>(Parents.getParent(Statement))) {
      unsigned Begin = 0, Offset = 0;
      if (Statement->getEndLoc().isMacroID() ||
          !Locator.offsetIn(Context, F, Statement->getBeginLoc(), Begin) ||
          !offsetAfterStatement(Context, Statement, Offset))
        return false;
      bool StartsLine = false;
      std::string Indent =
          indentationOf(SM, Statement->getBeginLoc(), StartsLine);
      Edits.push_back({Offset,
                       0,
                       StartsLine ? "\n" + Indent + "ddp::join();"
                                  : std::string(" ddp::join();"),
                       {}});
    } else {
      unsigned Begin = 0, End = 0;
      if (!Locator.offsetIn(Context, F, Statement->getBeginLoc(), Begin) ||
          !offsetRightAfter(Context, Locator, F, Statement, End))
        return false;
      Edits.push_back({Begin, 0, "{ ", {}});
      Edits.push_back({End, 0, " ddp::join(); }", {}});
    }
  }
  // A `return` inside the loop leaves it past the join after it.
  bool Placed = true;
  std::function<void(const Stmt *)> Walk = [&](const Stmt *S) {
    if (!S || isa<LambdaExpr>(S) || !Placed)
      return;
    if (isa<ReturnStmt>(S) && !isJoinCall(sibling(S, Parents, false)))
      Placed = joinBefore(Context, Locator, F, S, Parents, Edits);
    for (const Stmt *Child : S->children())
      Walk(Child);
  };
  Walk(Loop);
  return Placed;
}

} // namespace ddpify
