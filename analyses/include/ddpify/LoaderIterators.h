//===- LoaderIterators.h - Loaders walked by their iterators ----*- C++ -*-===//
//
// What a program does with the iterator a data loader's begin() gives: a
// pass to the loader's end (`for (auto it = l->begin(); it != l->end();
// ++it)`, the same as a while loop), or batches drawn one at a time (`auto
// batch = *val_loader->begin();`, a validation batch every K steps,
// `std::next(l->begin(), k)`, an iterator re-taken after the end), or a count
// of its batches (`std::distance(l->begin(), l->end())`). R4 decides a
// loader's sharding from it, R11 reduces the sums of a pass (and counts the
// batches of every rank where a sum made global is divided by such a count),
// and both name what holds a loader by one key (whole-program facts).
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_LOADERITERATORS_H
#define DDPIFY_LOADERITERATORS_H

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/Stmt.h"
#include <string>
#include <vector>

namespace ddpify {

/// What the iterator of one `begin()` call is used for.
struct IteratorUse {
  enum Kind {
    /// Walked to the loader's end by one loop, with no exit from it: every
    /// batch once, as a range-for.
    Pass,
    /// Batches read otherwise: a draw, the first K, a walk that restarts.
    Draws,
    /// No batch read through it (compared only).
    Nothing,
    /// Counted: `std::distance(l->begin(), l->end())`, the number of batches
    /// of a pass (each batch is made and dropped). Over a sharded loader it
    /// is this rank's number of batches, the same on every rank.
    Count,
    /// A use not followed (the iterator handed to a function, copied).
    Unknown,
  } K = Nothing;
  /// Pass: the loop and its body.
  const clang::Stmt *Loop = nullptr;
  const clang::Stmt *Body = nullptr;
  /// Draws: the statements a drawn batch may reach, for each draw the rest
  /// of the block where it is read (or where the variable it is stored in
  /// is declared).
  std::vector<const clang::Stmt *> Regions;
  /// Count: the std::distance call.
  const clang::CallExpr *Distance = nullptr;
  /// Unknown: why, for the report.
  std::string Why;
};

/// The use of the iterator Begin (a `begin()` call on a loader) returns.
IteratorUse iteratorUse(clang::ASTContext &Context,
                        const clang::CXXMemberCallExpr *Begin);

/// The loader (`*loader`, `loader`: the object whose begin() is called)
/// whose batches E counts, or null: E is, behind casts,
/// `std::distance(l->begin(), l->end())` (`l.begin()`, `(*l).begin()`), a
/// local initialised with one and never changed (`const auto n = ...`), or a
/// call of a function of the program whose body returns the count of one of
/// its parameters (the argument is the loader then).
const clang::Expr *loaderCountOf(clang::ASTContext &Context,
                                 const clang::Expr *E);

/// The loader (`*loader`, `loader`: the object whose begin() is called)
/// that Loop walks to its end by iterator (IteratorUse::Pass), or null;
/// Iterator, when given, is set to the variable holding the iterator.
const clang::Expr *
iteratorPassLoader(clang::ASTContext &Context, const clang::Stmt *Loop,
                   const clang::VarDecl **Iterator = nullptr);

/// The key of a function's parameter among the whole program's facts: the
/// function's qualified name and canonical parameter types, the same in the
/// unit that defines it and in each unit that calls it.
std::string parameterKey(const clang::FunctionDecl *Function, unsigned Index,
                         const clang::ASTContext &Context);

/// The key of what holds a loader (a local or global variable, a parameter,
/// a member), the same for R4, which follows a loader through its holders,
/// and for R11, which sees a loop over one of them.
std::string loaderHolderKey(const clang::ValueDecl *Holder,
                            const clang::ASTContext &Context);

/// The holder of the loader an expression names (`*loader`, `loader`,
/// `*this->loader_`), or null.
const clang::ValueDecl *loaderHolderOf(const clang::Expr *Loader);

/// The fact R4 provides for each holder of a loader it leaves unsharded: R11
/// does not reduce what a loop over it sums (every rank saw every sample).
std::string unshardedLoaderFact(llvm::StringRef HolderKey);

} // namespace ddpify

#endif // DDPIFY_LOADERITERATORS_H
