//===- ReduceMetrics.cpp - R11: metrics all-reduced -----------------------===//
//
// After R4 every loader gives each rank its share of the samples, so a loss
// summed or a count of correct predictions taken over it, in a validation
// loop or in the training loop itself, is this rank's part only. R11 finds
// range-for loops over a torch data loader and passes over one by iterator
// (`for (auto it = l->begin(); it != l->end(); ++it)`), except over a loader
// R4 leaves unsharded (drawn from one batch at a time), and the locals
// declared before
// such a loop (in the same function), updated in it by `+=`, `++` or `x = x +
// ...` and read after it: the accumulators. Right after the loop, on every
// rank, each becomes its global sum (`v = ddp::all_reduce(v);`,
// `ddp::all_reduce(t);` for a tensor). An accumulation it does not recognise (a
// maximum, a vector push_back, a member, a reference, a sum carried over an
// enclosing loop) is a `metric-pattern` report item instead. A loop already
// followed by the all-reduce statements, or by a collective of the user's own
// in its block, is left alone. A sum made global that is divided, after the
// loop, by a count of a sharded loader's batches (`std::distance(l->begin(),
// l->end())`, a local holding it, a helper returning it: this rank's count,
// the same on every rank) is divided by every rank's batches instead,
// `(n * ddp::world_size())`, so the epoch mean it prints is the global one.
//
//===----------------------------------------------------------------------===//

#include "ddpify/LoaderIterators.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "ddpify/SourceLines.h"
#include "ddpify/Work.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMap.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/SetVector.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

#include "ddpify/MetricLoops.h"

