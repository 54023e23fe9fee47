//===- PlacementLattice.h - Where a tensor lives, as a lattice --*- C++ -*-===//
//
// The abstract values of the placement analysis
// (analyses/PlacementAnalysis.cpp): the CPU, cuda:N, the current CUDA device,
// the process's device (a device variable), some CUDA device, unknown. Paths
// join to what they agree on (two CUDA placements: some CUDA device); an
// operation on disagreeing CUDA placements yields some CUDA device; anything
// not understood is unknown, and unknown never conflicts.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_PLACEMENTLATTICE_H
#define DDPIFY_PLACEMENTLATTICE_H

#include "clang/AST/Decl.h"
#include "clang/Basic/SourceLocation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"
#include <string>
#include <vector>

namespace ddpify::placement {

enum class Kind { Unknown, NoDevice, Cpu, Cuda, Var };

/// Where a tensor lives (or, for tensor options, which device they name).
struct Place {
  Kind K = Kind::Unknown;
  /// Cuda: -1 the current CUDA device, -2 a CUDA device of unknown index,
  /// N >= 0 cuda:N.
  int Index = -1;
  /// Var: the declaration of the device variable (or ddp::device) whose
  /// run-time value is the device.
  const void *Var = nullptr;
  std::string VarName;
  /// A 0-dim tensor (`torch::tensor(1.0)`, `loss.sum()`): a CPU scalar
  /// combines with tensors on any device.
  bool Scalar = false;
  /// Where the value got this placement, and by what.
  clang::SourceRange Origin;
  std::string How;

  bool known() const {
    return K == Kind::Cpu || K == Kind::Cuda || K == Kind::Var;
  }
  bool same(const Place &O) const {
    return K == O.K && Index == O.Index && Var == O.Var;
  }
};

/// Nowhere known.
Place unknown();

/// The placement in words ("the CPU", "cuda:1", "the device in 'device'").
std::string describe(const Place &P);

/// Whether two placements differ for certain at run time, and why. A device
/// variable is taken to be what it is in a DDP process on a GPU: that
/// process's CUDA device, not the CPU and not the current device.
bool conflict(const Place &A, const Place &B, std::string &Why);

/// Whether P is on a CUDA device (a device variable is, in a DDP job on GPUs).
bool onCuda(const Place &P);

/// Some CUDA device, of an index not known.
Place someCuda(clang::SourceRange Origin, std::string How);

/// The placement of an operation's result from its operands' (assuming it
/// ran: then the known operands agree, CPU scalars aside, or are all on CUDA
/// devices: some CUDA device).
Place join(const std::vector<Place> &Operands, clang::SourceRange At,
           llvm::StringRef OpName);

/// Where a value is after one of two paths (Old: the one seen first, whose
/// origin is kept): what both agree on.
Place joinPaths(const Place &Old, const Place &New);

struct Env {
  llvm::DenseMap<const clang::ValueDecl *, Place> Vars;

  bool operator==(const Env &O) const {
    if (Vars.size() != O.Vars.size())
      return false;
    for (const auto &[Decl, P] : Vars) {
      auto It = O.Vars.find(Decl);
      if (It == O.Vars.end() || !It->second.same(P) ||
          It->second.Scalar != P.Scalar)
        return false;
    }
    return true;
  }
};

/// The state after either of two paths; a variable one path never set is
/// unknown (the other path's value, or whatever it held before).
Env joinEnvs(const Env &Old, const Env &New);

} // namespace ddpify::placement

#endif // DDPIFY_PLACEMENTLATTICE_H
