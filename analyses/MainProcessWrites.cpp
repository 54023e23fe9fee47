//===- MainProcessWrites.cpp - Writes only the main process makes ---------===//
//
// The statements that write to stdout (`std::cout << ...` chains and
// `std::cout.flush()`, `.write()`, `.put()`, printf, puts, putchar, vprintf,
// fprintf/fputs/fputc/putc/fwrite/vfprintf on `stdout`; also through an
// ostream bound to std::cout), write checkpoints (`torch::save(...)`,
// `OutputArchive::save_to(...)`, a TorchScript module's `save(path)`) or
// other files (`cv::imwrite`, `std::filesystem::create_directory`), and
// their guards. Each is guarded when it is a whole statement (in a block,
// or the body of an if, loop or label) that no `if (ddp::is_main_process())`
// / `if (ddp::rank() == 0)` encloses; consecutive ones share one guarded
// block, and values they print that do work every process must do are
// computed before the guard. std::cerr and stderr stay on every rank: they
// are not matched.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MainProcessWrites.h"
#include "ddpify/DeviceExpressions.h"
#include "ddpify/EditSet.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/SourceLines.h"
#include "ddpify/Work.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSwitch.h"
#include <map>
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

/// Streams of the program that may be `std::cout`: references and pointers
/// to a `std::ostream` (locals, globals, members, parameters) that some code
/// of the translation unit binds to `std::cout` (`std::ostream &out =
/// verbose ? std::cout : null_stream;`, `report(std::cout)`, a logger
/// constructed with `std::cout` that keeps it in a member). Computed once
/// per translation unit, before any statement is looked at.
struct StdoutBindings {
  llvm::DenseSet<const ValueDecl *> Decls;
  /// Parameters, by their function (any declaration of it) and position.
  std::set<std::pair<const FunctionDecl *, unsigned>> Parameters;
};
const StdoutBindings *CurrentBindings = nullptr;

bool isOstreamType(QualType T) {
  if (T.isNull())
    return false;
  T = T.getNonReferenceType();
  if (T->isPointerType())
    T = T->getPointeeType();
  const auto *Record = T->getAsCXXRecordDecl();
  return Record && qualifiedName(Record) == "std::basic_ostream";
}

bool isBoundDecl(const ValueDecl *D) {
  if (!CurrentBindings || !D)
    return false;
  if (const auto *Param = dyn_cast<ParmVarDecl>(D))
    if (const auto *Function =
            dyn_cast_or_null<FunctionDecl>(Param->getDeclContext()))
      return CurrentBindings->Parameters.count(
          {Function->getCanonicalDecl(), Param->getFunctionScopeIndex()});
  return CurrentBindings->Decls.count(D);
}

/// `std::cout` itself, or a stream of the program bound to it (through `*`
/// for a pointer).
bool isStdoutRoot(const Expr *E) {
  E = strip(E);
  if (const auto *Deref = dyn_cast_or_null<UnaryOperator>(E))
    if (Deref->getOpcode() == UO_Deref)
      E = strip(Deref->getSubExpr());
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E))
    return qualifiedName(Ref->getDecl()) == "std::cout" ||
           isBoundDecl(Ref->getDecl());
  if (const auto *Member = dyn_cast_or_null<MemberExpr>(E))
    return isBoundDecl(Member->getMemberDecl());
  return false;
}

/// `std::cout`, or an expression that yields it: `std::cout << x`,
/// `std::cout.flush()`, a stream bound to it, ... .
bool isStdoutStream(const Expr *E) {
  E = strip(E);
  if (!E)
    return false;
  if (isStdoutRoot(E))
    return true;
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E))
    return Op->getOperator() == OO_LessLess && Op->getNumArgs() >= 1 &&
           isStdoutStream(Op->getArg(0));
  if (const auto *Bin = dyn_cast<BinaryOperator>(E)) // dependent operands
    return Bin->getOpcode() == BO_Shl && isStdoutStream(Bin->getLHS());
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E))
    return isStdoutStream(Member->getImplicitObjectArgument());
  return false;
}

/// Whether E may evaluate to std::cout: itself, `&std::cout`, a bound
/// stream, either branch of a `?:`.
bool mayYieldStdout(const Expr *E) {
  E = strip(E);
  if (!E)
    return false;
  if (const auto *AddressOf = dyn_cast<UnaryOperator>(E))
    if (AddressOf->getOpcode() == UO_AddrOf)
      return mayYieldStdout(AddressOf->getSubExpr());
  if (const auto *Conditional = dyn_cast<AbstractConditionalOperator>(E))
    return mayYieldStdout(Conditional->getTrueExpr()) ||
           mayYieldStdout(Conditional->getFalseExpr());
  return isStdoutRoot(E);
}

/// Finds every stream of the translation unit bound to std::cout, following
/// bindings until nothing changes (a parameter handed on to another
/// function, a constructor's parameter kept in a member).
class StdoutBindingFinder : public RecursiveASTVisitor<StdoutBindingFinder> {
public:
  StdoutBindingFinder(StdoutBindings &Result,
                      llvm::function_ref<bool(SourceLocation)> IsOurs)
      : Result(Result), IsOurs(IsOurs) {}

  bool shouldVisitTemplateInstantiations() const { return true; }

