//===- ShardFullBatches.cpp - R15: full batches sharded by rows -----------===//
//
// R15 for a training loop that feeds the whole of a tensor (or aligned
// tensors X, Y, weights) to a model at every step, with a loss that is a
// mean or a sum over rows (analyses/FullBatches.cpp): each rank takes its
// block of the rows once, before the loop, and weighs its loss so that the
// gradient DDP averages is the one-process gradient, also when the rows do
// not divide by N:
//
//   ddp::RowShard rows(x.size(0));
//   x = rows.of(x);                              // `x_rows` for a const x
//   for (...) {
//     auto loss = torch::mse_loss(model->forward(x), y);
//     rows.mean_weighted(loss).backward();      // sum_weighted for a sum
//     loss = rows.global_mean(loss);            // when it is read again;
//                                               // under the print's own
//                                               // condition when that is the
//                                               // same on every rank
//     auto correct = rows.global_sum(out.argmax(1).eq(y).sum()).item<...>();
//   }
//
// Figures over the rows (means, sums, counts) become global, `x.size(0)`
// the total; an evaluation after the loop on other whole tensors is sharded
// the same way where its figures are sums or means. A loss ddpify cannot
// decompose keeps the whole batch with a `full-batch-whole` note saying why.
//
//===----------------------------------------------------------------------===//

#include "ddpify/FullBatches.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "ddpify/UnevenSteps.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {

namespace {

class FullBatchMatchers : public MatcherModule,
                          public MatchFinder::MatchCallback {
public:
  FullBatchMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot), Root(ProjectRoot.str()) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(forStmt().bind("loop"), this);
    Finder.addMatcher(whileStmt().bind("loop"), this);
    Finder.addMatcher(doStmt().bind("loop"), this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Oracle.reset();
    OracleOf = nullptr;
  }

  void run(const MatchFinder::MatchResult &Result) override {
    ASTContext &Context = *Result.Context;
    if (OracleOf != &Context) {
      Oracle = std::make_unique<TrainingOracle>(Context);
      OracleOf = &Context;
    }
    const auto *Loop = Result.Nodes.getNodeAs<Stmt>("loop");
    if (!Loop || !Locator.isInRoot(Context, Loop->getBeginLoc()))
      return;
    FullBatchLoop Batch = fullBatchLoop(Context, Loop, *Oracle);
    if (!Batch.Loop || Batch.Migrated)
      return;
    Finding F =
        Locator.make(Context, SourceRange(Loop->getBeginLoc()), "R15", "");
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    F.Length = 0;
    if (!Batch.WholeWhy.empty()) {
      // Which tensors, why, and where the use that keeps them whole is.
      std::string Place = Batch.WholeAt.isValid()
                              ? placeOf(Context, Locator, Root, Batch.WholeAt)
                              : "";
      Findings.push_back(
          whole(F, namesOf(Batch.Train.Tensors),
                Batch.WholeWhy + (Place.empty() ? "" : ", at " + Place)));
      return;
    }
    std::string Names = namesOf(Batch.Train.Tensors);
    if (F.InMacro || !shard(Context, Batch, F)) {
      Findings.push_back(whole(F, Names,
                               "ddpify cannot spell its edits here (a "
                               "macro, or a spot it cannot place them)"));
      return;
    }
    F.Message = "this training loop feeds the whole of " + Names +
                " to the model at every step; each rank takes its block of "
                "their rows (ddp::RowShard) and weighs its loss, so the "
                "gradient is the one-process gradient and the figures it "
                "prints are global";
    Finding Note = reportNoteFor(F, "full-batch-sharded", F.Message);
    Findings.push_back(std::move(F));
    Findings.push_back(std::move(Note));
    if (Batch.LossVar && !Batch.LossReadWhen) {
      // A fact for the other rules: after backward() the loss holds the
      // same value on every rank (R12 need not average a decision on it).
      Finding Loss = Locator.make(
          Context, SourceRange(Batch.LossVar->getLocation()), "", "");
      if (!Loss.FilePath.empty() && !Loss.InMacro) {
        Finding Fact;
        Fact.RuleId = "R15";
        Fact.Provides = "global-value:" + locationKey(Loss);
        Findings.push_back(std::move(Fact));
      }
    }
  }

private:
  static std::string namesOf(llvm::ArrayRef<const ValueDecl *> Tensors) {
    std::string Names;
    for (const ValueDecl *Var : Tensors)
      Names += (Names.empty() ? "'" : ", '") + Var->getNameAsString() + "'";
    return Names;
  }

