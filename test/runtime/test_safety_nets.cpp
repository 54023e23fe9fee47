// The runtime's safety nets, the last line for idioms no rule of ddpify
// knows (docs/runtime-ddp.md, "Safety nets"). Under a launcher:
// - an optimizer that steps parameters no ddp::DistributedDataParallel
//   covers ends the job with one line naming the parameter
//   (DDP_ALLOW_UNWRAPPED=1: one warning on rank 0, and the job goes on);
// - parameters replaced under a wrapper (to(kDouble) after the wrap) end
//   the job with one line naming the parameter;
// - ranks whose parameters drifted apart end the job when the wrapper ends,
//   and every 256 steps by default;
// - ddp::is_main_process() answers from the launcher's environment before
//   ddp::init (a static object's constructor).
// Each case runs the training probe (train_probe.cpp) as separate processes
// on Gloo over loopback and reads what they wrote.

#include "multiprocess.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace {

using ddp_test::Command;
using ddp_test::CommandResult;

constexpr const char* kWarning = "ddp: warning:";
constexpr const char* kEnds = " ends: ";

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

// Runs the probe in `mode` as `world_size` ranks (no launcher at all for 0).
std::vector<CommandResult>
run_probe(int world_size, const std::vector<std::string>& args,
          std::vector<std::pair<std::string, std::string>> env = {},
          bool expect_success = true) {
  const std::string port = std::to_string(ddp_test::free_port());
  std::vector<Command> commands;
  for (int rank = 0; rank < std::max(world_size, 1); ++rank) {
    Command command;
    command.argv = {DDP_TRAIN_PROBE_PATH};
    command.argv.insert(command.argv.end(), args.begin(), args.end());
    auto set = [&](const char* key, const std::string& value) {
      command.env.emplace_back(key, world_size > 0 ? value
                                                   : ddp_test::unset_value());
    };
    set("RANK", std::to_string(rank));
    set("LOCAL_RANK", std::to_string(rank));
    set("WORLD_SIZE", std::to_string(world_size));
    set("LOCAL_WORLD_SIZE", std::to_string(world_size));
    set("MASTER_ADDR", "127.0.0.1");
    set("MASTER_PORT", port);
    command.env.emplace_back("OMP_NUM_THREADS", "1");
    command.env.emplace_back("DDP_TIMEOUT_SECONDS", "60");
    command.env.emplace_back("DDP_BACKEND", "gloo");
    command.env.emplace_back("DDP_WARN_UNWRAPPED", ddp_test::unset_value());
    command.env.emplace_back("DDP_ALLOW_UNWRAPPED", ddp_test::unset_value());
    command.env.emplace_back("DDP_CHECK_SYNC", ddp_test::unset_value());
    for (const auto& kv : env) {
      command.env.push_back(kv);
    }
    commands.push_back(std::move(command));
  }
  auto results = ddp_test::run_commands(commands, 120);
  for (size_t rank = 0; expect_success && rank < results.size(); ++rank) {
    EXPECT_EQ(results[rank].status, 0) << "rank " << rank << ":\n"
                                       << results[rank].output;
    EXPECT_NE(results[rank].output.find("done"), std::string::npos)
        << "rank " << rank << ":\n"
        << results[rank].output;
  }
  return results;
}

std::vector<CommandResult>
run_probe(int world_size, const std::string& mode,
          std::vector<std::pair<std::string, std::string>> env = {}) {
  return run_probe(world_size, std::vector<std::string>{mode}, std::move(env));
}

