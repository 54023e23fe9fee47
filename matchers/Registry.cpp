//===- Registry.cpp - The table of rules and lint checks ------------------===//

#include "ddpify/Registry.h"
#include "ddpify/BatchShapeMatchers.h"
#include "ddpify/DataMatchers.h"
#include "ddpify/DeviceMatchers.h"
#include "ddpify/DiscardedMoveMatchers.h"
#include "ddpify/EntryMatchers.h"
#include "ddpify/FlowMatchers.h"
#include "ddpify/HandBatchMatchers.h"
#include "ddpify/MetricsMatchers.h"
#include "ddpify/ModelMatchers.h"
#include "ddpify/OutputMatchers.h"
#include "ddpify/PlacementMatchers.h"
#include "ddpify/SeedMatchers.h"
#include "ddpify/StreamHandoverMatchers.h"

namespace ddpify {

llvm::ArrayRef<RuleInfo> allRules() {
  static const RuleInfo Rules[] = {
      {"R1", "",
       "ddp::init(argc, argv) as the first statement of main (parameters "
       "added when main() has none)"},
      {"R2", "ddp-hardcoded-device",
       "a device chosen as CUDA becomes ddp::device() (cuda:LOCAL_RANK or "
       "cpu)",
       CheckLevel::RewriteUntilDistributed},
      {"R3", "ddp-cuda-call",
       ".cuda() and .to(torch::kCUDA) become .to(device) (or "
       ".to(ddp::device()))",
       CheckLevel::RewriteUntilDistributed},
      {"R4", "ddp-unsharded-loader",
       "torch::data::make_data_loader becomes ddp::make_data_loader (even "
       "shards for loaders reaching backward, exact ones otherwise)",
       CheckLevel::RewriteUntilDistributed},
      {"R5", "ddp-unsynced-batchnorm",
       "torch::nn::BatchNorm{1,2,3}d becomes ddp::SyncBatchNorm{1,2,3}d",
       CheckLevel::Rewrite},
      {"R6", "ddp-unwrapped-model",
       "every model an optimizer trains gets a ddp::DistributedDataParallel "
       "for as long as it lives (placed on the device first when it is "
       "not)"},
      {"R7", "ddp-unguarded-output",
       "statements writing to stdout are guarded by ddp::is_main_process()",
       CheckLevel::Rewrite},
      {"R8", "ddp-unguarded-save",
       "torch::save and checkpoint writes happen on the main process only",
       CheckLevel::RewriteUntilDistributed},
      {"R9", "", "#include <ddp/ddp.h> added once to each changed file"},
      {"R10", "",
       "CMakeLists.txt: find_package(ddpify REQUIRED) and ddpify::runtime "
       "linked to targets whose sources changed"},
      {"R11", "",
       "sums and counts over a sharded loader (validation or training) are "
       "all-reduced after the loop"},
      {"", "ddp-device-mismatch",
       "one operation mixes tensors placed on different devices"},
      {"", "ddp-cpu-factory-in-forward",
       "a tensor factory without a device inside a module's forward"},
      {"R4", "ddp-fixed-batch-shape",
       "a view/reshape/expand spelling a dimension with the loader's batch "
       "size, in a loop over it, uses the batch's own size"},
      {"", "ddp-discarded-move",
       "a tensor's .to()/.cuda()/.cpu() as a statement: the moved copy is "
       "thrown away"},
      {"R12", "ddp-divergent-exit",
       "a loop exit or return decided by one rank's data (ranks diverge "
       "and hang) decides on the value's mean over the ranks where it is a "
       "floating-point scalar"},
      {"R13", "ddp-divergent-seed",
       "a seed drawn at run time (random_device, time, a clock) becomes the "
       "main process's on every rank (ddp::shared_seed)",
       CheckLevel::RewriteUntilDistributed},
  };
  return Rules;
}

const RuleInfo *findRule(llvm::StringRef Name) {
  for (const RuleInfo &Rule : allRules())
    if ((!Rule.RuleId.empty() && Rule.RuleId == Name) ||
        (!Rule.CheckName.empty() && Rule.CheckName == Name))
      return &Rule;
  return nullptr;
}

CheckLevel checkLevel(llvm::StringRef CheckName) {
  for (const RuleInfo &Rule : allRules())
    if (!CheckName.empty() && Rule.CheckName == CheckName)
      return Rule.Level;
  return CheckLevel::Hazard;
}

std::vector<std::unique_ptr<MatcherModule>>
createMatcherModules(FindingList &Findings, llvm::StringRef ProjectRoot) {
  std::vector<std::unique_ptr<MatcherModule>> Modules;
  Modules.push_back(createEntryMatchers(Findings, ProjectRoot));
  Modules.push_back(createDeviceMatchers(Findings, ProjectRoot));
  Modules.push_back(createModelMatchers(Findings, ProjectRoot));
  Modules.push_back(createOutputMatchers(Findings, ProjectRoot));
  Modules.push_back(createDataMatchers(Findings, ProjectRoot));
  Modules.push_back(createMetricsMatchers(Findings, ProjectRoot));
  Modules.push_back(createFlowMatchers(Findings, ProjectRoot));
  Modules.push_back(createPlacementMatchers(Findings, ProjectRoot));
  Modules.push_back(createDiscardedMoveMatchers(Findings, ProjectRoot));
  Modules.push_back(createBatchShapeMatchers(Findings, ProjectRoot));
  Modules.push_back(createHandBatchMatchers(Findings, ProjectRoot));
  Modules.push_back(createSeedMatchers(Findings, ProjectRoot));
  Modules.push_back(createStreamHandoverMatchers(Findings, ProjectRoot));
  return Modules;
}

} // namespace ddpify