  /// Only the program's own code binds its streams: LibTorch's and the
  /// standard library's declarations are not walked.
  bool TraverseDecl(Decl *D) {
    if (D && !isa<TranslationUnitDecl>(D) &&
        (isa<NamespaceDecl, LinkageSpecDecl>(D->getDeclContext()) ||
         isa<TranslationUnitDecl>(D->getDeclContext())) &&
        !IsOurs(D->getLocation()))
      return true;
    return RecursiveASTVisitor::TraverseDecl(D);
  }

  void run(ASTContext &Context) {
    const StdoutBindings *Saved = CurrentBindings;
    CurrentBindings = &Result;
    for (unsigned Round = 0; Round < 6; ++Round) {
      Changed = false;
      TraverseDecl(Context.getTranslationUnitDecl());
      if (!Changed)
        break;
    }
    CurrentBindings = Saved;
  }

  bool VisitVarDecl(VarDecl *Var) {
    if (!isa<ParmVarDecl>(Var) && isOstreamType(Var->getType()) &&
        (Var->getType()->isReferenceType() ||
         Var->getType()->isPointerType()) &&
        Var->getInit() && mayYieldStdout(Var->getInit()))
      add(Var);
    return true;
  }

  bool VisitBinaryOperator(BinaryOperator *Assign) {
    if (Assign->getOpcode() != BO_Assign || !mayYieldStdout(Assign->getRHS()))
      return true;
    const Expr *Target = strip(Assign->getLHS());
    if (const auto *Ref = dyn_cast<DeclRefExpr>(Target))
      addIfStream(Ref->getDecl());
    else if (const auto *Member = dyn_cast<MemberExpr>(Target))
      addIfStream(Member->getMemberDecl());
    return true;
  }

  bool VisitCallExpr(CallExpr *Call) {
    if (const FunctionDecl *Callee = Call->getDirectCallee()) {
      unsigned Skip =
          isa<CXXOperatorCallExpr>(Call) && isa<CXXMethodDecl>(Callee) ? 1 : 0;
      for (unsigned I = Skip; I < Call->getNumArgs(); ++I)
        bindParameter(Callee, I - Skip, Call->getArg(I));
    }
    return true;
  }

  bool VisitCXXConstructExpr(CXXConstructExpr *Construct) {
    for (unsigned I = 0; I < Construct->getNumArgs(); ++I)
      bindParameter(Construct->getConstructor(), I, Construct->getArg(I));
    return true;
  }

  bool VisitCXXConstructorDecl(CXXConstructorDecl *Constructor) {
    for (const CXXCtorInitializer *Init : Constructor->inits())
      if (Init->isMemberInitializer() && Init->getInit() &&
          mayYieldStdout(Init->getInit()))
        addIfStream(Init->getMember());
    return true;
  }

  bool VisitFieldDecl(FieldDecl *Field) {
    if (Field->hasInClassInitializer() && Field->getInClassInitializer() &&
        mayYieldStdout(Field->getInClassInitializer()))
      addIfStream(Field);
    return true;
  }

private:
  void bindParameter(const FunctionDecl *Callee, unsigned Index,
                     const Expr *Arg) {
    if (Index >= Callee->getNumParams() ||
        !isOstreamType(Callee->getParamDecl(Index)->getType()) ||
        !mayYieldStdout(Arg))
      return;
    if (Result.Parameters.insert({Callee->getCanonicalDecl(), Index}).second)
      Changed = true;
    // A function template's instantiation binds its pattern's parameter.
    if (const FunctionDecl *Pattern = Callee->getTemplateInstantiationPattern())
      if (Result.Parameters.insert({Pattern->getCanonicalDecl(), Index}).second)
        Changed = true;
  }

  void addIfStream(const ValueDecl *D) {
    if (D && isOstreamType(D->getType()) &&
        (D->getType()->isReferenceType() || D->getType()->isPointerType()))
      add(D);
  }

  void add(const ValueDecl *D) {
    if (Result.Decls.insert(D).second)
      Changed = true;
  }

  StdoutBindings &Result;
  llvm::function_ref<bool(SourceLocation)> IsOurs;
  bool Changed = false;
};

/// printf-family calls that write to stdout.
bool isStdoutCall(const CallExpr *Call) {
  std::string Name = qualifiedCalleeName(Call);
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
    return isStdoutStream(E) && !isStdoutRoot(E);
  if (const auto *Call = dyn_cast<CallExpr>(E))
    return isStdoutCall(Call);
  return false;
}

/// A stream manipulator that writes nothing: `std::fixed`, `std::hex` (a
/// function of an std::ios_base&; not std::endl or std::flush),
/// `std::setprecision(6)`, `std::setw(8)`.
bool isFormatManipulator(const Expr *E) {
  E = strip(E);
  if (!E)
    return false;
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E))
    if (const auto *Function = dyn_cast<FunctionDecl>(Ref->getDecl()))
      return Function->isInStdNamespace() && Function->getNumParams() == 1 &&
             devices::isRecordNamed(Function->getParamDecl(0)->getType(),
                                    "std::ios_base");
  if (const auto *Call = dyn_cast<CallExpr>(E))
    return llvm::StringSwitch<bool>(qualifiedCalleeName(Call))
        .Cases("std::setprecision", "std::setw", "std::setfill", "std::setbase",
               "std::setiosflags", "std::resetiosflags", true)
        .Default(false);
  return false;
}

