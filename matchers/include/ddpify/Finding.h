//===- Finding.h - What a matcher found, where, with which names -*- C++
//-*-===//
//
// A Finding is the only thing matchers hand to the rest of the pipeline: the
// rewriters turn it into an edit, lint prints it as a diagnostic, and the
// report lists the ones that cannot be rewritten safely.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_FINDING_H
#define DDPIFY_FINDING_H

#include <string>
#include <vector>

namespace ddpify {

/// The shape of the code a Finding covers; it tells the rewriter which text
/// replaces the range.
enum class FindingForm {
  /// An expression (or a constructor's argument list) that chooses a CUDA
  /// device; replaced by `ddp::device()`.
  CudaDeviceChoice,
  /// `x.cuda()`: the range covers `cuda()`, replaced by `to(<device>)`.
  CudaMemberCall,
  /// The device argument of `x.to(...)` / `model->to(...)`; replaced by
  /// `<device>`.
  CudaToArgument,
};

struct Finding {
  std::string RuleId;    ///< Migration rule, e.g. "R3".
  std::string CheckName; ///< Lint check, e.g. "ddp-cuda-call".
  FindingForm Form = FindingForm::CudaDeviceChoice;
  std::string FilePath; ///< Absolute path of the file holding the range.
  unsigned Offset = 0;  ///< Byte offset of the range in FilePath.
  unsigned Length = 0;
  unsigned Line = 0; ///< 1-based position of Offset, for diagnostics.
  unsigned Column = 0;
  std::string Message;
  /// The expression naming the process's device at this point: a
  /// torch::Device variable in scope (possibly `*ptr`), or empty when none is
  /// visible and the rewriter must use `ddp::device()`.
  std::string DeviceExpr;
  /// Set when the range comes from a macro expansion: such code is reported,
  /// never rewritten.
  bool InMacro = false;
  std::string MacroName;

  bool operator<(const Finding &Other) const {
    if (FilePath != Other.FilePath)
      return FilePath < Other.FilePath;
    if (Offset != Other.Offset)
      return Offset < Other.Offset;
    return RuleId < Other.RuleId;
  }
  /// The same finding, seen again through another translation unit. A
  /// different DeviceExpr at the same spot is not: it is a conflict.
  bool sameSpot(const Finding &Other) const {
    return FilePath == Other.FilePath && Offset == Other.Offset &&
           Length == Other.Length && RuleId == Other.RuleId &&
           Form == Other.Form && DeviceExpr == Other.DeviceExpr;
  }
};

/// Matchers append here; one sink per run, shared by every translation unit.
using FindingList = std::vector<Finding>;

} // namespace ddpify

#endif // DDPIFY_FINDING_H
