//===- MatcherUtil.cpp - Locating Findings in the user's files ------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/SourceLines.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/Expr.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/Basic/FileManager.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace clang;

namespace ddpify {

Finding FindingLocator::make(ASTContext &Context, SourceRange Range,
                             llvm::StringRef RuleId,
                             llvm::StringRef CheckName) {
  Finding F;
  F.RuleId = RuleId.str();
  F.CheckName = CheckName.str();
  const SourceManager &SM = Context.getSourceManager();
  if (Range.isInvalid())
    return F;
  SourceLocation Begin = Range.getBegin();
  if (Begin.isMacroID() || Range.getEnd().isMacroID()) {
    F.InMacro = true;
    // A report item (docs/report.md); lint-only checks have no migration to
    // report.
    if (!RuleId.empty())
      F.ReportId = "macro-expansion";
    SourceLocation Expansion = SM.getExpansionLoc(Begin);
    if (Begin.isMacroID())
      F.MacroName =
          Lexer::getImmediateMacroName(Begin, SM, Context.getLangOpts()).str();
    else
      F.MacroName = Lexer::getImmediateMacroName(Range.getEnd(), SM,
                                                 Context.getLangOpts())
                        .str();
    if (!locate(Context, F, Expansion, Expansion))
      F.FilePath.clear();
    return F;
  }
  SourceLocation End =
      Lexer::getLocForEndOfToken(Range.getEnd(), 0, SM, Context.getLangOpts());
  if (!locate(Context, F, Begin, End))
    F.FilePath.clear();
  return F;
}

bool FindingLocator::offsetIn(ASTContext &Context, const Finding &F,
                              SourceLocation Loc, unsigned &Offset) {
  const SourceManager &SM = Context.getSourceManager();
  if (Loc.isInvalid() || Loc.isMacroID() || F.FilePath.empty())
    return false;
  if (realPath(SM, SM.getFileID(Loc)) != F.FilePath)
    return false;
  Offset = SM.getFileOffset(Loc);
  return true;
}

bool FindingLocator::locate(ASTContext &Context, Finding &F,
                            SourceLocation Begin, SourceLocation End) {
  const SourceManager &SM = Context.getSourceManager();
  if (Begin.isInvalid() || End.isInvalid() || SM.isInSystemHeader(Begin))
    return false;
  FileID File = SM.getFileID(Begin);
  if (File != SM.getFileID(End))
    return false;
  std::string Path = realPath(SM, File);
  if (Path.empty() || !isUnderRoot(Path))
    return false;
  F.FilePath = Path;
  F.Offset = SM.getFileOffset(Begin);
  F.Length = SM.getFileOffset(End) - F.Offset;
  F.Line = SM.getSpellingLineNumber(Begin);
  F.Column = SM.getSpellingColumnNumber(Begin);
  return true;
}

bool FindingLocator::isInRoot(ASTContext &Context, SourceLocation Loc) {
  const SourceManager &SM = Context.getSourceManager();
  if (Loc.isInvalid())
    return false;
  Loc = SM.getExpansionLoc(Loc);
  if (SM.isInSystemHeader(Loc))
    return false;
  std::string Path = realPath(SM, SM.getFileID(Loc));
  return !Path.empty() && isUnderRoot(Path);
}

std::string FindingLocator::realPath(const SourceManager &SM, FileID File) {
  auto Cached = RealPaths.find(File);
  if (Cached != RealPaths.end())
    return Cached->second;
  std::string Result;
  if (OptionalFileEntryRef Entry = SM.getFileEntryRefForID(File)) {
    llvm::SmallString<256> Real;
    // Through the parse's file system: a relative name is relative to its
    // working directory (the compile command's), not the process's.
    if (!SM.getFileManager().getVirtualFileSystem().getRealPath(
            Entry->getName(), Real))
      Result = Real.str().str();
  }
  RealPaths[File] = Result;
  return Result;
}

std::string defaultProjectRoot(llvm::StringRef SourcePath) {
  llvm::StringRef Folder = llvm::sys::path::parent_path(SourcePath);
  for (llvm::StringRef Dir = Folder; !Dir.empty();
       Dir = llvm::sys::path::parent_path(Dir)) {
    llvm::SmallString<256> Git(Dir);
    llvm::sys::path::append(Git, ".git");
    if (llvm::sys::fs::exists(Git))
      return Dir.str();
  }
  return Folder.str();
}

bool isPathUnder(llvm::StringRef Path, llvm::StringRef Dir) {
  return Path.starts_with(Dir) &&
         (Path.size() == Dir.size() || Dir.ends_with("/") ||
          llvm::sys::path::is_separator(Path[Dir.size()]));
}

bool FindingLocator::isUnderRoot(llvm::StringRef Path) const {
  return isPathUnder(Path, ProjectRoot);
}

Finding reportNoteFor(const Finding &F, llvm::StringRef ReportId,
                      std::string Reason) {
  Finding Note = F;
  Note.RuleId.clear();
  Note.CheckName.clear();
  Note.Edits.clear();
  Note.ReportId = ReportId.str();
  Note.NotRewrittenReason = Reason;
  Note.Message = std::move(Reason);
  return Note;
}

std::string locationKey(const Finding &F) {
  return F.FilePath + ":" + std::to_string(F.Offset);
}

void collectReferences(const Stmt *S, const VarDecl *Var,
                       std::vector<const DeclRefExpr *> &Out) {
  if (!S)
    return;
  if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
    if (Ref->getDecl() == Var)
      Out.push_back(Ref);
  for (const Stmt *Child : S->children())
    collectReferences(Child, Var, Out);
}

bool offsetAfterStatement(ASTContext &Context, const Stmt *S,
                          unsigned &Offset) {
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
  if (After.isInvalid())
    return false;
  bool Invalid = false;
  llvm::StringRef Buffer = SM.getBufferData(SM.getFileID(After), &Invalid);
  if (Invalid)
    return false;
  Offset = SM.getFileOffset(After);
  size_t Next = Buffer.find_first_not_of(" \t", Offset);
  if (Next == llvm::StringRef::npos)
    Offset = Buffer.size();
  else if (Buffer[Next] == '\n' || Buffer[Next] == '\r' ||
           Buffer.substr(Next).starts_with("//"))
    Offset = std::min(Buffer.find_first_of("\r\n", Next), Buffer.size());
  return true;
}

std::string indentationOf(const SourceManager &SM, SourceLocation Loc,
                          bool &StartsLine) {
  StartsLine = false;
  if (Loc.isInvalid() || Loc.isMacroID())
    return "";
  bool Invalid = false;
  llvm::StringRef Buffer = SM.getBufferData(SM.getFileID(Loc), &Invalid);
  if (Invalid)
    return "";
  unsigned Offset = SM.getFileOffset(Loc);
  llvm::StringRef Before = Buffer.slice(lineStart(Buffer, Offset), Offset);
  StartsLine = Before.find_first_not_of(" \t") == llvm::StringRef::npos;
  return StartsLine ? Before.str() : "";
}

const clang::Expr *stripParensAndImplicit(const clang::Expr *E) {
  while (E) {
    const clang::Expr *Next = E->IgnoreImplicit()->IgnoreParens();
    // Before C++17 a temporary initialising a variable goes through an
    // elidable copy or move constructor (`auto l = make_data_loader(...)`);
    // from C++17 on it is the same object with no constructor in the AST.
    if (const auto *Construct = llvm::dyn_cast<clang::CXXConstructExpr>(Next))
      if (Construct->isElidable() && Construct->getNumArgs() == 1)
        Next = Construct->getArg(0);
    if (Next == E)
      break;
    E = Next;
  }
  return E;
}

static bool derivesFromAt(const clang::CXXRecordDecl *Record,
                          llvm::ArrayRef<llvm::StringRef> Names,
                          unsigned Depth) {
  if (!Record || Depth > 8)
    return false;
  std::string Qualified = Record->getQualifiedNameAsString();
  for (llvm::StringRef Name : Names)
    if (Qualified == Name)
      return true;
  const clang::CXXRecordDecl *Definition = Record->getDefinition();
  if (!Definition)
    return false;
  for (const clang::CXXBaseSpecifier &Base : Definition->bases())
    if (derivesFromAt(Base.getType()->getAsCXXRecordDecl(), Names, Depth + 1))
      return true;
  return false;
}

bool derivesFrom(const clang::CXXRecordDecl *Record,
                 llvm::ArrayRef<llvm::StringRef> QualifiedNames) {
  return derivesFromAt(Record, QualifiedNames, 0);
}

const clang::Expr *stripCopies(const clang::Expr *E) {
  for (int Depth = 0; E && Depth < 8; ++Depth) {
    E = stripParensAndImplicit(E);
    const auto *Construct = llvm::dyn_cast<clang::CXXConstructExpr>(E);
    if (!Construct || Construct->getNumArgs() != 1)
      break;
    E = Construct->getArg(0);
  }
  return E;
}

const clang::Expr *stripCasts(const clang::Expr *E) {
  for (int Depth = 0; E && Depth < 8; ++Depth) {
    E = stripParensAndImplicit(E);
    const auto *Cast = llvm::dyn_cast<clang::ExplicitCastExpr>(E);
    if (!Cast)
      break;
    E = Cast->getSubExpr();
  }
  return E;
}

namespace {

bool isDevice(QualType Type) {
  Type = Type.getNonReferenceType();
  if (Type->isPointerType())
    Type = Type->getPointeeType();
  const auto *Record = Type.getCanonicalType()->getAsCXXRecordDecl();
  return Record && Record->getQualifiedNameAsString() == "c10::Device";
}

/// A named torch::Device (or pointer to one) whose initialiser Accept takes.
bool usableDevice(const VarDecl *Var, DeviceInitFilter Accept) {
  return !Var->getName().empty() && isDevice(Var->getType()) &&
         Accept(Var->getInit());
}

std::string spellDevice(const VarDecl *Var) {
  if (Var->getType().getNonReferenceType()->isPointerType())
    return "*" + Var->getName().str();
  return Var->getName().str();
}

std::string globalDevice(ASTContext &Context, const FunctionDecl *Function,
                         SourceLocation Site, DeviceInitFilter Accept) {
  const SourceManager &SM = Context.getSourceManager();
  for (const DeclContext *Scope = Function->getDeclContext(); Scope;
       Scope = Scope->getParent()) {
    if (!Scope->isFileContext())
      continue;
    std::string Found;
    for (const Decl *D : Scope->decls()) {
      const auto *Var = dyn_cast<VarDecl>(D);
      if (Var && Var->hasGlobalStorage() && usableDevice(Var, Accept) &&
          SM.isBeforeInTranslationUnit(Var->getLocation(), Site))
        Found = spellDevice(Var);
    }
    if (!Found.empty())
      return Found;
  }
  return "";
}

} // namespace

std::string deviceVariableInScope(ASTContext &Context, const Stmt *Site,
                                  DeviceInitFilter Accept) {
  DynTypedNode Child = DynTypedNode::create(*Site);
  bool CapturesAll = true, CapturesThis = true;
  llvm::SmallPtrSet<const VarDecl *, 4> Captured;
  auto Visible = [&](const VarDecl *Var) {
    return CapturesAll || Captured.count(Var);
  };
  while (true) {
    DynTypedNodeList Parents = Context.getParents(Child);
    if (Parents.empty())
      break;
    DynTypedNode Parent = Parents[0];
    if (const auto *Block = Parent.get<CompoundStmt>()) {
      const VarDecl *Nearest = nullptr;
      for (const Stmt *Statement : Block->body()) {
        if (Child.get<Stmt>() == Statement)
          break;
        if (const auto *Decls = dyn_cast<DeclStmt>(Statement))
          for (const Decl *D : Decls->decls())
            if (const auto *Var = dyn_cast<VarDecl>(D))
              if (usableDevice(Var, Accept) && Visible(Var))
                Nearest = Var;
      }
      if (Nearest)
        return spellDevice(Nearest);
    } else if (const auto *Lambda = Parent.get<LambdaExpr>()) {
      for (const ParmVarDecl *Param : Lambda->getCallOperator()->parameters())
        if (usableDevice(Param, Accept))
          return spellDevice(Param);
      if (Lambda->getCaptureDefault() == LCD_None) {
        CapturesAll = false;
        CapturesThis = false;
        for (const LambdaCapture &Capture : Lambda->explicit_captures()) {
          if (Capture.capturesThis())
            CapturesThis = true;
          else if (Capture.capturesVariable())
            if (const auto *Var = dyn_cast<VarDecl>(Capture.getCapturedVar()))
              Captured.insert(Var);
        }
      }
    } else if (const auto *Function = Parent.get<FunctionDecl>()) {
      const auto *Record = dyn_cast<CXXRecordDecl>(Function->getParent());
      if (Record && Record->isLambda()) {
        // A lambda's call operator: the LambdaExpr above handles it.
      } else {
        for (const ParmVarDecl *Param : Function->parameters())
          if (usableDevice(Param, Accept) && Visible(Param))
            return spellDevice(Param);
        const auto *Method = dyn_cast<CXXMethodDecl>(Function);
        if (Method && !Method->isStatic() && CapturesThis)
          for (const FieldDecl *Field : Method->getParent()->fields())
            if (isDevice(Field->getType()) &&
                Accept(Field->getInClassInitializer()))
              return Field->getName().str();
        return globalDevice(Context, Function, Site->getBeginLoc(), Accept);
      }
    }
    Child = Parent;
  }
  return "";
}

clang::ast_matchers::internal::Matcher<Stmt> isStatementLevel() {
  using namespace clang::ast_matchers;
  return anyOf(
      hasParent(compoundStmt()), hasParent(ifStmt()), hasParent(forStmt()),
      hasParent(cxxForRangeStmt()), hasParent(whileStmt()), hasParent(doStmt()),
      hasParent(labelStmt()), hasParent(caseStmt()), hasParent(defaultStmt()));
}

bool mentionsIdentifier(llvm::StringRef Text, llvm::StringRef Name) {
  auto IsIdentChar = [](char C) { return isalnum(C) || C == '_'; };
  for (size_t At = Text.find(Name); At != llvm::StringRef::npos;
       At = Text.find(Name, At + 1)) {
    size_t After = At + Name.size();
    if (!(At > 0 && IsIdentChar(Text[At - 1])) &&
        !(After < Text.size() && IsIdentChar(Text[After])))
      return true;
  }
  return false;
}

const VarDecl *loaderVariable(const Expr *Range) {
  if (!Range)
    return nullptr;
  Range = stripParensAndImplicit(Range)->IgnoreParenImpCasts();
  if (const auto *Deref = dyn_cast<UnaryOperator>(Range))
    Range = Deref->getSubExpr()->IgnoreParenImpCasts();
  else if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Range))
    if (Op->getOperator() == OO_Star && Op->getNumArgs() == 1)
      Range = Op->getArg(0)->IgnoreParenImpCasts();
  const auto *Ref = dyn_cast<DeclRefExpr>(Range);
  return Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
}

std::string sourceText(const clang::ASTContext &Context,
                       clang::SourceRange Range) {
  return clang::Lexer::getSourceText(
             clang::CharSourceRange::getTokenRange(Range),
             Context.getSourceManager(), Context.getLangOpts())
      .str();
}

} // namespace ddpify
