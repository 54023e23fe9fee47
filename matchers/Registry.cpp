//===- Registry.cpp - The table of rules and lint checks ------------------===//

#include "ddpify/Registry.h"
#include "ddpify/DeviceMatchers.h"

namespace ddpify {

llvm::ArrayRef<RuleInfo> allRules() {
  static const RuleInfo Rules[] = {
      {"R2", "ddp-hardcoded-device",
       "a device chosen as CUDA becomes ddp::device() (cuda:LOCAL_RANK or "
       "cpu)"},
      {"R3", "ddp-cuda-call",
       ".cuda() and .to(torch::kCUDA) become .to(device) (or "
       ".to(ddp::device()))"},
      {"R9", "", "#include <ddp/ddp.h> added once to each changed file"},
  };
  return Rules;
}

const RuleInfo *findRule(llvm::StringRef Name) {
  for (const RuleInfo &Rule : allRules())
    if (Rule.RuleId == Name ||
        (!Rule.CheckName.empty() && Rule.CheckName == Name))
      return &Rule;
  return nullptr;
}

std::vector<std::unique_ptr<MatcherModule>>
createMatcherModules(FindingList &Findings, llvm::StringRef ProjectRoot) {
  std::vector<std::unique_ptr<MatcherModule>> Modules;
  Modules.push_back(createDeviceMatchers(Findings, ProjectRoot));
  return Modules;
}

} // namespace ddpify
