//===- OutputMatchers.cpp - R7/R8: output and checkpoints -----------------===//
//
// R7 finds statements that write to stdout: `std::cout << ...` chains (and
// `std::cout.flush()`, `.write()`, `.put()`), printf, puts, putchar, vprintf,
// and fprintf/fputs/fputc/putc/fwrite/vfprintf on `stdout`. R8 finds
// `torch::save(...)` and `OutputArchive::save_to(...)`. Each is recorded
// when it is a whole statement (in a block, or the body of an if, loop or
// label) that no `if (ddp::is_main_process())` / `if (ddp::rank() == 0)`
// encloses. std::cerr and stderr stay on every rank: they are not matched.
//
//===----------------------------------------------------------------------===//

#include "ddpify/OutputMatchers.h"
#include "ddpify/MatcherUtil.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/StringSwitch.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

const Expr *strip(const Expr *E) {
  return E ? E->IgnoreImplicit()->IgnoreParenImpCasts() : nullptr;
}

std::string qualifiedName(const NamedDecl *D) {
  return D ? D->getQualifiedNameAsString() : "";
}

/// The global C stream `stdout` (glibc's `#define stdout stdout`).
bool isStdoutHandle(const Expr *E) {
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(strip(E));
  return Ref && qualifiedName(Ref->getDecl()) == "stdout";
}

/// `std::cout`, or an expression that yields it: `std::cout << x`,
/// `std::cout.flush()`, ... .
bool isStdoutStream(const Expr *E) {
  E = strip(E);
  if (!E)
    return false;
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E))
    return qualifiedName(Ref->getDecl()) == "std::cout";
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E))
    return Op->getOperator() == OO_LessLess && Op->getNumArgs() >= 1 &&
           isStdoutStream(Op->getArg(0));
  if (const auto *Bin = dyn_cast<BinaryOperator>(E)) // dependent operands
    return Bin->getOpcode() == BO_Shl && isStdoutStream(Bin->getLHS());
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E))
    return isStdoutStream(Member->getImplicitObjectArgument());
  return false;
}

/// The callee's name, also for calls not resolved in a template pattern.
std::string calleeName(const CallExpr *Call) {
  if (const FunctionDecl *Callee = Call->getDirectCallee())
    return qualifiedName(Callee);
  if (const auto *Lookup =
          dyn_cast<UnresolvedLookupExpr>(Call->getCallee()->IgnoreImplicit())) {
    std::string Name = Lookup->getName().getAsString();
    if (NestedNameSpecifier *Qualifier = Lookup->getQualifier())
      if (const NamespaceDecl *NS = Qualifier->getAsNamespace())
        return NS->getName().str() + "::" + Name;
    return Name;
  }
  return "";
}

/// printf-family calls that write to stdout.
bool isStdoutCall(const CallExpr *Call) {
  std::string Name = calleeName(Call);
  llvm::StringRef Short = Name;
  Short.consume_front("std::");
  if (Short == "printf" || Short == "puts" || Short == "putchar" ||
      Short == "vprintf")
    return true;
  int StreamArg = llvm::StringSwitch<int>(Short)
                      .Cases("fprintf", "vfprintf", 0)
                      .Cases("fputs", "fputc", "putc", 1)
                      .Case("fwrite", 3)
                      .Default(-1);
  return StreamArg >= 0 && Call->getNumArgs() > unsigned(StreamArg) &&
         isStdoutHandle(Call->getArg(StreamArg));
}

/// A whole-statement expression that writes to stdout.
bool writesToStdout(const Expr *E) {
  E = strip(E);
  if (!E)
    return false;
  if (isa<CXXOperatorCallExpr>(E) || isa<BinaryOperator>(E) ||
      isa<CXXMemberCallExpr>(E))
    return isStdoutStream(E) && !isa<DeclRefExpr>(E);
  if (const auto *Call = dyn_cast<CallExpr>(E))
    return isStdoutCall(Call);
  return false;
}

/// `torch::save(...)`, `archive.save_to(...)`.
bool writesCheckpoint(const Expr *E) {
  E = strip(E);
  if (const auto *Member = dyn_cast_or_null<CXXMemberCallExpr>(E)) {
    const CXXMethodDecl *Method = Member->getMethodDecl();
    return Method && Method->getName() == "save_to" &&
           qualifiedName(Method->getParent()) ==
               "torch::serialize::OutputArchive";
  }
  if (const auto *Call = dyn_cast_or_null<CallExpr>(E))
    return calleeName(Call) == "torch::save";
  return false;
}

/// The main-process check: a call to ddp::is_main_process() or ddp::rank().
bool mentionsMainProcessCheck(const Stmt *S) {
  if (!S)
    return false;
  if (const auto *Call = dyn_cast<CallExpr>(S)) {
    std::string Name = calleeName(Call);
    if (Name == "ddp::is_main_process" || Name == "ddp::rank")
      return true;
  }
  for (const Stmt *Child : S->children())
    if (mentionsMainProcessCheck(Child))
      return true;
  return false;
}

class OutputMatchers : public MatcherModule, public MatchFinder::MatchCallback {
public:
  OutputMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    // Every statement-level expression: its parent is a block or the body
    // of a control statement. The callback decides what it writes.
    Finder.addMatcher(
        expr(anyOf(hasParent(compoundStmt()), hasParent(ifStmt()),
                   hasParent(forStmt()), hasParent(cxxForRangeStmt()),
                   hasParent(whileStmt()), hasParent(doStmt()),
                   hasParent(labelStmt()), hasParent(caseStmt()),
                   hasParent(defaultStmt())))
            .bind("stmt"),
        this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Seen.clear();
  }