/// A statement that only sets how a stdout stream formats what it prints
/// (`std::cout << std::fixed << std::setprecision(6);`,
/// `std::cout.precision(3);`): it prints nothing, so it needs no guard.
bool onlySetsFormat(const Expr *E) {
  E = strip(E);
  if (!E)
    return false;
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E)) {
    if (Op->getOperator() != OO_LessLess || Op->getNumArgs() != 2 ||
        !isFormatManipulator(Op->getArg(1)))
      return false;
    const Expr *Stream = strip(Op->getArg(0));
    return isStdoutRoot(Stream) || onlySetsFormat(Stream);
  }
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E)) {
    const CXXMethodDecl *Method = Member->getMethodDecl();
    if (!Method || !Method->getIdentifier() ||
        !llvm::StringSwitch<bool>(Method->getName())
             .Cases("precision", "setf", "unsetf", "width", "fill", "flags",
                    true)
             .Default(false))
      return false;
    const Expr *Stream = strip(Member->getImplicitObjectArgument());
    return isStdoutRoot(Stream) || onlySetsFormat(Stream);
  }
  return false;
}

/// A checkpoint: `torch::save(...)`, `archive.save_to(...)`, a TorchScript
/// module's `save(path)`.
bool writesCheckpoint(const Expr *E) {
  E = strip(E);
  if (const auto *Member = dyn_cast_or_null<CXXMemberCallExpr>(E)) {
    const CXXMethodDecl *Method = Member->getMethodDecl();
    if (!Method || !Method->getIdentifier())
      return false;
    std::string Class = qualifiedName(Method->getParent());
    if (Method->getName() == "save_to")
      return Class == "torch::serialize::OutputArchive";
    // `module.save(path)`; `save(std::ostream&)` writes to a stream, not a
    // file of its own.
    if (Method->getName() == "save" && Class == "torch::jit::Module")
      return Method->getNumParams() >= 1 &&
             !llvm::StringRef(Method->getParamDecl(0)->getType().getAsString())
                  .contains("ostream");
    return false;
  }
  if (const auto *Call = dyn_cast_or_null<CallExpr>(E))
    return qualifiedCalleeName(Call) == "torch::save";
  return false;
}

/// Another file or folder a library call makes: `cv::imwrite`, a directory
/// made with `std::filesystem` (or Boost's).
bool writesOtherFile(const Expr *E) {
  const auto *Call = dyn_cast_or_null<CallExpr>(strip(E));
  if (!Call)
    return false;
  return llvm::StringSwitch<bool>(qualifiedCalleeName(Call))
      .Case("cv::imwrite", true)
      .Cases("std::filesystem::create_directory",
             "std::filesystem::create_directories",
             "std::experimental::filesystem::create_directory",
             "std::experimental::filesystem::create_directories", true)
      .Cases("boost::filesystem::create_directory",
             "boost::filesystem::create_directories", true)
      .Default(false);
}

/// The main-process check: a call to ddp::is_main_process() or ddp::rank().
bool mentionsMainProcessCheck(const Stmt *S) {
  if (!S)
    return false;
  if (const auto *Call = dyn_cast<CallExpr>(S)) {
    std::string Name = qualifiedCalleeName(Call);
    if (Name == "ddp::is_main_process" || Name == "ddp::rank")
      return true;
  }
  for (const Stmt *Child : S->children())
    if (mentionsMainProcessCheck(Child))
      return true;
  return false;
}

constexpr llvm::StringLiteral MainProcessGuard = "if (ddp::is_main_process())";

/// The operand of `++x`, `x = ...`, `x += ...`: what the statement changes.
const Expr *changedOperand(const Expr *E) {
  if (const auto *Unary = dyn_cast<UnaryOperator>(E))
    return Unary->isPrefix() ? Unary->getSubExpr() : nullptr;
  if (const auto *Binary = dyn_cast<BinaryOperator>(E))
    return Binary->getLHS();
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E)) {
    // A postfix operator++ has a second, int argument.
    if ((Op->getOperator() == OO_PlusPlus ||
         Op->getOperator() == OO_MinusMinus) &&
        Op->getNumArgs() != 1)
      return nullptr;
    return Op->getArg(0);
  }
  return nullptr;
}

} // namespace

/// The state of one run and its steps, behind MainProcessWrites.
class MainProcessWrites::Impl {
public:
  explicit Impl(llvm::StringRef ProjectRoot) : Locator(ProjectRoot) {}

  void startTranslationUnit() {
    BindingsOf = nullptr;
    SavedPaths.clear();
    Locator.reset();
    Seen.clear();
    Candidates.clear();
    HoistNames.clear();
    LineLimits.clear();
  }

  void finishTranslationUnit(FindingList &Findings, llvm::StringRef Rule) {
    emitGuards(Findings, Rule);
    Candidates.clear();
    SavedPaths.clear();
    // The next unit's ASTContext may live at the same address.
    CurrentBindings = nullptr;
    BindingsOf = nullptr;
  }

