// The safety net for training that is not data parallel: under a launcher, a
// process that runs backward passes without ever constructing a
// ddp::DistributedDataParallel gets one warning on rank 0 (at the first
// batch a ddp loader hands out after a step, or else at exit). Each case runs
// the training probe (train_probe.cpp) as separate processes on Gloo over
// loopback and reads what they wrote.

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
run_probe(int world_size, const std::string& mode,
          std::vector<std::pair<std::string, std::string>> env = {}) {
  const std::string port = std::to_string(ddp_test::free_port());
  std::vector<Command> commands;
  for (int rank = 0; rank < std::max(world_size, 1); ++rank) {
    Command command;
    command.argv = {DDP_TRAIN_PROBE_PATH, mode};
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
    for (const auto& kv : env) {
      command.env.push_back(kv);
    }
    commands.push_back(std::move(command));
  }
  auto results = ddp_test::run_commands(commands, 120);
  for (size_t rank = 0; rank < results.size(); ++rank) {
    EXPECT_EQ(results[rank].status, 0) << "rank " << rank << ":\n"
                                       << results[rank].output;
    EXPECT_NE(results[rank].output.find("done"), std::string::npos)
        << "rank " << rank << ":\n"
        << results[rank].output;
  }
  return results;
}

// Rank 0 names the problem and the fix, exactly once; no other rank warns.
void expect_one_warning_on_rank0(const std::vector<CommandResult>& results) {
  ASSERT_EQ(results.size(), 2u);
  const std::string& out = results[0].output;
  EXPECT_EQ(count(out, kWarning), 1) << out;
  EXPECT_NE(out.find("ddp: warning: backward passes ran under a launcher "
                     "(world size 2), but no ddp::DistributedDataParallel "
                     "was constructed in this process"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("every rank trains its own copy of the model"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Wrap the model with ddp::DistributedDataParallel"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("DDP_WARN_UNWRAPPED=0"), std::string::npos) << out;
  EXPECT_EQ(count(results[1].output, kWarning), 0) << results[1].output;
}

void expect_no_warning(const std::vector<CommandResult>& results) {
  for (size_t rank = 0; rank < results.size(); ++rank) {
    EXPECT_EQ(count(results[rank].output, kWarning), 0)
        << "rank " << rank << ":\n"
        << results[rank].output;
  }
}

// Where in `out` the warning came: after "step 0" and before "step 1" means
// at the first batch after the first optimizer step.
void expect_warning_between(const std::string& out, const std::string& before,
                            const std::string& after) {
  const auto at = out.find(kWarning);
  ASSERT_NE(at, std::string::npos) << out;
  const auto b = out.find(before + "\n");
  const auto a = out.find(after + "\n");
  ASSERT_NE(b, std::string::npos) << out;
  ASSERT_NE(a, std::string::npos) << out;
  EXPECT_LT(b, at) << out;
  EXPECT_LT(at, a) << out;
}

TEST(UnwrappedWarning, DdpLoaderWithoutWrapperWarnsOnceAtTheFirstStep) {
  const auto results = run_probe(2, "loader");
  expect_one_warning_on_rank0(results);
  expect_warning_between(results[0].output, "step 0", "step 1");
}

TEST(UnwrappedWarning, LoaderWithWorkersWarnsAtTheFirstStepToo) {
  // Workers prefetch at begin(), before any step: no early (or missed)
  // warning because of that.
  const auto results = run_probe(2, "loader-workers");
  expect_one_warning_on_rank0(results);
  expect_warning_between(results[0].output, "step 0", "step 1");
}

TEST(UnwrappedWarning, TrainingWithoutDdpLoaderWarnsOnceAtExit) {
  const auto results = run_probe(2, "plain");
  expect_one_warning_on_rank0(results);
  // After the program's own last words.
  EXPECT_LT(results[0].output.find("done\n"), results[0].output.find(kWarning))
      << results[0].output;
}

TEST(UnwrappedWarning, NoWarningWithAWrapper) {
  expect_no_warning(run_probe(2, "wrap"));
}

TEST(UnwrappedWarning, NoWarningWithDistribute) {
  expect_no_warning(run_probe(2, "distribute"));
}

TEST(UnwrappedWarning, NoWarningWithoutBackward) {
  // An even ddp loader iterated for inference only.
  expect_no_warning(run_probe(2, "eval"));
}

TEST(UnwrappedWarning, NoWarningAtWorldSizeOne) {
  expect_no_warning(run_probe(1, "loader"));
  expect_no_warning(run_probe(1, "plain"));
}

TEST(UnwrappedWarning, NoWarningWithoutLauncher) {
  expect_no_warning(run_probe(0, "loader"));
  expect_no_warning(run_probe(0, "plain"));
}

TEST(UnwrappedWarning, EnvironmentVariableTurnsItOff) {
  expect_no_warning(run_probe(2, "loader", {{"DDP_WARN_UNWRAPPED", "0"}}));
  expect_no_warning(run_probe(2, "plain", {{"DDP_WARN_UNWRAPPED", "0"}}));
}

} // namespace
