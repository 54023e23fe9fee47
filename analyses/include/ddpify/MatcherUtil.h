//===- MatcherUtil.h - Locating Findings in the user's files ----*- C++ -*-===//
//
// What every matcher module needs to turn a source range into a Finding:
// the file's real path (only files under the project root are ours), offsets,
// line and column, and whether the range comes from a macro expansion.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_MATCHERUTIL_H
#define DDPIFY_MATCHERUTIL_H

#include "ddpify/Finding.h"
#include "clang/AST/ASTContext.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceLocation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <string>

namespace ddpify {

/// Whether Path is Dir or lies inside it (a path prefix, not a string one).
bool isPathUnder(llvm::StringRef Path, llvm::StringRef Dir);

/// The project root of a source file when none is given: the git top-level
/// holding it (a folder with .git), else the file's folder.
std::string defaultProjectRoot(llvm::StringRef SourcePath);

/// E with every layer of parentheses and implicit nodes (casts,
/// temporaries, cleanups) removed; null stays null.
const clang::Expr *stripParensAndImplicit(const clang::Expr *E);

/// Whether Record is, or derives from, a class of one of these qualified
/// names (`torch::nn::Module`).
bool derivesFrom(const clang::CXXRecordDecl *Record,
                 llvm::ArrayRef<llvm::StringRef> QualifiedNames);
inline bool derivesFrom(const clang::CXXRecordDecl *Record,
                        llvm::StringRef QualifiedName) {
  return derivesFrom(Record, llvm::ArrayRef<llvm::StringRef>(QualifiedName));
}

/// E behind the copies an argument taken by value goes through.
const clang::Expr *stripCopies(const clang::Expr *E);

/// E behind parentheses, implicit nodes and explicit casts
/// (`static_cast<double>(n)`).
const clang::Expr *stripCasts(const clang::Expr *E);

class FindingLocator {
public:
  explicit FindingLocator(llvm::StringRef ProjectRoot)
      : ProjectRoot(ProjectRoot.str()) {}

  /// Forgets the FileIDs of the previous translation unit.
  void reset() { RealPaths.clear(); }

  /// A Finding covering the token range Range. Its FilePath is empty when
  /// the range is not ours (system header, outside the root, invalid). A range
  /// from a macro expansion is located at the expansion, with InMacro set.
  Finding make(clang::ASTContext &Context, clang::SourceRange Range,
               llvm::StringRef RuleId, llvm::StringRef CheckName);

  /// The file offset of Loc when it is a file location in the same file as
  /// F (a located Finding); false otherwise.
  bool offsetIn(clang::ASTContext &Context, const Finding &F,
                clang::SourceLocation Loc, unsigned &Offset);

  /// Whether Loc (its expansion) lies in a file under the project root.
  bool isInRoot(clang::ASTContext &Context, clang::SourceLocation Loc);

private:
  bool locate(clang::ASTContext &Context, Finding &F,
              clang::SourceLocation Begin, clang::SourceLocation End);
  std::string realPath(const clang::SourceManager &SM, clang::FileID File);
  bool isUnderRoot(llvm::StringRef Path) const;

  std::string ProjectRoot;
  llvm::DenseMap<clang::FileID, std::string> RealPaths;
};

/// A warning-level report item at F's spot saying what F's edit did (the
/// report lists it, migrate marks the spot with a `// ddpify:` comment): no
/// rule, no check, no edit of its own.
Finding reportNoteFor(const Finding &F, llvm::StringRef ReportId,
                      std::string Reason);

/// Every reference to Var in S.
/// "FILE:OFFSET" of a finding's location: the part of a whole-program fact's
/// key (`unsharded-loop:`, `global-value:`) that names where it holds.
std::string locationKey(const Finding &F);

void collectReferences(const clang::Stmt *S, const clang::VarDecl *Var,
                       std::vector<const clang::DeclRefExpr *> &Out);

/// The file offset right after the statement or block S (its `;` or `}`);
/// at the end of that line when only blanks or a line comment follow, so
/// the comment stays with S. False in a macro or where it cannot be found.
bool offsetAfterStatement(clang::ASTContext &Context, const clang::Stmt *S,
                          unsigned &Offset);

/// The whitespace before Loc on its line, and whether only whitespace
/// precedes Loc there.
std::string indentationOf(const clang::SourceManager &SM,
                          clang::SourceLocation Loc, bool &StartsLine);

/// Which device variables count, by their initialiser (null when there is
/// none).
using DeviceInitFilter = llvm::function_ref<bool(const clang::Expr *Init)>;

/// The torch::Device variable the code at Site can use, as that code spells
/// it (`*ptr` through a pointer): the nearest local declared before Site in
/// an enclosing block, a lambda's parameter or capture, a parameter of the
/// function, a member of the method's class, a global declared before it;
/// only those whose initialiser Accept takes. Empty when there is none.
std::string deviceVariableInScope(clang::ASTContext &Context,
                                  const clang::Stmt *Site,
                                  DeviceInitFilter Accept);

/// A statement-level node: its parent is a block or the body of a control
/// statement (its value, if any, is used by nothing).
clang::ast_matchers::internal::Matcher<clang::Stmt> isStatementLevel();

/// The text of Range as written (its tokens).
std::string sourceText(const clang::ASTContext &Context,
                       clang::SourceRange Range);

/// Whether Name occurs in Text as a whole identifier (what a new local's
/// name must not clash with).
bool mentionsIdentifier(llvm::StringRef Text, llvm::StringRef Name);

/// The variable a range-for over a loader names: `*loader`, `loader`; null
/// for anything else.
const clang::VarDecl *loaderVariable(const clang::Expr *Range);

} // namespace ddpify

#endif // DDPIFY_MATCHERUTIL_H