// Every rank ends non-zero, having written exactly one line of the runtime's
// that contains `cause` (and no abort's or terminate's noise).
void expect_every_rank_ends_with(const std::vector<CommandResult>& results,
                                 const std::string& cause) {
  ASSERT_EQ(results.size(), 2u);
  for (size_t rank = 0; rank < results.size(); ++rank) {
    const std::string& out = results[rank].output;
    EXPECT_NE(results[rank].status, 0) << "rank " << rank << ":\n" << out;
    EXPECT_EQ(count(out, kEnds), 1) << "rank " << rank << ":\n" << out;
    const auto line_start = out.rfind("\nddp: rank ", out.find(kEnds));
    const auto line_end = out.find('\n', out.find(kEnds));
    ASSERT_NE(line_end, std::string::npos) << out;
    const std::string line = out.substr(
        line_start == std::string::npos ? 0 : line_start + 1,
        line_end - (line_start == std::string::npos ? 0 : line_start + 1));
    EXPECT_NE(line.find("ddp: rank " + std::to_string(rank) + " of 2 on "),
              std::string::npos)
        << line;
    EXPECT_NE(line.find(cause), std::string::npos) << line;
    EXPECT_EQ(out.find("terminate called"), std::string::npos) << out;
    EXPECT_EQ(out.find("done\n"), std::string::npos) << out;
  }
}

void expect_no_warning(const std::vector<CommandResult>& results) {
  for (size_t rank = 0; rank < results.size(); ++rank) {
    EXPECT_EQ(count(results[rank].output, kWarning), 0)
        << "rank " << rank << ":\n"
        << results[rank].output;
  }
}

constexpr const char* kUnwrapped =
    "an optimizer steps a parameter that no ddp::DistributedDataParallel "
    "covers (";

