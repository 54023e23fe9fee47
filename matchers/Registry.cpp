//===- Registry.cpp - The table of rules and lint checks ------------------===//

#include "ddpify/Registry.h"
#include "ddpify/DeviceMatchers.h"
#include "ddpify/EntryMatchers.h"
#include "ddpify/ModelMatchers.h"
#include "ddpify/OutputMatchers.h"

namespace ddpify {

llvm::ArrayRef<RuleInfo> allRules() {
  static const RuleInfo Rules[] = {
      {"R1", "",
       "ddp::init(argc, argv) as the first statement of main (parameters "
       "added when main() has none)"},
      {"R2", "ddp-hardcoded-device",
       "a device chosen as CUDA becomes ddp::device() (cuda:LOCAL_RANK or "
       "cpu)"},
      {"R3", "ddp-cuda-call",
       ".cuda() and .to(torch::kCUDA) become .to(device) (or "
       ".to(ddp::device()))"},
      {"R5", "ddp-unsynced-batchnorm",
       "torch::nn::BatchNorm{1,2,3}d becomes ddp::SyncBatchNorm{1,2,3}d"},
      {"R7", "ddp-unguarded-output",
       "statements writing to stdout are guarded by ddp::is_main_process()"},
      {"R8", "ddp-unguarded-save",
       "torch::save and checkpoint writes happen on the main process only"},
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
  Modules.push_back(createEntryMatchers(Findings, ProjectRoot));
  Modules.push_back(createDeviceMatchers(Findings, ProjectRoot));
  Modules.push_back(createModelMatchers(Findings, ProjectRoot));
  Modules.push_back(createOutputMatchers(Findings, ProjectRoot));
  return Modules;
}

} // namespace ddpify