namespace ddpify {

namespace {

/// The statement that all-reduces the accumulator Var of kind Kind
/// (MetricLoops.cpp: kindOf): a number through ddp::all_reduce's overloads
/// (which carry an `int` through int64_t, a `float` through double, and give
/// back the same type), a tensor and a container of numbers (per-class
/// counts) in place; empty for a kind it does not know.
std::string reduceStatement(const std::string &Var, llvm::StringRef Kind) {
  if (Kind == "tensor" || Kind == "elements")
    return "ddp::all_reduce(" + Var + ");";
  llvm::StringRef Family = Kind.split(':').first;
  if (Kind == "double" || Kind == "int64" || Family == "int" ||
      Family == "float")
    return Var + " = ddp::all_reduce(" + Var + ");";
  return "";
}

class MetricsMatchers : public MatcherModule,
                        public MatchFinder::MatchCallback {
public:
  MetricsMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(functionDecl(isDefinition()).bind("function"), this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Seen.clear();
  }

  void run(const MatchFinder::MatchResult &Result) override {
    const auto *Function = Result.Nodes.getNodeAs<FunctionDecl>("function");
    ASTContext &Context = *Result.Context;
    // Template patterns are analysed through their instantiations, where the
    // loader's type is known.
    if (!Function || !Function->getBody() || Function->isDependentContext() ||
        Context.getSourceManager().isInSystemHeader(Function->getLocation()))
      return;
    for (const MetricLoop &Loop : analyzeMetricLoops(Context, Function))
      report(Context, Function, Loop);
  }

private:
  void report(ASTContext &Context, const FunctionDecl *Function,
              const MetricLoop &Loop) {
    const SourceManager &SM = Context.getSourceManager();
    for (const MetricLoop::Problem &Problem : Loop.Problems) {
      Finding F = Locator.make(Context, SourceRange(Problem.Loc), "R11", "");
      if (!F.FilePath.empty() &&
          Seen.insert({F.FilePath, F.Offset, "metric-pattern"}).second) {
        F.Length = 0;
        F.ReportId = "metric-pattern";
        excludeUnsharded(F, Loop);
        F.NotRewrittenReason = Problem.Text;
        F.Message = Problem.Text;
        Findings.push_back(std::move(F));
      }
    }
    if (Loop.Accumulators.empty())
      return;
    SourceLocation End = Loop.Loop->getEndLoc();
    Finding F = Locator.make(
        Context, SourceRange(Loop.Loop->getBeginLoc(), End), "R11", "");
    if (F.FilePath.empty())
      return;
    excludeUnsharded(F, Loop);
    std::string Names;
    for (const VarDecl *Var : Loop.Accumulators)
      Names += (Names.empty() ? "'" : ", '") + Var->getNameAsString() + "'";
    F.Message = Names +
                " summed over this rank's share of the data; "
                "all-reduced after the loop so the reported figures are "
                "global";
    if (F.InMacro) {
      if (Seen.insert({F.FilePath, F.Offset, "R11"}).second)
        Findings.push_back(std::move(F));
      return;
    }
    unsigned Offset = 0;
    if (!offsetAfterStatement(Context, Loop.Loop, Offset))
      return;
    bool Invalid = false;
    FileID File = SM.getFileID(SM.getExpansionLoc(End));
    llvm::StringRef Buffer = SM.getBufferData(File, &Invalid);
    if (Invalid)
      return;
    unsigned Begin = SM.getFileOffset(Loop.Loop->getBeginLoc());
    std::string Indent = indentationAt(Buffer, Begin).str();
    F.Offset = Offset;
    F.Length = 0;
    F.Line = SM.getSpellingLineNumber(End);
    F.Column = SM.getSpellingColumnNumber(End);
    // One statement per accumulator, each on a line of its own, indented
    // like the loop; none if one of them has no statement.
    std::string Text;
    for (size_t I = 0; I < Loop.Accumulators.size(); ++I) {
      std::string Statement = reduceStatement(
          Loop.Accumulators[I]->getNameAsString(), Loop.Kinds[I]);
      if (Statement.empty()) {
        Text.clear();
        break;
      }
      Text += "\n" + Indent + Statement;
    }
    if (!Text.empty())
      F.replaceRangeWith(Text);
    std::vector<std::string> Excludes = F.Excludes;
    if (Seen.insert({F.FilePath, F.Offset, "R11"}).second)
      Findings.push_back(std::move(F));
    if (!Text.empty())
      countEveryRank(Context, Function, Loop, Excludes);
  }

  /// The divisions after Loop of a sum it makes global by a count of a
  /// sharded loader's batches: this rank's count, the same on every rank
  /// (even shards are padded, exact ones cut into as many batches), times
  /// the world size is every rank's.
  void countEveryRank(ASTContext &Context, const FunctionDecl *Function,
                      const MetricLoop &Loop,
                      const std::vector<std::string> &Excludes) {
    const SourceManager &SM = Context.getSourceManager();
    std::set<const VarDecl *> Sums(Loop.Accumulators.begin(),
                                   Loop.Accumulators.end());
    std::vector<std::pair<const Expr *, const Expr *>> Divisions;
    collectDivisions(Function->getBody(), Divisions);
    for (const auto &[Dividend, Divisor] : Divisions) {
      if (!SM.isBeforeInTranslationUnit(Loop.Loop->getEndLoc(),
                                        Dividend->getBeginLoc()))
        continue;
      const auto *Ref = dyn_cast<DeclRefExpr>(stripCasts(Dividend));
      const auto *Sum = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
      if (!Sum || !Sums.count(Sum))
        continue;
      const Expr *Counted = loaderCountOf(Context, Divisor);
      if (!Counted)
        continue;
      const Expr *Count = stripCasts(Divisor);
      Finding F = Locator.make(Context, Count->getSourceRange(), "R11", "");
      if (F.FilePath.empty() || F.InMacro ||
          !Seen.insert({F.FilePath, F.Offset, "R11-count"}).second)
        continue;
      F.Excludes = Excludes;
      if (const ValueDecl *Holder = loaderHolderOf(Counted))
        F.Excludes.push_back(
            unshardedLoaderFact(loaderHolderKey(Holder, Context)));
      // Inside a named cast's own parentheses no more are needed.
      bool Bare = false;
      for (const Expr *E = stripParensAndImplicit(Divisor); E && !Bare;) {
        const auto *Cast = dyn_cast<ExplicitCastExpr>(E);
        if (!Cast)
          break;
        const Expr *Inner = stripParensAndImplicit(Cast->getSubExpr());
        Bare = Inner == Count && (isa<CXXNamedCastExpr>(Cast) ||
                                  isa<CXXFunctionalCastExpr>(Cast));
        E = Inner;
      }
      std::string Text =
          sourceText(Context, Count->getSourceRange()) + " * ddp::world_size()";
      F.replaceRangeWith(Bare ? Text : "(" + Text + ")");
      F.Message = "'" + Sum->getNameAsString() +
                  "' is summed over every rank after the loop, and '" +
                  sourceText(Context, Count->getSourceRange()) +
                  "' counts this rank's batches (the same on every rank): "
                  "divided by every rank's batches, so the mean is global";
      Findings.push_back(std::move(F));
    }
  }

  /// `a / b`, `a /= b` (numbers and tensors) in S: dividend and divisor.
  static void
  collectDivisions(const Stmt *S,
                   std::vector<std::pair<const Expr *, const Expr *>> &Out) {
    if (!S)
      return;
    if (const auto *Op = dyn_cast<BinaryOperator>(S))
      if (Op->getOpcode() == BO_Div || Op->getOpcode() == BO_DivAssign)
        Out.push_back({Op->getLHS(), Op->getRHS()});
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(S))
      if ((Op->getOperator() == OO_Slash ||
           Op->getOperator() == OO_SlashEqual) &&
          Op->getNumArgs() == 2)
        Out.push_back({Op->getArg(0), Op->getArg(1)});
    for (const Stmt *Child : S->children())
      collectDivisions(Child, Out);
  }

  /// A loader R4 leaves unsharded gives every rank every sample: nothing
  /// to reduce (R4 provides the fact for each holder of such a loader).
  static void excludeUnsharded(Finding &F, const MetricLoop &Loop) {
    if (!Loop.LoaderHolder.empty())
      F.Excludes.push_back(unshardedLoaderFact(Loop.LoaderHolder));
  }

  FindingList &Findings;
  FindingLocator Locator;
  // One per translation unit: it memoises by declaration.
  std::set<std::tuple<std::string, unsigned, std::string>> Seen;
};

const RuleInfo ReduceMetricsRows[] = {
    {"R11", "",
     "sums and counts over a sharded loader (validation or training) are "
     "all-reduced after the loop"},
};
} // namespace

extern const RuleUnit ReduceMetrics{ReduceMetricsRows,
                                    createModule<MetricsMatchers>};

} // namespace ddpify