TEST(UnwrappedTraining, DdpLoaderWithoutWrapperEndsTheJobAtTheSecondStep) {
  const auto results = run_probe(2, {"loader"}, {}, false);
  expect_every_rank_ends_with(results, kUnwrapped);
  // Named: the Linear(4, 1)'s weight or bias, what used it; the remedy and
  // the way out.
  const std::string& out = results[0].output;
  EXPECT_TRUE(out.find("Float [1, 4] on cpu, used by ") != std::string::npos ||
              out.find("Float [1] on cpu, used by ") != std::string::npos)
      << out;
  EXPECT_NE(out.find("updated after backward pass 1)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("Wrap the model that owns it with "
                     "ddp::DistributedDataParallel"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("DDP_ALLOW_UNWRAPPED=1"), std::string::npos) << out;
  // Found at the second backward pass, after the first step: long before
  // the 16 steps of the job.
  EXPECT_NE(out.find("step 0\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("step 2\n"), std::string::npos) << out;
}

TEST(UnwrappedTraining, LoaderWithWorkersEndsTheJobToo) {
  expect_every_rank_ends_with(run_probe(2, {"loader-workers"}, {}, false),
                              kUnwrapped);
}

TEST(UnwrappedTraining, TrainingWithoutDdpLoaderEndsTheJobToo) {
  expect_every_rank_ends_with(run_probe(2, {"plain"}, {}, false), kUnwrapped);
}

TEST(UnwrappedTraining, AnUnwrappedHeadBesideAWrappedModelEndsTheJob) {
  const auto results = run_probe(2, {"partial"}, {}, false);
  expect_every_rank_ends_with(results, kUnwrapped);
  // The head's parameters, not the wrapped model's.
  const std::string& out = results[0].output;
  EXPECT_TRUE(out.find("Float [2, 4] on cpu") != std::string::npos ||
              out.find("Float [2] on cpu") != std::string::npos)
      << out;
}

TEST(UnwrappedTraining, NothingWithAWrapper) {
  expect_no_warning(run_probe(2, "wrap"));
}

TEST(UnwrappedTraining, NothingWithDistribute) {
  expect_no_warning(run_probe(2, "distribute"));
}

TEST(UnwrappedTraining, NothingWithoutBackward) {
  // An even ddp loader iterated for inference only.
  expect_no_warning(run_probe(2, "eval"));
}

TEST(UnwrappedTraining, AnInputThatRequiresGradIsNoParameter) {
  // A fresh leaf every batch that gets a gradient but is never stepped.
  expect_no_warning(run_probe(2, "input-grad"));
}

TEST(UnwrappedTraining, ATargetNetworkUpdatedSoftlyIsNotTrained) {
  expect_no_warning(run_probe(2, "target-net"));
}

TEST(UnwrappedTraining, NothingAtWorldSizeOne) {
  expect_no_warning(run_probe(1, "loader"));
  expect_no_warning(run_probe(1, "plain"));
}

TEST(UnwrappedTraining, NothingWithoutLauncher) {
  expect_no_warning(run_probe(0, "loader"));
  expect_no_warning(run_probe(0, "plain"));
}

TEST(UnwrappedTraining, AllowedByTheEnvironmentWarnsOnceOnRankZero) {
  for (const char* mode : {"loader", "plain"}) {
    const auto results = run_probe(2, mode, {{"DDP_ALLOW_UNWRAPPED", "1"}});
    ASSERT_EQ(results.size(), 2u);
    const std::string& out = results[0].output;
    EXPECT_EQ(count(out, kWarning), 1) << out;
    EXPECT_NE(out.find("ddp: warning: an optimizer steps a parameter that no "
                       "ddp::DistributedDataParallel covers"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("as DDP_ALLOW_UNWRAPPED=1 allows"), std::string::npos)
        << out;
    EXPECT_EQ(count(results[1].output, kWarning), 0) << results[1].output;
  }
  // The older switch keeps the job going without a word.
  expect_no_warning(run_probe(2, "loader", {{"DDP_WARN_UNWRAPPED", "0"}}));
}

TEST(ReplacedParameters, ToDoubleAfterTheWrapEndsTheJobNamingTheParameter) {
  const auto results = run_probe(2, {"convert-after-wrap"}, {}, false);
  expect_every_rank_ends_with(results,
                              "was replaced after the model was wrapped (it "
                              "was Float [");
  const std::string& out = results[0].output;
  EXPECT_TRUE(out.find("parameter 'weight'") != std::string::npos ||
              out.find("parameter 'bias'") != std::string::npos)
      << out;
  EXPECT_NE(out.find("it is Double ["), std::string::npos) << out;
  EXPECT_NE(out.find("Wrap the model after its last to(dtype), to(device) "
                     "or load"),
            std::string::npos)
      << out;
  // At the first backward pass.
  EXPECT_EQ(out.find("step 0\n"), std::string::npos) << out;
}

TEST(DriftingRanks, TheWrappersEndComparesTheRanksParameters) {
  // The periodic check off: the last rank's bias changed after step 3 of 5
  // is found when the wrapper ends.
  const auto results =
      run_probe(2, {"desync", "5", "3"}, {{"DDP_CHECK_SYNC", "0"}}, false);
  expect_every_rank_ends_with(
      results, "the ranks are out of sync at the end of training, after "
               "step 5: 'bias' differs (its sum: rank 0 ");
}

TEST(DriftingRanks, TheDefaultPeriodFindsThemWithinAFewHundredSteps) {
  // No DDP_CHECK_SYNC: the default period (256) stops the job at step 256,
  // not at the end (step 300).
  const auto results = run_probe(2, {"desync", "300", "10"}, {}, false);
  expect_every_rank_ends_with(results, "the ranks are out of sync at step "
                                       "256: 'bias' differs");
}

TEST(DriftingRanks, RanksInSyncEndQuietly) {
  const auto results = run_probe(2, {"desync", "5", "0"});
  for (const auto& result : results) {
    EXPECT_EQ(count(result.output, kEnds), 0) << result.output;
  }
}

TEST(BeforeInit, IsMainProcessAnswersFromTheLaunchersEnvironment) {
  const auto results =
      run_probe(2, "static", {{"DDP_TRAIN_PROBE_STATIC", "1"}});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NE(results[0].output.find("static main 1 rank 0\n"), std::string::npos)
      << results[0].output;
  EXPECT_NE(results[1].output.find("static main 0 rank 1\n"), std::string::npos)
      << results[1].output;
  // Without a launcher: the one process is the main one.
  const auto alone = run_probe(0, "static", {{"DDP_TRAIN_PROBE_STATIC", "1"}});
  EXPECT_NE(alone[0].output.find("static main 1 rank 0\n"), std::string::npos)
      << alone[0].output;
}

} // namespace