  /// The note of a loop that keeps the whole batch: the tensors it feeds
  /// (Names), and why.
  static Finding whole(const Finding &At, const std::string &Names,
                       const std::string &Why) {
    Finding F = At;
    F.RuleId.clear();
    F.Edits.clear();
    F.ReportId = "full-batch-whole";
    F.NotRewrittenReason =
        "this training loop feeds " +
        (Names.empty() ? std::string("whole tensors") : Names + " whole") +
        " to the model at every step and keeps the whole batch on every rank "
        "(correct, no speed-up): " +
        Why;
    F.Message = F.NotRewrittenReason;
    return F;
  }

  /// A name for a new local of the function around Loop: the first of
  /// Candidates its text does not mention.
  static std::string freshName(ASTContext &Context, const Stmt *Body,
                               llvm::ArrayRef<std::string> Candidates) {
    std::string Text = sourceText(Context, Body->getSourceRange());
    for (const std::string &Name : Candidates)
      if (!mentionsIdentifier(Text, Name))
        return Name;
    return "";
  }

  /// `Name(` before E and `)` after it.
  bool wrap(ASTContext &Context, Finding &F, const Expr *E,
            const std::string &Name) {
    unsigned Begin = 0, End = 0;
    SourceLocation After = Lexer::getLocForEndOfToken(
        E->getEndLoc(), 0, Context.getSourceManager(), Context.getLangOpts());
    if (!Locator.offsetIn(Context, F, E->getBeginLoc(), Begin) ||
        After.isInvalid() || !Locator.offsetIn(Context, F, After, End))
      return false;
    F.Edits.push_back({Begin, 0, Name + "(", {}});
    F.Edits.push_back({End, 0, ")", {}});
    return true;
  }

  bool replace(ASTContext &Context, Finding &F, SourceRange Range,
               const std::string &Text) {
    unsigned Begin = 0, End = 0;
    SourceLocation After = Lexer::getLocForEndOfToken(
        Range.getEnd(), 0, Context.getSourceManager(), Context.getLangOpts());
    if (!Locator.offsetIn(Context, F, Range.getBegin(), Begin) ||
        After.isInvalid() || !Locator.offsetIn(Context, F, After, End) ||
        End < Begin)
      return false;
    F.Edits.push_back({Begin, End - Begin, Text, {}});
    return true;
  }

  /// The body of the function whose code holds S.
  static const Stmt *functionBody(ASTContext &Context, const Stmt *S) {
    DynTypedNodeList Parents = Context.getParents(*S);
    for (int Steps = 0; Steps < 256 && !Parents.empty(); ++Steps) {
      if (const auto *Function = Parents[0].get<FunctionDecl>())
        return Function->getBody();
      const auto *Parent = Parents[0].get<Stmt>();
      if (!Parent)
        return nullptr;
      Parents = Context.getParents(*Parent);
    }
    return nullptr;
  }

  /// The shard's declaration and each tensor bound to its rows (a new local
  /// for a const tensor or a reference, its uses in Scope renamed), its
  /// figures made global and its row counts the total.
  bool shardRegion(ASTContext &Context, Finding &F, const RowRegion &Region,
                   const std::string &Shard, const Stmt *Scope,
                   SourceLocation From, std::string &Declarations,
                   const std::string &Indent) {
    const SourceManager &SM = Context.getSourceManager();
    Declarations = "ddp::RowShard " + Shard + "(" +
                   Region.Tensors.front()->getNameAsString() + ".size(0));";
    for (const ValueDecl *Var : Region.Tensors) {
      std::string Name = Var->getNameAsString();
      if (rebindsInPlace(Var) && !Region.WholeAfter.count(Var)) {
        Declarations +=
            "\n" + Indent + Name + " = " + Shard + ".of(" + Name + ");";
        continue;
      }
      std::string Own =
          freshName(Context, Scope,
                    {Name + "_rows", Name + "_shard", "ddp_" + Name + "_rows"});
      if (Own.empty())
        return false;
      Declarations += "\n" + Indent + "const torch::Tensor " + Own + " = " +
                      Shard + ".of(" + Name + ");";
      std::vector<const DeclRefExpr *> Refs;
      collectReferences(Scope, Var, Refs);
      for (const DeclRefExpr *Ref : Refs)
        if ((From.isInvalid() ||
             SM.isBeforeInTranslationUnit(From, Ref->getLocation())) &&
            !replace(Context, F, Ref->getSourceRange(), Own))
          return false;
    }
    std::vector<std::pair<const Expr *, bool>> Figures = Region.Figures;
    // Outer figures open first where two begin at one spot.
    llvm::stable_sort(Figures, [&](const auto &A, const auto &B) {
      unsigned AB =
          SM.getFileOffset(SM.getExpansionLoc(A.first->getBeginLoc()));
      unsigned BB =
          SM.getFileOffset(SM.getExpansionLoc(B.first->getBeginLoc()));
      if (AB != BB)
        return AB < BB;
      return SM.getFileOffset(SM.getExpansionLoc(A.first->getEndLoc())) >
             SM.getFileOffset(SM.getExpansionLoc(B.first->getEndLoc()));
    });
    std::set<const Expr *> Done;
    for (const auto &[E, Sum] : Figures)
      if (Done.insert(E).second &&
          !wrap(Context, F, E, Shard + (Sum ? ".global_sum" : ".global_mean")))
        return false;
    Done.clear();
    for (const Expr *Count : Region.RowCounts)
      if (Done.insert(Count).second &&
          !replace(Context, F, Count->getSourceRange(),
                   Shard + ".total_rows()"))
        return false;
    return true;
  }