  void enter(ASTContext &Unit) {
    Context = &Unit;
    if (BindingsOf != Context) {
      Bindings = StdoutBindings();
      const SourceManager &SM = Context->getSourceManager();
      llvm::DenseMap<FileID, bool> Ours;
      StdoutBindingFinder(Bindings, [&](SourceLocation Loc) {
        if (Loc.isInvalid())
          return true; // Implicit declarations hold nothing of ours.
        FileID File = SM.getFileID(SM.getExpansionLoc(Loc));
        auto Known = Ours.find(File);
        if (Known != Ours.end())
          return Known->second;
        bool Result = Locator.isInRoot(*Context, Loc);
        Ours[File] = Result;
        return Result;
      }).run(*Context);
      BindingsOf = Context;
    }
    CurrentBindings = &Bindings;
  }

  void noteStatement(const Expr *E) {
    bool Output = writesToStdout(E) && !onlySetsFormat(E);
    bool Checkpoint = !Output && writesCheckpoint(E);
    if (Checkpoint)
      SavedPaths.push_back(pathKey(checkpointPath(E)));
    bool OtherFile = !Output && !Checkpoint && writesOtherFile(E);
    if (!Output && !Checkpoint && !OtherFile)
      return;
    if (!isWholeStatement(E) || isGuarded(E))
      return;
    const char *Rule = Output ? "R7" : "R8";
    const char *Check = Output ? "ddp-unguarded-output" : "ddp-unguarded-save";
    // `std::cout << VALUE;` with a macro at the end is still our statement:
    // the guard goes before it and nothing inside the macro changes.
    const SourceManager &SM = Context->getSourceManager();
    SourceLocation Begin = E->getBeginLoc(), End = E->getEndLoc();
    if (Begin.isFileID() && End.isMacroID())
      End = SM.getExpansionRange(End).getEnd();
    Finding F = Locator.make(*Context, SourceRange(Begin, End), Rule, Check);
    if (F.FilePath.empty())
      return;
    // The same statement again, through a template instantiation.
    if (!Seen.insert({F.FilePath, F.Offset}).second)
      return;
    F.Message = Output ? "output to stdout is printed by every process of a "
                         "DDP program; guard it with "
                         "'if (ddp::is_main_process())'"
                : Checkpoint ? "every process of a DDP program writes this "
                               "checkpoint to the same file; guard it with "
                               "'if (ddp::is_main_process())'"
                             : "every process of a DDP program makes this "
                               "file or folder; guard it with "
                               "'if (ddp::is_main_process())'";
    GuardCandidate Candidate;
    Candidate.Begin = Begin;
    if (!F.InMacro) {
      // The statement ends with its `;`, which the guard must cover.
      SourceLocation Semi = Lexer::findLocationAfterToken(
          End, tok::semi, SM, Context->getLangOpts(),
          /*SkipTrailingWhitespaceAndNewLine=*/false);
      unsigned AfterSemi = 0;
      if (Semi.isInvalid() || !Locator.offsetIn(*Context, F, Semi, AfterSemi))
        // `PRINT(x)` without a `;` of ours: the macro writes the statement.
        F.InMacro = true;
      else
        F.Length = AfterSemi - F.Offset;
    }
    if (!F.InMacro) {
      Candidate.Braced = wouldCaptureElse(E);
      if (const auto *Block = dyn_cast_or_null<CompoundStmt>(parentStmt(E))) {
        Candidate.Block = Block->getLBracLoc();
        for (const Stmt *Child : Block->body()) {
          if (Child == E)
            break;
          ++Candidate.Index;
        }
      }
      if (!planHoists(E, F, Candidate)) {
        F.ReportId = "output-does-work";
        F.NotRewrittenReason =
            "a value this statement prints does work every process must do "
            "(a forward pass, a collective, a change of the program's "
            "state), inside a macro; compute it into a variable before the "
            "statement and guard the printing by hand";
      }
    }
    Candidate.F = std::move(F);
    Candidates.push_back(std::move(Candidate));
  }

  /// A value a guarded statement prints that every process must compute:
  /// it is computed before the guard, and the statement prints the result.
  struct Hoist {
    unsigned Offset = 0, Length = 0; ///< The operand in the statement.
    std::string Statement;           ///< `auto v = f(x);`, `++counter;`.
    std::string Replacement;         ///< `v`, `counter`.
    bool Verbatim = false; ///< Statement holds the operand's text as is.
  };

  struct GuardCandidate {
    Finding F; ///< Covers the statement and its `;`.
    SourceLocation Begin;
    /// The `{` of the block holding the statement (invalid when it is the
    /// body of an if or loop), and the statement's position in it.
    SourceLocation Block;
    unsigned Index = 0;
    bool Braced = false; ///< A guard before it would capture an `else`.
    std::vector<Hoist> Hoists;
  };

  //===--------------------------------------------------------------------===//
  // Files the main process writes and every rank reads back.
  //===--------------------------------------------------------------------===//

