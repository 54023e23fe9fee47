//===- Work.h - What must run on every process --------------------*- C++
//-*-===//
//
// Shared by the rules that decide where code may run on one process only:
// R7 (what a guarded print must still compute on every process) and R4's
// hand batch loops (what a condition that differs by rank may still hold).
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_WORK_H
#define DDPIFY_WORK_H

#include "clang/AST/Expr.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <string>

namespace ddpify {

/// Whether a called function is the program's own (it may do anything).
using ProgramFunctionFilter =
    llvm::function_ref<bool(const clang::FunctionDecl *Callee)>;

/// A call's callee by its qualified name, also where a template's pattern
/// leaves it unresolved (`std::max`, `printf`); empty when there is none.
std::string qualifiedCalleeName(const clang::CallExpr *Call);

/// A forward pass: a call of a `forward` method, or `model(x)` on a
/// TORCH_MODULE holder.
bool isForwardPass(const clang::CallExpr *Call);

/// `++x`, `x--`, `x = ...`, `x += ...` (also through overloaded operators).
bool isIncrementOrAssignment(const clang::Expr *E);

/// Whether E itself is a call or change that must happen on every process:
/// a forward pass (SyncBatchNorm's collectives hang the job when one rank
/// skips them), ddp:: and c10d calls, the program's own functions (they may
/// do any of these), random numbers (they advance the generator), `++`,
/// `=`. Writing to a stream is not work.
bool doesWork(const clang::Expr *E, ProgramFunctionFilter IsProgramFunction);

/// Whether S or anything in it (lambdas excepted) does work.
bool containsWork(const clang::Stmt *S,
                  ProgramFunctionFilter IsProgramFunction);

/// Whether E is, or starts a chain of `<<` on, a std::basic_ostream (or a
/// stream derived from one: `std::cout`, `*log`, `file`, `logger.stream()`).
bool isStreamChain(const clang::Expr *E);

/// A whole statement that only writes text: a `<<` chain on a stream, a
/// stream's flush, a printf-family call. Its operands may still do work.
bool isOutputStatement(const clang::Expr *E);

} // namespace ddpify

#endif // DDPIFY_WORK_H
