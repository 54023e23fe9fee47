// Unit tests of the launcher environment and --local_rank parsing
// (runtime/src/env_launcher.*), with a fake environment: no processes.

#include "env_launcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using ddp::detail::EnvConfig;
using ddp::detail::LauncherKind;

EnvConfig read(const std::map<std::string, std::string>& vars,
               std::optional<int> local_rank_arg = std::nullopt,
               const std::string& backend = "",
               std::chrono::milliseconds timeout = std::chrono::minutes(10)) {
  auto getenv_fn = [&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  return ddp::detail::read_environment(getenv_fn, local_rank_arg, backend,
                                       timeout);
}

/// The message of the runtime_error that read() throws ("" if none).
std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    read(vars);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

const std::map<std::string, std::string> kTorchrun = {
    {"RANK", "3"},
    {"WORLD_SIZE", "4"},
    {"LOCAL_RANK", "1"},
    {"LOCAL_WORLD_SIZE", "2"},
    {"MASTER_ADDR", "10.0.0.1"},
    {"MASTER_PORT", "29400"}};

TEST(InitEnv, NoLauncherIsOneProcess) {
  const auto c = read({});
  EXPECT_EQ(c.launcher, LauncherKind::kNone);
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.world_size, 1);
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(read({}, 2).local_rank, 2); // --local_rank alone picks the GPU
}

TEST(InitEnv, Torchrun) {
  const auto c = read(kTorchrun);
  EXPECT_EQ(c.launcher, LauncherKind::kTorchrun);
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world_size, 2);
  EXPECT_EQ(c.master_addr, "10.0.0.1");
  EXPECT_EQ(c.master_port, 29400);
  EXPECT_FALSE(c.use_agent_store);
  EXPECT_EQ(c.backend, "");
  EXPECT_EQ(c.timeout, std::chrono::minutes(10));
}

TEST(InitEnv, LocalRankArgumentOnlyWhenEnvironmentHasNone) {
  auto vars = kTorchrun;
  EXPECT_EQ(read(vars, 0).local_rank, 1); // the environment wins
  vars.erase("LOCAL_RANK");
  EXPECT_EQ(read(vars, 0).local_rank, 0);
  // Neither: derived from the rank.
  EXPECT_EQ(read(vars).local_rank, 3 % 2);
}

TEST(InitEnv, AgentStorePrefix) {
  auto vars = kTorchrun;
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  vars["TORCHELASTIC_RESTART_COUNT"] = "2";
  const auto c = read(vars);
  EXPECT_TRUE(c.use_agent_store);
  EXPECT_EQ(c.store_prefix, "/worker/attempt_2");
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_FALSE(read(vars).use_agent_store);
}

TEST(InitEnv, BackendAndTimeoutOverrides) {
  auto vars = kTorchrun;
  EXPECT_EQ(read(vars, std::nullopt, "NCCL").backend, "nccl");
  vars["DDP_BACKEND"] = "Gloo";
  EXPECT_EQ(read(vars, std::nullopt, "nccl").backend, "gloo");
  vars["DDP_BACKEND"] = "auto";
  EXPECT_EQ(read(vars, std::nullopt, "nccl").backend, "");
  vars["DDP_BACKEND"] = "mpi";
  EXPECT_NE(error_of(vars).find("DDP_BACKEND='mpi'"), std::string::npos);
  vars.erase("DDP_BACKEND");
  vars["DDP_TIMEOUT_SECONDS"] = "2.5";
  EXPECT_EQ(read(vars).timeout, std::chrono::milliseconds(2500));
  for (const char* bad : {"0", "-3", "abc", "", "1e400", "5s"}) {
    vars["DDP_TIMEOUT_SECONDS"] = bad;
    EXPECT_NE(error_of(vars).find("DDP_TIMEOUT_SECONDS"), std::string::npos)
        << bad;
  }
}

TEST(InitEnv, GroupOfOne) {
  auto vars = kTorchrun;
  EXPECT_FALSE(read(vars).group_of_one);
  vars["DDP_GROUP_OF_ONE"] = "1";
  EXPECT_TRUE(read(vars).group_of_one);
  vars["DDP_GROUP_OF_ONE"] = "0";
  EXPECT_FALSE(read(vars).group_of_one);
  vars["DDP_GROUP_OF_ONE"] = "yes";
  EXPECT_NE(error_of(vars).find("DDP_GROUP_OF_ONE='yes'"), std::string::npos);
  // A world of one under a launcher still needs the master's address.
  vars = kTorchrun;
  vars["WORLD_SIZE"] = "1";
  vars["RANK"] = "0";
  vars.erase("MASTER_ADDR");
  vars["DDP_GROUP_OF_ONE"] = "1";
  EXPECT_NE(error_of(vars).find("MASTER_ADDR"), std::string::npos);
  // Without a launcher there is no store to meet at.
  EXPECT_NE(error_of({{"DDP_GROUP_OF_ONE", "1"}}).find("needs a launcher"),
            std::string::npos);
}