  bool shard(ASTContext &Context, const FullBatchLoop &Batch, Finding &F) {
    const SourceManager &SM = Context.getSourceManager();
    const Stmt *Loop = Batch.Loop;
    bool StartsLine = false;
    std::string Indent = indentationOf(SM, Loop->getBeginLoc(), StartsLine);
    if (!StartsLine)
      return false;
    const Stmt *Body = functionBody(Context, Loop);
    if (!Body)
      return false;
    std::string Shard =
        freshName(Context, Body, {"rows", "train_rows", "ddp_rows"});
    if (Shard.empty())
      return false;
    std::string Declarations;
    if (!shardRegion(Context, F, Batch.Train, Shard, Loop, SourceLocation(),
                     Declarations, Indent))
      return false;
    unsigned LoopOffset = 0;
    if (!Locator.offsetIn(Context, F, Loop->getBeginLoc(), LoopOffset))
      return false;
    F.Edits.push_back({LoopOffset, 0, Declarations + "\n" + Indent, {}});
    if (!wrap(Context, F, Batch.Loss,
              Shard + (Batch.SumLoss ? ".sum_weighted" : ".mean_weighted")))
      return false;
    if (Batch.LossVar) {
      unsigned After = 0;
      bool Starts = false;
      std::string StatementIndent =
          indentationOf(SM, Batch.BackwardStatement->getBeginLoc(), Starts);
      if (!Starts ||
          !offsetAfterStatement(Context, Batch.BackwardStatement, After))
        return false;
      std::string Loss = Batch.LossVar->getNameAsString();
      std::string Global = Loss + " = " + Shard +
                           (Batch.SumLoss ? ".global_sum(" : ".global_mean(") +
                           Loss + ");";
      // Only when the loss is read (a print every k epochs): a collective
      // at every step would cost more than the print.
      if (Batch.LossReadWhen)
        Global = "if (" +
                 Lexer::getSourceText(CharSourceRange::getTokenRange(
                                          Batch.LossReadWhen->getSourceRange()),
                                      SM, Context.getLangOpts())
                     .str() +
                 ")\n" + StatementIndent + "  " + Global;
      F.Edits.push_back({After, 0, "\n" + StatementIndent + Global, {}});
    }
    if (Batch.Eval.Tensors.empty())
      return true;
    // The evaluation after the loop: its own shard, right after the loop,
    // its figures global; left whole where ddpify cannot spell it.
    std::vector<FindingEdit> Before = F.Edits;
    std::string EvalShard =
        freshName(Context, Body, {"eval_rows", "test_rows", "ddp_eval_rows"});
    unsigned After = 0;
    if (EvalShard.empty() || !offsetAfterStatement(Context, Loop, After) ||
        !shardRegion(Context, F, Batch.Eval, EvalShard, Body, Loop->getEndLoc(),
                     Declarations, Indent)) {
      F.Edits = Before;
      return true;
    }
    F.Edits.push_back({After, 0, "\n" + Indent + Declarations, {}});
    return true;
  }

  FindingList &Findings;
  FindingLocator Locator;
  std::string Root;
  std::unique_ptr<TrainingOracle> Oracle;
  const ASTContext *OracleOf = nullptr;
  std::set<std::pair<std::string, unsigned>> Seen;
};

const RuleInfo ShardFullBatchesRows[] = {
    {"R15", "",
     "a training loop fed whole tensors with a mean or sum loss over rows: "
     "each rank takes its block of rows (ddp::RowShard), its loss weighted so "
     "the gradient is exact, printed figures global"},
};

} // namespace

extern const RuleUnit ShardFullBatches{ShardFullBatchesRows,
                                       createModule<FullBatchMatchers>};

} // namespace ddpify
