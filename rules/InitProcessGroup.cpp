//===- InitProcessGroup.cpp - R1: ddp::init at the start of main ----------===//
//
// R1 finds the definition of `main` in the user's code and records where its
// body opens, the names of its parameters when they can be handed to
// `ddp::init(int&, char**)`, and whether the parameters must be added. A main
// that already calls ddp::init (anywhere in its body) is left alone.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "ddpify/SourceLines.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Stmt.h"
#include "clang/AST/TypeLoc.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include <optional>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

/// `int&` binds argc: a non-const int (not a reference to const).
bool bindsToIntRef(QualType Type) {
  Type = Type.getNonReferenceType();
  return !Type.isConstQualified() &&
         Type.getCanonicalType()->isSpecificBuiltinType(BuiltinType::Int);
}

/// `char**` accepts argv: char** or char*[] (already decayed in a parameter),
/// without const below the top level.
bool convertsToCharPtrPtr(QualType Type) {
  Type = Type.getNonReferenceType().getCanonicalType();
  if (!Type->isPointerType())
    return false;
  QualType Inner = Type->getPointeeType();
  if (Inner.isConstQualified() || !Inner->isPointerType())
    return false;
  QualType Char = Inner->getPointeeType();
  return !Char.isConstQualified() && Char->isCharType() &&
         !Char->isSpecificBuiltinType(BuiltinType::SChar) &&
         !Char->isSpecificBuiltinType(BuiltinType::UChar);
}

bool callsDdpInit(const Stmt *S) {
  if (!S)
    return false;
  if (const auto *Call = dyn_cast<CallExpr>(S))
    if (const FunctionDecl *Callee = Call->getDirectCallee())
      if (Callee->getQualifiedNameAsString() == "ddp::init")
        return true;
  // A call in a template or with unresolved overloads: look at the name.
  if (const auto *Lookup = dyn_cast<UnresolvedLookupExpr>(S))
    if (Lookup->getName().getAsString() == "init" && Lookup->getQualifier())
      if (const NamespaceDecl *NS = Lookup->getQualifier()->getAsNamespace())
        if (NS->getName() == "ddp")
          return true;
  for (const Stmt *Child : S->children())
    if (callsDdpInit(Child))
      return true;
  return false;
}

/// Whether main's outermost block declares Name (a parameter of that name
/// would clash with it).
bool declaresAtTopLevel(const CompoundStmt *Body, llvm::StringRef Name) {
  for (const Stmt *S : Body->body())
    if (const auto *Decls = dyn_cast<DeclStmt>(S))
      for (const Decl *D : Decls->decls())
        if (const auto *Named = dyn_cast<NamedDecl>(D))
          if (Named->getName() == Name)
            return true;
  return false;
}

/// `(void)argc;`, `static_cast<void>(argv);`: a statement that only marks
/// Param used.
bool discardsParameter(const Stmt *S, const ParmVarDecl *Param) {
  const auto *Cast = dyn_cast<ExplicitCastExpr>(S);
  if (!Cast || !Cast->getType()->isVoidType())
    return false;
  const auto *Ref =
      dyn_cast<DeclRefExpr>(Cast->getSubExpr()->IgnoreParenImpCasts());
  return Ref && Ref->getDecl() == Param;
}

