//===- PlacementLattice.cpp - Where a tensor lives, as a lattice ----------===//

#include "ddpify/PlacementLattice.h"
#include <optional>

using namespace clang;

namespace ddpify::placement {

Place unknown() { return Place(); }

std::string describe(const Place &P) {
  switch (P.K) {
  case Kind::Cpu:
    return "the CPU";
  case Kind::Cuda:
    if (P.Index == -1)
      return "the current CUDA device";
    if (P.Index == -2)
      return "a CUDA device";
    return "cuda:" + std::to_string(P.Index);
  case Kind::Var:
    return "the device in '" + P.VarName + "'";
  default:
    return "an unknown device";
  }
}

/// Whether two placements differ for certain at run time, and why. A device
/// variable is taken to be what it is in a DDP process on a GPU: that
/// process's CUDA device, not the CPU and not the current device.
bool conflict(const Place &A, const Place &B, std::string &Why) {
  if (!A.known() || !B.known())
    return false;
  if ((A.K == Kind::Cpu && A.Scalar) || (B.K == Kind::Cpu && B.Scalar))
    return false; // CPU scalars are allowed with any device.
  if (A.same(B))
    return false;
  const Place &Var = A.K == Kind::Var ? A : B;
  const Place &Other = A.K == Kind::Var ? B : A;
  if (A.K == Kind::Var && B.K == Kind::Var)
    return false; // Two device variables may hold the same device.
  if (Var.K == Kind::Var && Other.K == Kind::Cuda && Other.Index == -2)
    return false; // Some CUDA device may be the process's.
  if (Var.K == Kind::Var) {
    if (Other.K == Kind::Cpu)
      Why = "this fails whenever '" + Var.VarName +
            "' is a CUDA device, as it is in every process of a DDP job on "
            "GPUs";
    else
      Why = "'" + Var.VarName +
            "' is each process's own device (cuda:LOCAL_RANK in a DDP job), "
            "not " +
            describe(Other) + ": this fails on every rank whose device differs";
    return true;
  }
  if (A.K != B.K) {
    Why = "this fails at run time: \"Expected all tensors to be on the same "
          "device\"";
    return true;
  }
  // Both CUDA: only two different explicit indices are certain to differ.
  if (A.Index >= 0 && B.Index >= 0 && A.Index != B.Index) {
    Why = "this fails at run time: \"Expected all tensors to be on the same "
          "device\"";
    return true;
  }
  return false;
}

/// Whether P is on a CUDA device (a device variable is, in a DDP job on GPUs).
bool onCuda(const Place &P) { return P.K == Kind::Cuda || P.K == Kind::Var; }

Place someCuda(SourceRange Origin, std::string How) {
  Place P;
  P.K = Kind::Cuda;
  P.Index = -2;
  P.Origin = Origin;
  P.How = std::move(How);
  return P;
}

/// The placement of an operation's result from its operands' (assuming it
/// ran: then the known operands agree, CPU scalars aside, or are all on CUDA
/// devices: some CUDA device).
Place join(const std::vector<Place> &Operands, SourceRange At,
           llvm::StringRef OpName) {
  std::optional<Place> Found;
  const Place *CpuScalar = nullptr;
  for (const Place &P : Operands) {
    if (!P.known())
      continue;
    if (P.K == Kind::Cpu && P.Scalar) {
      CpuScalar = CpuScalar ? CpuScalar : &P;
      continue;
    }
    if (!Found)
      Found = P;
    else if (Found->same(P))
      continue;
    else if (onCuda(*Found) && onCuda(P))
      Found = someCuda(At, "'" + OpName.str() +
                               "' of tensors on different CUDA devices");
    else
      return unknown();
  }
  Place R = Found ? *Found : CpuScalar ? *CpuScalar : unknown();
  R.Scalar = !Found && CpuScalar;
  return R;
}

/// Where a value is after one of two paths (Old: the one seen first, whose
/// origin is kept): what both agree on.
Place joinPaths(const Place &Old, const Place &New) {
  if (Old.same(New)) {
    Place R = Old;
    R.Scalar = Old.Scalar && New.Scalar;
    return R;
  }
  if (onCuda(Old) && onCuda(New)) {
    Place R = someCuda(Old.Origin, Old.How + " on one path (" + describe(New) +
                                       " on another)");
    if (Old.K == Kind::Cuda && Old.Index == -2)
      R.How = Old.How;
    R.Scalar = Old.Scalar && New.Scalar;
    return R;
  }
  return unknown();
}

/// The state after either of two paths; a variable one path never set is
/// unknown (the other path's value, or whatever it held before).
Env joinEnvs(const Env &Old, const Env &New) {
  Env R;
  for (const auto &[Decl, P] : Old.Vars) {
    auto It = New.Vars.find(Decl);
    R.Vars[Decl] = It != New.Vars.end() ? joinPaths(P, It->second) : unknown();
  }
  for (const auto &[Decl, P] : New.Vars)
    if (!Old.Vars.count(Decl))
      R.Vars[Decl] = unknown();
  return R;
}

} // namespace ddpify::placement
