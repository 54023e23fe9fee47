//===- GuardOutput.cpp - R7: output on the main process -------------------===//
//
// R7 guards statements that write to stdout (`std::cout << ...`, printf,
// puts, fprintf on `stdout`, an ostream bound to std::cout) with
// `if (ddp::is_main_process())`; analyses/MainProcessWrites.h plans the
// guards with R8's, so that one block spans consecutive prints and saves.
// std::cerr and stderr stay on every rank.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MainProcessWrites.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "clang/ASTMatchers/ASTMatchers.h"

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

class GuardOutput : public MatcherModule, public MatchFinder::MatchCallback {
public:
  GuardOutput(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Writes(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    // Every statement-level expression: the planner decides what it writes.
    Finder.addMatcher(expr(isStatementLevel()).bind("stmt"), this);
  }

  void onStartOfTranslationUnit() override { Writes.startTranslationUnit(); }

  void onEndOfTranslationUnit() override {
    Writes.finishTranslationUnit(Findings, "R7");
  }

  void run(const MatchFinder::MatchResult &Result) override {
    Writes.enter(*Result.Context);
    if (const auto *E = Result.Nodes.getNodeAs<Expr>("stmt"))
      Writes.noteStatement(E);
  }

private:
  FindingList &Findings;
  MainProcessWrites Writes;
};

const RuleInfo GuardOutputRows[] = {
    {"R7", "ddp-unguarded-output",
     "statements writing to stdout are guarded by ddp::is_main_process()",
     CheckLevel::Rewrite},
};
} // namespace

extern const RuleUnit GuardOutput{GuardOutputRows,
                                  createModule<class GuardOutput>};

} // namespace ddpify