  /// What names a checkpoint's file, to tell two paths apart: a string
  /// literal's text, else the spelling of the expression; empty when not
  /// known (no path, a macro).
  std::string pathKey(const Expr *Path) {
    Path = strip(Path);
    if (!Path || Path->getBeginLoc().isMacroID())
      return "";
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(Path))
      if (Construct->getNumArgs() >= 1)
        return pathKey(Construct->getArg(0));
    if (const auto *Literal = dyn_cast<StringLiteral>(Path))
      return "\"" + Literal->getString().str() + "\"";
    if (const auto *Ref = dyn_cast<DeclRefExpr>(Path))
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
        if (Var->getType().isConstQualified() && Var->getInit())
          return pathKey(Var->getInit());
    return sourceText(Path->getSourceRange());
  }

  /// The file argument of a checkpoint write or read: `torch::save(x, path)`,
  /// `torch::load(x, path)`, `archive.save_to(path)`, `load_from(path)`,
  /// `torch::jit::load(path)`, `module.save(path)`.
  static const Expr *checkpointPath(const Expr *E) {
    const auto *Call = dyn_cast_or_null<CallExpr>(strip(E));
    if (!Call)
      return nullptr;
    if (isa<CXXMemberCallExpr>(Call) ||
        qualifiedCalleeName(Call) == "torch::jit::load")
      return Call->getNumArgs() >= 1 ? Call->getArg(0) : nullptr;
    return Call->getNumArgs() >= 2 ? Call->getArg(1) : nullptr;
  }

  //===--------------------------------------------------------------------===//
  // Values that do work: computed on every process, printed on one.
  //===--------------------------------------------------------------------===//

  /// The program's own functions may do anything (ddpify/Work.h).
  bool isProgramFunction(const FunctionDecl *Callee) {
    return Locator.isInRoot(*Context, Callee->getLocation());
  }

  bool doesWork(const Expr *E) {
    return ddpify::doesWork(
        E, [&](const FunctionDecl *F) { return isProgramFunction(F); });
  }

  bool containsWork(const Stmt *S) {
    return ddpify::containsWork(
        S, [&](const FunctionDecl *F) { return isProgramFunction(F); });
  }

  /// The outermost sub-expressions of S that do work. What is evaluated
  /// only on some paths (a `?:` branch, the right of `&&`) goes with its
  /// condition, so that hoisting it changes nothing but where it runs.
  void collectWork(const Stmt *S, std::vector<const Expr *> &Out) {
    if (!S || isa<LambdaExpr>(S))
      return;
    if (const auto *E = dyn_cast<Expr>(S)) {
      if (doesWork(E)) {
        Out.push_back(E);
        return;
      }
      const Expr *Inner = E->IgnoreParens();
      bool Conditional = isa<AbstractConditionalOperator>(Inner);
      if (const auto *Binary = dyn_cast<BinaryOperator>(Inner))
        Conditional = Binary->isLogicalOp();
      // `(c ? f() : 0)` goes with its parentheses.
      if (Conditional && containsWork(Inner)) {
        Out.push_back(E);
        return;
      }
    }
    for (const Stmt *Child : S->children())
      collectWork(Child, Out);
  }

  std::string sourceText(SourceRange Range) {
    return ddpify::sourceText(*Context, Range);
  }

  /// What a hoisted value is called: after the function that computes it
  /// (`probe_loss(...)` -> `probe_loss_value`, `model->forward(x)` ->
  /// `model_output`, `mean_value()` -> `mean_value_result`), or the
  /// variable it changes.
  std::string valueName(const Expr *E) {
    E = strip(E);
    std::string Base;
    bool Forward = false;
    if (const auto *Unary = dyn_cast<UnaryOperator>(E))
      return valueName(Unary->getSubExpr());
    if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
      Base = Ref->getDecl()->getNameAsString();
    } else if (const auto *Member = dyn_cast<MemberExpr>(E)) {
      Base = Member->getMemberDecl()->getNameAsString();
    } else if (const auto *MemberCall = dyn_cast<CXXMemberCallExpr>(E)) {
      const CXXMethodDecl *Method = MemberCall->getMethodDecl();
      if (Method && Method->getIdentifier() && Method->getName() == "forward") {
        Forward = true;
        if (const Expr *Object = MemberCall->getImplicitObjectArgument()) {
          const Expr *Inner = strip(Object);
          if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Inner))
            Inner = strip(Arrow->getArg(0));
          if (const auto *Ref = dyn_cast<DeclRefExpr>(Inner))
            Base = Ref->getDecl()->getNameAsString();
          else if (const auto *Field = dyn_cast<MemberExpr>(Inner))
            Base = Field->getMemberDecl()->getNameAsString();
        }
      } else if (Method && Method->getIdentifier()) {
        Base = Method->getNameAsString();
      }
    } else if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E)) {
      if (Op->getOperator() != OO_Call)
        return valueName(Op->getArg(0));
      // `model(x)` is a forward pass; `print()` a lambda or functor's value.
      const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Op->getCalleeDecl());
      Forward = !Method || !Method->getParent()->isLambda();
      if (const auto *Ref = dyn_cast<DeclRefExpr>(strip(Op->getArg(0))))
        Base = Ref->getDecl()->getNameAsString();
    } else if (const auto *Call = dyn_cast<CallExpr>(E);
               Call && isa<CXXDependentScopeMemberExpr>(
                           Call->getCallee()->IgnoreParenImpCasts())) {
      // `model->forward(x)` in a template's pattern.
      const auto *Member = cast<CXXDependentScopeMemberExpr>(
          Call->getCallee()->IgnoreParenImpCasts());
      Base = Member->getMember().getAsString();
      if (Base == "forward" && !Member->isImplicitAccess()) {
        Forward = true;
        Base.clear();
        if (const auto *Ref = dyn_cast<DeclRefExpr>(strip(Member->getBase())))
          Base = Ref->getDecl()->getNameAsString();
      }
    } else if (isa<AbstractConditionalOperator>(E) ||
               (isa<BinaryOperator>(E) &&
                cast<BinaryOperator>(E)->isLogicalOp())) {
      // Named after the work it guards.
      std::vector<const Expr *> Work;
      for (const Stmt *Child : E->children())
        collectWork(Child, Work);
      return Work.empty() ? "value" : valueName(Work.front());
    } else if (const auto *Call = dyn_cast<CallExpr>(E)) {
      std::string Name = qualifiedCalleeName(Call);
      Base = llvm::StringRef(Name).rsplit("::").second.empty()
                 ? Name
                 : llvm::StringRef(Name).rsplit("::").second.str();
    } else if (const auto *Binary = dyn_cast<BinaryOperator>(E)) {
      return valueName(Binary->getLHS());
    }
    while (!Base.empty() && Base.back() == '_')
      Base.pop_back();
    bool Identifier = !Base.empty() && !isdigit(Base[0]);
    for (char C : Base)
      Identifier = Identifier && (isalnum(C) || C == '_');
    if (!Identifier)
      return Forward ? "output" : "value";
    llvm::StringRef Suffix = Forward ? "output" : "value";
    // `mean_value()` -> `mean_value_result`, not `mean_value_value`.
    if (llvm::StringRef(Base).ends_with_insensitive(Suffix))
      return Base + "_result";
    return Base + "_" + Suffix.str();
  }

  /// A name no declaration or use in the enclosing function has yet.
  std::string freshName(const Stmt *S, const std::string &Wanted) {
    const Decl *Function = enclosingFunction(S);
    FunctionNames &Names = HoistNames[Function];
    // The function's text is read once, with its first hoist.
    if (!Names.TextRead && Function)
      Names.Text = sourceText(Function->getSourceRange());
    Names.TextRead = true;
    for (unsigned Suffix = 1;; ++Suffix) {
      std::string Name = Suffix == 1 ? Wanted : Wanted + std::to_string(Suffix);
      if (!Names.Taken.count(Name) && !mentionsIdentifier(Names.Text, Name)) {
        Names.Taken.insert(Name);
        return Name;
      }
    }
  }

  const Decl *enclosingFunction(const Stmt *S) {
    DynTypedNode Node = DynTypedNode::create(*S);
    while (true) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty())
        return nullptr;
      Node = Parents[0];
      if (const auto *Function = Node.get<FunctionDecl>())
        return Function;
    }
  }

  /// One line of text for a value moved in front of its statement.
  static std::string oneLine(llvm::StringRef Text) {
    if (Text.contains("//"))
      return Text.str();
    std::string Result;
    bool InSpace = false;
    for (char C : Text) {
      if (C == '\n' || C == '\r' || ((C == ' ' || C == '\t') && InSpace)) {
        if (!InSpace && !Result.empty() && Result.back() != ' ')
          Result += ' ';
        InSpace = true;
        continue;
      }
      InSpace = C == ' ' || C == '\t';
      Result += C;
    }
    return Result;
  }

  /// The values of statement E that every process must compute. False when
  /// one lies in a macro (it cannot be moved).
  bool planHoists(const Expr *E, const Finding &F, GuardCandidate &Candidate) {
    std::vector<const Expr *> Work;
    collectWork(E, Work);
    for (const Expr *Value : Work) {
      Finding Operand = Locator.make(*Context, Value->getSourceRange(), "", "");
      if (Operand.InMacro || Operand.FilePath != F.FilePath)
        return false;
      Hoist H;
      H.Offset = Operand.Offset;
      H.Length = Operand.Length;
      std::string Original = sourceText(Value->getSourceRange());
      std::string Text = oneLine(Original);
      H.Verbatim = Text == Original && Original.size() == H.Length;
      const Expr *Changed = changedOperand(strip(Value));
      if (isIncrementOrAssignment(strip(Value)) && Changed &&
          !containsWork(Changed)) {
        H.Statement = Text + ";";
        H.Replacement = oneLine(sourceText(Changed->getSourceRange()));
      } else {
        H.Replacement = freshName(E, valueName(Value));
        H.Statement = (Value->isPRValue() ? "auto " : "const auto &") +
                      H.Replacement + " = " + Text + ";";
      }
      Candidate.Hoists.push_back(std::move(H));
    }
    return true;
  }

  //===--------------------------------------------------------------------===//
  // The guards, once every statement of the translation unit is known.
  //===--------------------------------------------------------------------===//

  /// The layout of a candidate's lines in its file.
  struct Lines {
    llvm::StringRef Code;
    unsigned Begin = 0, End = 0; ///< The statement, `;` included.
    std::string Indent;
    bool OwnLines = false; ///< Nothing but blanks or a comment around it.
  };

  Lines linesOf(const GuardCandidate &C) {
    Lines L;
    const SourceManager &SM = Context->getSourceManager();
    bool Invalid = false;
    L.Code =
        SM.getBufferData(SM.getFileID(SM.getExpansionLoc(C.Begin)), &Invalid);
    if (Invalid)
      return L;
    L.Begin = C.F.Offset;
    L.End = C.F.Offset + C.F.Length;
    if (L.End > L.Code.size())
      return L;
    bool StartsLine = false;
    L.Indent = indentationOf(SM, SM.getExpansionLoc(C.Begin), StartsLine);
    llvm::StringRef Rest = L.Code.substr(L.End);
    Rest = Rest.take_until([](char Ch) { return Ch == '\n'; }).trim();
    L.OwnLines = StartsLine && (Rest.empty() || Rest.starts_with("//"));
    return L;
  }

  /// `if (ddp::is_main_process()) ` in front of the statement's line makes
  /// it longer than the file's lines may be (columnLimitOf: the limit the
  /// formatting of the edits keeps).
  bool inlineOverflows(const GuardCandidate &C, const Lines &L,
                       llvm::StringRef File) {
    if (L.End > L.Code.size())
      return false;
    auto Known = LineLimits.find(L.Code.data());
    if (Known == LineLimits.end())
      Known =
          LineLimits.emplace(L.Code.data(), columnLimitOf(File, L.Code)).first;
    unsigned Limit = Known->second;
    if (!Limit)
      return false;
    unsigned Width = lineEnd(L.Code, L.End) - lineStart(L.Code, L.Begin);
    // Values computed before the guard leave their names in the line.
    for (const Hoist &H : C.Hoists)
      Width -= std::min<unsigned>(Width, H.Length) -
               std::min<unsigned>(H.Length, H.Replacement.size());
    return Width + MainProcessGuard.size() + 1 > Limit;
  }

  /// Re-indenting these lines would change a string literal.
  static bool splicesLines(llvm::StringRef Text) {
    return Text.contains("R\"") || Text.contains("\\\n") ||
           Text.contains("\\\r\n");
  }

  bool inOneBlock(const GuardCandidate &A, const GuardCandidate &B) {
    return A.Block.isValid() && A.Block == B.Block &&
           A.F.FilePath == B.F.FilePath && B.Index == A.Index + 1;
  }

  /// The guards of the unit's candidates; Findings gets those of Rule.
  void emitGuards(FindingList &Findings, llvm::StringRef Rule) {
    std::stable_sort(Candidates.begin(), Candidates.end(),
                     [](const GuardCandidate &A, const GuardCandidate &B) {
                       return A.F < B.F;
                     });
    for (size_t I = 0; I < Candidates.size();) {
      GuardCandidate &First = Candidates[I];
      if (First.F.InMacro || !First.F.NotRewrittenReason.empty()) {
        if (First.F.RuleId == Rule)
          Findings.push_back(std::move(First.F));
        ++I;
        continue;
      }
      Lines FirstLines = linesOf(First);
      bool Blockable = First.Block.isValid() && FirstLines.OwnLines;
      // Consecutive statements of one block share one guarded block. A
      // statement with values to compute first starts a block of its own,
      // so that they are computed where the original computed them.
      size_t Next = I + 1;
      unsigned GroupEnd = FirstLines.End;
      if (Blockable)
        while (Next < Candidates.size() &&
               inOneBlock(Candidates[Next - 1], Candidates[Next]) &&
               !Candidates[Next].F.InMacro &&
               Candidates[Next].F.NotRewrittenReason.empty() &&
               Candidates[Next].Hoists.empty()) {
          Lines NextLines = linesOf(Candidates[Next]);
          if (!NextLines.OwnLines)
            break;
          GroupEnd = NextLines.End;
          ++Next;
        }
      llvm::StringRef GroupText =
          FirstLines.Code.slice(FirstLines.Begin, GroupEnd);
      bool MultiLine = GroupText.contains('\n');
      // One statement whose line the guard in front would push past the
      // file's width is guarded as a block too, as the program's own long
      // lines are broken.
      if (Blockable &&
          (MultiLine || inlineOverflows(First, FirstLines, First.F.FilePath)) &&
          !splicesLines(GroupText))
        guardAsBlock(First, FirstLines, GroupEnd);
      else {
        Next = I + 1;
        guardInline(First, FirstLines);
      }
      // A block of prints and saves is carried by its first statement's
      // finding, whichever rule's it is.
      for (size_t K = I; K < Next; ++K)
        if (Candidates[K].F.RuleId == Rule)
          Findings.push_back(std::move(Candidates[K].F));
      I = Next;
    }
  }

  /// The hoisted values whose statement holds their text verbatim: another
  /// rule's edit inside them (R3's `.to(device)` in `f(x.cuda())`) follows
  /// the value to where it is now computed.
  static std::vector<FindingEdit::Moved> movesOf(const GuardCandidate &C) {
    std::vector<FindingEdit::Moved> Moves;
    for (const Hoist &H : C.Hoists)
      if (H.Verbatim)
        Moves.push_back({H.Offset, H.Length, H.Replacement});
    return Moves;
  }

  static void addHoistReplacements(GuardCandidate &C) {
    for (const Hoist &H : C.Hoists)
      C.F.Edits.push_back({H.Offset, H.Length, H.Replacement});
  }

  /// One step of the file's indentation: a tab in a file indented with
  /// tabs, else how much deeper the statement is than the line that opens
  /// its block (`for (...) {` at 4 and the statement at 8: four spaces),
  /// else two spaces.
  std::string indentStep(const GuardCandidate &C, const Lines &L) {
    if (llvm::StringRef(L.Indent).contains('\t'))
      return "\t";
    const SourceManager &SM = Context->getSourceManager();
    if (C.Block.isValid()) {
      SourceLocation Open = SM.getExpansionLoc(C.Block);
      if (SM.getFileID(Open) == SM.getFileID(SM.getExpansionLoc(C.Begin))) {
        unsigned Offset = SM.getFileOffset(Open);
        llvm::StringRef Line = L.Code.substr(lineStart(L.Code, Offset));
        unsigned Outer = Line.size() - Line.ltrim(" ").size();
        if (Outer < L.Indent.size() && L.Indent.size() - Outer <= 8)
          return std::string(L.Indent.size() - Outer, ' ');
      }
    }
    return "  ";
  }

  /// `if (ddp::is_main_process()) {`, the statements indented one step
  /// more, `}`. The first statement's finding carries the edits of the
  /// whole block, so that they are applied (or left) together.
  void guardAsBlock(GuardCandidate &First, const Lines &L, unsigned GroupEnd) {
    std::string Step = indentStep(First, L);
    std::string Open;
    for (const Hoist &H : First.Hoists)
      Open += H.Statement + "\n" + L.Indent;
    Open += std::string(MainProcessGuard) + " {\n" + L.Indent + Step;
    First.F.Edits.push_back({L.Begin, 0, Open, movesOf(First)});
    addHoistReplacements(First);
    unsigned Last = lineEnd(L.Code, GroupEnd);
    // Every line after the first, up to the last: one step more.
    for (size_t Newline = L.Code.find('\n', L.Begin);
         Newline != llvm::StringRef::npos && Newline < Last;
         Newline = L.Code.find('\n', Newline + 1)) {
      unsigned LineStart = Newline + 1;
      llvm::StringRef Line = lineAt(L.Code, LineStart);
      if (Line.trim().empty())
        continue;
      bool InHoist = false;
      for (const Hoist &H : First.Hoists)
        InHoist = InHoist ||
                  (H.Offset < LineStart && LineStart < H.Offset + H.Length);
      if (!InHoist)
        First.F.Edits.push_back({LineStart, 0, Step});
    }
    First.F.Edits.push_back({Last, 0, "\n" + L.Indent + "}"});
  }

  /// `if (ddp::is_main_process()) ` in front of one statement (in braces
  /// where it would capture an `else`, or where values are computed first
  /// in the body of an if or loop).
  void guardInline(GuardCandidate &C, const Lines &L) {
    std::string Before, After;
    if (!C.Hoists.empty()) {
      bool OwnLines = C.Block.isValid() && L.OwnLines;
      if (!OwnLines)
        Before = "{ ";
      for (const Hoist &H : C.Hoists)
        Before += H.Statement + (OwnLines ? "\n" + L.Indent : " ");
      if (!OwnLines)
        After = " }";
    } else if (C.Braced) {
      Before = "{ ";
      After = " }";
    }
    C.F.Edits.push_back(
        {L.Begin, 0, Before + MainProcessGuard.str() + " ", movesOf(C)});
    addHoistReplacements(C);
    if (!After.empty())
      C.F.Edits.push_back({L.End, 0, After});
  }

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

  FindingLocator Locator;
  ASTContext *Context = nullptr;
  /// The streams bound to std::cout in the unit of BindingsOf.
  StdoutBindings Bindings;
  const ASTContext *BindingsOf = nullptr;
  std::set<std::pair<std::string, unsigned>> Seen;
  std::vector<GuardCandidate> Candidates;
  /// The keys of the checkpoint files written (pathKey).
  std::vector<std::string> SavedPaths;
  /// Per enclosing function: its text (the names it uses) and the names
  /// given to hoisted values.
  struct FunctionNames {
    bool TextRead = false;
    std::string Text;
    std::set<std::string> Taken;
  };
  std::map<const Decl *, FunctionNames> HoistNames;
  /// Per file text of the unit: columnLimitOf().
  std::map<const char *, unsigned> LineLimits;
};

