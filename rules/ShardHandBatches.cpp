//===- ShardHandBatches.cpp - R4: batches cut from tensors by hand --------===//
//
// R4 for a training loop that cuts its batches from tensors itself: where
// the analysis (analyses/HandBatches.cpp) shows the counter only picks the
// batch, `for (int64_t i = A; i < N; i += S)` becomes
// `for (int64_t i : ddp::batch_starts(A, N, S))` and a range-for over
// batches cut beforehand walks `ddp::rank_batches(...)`: each rank takes
// every N-th batch, padded so all ranks step as often.
//
//===----------------------------------------------------------------------===//

#include "ddpify/HandBatches.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "ddpify/Work.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Analysis/Analyses/ExprMutationAnalyzer.h"
#include "clang/Lex/Lexer.h"
#include <functional>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {

namespace {

class HandBatchMatchers : public MatcherModule,
                          public MatchFinder::MatchCallback {
public:
  HandBatchMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(forStmt().bind("loop"), this);
    Finder.addMatcher(whileStmt().bind("loop"), this);
    Finder.addMatcher(cxxForRangeStmt().bind("list"), this);
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
    if (const auto *List = Result.Nodes.getNodeAs<CXXForRangeStmt>("list")) {
      shardList(Context, List);
      return;
    }
    const auto *Loop = Result.Nodes.getNodeAs<Stmt>("loop");
    if (!Loop || !Locator.isInRoot(Context, Loop->getBeginLoc()))
      return;
    HandBatchLoop Batches = handBatchLoop(Context, Loop, *Oracle);
    if (!Batches.Loop)
      return;
    if (const auto *While = dyn_cast<WhileStmt>(Loop)) {
      shardWhile(Context, While, Batches);
      return;
    }
    const auto *For = cast<ForStmt>(Loop);
    const SourceManager &SM = Context.getSourceManager();
    const Stmt *Init = For->getInit();
    Finding F = Locator.make(
        Context, SourceRange(Init->getBeginLoc(), For->getInc()->getEndLoc()),
        "R4", "");
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    F.Message = "this training loop cuts its batches from tensors by hand, "
                "so every rank would train on every batch; each rank takes "
                "every N-th batch (ddp::batch_starts)";
    if (!F.InMacro) {
      // The counter's type as written (`int64_t `, `size_t `, `auto `).
      std::string Type =
          Lexer::getSourceText(
              CharSourceRange::getCharRange(Init->getBeginLoc(),
                                            Batches.Counter->getLocation()),
              SM, Context.getLangOpts())
              .str();
      for (const Expr *Part :
           {Batches.Begin, Batches.End, Batches.Step, Batches.Ahead})
        if (Part &&
            (Part->getBeginLoc().isMacroID() || Part->getEndLoc().isMacroID()))
          return;
      F.Edits.push_back({F.Offset, F.Length,
                         Type + Batches.Counter->getNameAsString() + " : " +
                             batchStartsCall(Context, Batches)});
    }
    Findings.push_back(std::move(F));
  }

private:
  /// `ddp::batch_starts(A, N, S)` for Batches, N the exclusive end of the
  /// counter's range (`i + K <= N` is `i < N - K + 1`); A is the counter
  /// itself for a while loop.
  static std::string batchStartsCall(ASTContext &Context,
                                     const HandBatchLoop &Batches) {
    auto Text = [&](const Expr *E) {
      return Lexer::getSourceText(
                 CharSourceRange::getTokenRange(E->getSourceRange()),
                 Context.getSourceManager(), Context.getLangOpts())
          .str();
    };
    auto Operand = [&](const Expr *E) {
      std::string Spelled = Text(E);
      const Expr *Bare = E->IgnoreImpCasts();
      return isa<DeclRefExpr, IntegerLiteral, CallExpr, MemberExpr, ParenExpr>(
                 Bare)
                 ? Spelled
                 : "(" + Spelled + ")";
    };
    std::string End = Text(Batches.End);
    if (Batches.Ahead || Batches.Inclusive) {
      End = Operand(Batches.End);
      if (Batches.Ahead)
        End += " - " + Operand(Batches.Ahead);
      if (Batches.Inclusive)
        End += " + 1";
    }
    return "ddp::batch_starts(" +
           (Batches.Begin ? Text(Batches.Begin)
                          : Batches.Counter->getNameAsString()) +
           ", " + End + ", " +
           (Batches.Step ? Text(Batches.Step) : std::string("1")) + ")";
  }

