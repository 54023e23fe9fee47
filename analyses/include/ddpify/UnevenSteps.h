//===- UnevenSteps.h - Training loops whose steps differ by rank -*- C++
//-*-===//
//
// What R12 (rules/DivergentExit.cpp) and R16 (rules/SeedRollouts.cpp) share
// about a training loop that may take a different number of steps on each
// rank (an episode that ends on its own `done`, rollouts drawn per rank):
// what the loop draws at random and from which seeds, the collectives of the
// program's own it makes (which ddp::join() cannot make right), and the edits
// that let every rank leave it through `ddp::join();` (runtime:
// ddp/distributed.h).
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_UNEVENSTEPS_H
#define DDPIFY_UNEVENSTEPS_H

#include "ddpify/MatcherUtil.h"
#include "ddpify/MetricLoops.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ParentMap.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include <set>
#include <string>
#include <vector>

namespace ddpify {

bool isLoopStatement(const clang::Stmt *S);

/// A call whose value differs by process: a draw from std::random_device,
/// the time, a clock, the process id.
bool isRunTimeSource(const clang::Expr *E);

/// Whether E draws a value that differs by process, directly, through the
/// initialisers of the local variables it reads, or through what a helper
/// of the program returns (`make_seed()`); Shared when it already goes
/// through ddp::shared_seed or ddp::rollout_seed.
bool drawsRunTimeSeed(const clang::Expr *E, bool &Shared, int Depth = 0);

/// A standard random engine type (std::mt19937, std::default_random_engine,
/// ...).
bool isStandardEngine(clang::QualType T);

/// What a loop draws: whether it samples random numbers at all, and the
/// standard engines (locals and globals) it draws from by name.
struct Draws {
  bool Random = false;
  std::vector<const clang::VarDecl *> Engines;
  std::set<std::string> MemberEngines;
  std::set<std::string> ReferencedEngines;
};

/// What S draws, directly or through the program's functions and methods:
/// torch::multinomial, torch::rand*, torch::normal, ..., a tensor's
/// uniform_()/normal_()/..., a standard distribution or engine called,
/// rand().
Draws drawsOf(const clang::SourceManager &SM, const clang::Stmt *S);

/// A seed that is the same on every rank and every run, spelled in the
/// program's code (`torch::manual_seed(42)`, `std::srand(7)`, an engine S
/// draws from built or seeded with a constant, `std::mt19937 rng(1234)`):
/// its text and file:line (relative to Root), or empty.
std::string fixedSeedOf(clang::ASTContext &Context, FindingLocator &Locator,
                        llvm::StringRef Root, const Draws &Found);

/// "FILE:LINE" of Loc, FILE relative to Root where it lies under it.
std::string placeOf(clang::ASTContext &Context, FindingLocator &Locator,
                    llvm::StringRef Root, clang::SourceLocation Loc);

/// The outermost loop around S in its function (S itself when it is a loop
/// and none is around it); lambdas are not crossed. Null when there is none.
const clang::Stmt *outermostLoop(const clang::Stmt *S,
                                 const clang::ParentMap &Parents);

/// How a loop reads where it starts: `'for (int episode = 0; ...; ++episode)'`
/// (quoted), "the do-while loop".
std::string loopHeader(clang::ASTContext &Context, const clang::Stmt *Loop);

/// Whether S is `ddp::join();`.
bool isJoinCall(const clang::Stmt *S);

/// Whether the statement right after Loop (through labels) in its block is
/// `ddp::join();`: a loop the migration made join.
bool followedByJoin(const clang::Stmt *Loop, const clang::ParentMap &Parents);

/// The `ddp::join();` right before S in its block (a migrated return's),
/// or null.
const clang::Stmt *joinRightBefore(const clang::Stmt *S,
                                   const clang::ParentMap &Parents);

/// A collective of the program's own that running a loop makes: the call
/// (or the loop whose sums R11 all-reduces right after it) and its words.
struct ProgramCollective {
  const clang::Stmt *At = nullptr;
  std::string What;
  /// ", through 'helper(x)' at FILE:LINE" when a function of the program's
  /// makes it.
  std::string Through;
  explicit operator bool() const { return At != nullptr; }
};

/// Finds the collectives of the program's own that a training loop makes,
/// directly or through the program's functions: ddp::all_reduce,
/// ddp::all_gather, ddp::broadcast, ddp::barrier, a RowShard's global
/// figures, ddp::load and ddp::exists_on_main, c10d, a ZeroRedundancyOptimizer
/// step, the all-reduces R11 inserts after a metric loop, the global figures
/// R15 inserts in a loop fed whole tensors, a forward pass where the program
/// has BatchNorm layers (SyncBatchNorm's collectives run in forward), a
/// torch::load (R8 makes it ddp::load). Their number would differ by rank
/// once the ranks take different numbers of steps: ddp::join() cannot make
/// that right (the runtime ends the job naming it). The wrapper's own
/// collectives (gradient all-reduces, buffer broadcasts, sync checks) are
/// not among them: join takes part in those.
class CollectiveFinder {
public:
  CollectiveFinder(clang::ASTContext &Context, TrainingOracle &Oracle,
                   FindingLocator &Locator, llvm::StringRef Root,
                   bool HasBatchNorm)
      : Context(Context), Oracle(Oracle), Locator(Locator), Root(Root.str()),
        HasBatchNorm(HasBatchNorm) {}

  /// The first collective in Loop, a loop of Function. With
  /// AfterToo, also those in the rest of Function after Loop, the ones R11
  /// inserts right after Loop included: a rank that returns from inside the
  /// loop skips them.
  ProgramCollective find(const clang::FunctionDecl *Function,
                         const clang::Stmt *Loop,
                         const clang::ParentMap &Parents, bool AfterToo);

private:
  ProgramCollective walk(const clang::Stmt *S, unsigned Depth);
  ProgramCollective inFunction(const clang::FunctionDecl *Definition,
                               unsigned Depth);
  ProgramCollective insertedIn(const clang::FunctionDecl *Function,
                               const clang::Stmt *Region, bool Inclusive,
                               const clang::Stmt *After);
  std::string text(const clang::Stmt *S);

  clang::ASTContext &Context;
  TrainingOracle &Oracle;
  FindingLocator &Locator;
  std::string Root;
  bool HasBatchNorm;
  llvm::DenseMap<const clang::FunctionDecl *, ProgramCollective> Functions;
  llvm::DenseMap<const clang::FunctionDecl *, std::vector<MetricLoop>> Metrics;
};

/// A `goto` inside Loop to a label outside it (it would skip the join).
const clang::Stmt *gotoOutOf(const clang::Stmt *Loop);

/// The edits that make every rank leave Loop (in F's file) through
/// `ddp::join();`: the call right after Loop where it is not there yet, and
/// right before each `return` inside Loop (lambdas left out) that has none.
/// False where one cannot be placed (a macro, another file).
bool joinEdits(clang::ASTContext &Context, FindingLocator &Locator,
               const Finding &F, const clang::Stmt *Loop,
               const clang::ParentMap &Parents,
               std::vector<FindingEdit> &Edits);

} // namespace ddpify

#endif // DDPIFY_UNEVENSTEPS_H