  void run(const MatchFinder::MatchResult &Result) override {
    const auto *E = Result.Nodes.getNodeAs<Expr>("stmt");
    if (!E)
      return;
    Context = Result.Context;
    bool Output = writesToStdout(E);
    bool Save = !Output && writesCheckpoint(E);
    if (!Output && !Save)
      return;
    if (!isWholeStatement(E) || isGuarded(E))
      return;
    const char *Rule = Output ? "R7" : "R8";
    const char *Check = Output ? "ddp-unguarded-output" : "ddp-unguarded-save";
    bool Braced = wouldCaptureElse(E);
    // `std::cout << VALUE;` with a macro at the end is still our statement:
    // the guard goes before it and nothing inside the macro changes.
    const SourceManager &SM = Context->getSourceManager();
    SourceLocation Begin = E->getBeginLoc(), End = E->getEndLoc();
    if (Begin.isFileID() && End.isMacroID())
      End = SM.getExpansionRange(End).getEnd();
    Finding F = Locator.make(*Context, SourceRange(Begin, End), Rule, Check,
                             Braced ? FindingForm::GuardStatementBraced
                                    : FindingForm::GuardStatement);
    if (F.FilePath.empty())
      return;
    // The same statement again, through a template instantiation.
    if (!Seen.insert({F.FilePath, F.Offset}).second)
      return;
    F.Message = Output ? "output to stdout is printed by every process of a "
                         "DDP program; guard it with "
                         "'if (ddp::is_main_process())'"
                       : "every process of a DDP program writes this "
                         "checkpoint to the same file; guard it with "
                         "'if (ddp::is_main_process())'";
    if (!F.InMacro) {
      // The statement ends with its `;`, which the guard must cover.
      SourceLocation Semi = Lexer::findLocationAfterToken(
          End, tok::semi, SM, Context->getLangOpts(),
          /*SkipTrailingWhitespaceAndNewLine=*/false);
      unsigned AfterSemi = 0;
      if (Semi.isInvalid() || !Locator.offsetIn(*Context, F, Semi, AfterSemi)) {
        // `PRINT(x)` without a `;` of ours: the macro writes the statement.
        F.InMacro = true;
      } else {
        F.Length = AfterSemi - F.Offset;
        if (Braced) {
          F.HasSecondRange = true;
          F.SecondOffset = AfterSemi;
        }
      }
    }
    Findings.push_back(std::move(F));
  }

private:
  const Stmt *parentStmt(const Stmt *S) {
    DynTypedNodeList Parents = Context->getParents(*S);
    return Parents.empty() ? nullptr : Parents[0].get<Stmt>();
  }

  /// The expression is a statement of its own (not the condition of an if,
  /// the init of a for, ...).
  bool isWholeStatement(const Expr *E) {
    const Stmt *Parent = parentStmt(E);
    if (!Parent)
      return false;
    if (isa<CompoundStmt>(Parent) || isa<LabelStmt>(Parent) ||
        isa<CaseStmt>(Parent) || isa<DefaultStmt>(Parent))
      return true;
    if (const auto *If = dyn_cast<IfStmt>(Parent))
      return If->getThen() == E || If->getElse() == E;
    if (const auto *For = dyn_cast<ForStmt>(Parent))
      return For->getBody() == E;
    if (const auto *Range = dyn_cast<CXXForRangeStmt>(Parent))
      return Range->getBody() == E;
    if (const auto *While = dyn_cast<WhileStmt>(Parent))
      return While->getBody() == E;
    if (const auto *Do = dyn_cast<DoStmt>(Parent))
      return Do->getBody() == E;
    return false;
  }

  /// Inside the then-branch of an if whose condition is the main-process
  /// check (also through a lambda defined there).
  bool isGuarded(const Stmt *S) {
    DynTypedNode Child = DynTypedNode::create(*S);
    while (true) {
      DynTypedNodeList Parents = Context->getParents(Child);
      if (Parents.empty())
        return false;
      DynTypedNode Parent = Parents[0];
      if (const auto *If = Parent.get<IfStmt>())
        if (If->getThen() == Child.get<Stmt>() &&
            mentionsMainProcessCheck(If->getCond()))
          return true;
      // A function other than a lambda's call operator ends the search: its
      // callers are not known here.
      if (const auto *Function = Parent.get<FunctionDecl>()) {
        const auto *Method = dyn_cast<CXXMethodDecl>(Function);
        if (!Method || !Method->getParent()->isLambda())
          return false;
      }
      Child = Parent;
    }
  }

  /// `if (c) std::cout << a; else ...`: a guard put before the statement
  /// would take the else.
  bool wouldCaptureElse(const Stmt *S) {
    const Stmt *Child = S;
    while (const Stmt *Parent = parentStmt(Child)) {
      if (const auto *If = dyn_cast<IfStmt>(Parent)) {
        if (If->getThen() == Child && If->getElse())
          return true;
      } else if (!isa<ForStmt>(Parent) && !isa<CXXForRangeStmt>(Parent) &&
                 !isa<WhileStmt>(Parent) && !isa<LabelStmt>(Parent) &&
                 !isa<CaseStmt>(Parent) && !isa<DefaultStmt>(Parent) &&
                 !isa<SwitchStmt>(Parent)) {
        return false;
      }
      Child = Parent;
    }
    return false;
  }

  FindingList &Findings;
  FindingLocator Locator;
  ASTContext *Context = nullptr;
  std::set<std::pair<std::string, unsigned>> Seen;
};

} // namespace

std::unique_ptr<MatcherModule>
createOutputMatchers(FindingList &Findings, llvm::StringRef ProjectRoot) {
  return std::make_unique<OutputMatchers>(Findings, ProjectRoot);
}

} // namespace ddpify