TEST(InitEnv, BadValuesNameTheVariable) {
  struct Case {
    const char* var;
    const char* value;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"WORLD_SIZE", "abc", "WORLD_SIZE='abc'"},
      {"WORLD_SIZE", "0", "WORLD_SIZE='0'"},
      {"WORLD_SIZE", "-2", "WORLD_SIZE='-2'"},
      {"RANK", "-1", "RANK='-1'"},
      {"RANK", "4", "RANK=4 is out of range"},
      {"RANK", "1.5", "RANK='1.5'"},
      {"LOCAL_RANK", "2", "LOCAL_RANK=2 is out of range"},
      {"LOCAL_RANK", "x", "LOCAL_RANK='x'"},
      {"LOCAL_WORLD_SIZE", "0", "LOCAL_WORLD_SIZE='0'"},
      {"MASTER_PORT", "70000", "MASTER_PORT='70000'"},
      {"MASTER_PORT", "http", "MASTER_PORT='http'"},
      {"MASTER_ADDR", "", "MASTER_ADDR is set but empty"},
  };
  for (const auto& c : cases) {
    auto vars = kTorchrun;
    vars[c.var] = c.value;
    const auto message = error_of(vars);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << c.var << "=" << c.value << " gave: '" << message << "'";
    EXPECT_EQ(message.rfind("ddp::init: ", 0), 0u) << message;
  }
}

TEST(InitEnv, MissingVariables) {
  auto vars = kTorchrun;
  vars.erase("WORLD_SIZE");
  EXPECT_NE(error_of(vars).find("WORLD_SIZE is not set"), std::string::npos);
  vars = kTorchrun;
  vars.erase("RANK");
  EXPECT_NE(error_of(vars).find("RANK is not set"), std::string::npos);
  vars = kTorchrun;
  vars.erase("MASTER_ADDR");
  EXPECT_NE(error_of(vars).find("MASTER_ADDR is not set"), std::string::npos);
  vars = kTorchrun;
  vars.erase("MASTER_PORT");
  EXPECT_NE(error_of(vars).find("MASTER_PORT is not set"), std::string::npos);
  // A world of one needs no master.
  EXPECT_EQ(read({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).world_size, 1);
}

TEST(InitEnv, Slurm) {
  std::map<std::string, std::string> vars = {
      {"SLURM_PROCID", "5"},
      {"SLURM_NTASKS", "8"},
      {"SLURM_LOCALID", "1"},
      {"SLURM_NTASKS_PER_NODE", "4"},
      {"SLURM_STEP_NODELIST", "gpu[07-08,11],login1"},
      {"SLURM_JOB_ID", "123456"}};
  auto c = read(vars);
  EXPECT_EQ(c.launcher, LauncherKind::kSlurm);
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world_size, 4);
  EXPECT_EQ(c.master_addr, "gpu07");
  EXPECT_EQ(c.master_port, 20000 + 123456 % 20000);
  vars["MASTER_ADDR"] = "head";
  vars["MASTER_PORT"] = "1234";
  c = read(vars);
  EXPECT_EQ(c.master_addr, "head");
  EXPECT_EQ(c.master_port, 1234);
  // Tasks per node in Slurm's compressed form.
  vars["SLURM_NTASKS_PER_NODE"] = "2(x4)";
  EXPECT_EQ(read(vars).local_world_size, 2);
  vars["SLURM_NTASKS"] = "eight";
  EXPECT_NE(error_of(vars).find("SLURM_NTASKS='eight'"), std::string::npos);
  // No node list and no MASTER_ADDR.
  std::map<std::string, std::string> bare = {
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "1"}};
  EXPECT_NE(error_of(bare).find("MASTER_ADDR is not set"), std::string::npos);
}

TEST(InitEnv, SlurmNodeCountAsLargeAsAnInt) {
  // Found by fuzz/runtime_environment.cpp: the tasks per node were computed
  // as (world + nodes - 1) / nodes in int, which overflowed.
  const std::map<std::string, std::string> vars = {
      {"SLURM_PROCID", "1"},
      {"SLURM_NTASKS", "2"},
      {"SLURM_NNODES", "2147483647"},
      {"MASTER_ADDR", "head"},
      {"MASTER_PORT", "1234"}};
  const auto c = read(vars);
  EXPECT_EQ(c.local_world_size, 1);
  EXPECT_EQ(c.local_rank, 0);
}

