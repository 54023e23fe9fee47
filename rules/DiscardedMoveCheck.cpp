//===- DiscardedMoveCheck.cpp - ddp-discarded-move ------------------------===//
//
// A tensor's `to()`, `cuda()` and `cpu()` return a new tensor and leave the
// one they are called on where it was (unlike a module's `to()`, which moves
// the module). As a statement, `batch.data.to(device);` throws the moved
// copy away: the data stays on the CPU. On one GPU this can go unnoticed (a
// CPU model, a later `.to()`); on N ranks it fails or computes elsewhere.
// Lint only; the fix-it assigns the result back when the tensor is a
// non-const lvalue (`batch.data = batch.data.to(device);`).
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Lex/Lexer.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral Check = "ddp-discarded-move";

class DiscardedMoveMatchers : public MatcherModule,
                              public MatchFinder::MatchCallback {
public:
  DiscardedMoveMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    auto Move = cxxMemberCallExpr(callee(cxxMethodDecl(
        hasAnyName("to", "cuda", "cpu"),
        ofClass(hasAnyName("::at::Tensor", "::at::TensorBase")))));
    // A whole statement: its value is used by nothing.
    Finder.addMatcher(
        expr(isStatementLevel(), ignoringImplicit(Move.bind("move")))
            .bind("stmt"),
        this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Seen.clear();
  }

  void run(const MatchFinder::MatchResult &Result) override {
    const auto *Statement = Result.Nodes.getNodeAs<Expr>("stmt");
    const auto *Move = Result.Nodes.getNodeAs<CXXMemberCallExpr>("move");
    if (!Statement || !Move)
      return;
    ASTContext &Context = *Result.Context;
    Finding F = Locator.make(Context, Statement->getSourceRange(), "", Check);
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    std::string Method = Move->getMethodDecl()->getNameAsString();
    F.Message = "the result of '." + Method + "()' is discarded: a tensor's " +
                Method +
                "() returns a moved copy and leaves this tensor where it "
                "was; assign the result";
    const Expr *Object = Move->getImplicitObjectArgument();
    if (!F.InMacro && Object && isAssignable(Object)) {
      std::string Text =
          Lexer::getSourceText(
              CharSourceRange::getTokenRange(Object->getSourceRange()),
              Context.getSourceManager(), Context.getLangOpts())
              .str();
      if (!Text.empty())
        F.Edits.push_back({F.Offset, 0, Text + " = "});
    }
    Findings.push_back(std::move(F));
  }

private:
  /// A non-const lvalue tensor named by a variable or a member access:
  /// assigning to it is what the code meant, and naming it twice does
  /// nothing twice.
  static bool isAssignable(const Expr *Object) {
    Object = Object->IgnoreParenImpCasts();
    if (!Object->isLValue() || Object->getType().isConstQualified())
      return false;
    const Expr *Base = Object;
    while (const auto *Member = dyn_cast<MemberExpr>(Base))
      Base = Member->getBase()->IgnoreParenImpCasts();
    return isa<DeclRefExpr>(Base) || isa<CXXThisExpr>(Base);
  }

  FindingList &Findings;
  FindingLocator Locator;
  std::set<std::pair<std::string, unsigned>> Seen;
};

const RuleInfo DiscardedMoveCheckRows[] = {
    {"", "ddp-discarded-move",
     "a tensor's .to()/.cuda()/.cpu() as a statement: the moved copy is "
     "thrown away"},
};
} // namespace

extern const RuleUnit DiscardedMoveCheck{DiscardedMoveCheckRows,
                                         createModule<DiscardedMoveMatchers>};

} // namespace ddpify
