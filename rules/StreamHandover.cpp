//===- StreamHandover.cpp - R7: std::cout handed on -----------------------===//
//
// R7 guards the statements that print through a `std::ostream&` bound to
// `std::cout` when the binding and the printing are in one translation unit.
// A logger or a trainer usually lives in files of its own: `Logger
// log(std::cout);` in main.cpp, `os_ << ...` in logger.cpp. That unit never
// sees the binding, and every rank would print every line. So where
// `std::cout` (or `&std::cout`) is handed to a function of the project whose
// body is not in this unit, or to a constructor of the project whose class
// has methods defined in another unit (which may print through the stream
// it keeps), it becomes
// `ddp::output_stream(std::cout)`: std::cout on the main process, a stream
// that discards its text on the others. Every rank still runs the code (the
// values it prints included), and the text appears once.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

class StreamHandoverMatchers : public MatcherModule,
                               public MatchFinder::MatchCallback {
public:
  StreamHandoverMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    auto Cout = declRefExpr(to(varDecl(hasName("::std::cout")))).bind("cout");
    auto Handed = expr(ignoringParenImpCasts(anyOf(
        Cout, unaryOperator(hasOperatorName("&"),
                            hasUnaryOperand(ignoringParenImpCasts(Cout))))));
    Finder.addMatcher(
        callExpr(forEachArgumentWithParam(Handed, parmVarDecl().bind("param")),
                 callee(functionDecl().bind("callee"))),
        this);
    Finder.addMatcher(
        cxxConstructExpr(
            forEachArgumentWithParam(Handed, parmVarDecl().bind("param")),
            hasDeclaration(functionDecl().bind("callee"))),
        this);
  }

  void onStartOfTranslationUnit() override { Locator.reset(); }

  void run(const MatchFinder::MatchResult &Result) override {
    const auto *Cout = Result.Nodes.getNodeAs<DeclRefExpr>("cout");
    const auto *Param = Result.Nodes.getNodeAs<ParmVarDecl>("param");
    const auto *Callee = Result.Nodes.getNodeAs<FunctionDecl>("callee");
    if (!Cout || !Param || !Callee)
      return;
    ASTContext &Context = *Result.Context;
    QualType Type = Param->getType();
    if (!Type->isReferenceType() && !Type->isPointerType())
      return;
    const CXXRecordDecl *Stream = Type->getPointeeType()->getAsCXXRecordDecl();
    if (!Stream || Stream->getQualifiedNameAsString() != "std::basic_ostream")
      return;
    // The project's own code, whose body this unit does not hold: a
    // function's body here has its statements guarded by R7 itself. A
    // constructor keeps the stream for methods that may be anywhere.
    if ((Callee->hasBody() && !keepsForOtherUnits(Callee)) ||
        !Locator.isInRoot(Context, Callee->getCanonicalDecl()->getLocation()) ||
        !Locator.isInRoot(Context, Cout->getBeginLoc()))
      return;
    Finding F = Locator.make(Context, Cout->getSourceRange(), "R7",
                             "ddp-unguarded-output");
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    F.Message = "std::cout is handed to '" + Callee->getNameAsString() +
                "', defined in another file, which prints through it on "
                "every rank; it gets ddp::output_stream(std::cout), which "
                "prints on the main process only";
    if (!F.InMacro) {
      F.Edits.push_back({F.Offset, 0, "ddp::output_stream("});
      F.Edits.push_back({F.Offset + F.Length, 0, ")"});
    }
    Findings.push_back(std::move(F));
  }

private:
  /// A constructor whose class has a method defined in another unit (its
  /// body is not here), which may print through the stream it keeps.
  static bool keepsForOtherUnits(const FunctionDecl *Callee) {
    const auto *Constructor = dyn_cast<CXXConstructorDecl>(Callee);
    if (!Constructor)
      return false;
    for (const CXXMethodDecl *Method : Constructor->getParent()->methods())
      if (Method->isUserProvided() && !Method->hasBody())
        return true;
    return false;
  }

  FindingList &Findings;
  FindingLocator Locator;
  std::set<std::pair<std::string, unsigned>> Seen;
};

} // namespace

extern const RuleUnit StreamHandover{{}, createModule<StreamHandoverMatchers>};

} // namespace ddpify