TEST(InitEnv, LocalRankArgumentOutOfRange) {
  // Found by fuzz/runtime_environment.cpp: --local_rank=2147483647 made the
  // local world size local_rank + 1 overflow.
  for (const auto& vars : {std::map<std::string, std::string>{},
                           std::map<std::string, std::string>{
                               {"RANK", "0"}, {"WORLD_SIZE", "1"}}}) {
    try {
      read(vars, 2147483647);
      ADD_FAILURE() << "no error for --local_rank=2147483647";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("--local_rank=2147483647 is out of "
                                           "range"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(read({}, 16777215).local_rank, 16777215);
}

TEST(InitEnv, SlurmHostList) {
  using ddp::detail::first_slurm_host;
  EXPECT_EQ(first_slurm_host("node1"), "node1");
  EXPECT_EQ(first_slurm_host("node1,node2"), "node1");
  EXPECT_EQ(first_slurm_host("node[3-5,9]"), "node3");
  EXPECT_EQ(first_slurm_host("rack[2,4]-gpu[01-04],x"), "rack2-gpu01");
  EXPECT_EQ(first_slurm_host("a[010-012].cluster"), "a010.cluster");
}

TEST(InitEnv, OpenMPI) {
  std::map<std::string, std::string> vars = {
      {"OMPI_COMM_WORLD_RANK", "1"},
      {"OMPI_COMM_WORLD_SIZE", "2"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  auto c = read(vars);
  EXPECT_EQ(c.launcher, LauncherKind::kOpenMPI);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.world_size, 2);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world_size, 2);
  // Every rank on one node: loopback and the default port.
  EXPECT_EQ(c.master_addr, "127.0.0.1");
  EXPECT_EQ(c.master_port, 29500);
  // Several nodes: MASTER_ADDR is required.
  vars["OMPI_COMM_WORLD_SIZE"] = "4";
  EXPECT_NE(error_of(vars).find("MASTER_ADDR is not set"), std::string::npos);
  vars["MASTER_ADDR"] = "n0";
  EXPECT_EQ(read(vars).master_addr, "n0");
  // torchrun's variables take precedence when both are present.
  vars["RANK"] = "0";
  vars["WORLD_SIZE"] = "1";
  EXPECT_EQ(read(vars).launcher, LauncherKind::kTorchrun);
}

std::vector<std::string> strip(std::vector<std::string> args,
                               std::optional<int>* value = nullptr) {
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  const auto found = ddp::detail::strip_local_rank(argc, argv.data());
  if (value != nullptr) {
    *value = found;
  }
  EXPECT_EQ(argv[static_cast<size_t>(argc)], nullptr);
  return std::vector<std::string>(argv.begin(), argv.begin() + argc);
}

TEST(InitArgs, LocalRankSpellingsAreRemoved) {
  using V = std::vector<std::string>;
  std::optional<int> value;
  EXPECT_EQ(strip({"prog", "--local_rank", "3", "x"}, &value),
            (V{"prog", "x"}));
  EXPECT_EQ(value, 3);
  EXPECT_EQ(strip({"prog", "a", "--local_rank=2"}, &value), (V{"prog", "a"}));
  EXPECT_EQ(value, 2);
  EXPECT_EQ(strip({"prog", "--local-rank", "1"}, &value), (V{"prog"}));
  EXPECT_EQ(value, 1);
  EXPECT_EQ(strip({"prog", "--local-rank=0", "--lr", "0.1"}, &value),
            (V{"prog", "--lr", "0.1"}));
  EXPECT_EQ(value, 0);
  EXPECT_EQ(strip({"prog", "--epochs", "3"}, &value),
            (V{"prog", "--epochs", "3"}));
  EXPECT_FALSE(value.has_value());
  // Look-alikes stay.
  EXPECT_EQ(strip({"prog", "--local_ranks", "--local_rank_x=1"}),
            (V{"prog", "--local_ranks", "--local_rank_x=1"}));
}

TEST(InitArgs, BadLocalRankValues) {
  EXPECT_THROW(strip({"prog", "--local_rank"}), std::runtime_error);
  EXPECT_THROW(strip({"prog", "--local_rank=abc"}), std::runtime_error);
  EXPECT_THROW(strip({"prog", "--local-rank", "-1"}), std::runtime_error);
  try {
    strip({"prog", "--local_rank=x"});
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--local_rank"), std::string::npos);
  }
}

} // namespace