class EntryMatchers : public MatcherModule, public MatchFinder::MatchCallback {
public:
  EntryMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(
        functionDecl(isMain(), isDefinition(), hasBody(compoundStmt()))
            .bind("main"),
        this);
  }

  void onStartOfTranslationUnit() override { Locator.reset(); }

  void run(const MatchFinder::MatchResult &Result) override {
    const auto *Main = Result.Nodes.getNodeAs<FunctionDecl>("main");
    if (!Main)
      return;
    ASTContext &Context = *Result.Context;
    const SourceManager &SM = Context.getSourceManager();
    const auto *Body = dyn_cast<CompoundStmt>(Main->getBody());
    if (!Body || callsDdpInit(Body))
      return;
    SourceLocation Brace = Body->getLBracLoc();
    // Inserted after `{`: the location right after the brace token.
    Finding F = Locator.make(Context, SourceRange(Brace, Brace), "R1", "");
    if (F.FilePath.empty())
      return;
    if (!F.InMacro) {
      F.Offset += F.Length;
      F.Length = 0;
    }
    F.Message = "'main' does not join the process group; call "
                "'ddp::init' as its first statement";

    // Where the call goes: on its own line, indented as main's first
    // statement, or on the brace's line.
    bool OwnLine = false;
    std::string Indent;
    if (!Body->body_empty())
      Indent = indentationOf(SM, Body->body_front()->getBeginLoc(), OwnLine);

    // Which arguments ddp::init gets: main's own, or none; `main()` and
    // `main(void)` get `int argc, char** argv`.
    std::string Arguments;
    std::optional<FindingEdit> AddParameters;
    unsigned Params = Main->getNumParams();
    if (Params >= 2) {
      const ParmVarDecl *Argc = Main->getParamDecl(0);
      const ParmVarDecl *Argv = Main->getParamDecl(1);
      if (!Argc->getName().empty() && !Argv->getName().empty() &&
          bindsToIntRef(Argc->getType()) &&
          convertsToCharPtrPtr(Argv->getType())) {
        Arguments = Argc->getName().str() + ", " + Argv->getName().str();
        // ddp::init uses both now: `(void)argc;` that said they were unused
        // goes, with its line.
        for (const Stmt *S : Body->body())
          if (discardsParameter(S, Argc) || discardsParameter(S, Argv))
            if (std::optional<FindingEdit> Removal =
                    removalOfLine(Context, F, S))
              F.Edits.push_back(std::move(*Removal));
      }
    } else if (Params == 0 && !declaresAtTopLevel(Body, "argc") &&
               !declaresAtTopLevel(Body, "argv")) {
      FunctionTypeLoc Type = Main->getFunctionTypeLoc();
      unsigned Open = 0, Close = 0;
      if (Type && Locator.offsetIn(Context, F, Type.getLParenLoc(), Open) &&
          Locator.offsetIn(Context, F, Type.getRParenLoc(), Close) &&
          Close > Open) {
        AddParameters =
            FindingEdit{Open + 1, Close - Open - 1, "int argc, char** argv"};
        Arguments = "argc, argv";
      }
    }
    std::string Call = "ddp::init(" + Arguments + ");";
    F.Edits.push_back(
        {F.Offset, 0, OwnLine ? "\n" + Indent + Call : " " + Call});
    if (AddParameters)
      F.Edits.push_back(std::move(*AddParameters));
    Findings.push_back(std::move(F));
  }

private:
  /// The edit that removes statement S and its line, when nothing else is
  /// on that line.
  std::optional<FindingEdit> removalOfLine(ASTContext &Context,
                                           const Finding &F, const Stmt *S) {
    const SourceManager &SM = Context.getSourceManager();
    unsigned Begin = 0, End = 0;
    if (!Locator.offsetIn(Context, F, S->getBeginLoc(), Begin) ||
        !offsetAfterStatement(Context, S, End))
      return std::nullopt;
    bool Invalid = false;
    llvm::StringRef Code = SM.getBufferData(
        SM.getFileID(SM.getExpansionLoc(S->getBeginLoc())), &Invalid);
    if (Invalid || End > Code.size() || Begin > End)
      return std::nullopt;
    size_t LineBegin = lineStart(Code, Begin);
    if (!Code.slice(LineBegin, Begin).trim().empty() ||
        !Code.slice(Begin, End).rtrim().ends_with(";"))
      return std::nullopt;
    size_t LineEnd = Code.find('\n', End);
    if (LineEnd == llvm::StringRef::npos ||
        !Code.slice(End, LineEnd).trim().empty())
      return std::nullopt;
    return FindingEdit{static_cast<unsigned>(LineBegin),
                       static_cast<unsigned>(LineEnd + 1 - LineBegin), ""};
  }

  FindingList &Findings;
  FindingLocator Locator;
};

const RuleInfo InitProcessGroupRows[] = {
    {"R1", "",
     "ddp::init(argc, argv) as the first statement of main (parameters "
     "added when main() has none)"},
};
} // namespace

extern const RuleUnit InitProcessGroup{InitProcessGroupRows,
                                       createModule<EntryMatchers>};

} // namespace ddpify