MainProcessWrites::MainProcessWrites(llvm::StringRef ProjectRoot)
    : I(std::make_unique<Impl>(ProjectRoot)) {}

MainProcessWrites::~MainProcessWrites() = default;

void MainProcessWrites::startTranslationUnit() { I->startTranslationUnit(); }

void MainProcessWrites::enter(ASTContext &Context) { I->enter(Context); }

void MainProcessWrites::noteStatement(const Expr *E) { I->noteStatement(E); }

void MainProcessWrites::finishTranslationUnit(FindingList &Findings,
                                              llvm::StringRef Rule) {
  I->finishTranslationUnit(Findings, Rule);
}

bool MainProcessWrites::isGuarded(const Stmt *S) { return I->isGuarded(S); }

bool MainProcessWrites::claimSpot(const Finding &F) {
  return I->Seen.insert({F.FilePath, F.Offset}).second;
}

FindingLocator &MainProcessWrites::locator() { return I->Locator; }

std::string MainProcessWrites::pathKey(const Expr *Path) {
  return I->pathKey(Path);
}

const Expr *MainProcessWrites::checkpointPath(const Expr *E) {
  return Impl::checkpointPath(E);
}

llvm::ArrayRef<std::string> MainProcessWrites::savedPaths() const {
  return I->SavedPaths;
}

bool MainProcessWrites::mentionsMainProcessCheck(const Stmt *S) {
  return ::ddpify::mentionsMainProcessCheck(S);
}

} // namespace ddpify
