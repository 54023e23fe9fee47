//===- DeviceRewriter.cpp - R2/R3 edits -----------------------------------===//

#include "ddpify/Rewriter.h"

namespace ddpify {

std::optional<clang::tooling::Replacement>
rewriteDeviceFinding(const Finding &F) {
  std::string Device = F.DeviceExpr.empty() ? ProcessDevice : F.DeviceExpr;
  std::string Text;
  switch (F.Form) {
  case FindingForm::CudaDeviceChoice:
    Text = ProcessDevice;
    break;
  case FindingForm::CudaMemberCall:
    Text = "to(" + Device + ")";
    break;
  case FindingForm::CudaToArgument:
    Text = Device;
    break;
  }
  return clang::tooling::Replacement(F.FilePath, F.Offset, F.Length, Text);
}

} // namespace ddpify
