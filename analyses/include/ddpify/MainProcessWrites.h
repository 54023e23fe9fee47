//===- MainProcessWrites.h - Writes only the main process makes -*- C++ -*-===//
//
// The statements of a translation unit that write what only the main
// process of a DDP program should (output to stdout, checkpoints, other
// files) and the `if (ddp::is_main_process())` guards they get. R7
// (rules/GuardOutput.cpp) and R8 (rules/GuardSaves.cpp) each plan
// every kind, so that one guarded block spans consecutive prints and saves
// alike, and each keeps the findings of its own rule.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_MAINPROCESSWRITES_H
#define DDPIFY_MAINPROCESSWRITES_H

#include "ddpify/Finding.h"
#include "ddpify/MatcherUtil.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/Expr.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <memory>
#include <string>

namespace ddpify {

class MainProcessWrites {
public:
  explicit MainProcessWrites(llvm::StringRef ProjectRoot);
  ~MainProcessWrites();

  void startTranslationUnit();
  /// Before a match of Context's unit is looked at (the streams bound to
  /// std::cout are found once per unit).
  void enter(clang::ASTContext &Context);
  /// A statement-level expression (MatcherUtil's isStatementLevel): a
  /// candidate for a guard when it writes to stdout (R7), a checkpoint or
  /// another file (R8) and no main-process check encloses it.
  void noteStatement(const clang::Expr *E);
  /// The guards of the unit's candidates; Findings gets the findings of
  /// Rule ("R7" or "R8"). A block is carried by its first statement's
  /// finding, whichever rule's it is.
  void finishTranslationUnit(FindingList &Findings, llvm::StringRef Rule);

  /// Inside the then-branch of an if whose condition is the main-process
  /// check (also through a lambda defined there).
  bool isGuarded(const clang::Stmt *S);
  /// False when a finding of this unit is already at F's spot; else F's
  /// spot is taken.
  bool claimSpot(const Finding &F);
  FindingLocator &locator();
  /// What names a checkpoint's file, to tell two paths apart: a string
  /// literal's text, else the spelling of the expression; empty when not
  /// known (no path, a macro).
  std::string pathKey(const clang::Expr *Path);
  /// The file argument of a checkpoint write or read: `torch::save(x,
  /// path)`, `torch::load(x, path)`, `archive.save_to(path)`,
  /// `load_from(path)`, `torch::jit::load(path)`, `module.save(path)`.
  static const clang::Expr *checkpointPath(const clang::Expr *E);
  /// The pathKey of each checkpoint the unit writes so far.
  llvm::ArrayRef<std::string> savedPaths() const;
  /// A call to ddp::is_main_process() or ddp::rank() in S.
  static bool mentionsMainProcessCheck(const clang::Stmt *S);

private:
  class Impl;
  std::unique_ptr<Impl> I;
};

} // namespace ddpify

#endif // DDPIFY_MAINPROCESSWRITES_H
