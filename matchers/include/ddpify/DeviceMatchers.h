//===- DeviceMatchers.h - R2/R3: CUDA devices chosen by hand ----*- C++ -*-===//

#ifndef DDPIFY_DEVICEMATCHERS_H
#define DDPIFY_DEVICEMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

/// R2 (a device chosen as CUDA) and R3 (`.cuda()`, `.to(torch::kCUDA)`).
std::unique_ptr<MatcherModule>
createDeviceMatchers(FindingList &Findings, llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_DEVICEMATCHERS_H