  /// `while (i < N) { BODY i += S; }` becomes
  /// `for (const auto ddp_i : ddp::batch_starts(i, N, S)) { i = ddp_i; BODY
  /// i += S; }`: the body and its step stay as written.
  void shardWhile(ASTContext &Context, const WhileStmt *Loop,
                  const HandBatchLoop &Batches) {
    const SourceManager &SM = Context.getSourceManager();
    Finding F = Locator.make(
        Context, SourceRange(Loop->getBeginLoc(), Loop->getRParenLoc()), "R4",
        "");
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    F.Message = "this training loop cuts its batches from tensors by hand, "
                "so every rank would train on every batch; each rank takes "
                "every N-th batch (ddp::batch_starts)";
    const auto *Block = cast<CompoundStmt>(Loop->getBody());
    bool Macro = Loop->getBeginLoc().isMacroID() ||
                 Loop->getRParenLoc().isMacroID() ||
                 Block->getLBracLoc().isMacroID() ||
                 Block->body_front()->getBeginLoc().isMacroID();
    for (const Expr *Part : {Batches.End, Batches.Step, Batches.Ahead})
      Macro |= Part && (Part->getBeginLoc().isMacroID() ||
                        Part->getEndLoc().isMacroID());
    if (Macro)
      return; // As a for loop's: ddpify cannot spell the edit.
    if (!F.InMacro) {
      std::string Counter = Batches.Counter->getNameAsString();
      std::string Own = "ddp_" + Counter;
      // The first statement's indentation, for the assignment put before it.
      SourceLocation First = Block->body_front()->getBeginLoc();
      unsigned Column = SM.getSpellingColumnNumber(First);
      std::string Indent(Column > 0 ? Column - 1 : 0, ' ');
      bool OwnLine = SM.getSpellingLineNumber(First) !=
                     SM.getSpellingLineNumber(Block->getLBracLoc());
      F.Edits.push_back({F.Offset, F.Length,
                         "for (const auto " + Own + " : " +
                             batchStartsCall(Context, Batches) + ")"});
      F.Edits.push_back({SM.getFileOffset(Block->getLBracLoc()) + 1, 0,
                         (OwnLine ? "\n" + Indent : std::string(" ")) +
                             Counter + " = " + Own + ";"});
    }
    Findings.push_back(std::move(F));
  }

  /// `for (auto &b : RANGE)` over batches cut beforehand becomes
  /// `for (auto &b : ddp::rank_batches(RANGE))`.
  void shardList(ASTContext &Context, const CXXForRangeStmt *Loop) {
    if (!Locator.isInRoot(Context, Loop->getBeginLoc()))
      return;
    const Expr *Range = handBatchList(Context, Loop, *Oracle);
    if (!Range)
      return;
    SourceRange Spelled = Range->getSourceRange();
    Finding F = Locator.make(Context, Spelled, "R4", "");
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    F.Message = "this training loop walks batches cut beforehand, so every "
                "rank would train on every batch; each rank takes every N-th "
                "batch (ddp::rank_batches)";
    if (!F.InMacro && !Spelled.getBegin().isMacroID() &&
        !Spelled.getEnd().isMacroID())
      F.Edits.push_back(
          {F.Offset, F.Length,
           "ddp::rank_batches(" +
               Lexer::getSourceText(CharSourceRange::getTokenRange(Spelled),
                                    Context.getSourceManager(),
                                    Context.getLangOpts())
                   .str() +
               ")"});
    Findings.push_back(std::move(F));
  }

  FindingList &Findings;
  FindingLocator Locator;
  std::unique_ptr<TrainingOracle> Oracle;
  const ASTContext *OracleOf = nullptr;
  std::set<std::pair<std::string, unsigned>> Seen;
};

} // namespace

extern const RuleUnit ShardHandBatches{{}, createModule<HandBatchMatchers>};

} // namespace ddpify
