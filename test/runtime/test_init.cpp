// ddp::init in real processes: a program using the runtime (init_probe.cpp)
// run without a launcher, with bad environments, against an unreachable
// master, under torchrun's agent store; and what a rank sees when its peer
// dies or stops answering.

#include "host_address.h"
#include "multiprocess.h"

#include <ddp/distributed.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace {

using ddp_test::Command;
using ddp_test::CommandResult;

const std::vector<std::string> kLauncherVars = {"RANK",
                                                "WORLD_SIZE",
                                                "LOCAL_RANK",
                                                "LOCAL_WORLD_SIZE",
                                                "MASTER_ADDR",
                                                "MASTER_PORT",
                                                "SLURM_PROCID",
                                                "SLURM_NTASKS",
                                                "OMPI_COMM_WORLD_RANK",
                                                "OMPI_COMM_WORLD_SIZE",
                                                "TORCHELASTIC_USE_AGENT_STORE",
                                                "DDP_BACKEND",
                                                "DDP_TIMEOUT_SECONDS"};

/// The probe with exactly `env` as its launcher environment.
Command probe(std::vector<std::string> args,
              std::vector<std::pair<std::string, std::string>> env = {}) {
  Command command;
  command.argv = {DDP_INIT_PROBE_PATH};
  command.argv.insert(command.argv.end(), args.begin(), args.end());
  for (const auto& var : kLauncherVars) {
    command.env.emplace_back(var, ddp_test::unset_value());
  }
  command.env.emplace_back("OMP_NUM_THREADS", "1");
  for (auto& kv : env) {
    command.env.push_back(kv);
  }
  return command;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Init, NoLauncherRunsAsBefore) {
  const auto r = ddp_test::run_command(
      probe({"a", "--local_rank", "3", "b", "--local-rank=2", "c"}));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "rank=0 world=1 local_rank=2 local_world=3 "
                                 "distributed=0 backend=none launcher=0 "
                                 "main=1 args=a,b,c argv_terminated=1"))
      << r.output;
}

TEST(Init, LocalRankArgumentUnderALauncher) {
  // torch.distributed.launch's legacy form: no LOCAL_RANK in the environment.
  auto r = ddp_test::run_command(
      probe({"--local_rank=3", "x"}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "rank=0 world=1 local_rank=3 ")) << r.output;
  EXPECT_TRUE(contains(r.output, "launcher=1 main=1 args=x ")) << r.output;
  // The environment's LOCAL_RANK wins over the argument.
  r = ddp_test::run_command(
      probe({"--local-rank", "3"},
            {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}}));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "local_rank=0 ")) << r.output;
}

struct BadEnv {
  std::vector<std::pair<std::string, std::string>> env;
  std::string message;
};

class InitBadEnvironment : public ::testing::TestWithParam<BadEnv> {};

TEST_P(InitBadEnvironment, ExitsNonZeroNamingTheVariable) {
  const auto r = ddp_test::run_command(probe({}, GetParam().env), 60);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, GetParam().message)) << r.output;
  EXPECT_FALSE(contains(r.output, "rank=")) << "init() returned: " << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Values, InitBadEnvironment,
    ::testing::Values(
        BadEnv{{{"RANK", "0"}, {"WORLD_SIZE", "abc"}}, "WORLD_SIZE='abc'"},
        BadEnv{{{"RANK", "2"}, {"WORLD_SIZE", "2"}},
               "RANK=2 is out of range: it must be smaller than WORLD_SIZE=2"},
        BadEnv{{{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK='-1'"},
        BadEnv{{{"RANK", "1"}}, "WORLD_SIZE is not set"},
        BadEnv{{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1234"}},
               "MASTER_ADDR is not set"},
        BadEnv{{{"RANK", "0"},
                {"WORLD_SIZE", "2"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", "99999"}},
               "MASTER_PORT='99999'"},
        BadEnv{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "x"}},
               "SLURM_NTASKS='x'"},
        BadEnv{{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
               "OMPI_COMM_WORLD_RANK=3 is out of range"},
        BadEnv{{{"RANK", "0"},
                {"WORLD_SIZE", "2"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", "29999"},
                {"DDP_TIMEOUT_SECONDS", "soon"}},
               "DDP_TIMEOUT_SECONDS='soon'"},
        BadEnv{{{"RANK", "0"},
                {"WORLD_SIZE", "2"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", "29999"},
                {"DDP_BACKEND", "nccl"}},
               "backend nccl requested"},
        BadEnv{{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"DDP_BACKEND", "tcp"}},
               "DDP_BACKEND='tcp'"}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

TEST(Init, UnreachableMasterFailsWithinTheTimeout) {
  // Rank 1 of 2; nobody listens on the port.
  const int port = ddp_test::free_port();
  const auto r =
      ddp_test::run_command(probe({}, {{"RANK", "1"},
                                       {"WORLD_SIZE", "2"},
                                       {"MASTER_ADDR", "127.0.0.1"},
                                       {"MASTER_PORT", std::to_string(port)},
                                       {"DDP_TIMEOUT_SECONDS", "3"}}),
                            120);
  ASSERT_FALSE(r.timed_out) << "init() hung: " << r.output;
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "could not reach the master at "
                                 "MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                                     std::to_string(port) +
                                     " within the timeout of 3 s"))
      << r.output;
}

TEST(Init, MissingPeerFailsRankZeroWithinTheTimeout) {
  // Rank 0 of 2 waits for a rank 1 that never comes.
  const auto r = ddp_test::run_command(
      probe({}, {{"RANK", "0"},
                 {"WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", std::to_string(ddp_test::free_port())},
                 {"DDP_TIMEOUT_SECONDS", "3"}}),
      120);
  ASSERT_FALSE(r.timed_out) << "init() hung: " << r.output;
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "ddp::init: rank 0")) << r.output;
  EXPECT_TRUE(contains(r.output, "within the timeout of 3 s")) << r.output;
}

TEST(Init, StoreClientWaitsUntilRankZeroListens) {
  // c10d's TCPStore client sleeps a second after a refused connect; the
  // runtime probes first (every few ms) and returns once rank 0's store
  // listens: here a listener that appears after a while, and the probe
  // returns only once it is there.
  const int port = ddp_test::free_port();
  std::atomic<bool> listening{false};
  int fd = -1;
  std::thread rank_zero([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    fd = ddp::detail::listen_on("127.0.0.1", port, 4).fd;
    listening = true;
  });
  ddp::detail::wait_until_listening("127.0.0.1", port, 60000);
  EXPECT_TRUE(listening.load());
  rank_zero.join();
  ASSERT_GE(fd, 0);
  ::close(fd);

  // Nothing listens and no time is left: it returns (TCPStore then says why).
  ddp::detail::wait_until_listening("127.0.0.1", ddp_test::free_port(), 0);
}

TEST(Init, TwiceIsANoOp) {
  ddp_test::run_ranks(2, [] {
    auto group = ddp::process_group();
    ASSERT_TRUE(group);
    ddp::init();
    EXPECT_EQ(ddp::process_group().get(), group.get());
    EXPECT_EQ(ddp::all_reduce(int64_t(1)), 2);
  });
}

TEST(Init, ShutdownThenCollectivesThrow) {
  ddp_test::run_ranks(2, [] {
    ddp::barrier();
    ddp::shutdown();
    EXPECT_FALSE(ddp::process_group());
    EXPECT_FALSE(ddp::is_distributed());
    auto t = torch::ones({1});
    EXPECT_THROW(ddp::all_reduce(t), std::runtime_error);
    EXPECT_THROW(ddp::barrier(), std::runtime_error);
  });
}

TEST(Init, ExplicitGlooBackend) {
  ddp_test::RankOptions options;
  options.env = {{"DDP_BACKEND", "gloo"}};
  ddp_test::run_ranks(
      2, [] { EXPECT_EQ(ddp::backend_name(), "gloo"); }, options);
}

// A peer that exits: the collective of the survivor throws a clear error
// (instead of hanging); the survivor catches it and reports to the parent.
TEST(InitFailure, DeadPeerMakesCollectivesThrow) {
  ddp_test::RankOptions options;
  options.env = {{"DDP_TIMEOUT_SECONDS", "30"}};
  const auto statuses = ddp_test::run_ranks_status(
      2,
      [] {
        ddp::barrier();
        if (ddp::rank() == 1) {
          std::_Exit(5);
        }
        std::string message;
        try {
          auto t = torch::ones({1 << 12});
          for (int i = 0; i < 100000; ++i) {
            ddp::all_reduce(t);
          }
        } catch (const std::runtime_error& e) {
          message = e.what();
        }
        std::ofstream(ddp_test::shared_dir() + "/error") << message;
      },
      options);
  if (ddp_test::is_worker()) {
    return;
  }
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[1], 5);
  EXPECT_EQ(statuses[0], 0);
  std::ifstream in(ddp_test::shared_dir() + "/error");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(contains(text.str(), "ddp::all_reduce failed on rank 0 of 2"))
      << text.str();
}

// A write to a dead peer's connection fails instead of ending the rank by
// SIGPIPE (whose default kills it with no word): init ignores the signal
// where the program left the default, and keeps a handler of its own.
TEST(InitFailure, IgnoresSigpipeLeftAtItsDefault) {
  ddp_test::RankOptions options;
  options.init = false;
  ddp_test::run_ranks(
      2,
      [] {
        struct sigaction action{};
        action.sa_handler = SIG_DFL;
        ::sigemptyset(&action.sa_mask);
        ASSERT_EQ(::sigaction(SIGPIPE, &action, nullptr), 0);
        ddp::init();
        struct sigaction now{};
        ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &now), 0);
        EXPECT_EQ(now.sa_handler, SIG_IGN);
      },
      options);
}

// A peer that is alive but never joins the collective: the timeout ends it.
TEST(InitFailure, SilentPeerTimesOut) {
  ddp_test::RankOptions options;
  options.env = {{"DDP_TIMEOUT_SECONDS", "2"}};
  const auto statuses = ddp_test::run_ranks_status(
      2,
      [] {
        const std::string done = ddp_test::shared_dir() + "/done";
        ddp::barrier();
        if (ddp::rank() == 1) {
          // Stays away from collectives until rank 0 has given up.
          while (!std::ifstream(done)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
          return;
        }
        std::string message;
        try {
          auto t = torch::ones({4});
          ddp::all_reduce(t);
        } catch (const std::runtime_error& e) {
          message = e.what();
        }
        std::ofstream(ddp_test::shared_dir() + "/error") << message;
        std::ofstream(done) << "1";
      },
      options);
  if (ddp_test::is_worker()) {
    return;
  }
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0], 0);
  EXPECT_EQ(statuses[1], 0);
  std::ifstream in(ddp_test::shared_dir() + "/error");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(contains(text.str(), "ddp::all_reduce failed on rank 0 of 2"))
      << text.str();
  EXPECT_TRUE(contains(text.str(), "timeout of 2 s")) << text.str();
}

// Under torchrun with TORCHELASTIC_USE_AGENT_STORE the agent runs the store:
// every rank is a client (none may start a server on that port) and keys
// live under /worker/attempt_<restart count>.
TEST(Init, AgentStoreOfTorchrun) {
  auto body = [] {
    EXPECT_TRUE(ddp::is_distributed());
    EXPECT_EQ(ddp::all_reduce(int64_t(ddp::rank() + 1)), 3);
  };
  const int port = ddp_test::free_port();
  c10::intrusive_ptr<c10d::TCPStore> agent;
  if (!ddp_test::is_worker()) {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(port);
    store_options.isServer = true;
    store_options.waitWorkers = false;
    store_options.timeout = std::chrono::seconds(60);
    agent = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
  }
  ddp_test::RankOptions options;
  options.env = {{"MASTER_PORT", std::to_string(port)},
                 {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                 {"TORCHELASTIC_RESTART_COUNT", "1"}};
  ddp_test::run_ranks(2, body, options);
  if (!ddp_test::is_worker()) {
    // The process group's rendezvous keys are under torchrun's prefix.
    EXPECT_TRUE(agent->check({"/worker/attempt_1/ddp_default_pg/0/0"}));
    EXPECT_TRUE(agent->check({"/worker/attempt_1/ddp_default_pg/0/1"}));
  }
}

// srun's and mpirun's variables, set by hand for two processes on this host.
TEST(Init, SlurmJobOfTwo) {
  const std::string port = std::to_string(ddp_test::free_port());
  std::vector<Command> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(probe({"sum"}, {{"SLURM_PROCID", std::to_string(rank)},
                                    {"SLURM_NTASKS", "2"},
                                    {"SLURM_LOCALID", std::to_string(rank)},
                                    {"SLURM_NTASKS_PER_NODE", "2"},
                                    {"SLURM_STEP_NODELIST", "127.0.0.1"},
                                    {"SLURM_JOB_ID", "77"},
                                    {"MASTER_PORT", port}}));
  }
  const auto results = ddp_test::run_commands(ranks, 120);
  for (int rank = 0; rank < 2; ++rank) {
    const auto& r = results[static_cast<size_t>(rank)];
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(
        contains(r.output, "rank=" + std::to_string(rank) +
                               " world=2 local_rank=" + std::to_string(rank) +
                               " local_world=2 distributed=1 "
                               "backend=gloo launcher=2"))
        << r.output;
    EXPECT_TRUE(contains(r.output, "sum=3")) << r.output;
  }
}

TEST(Init, OpenMpiJobOfTwo) {
  const std::string port = std::to_string(ddp_test::free_port());
  std::vector<Command> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    // No MASTER_ADDR: every rank is on this node, so loopback.
    ranks.push_back(
        probe({"sum"}, {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
                        {"OMPI_COMM_WORLD_SIZE", "2"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)},
                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                        {"MASTER_PORT", port}}));
  }
  const auto results = ddp_test::run_commands(ranks, 120);
  for (int rank = 0; rank < 2; ++rank) {
    const auto& r = results[static_cast<size_t>(rank)];
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(
        contains(r.output, "rank=" + std::to_string(rank) +
                               " world=2 local_rank=" + std::to_string(rank) +
                               " local_world=2 distributed=1 "
                               "backend=gloo launcher=3"))
        << r.output;
    EXPECT_TRUE(contains(r.output, "sum=3")) << r.output;
  }
}

/// The words of a command line without quoting (the test's own paths).
std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    out.push_back(word);
  }
  return out;
}

// DDP_DEVICE overrides ddp::device(); a device this machine lacks is an
// error (ranks sharing one GPU over Gloo set DDP_DEVICE=cuda:0).
TEST(Init, DdpDeviceOverridesTheDevice) {
  struct Restore {
    ~Restore() { ::unsetenv("DDP_DEVICE"); }
  } restore;
  ::setenv("DDP_DEVICE", "cpu", 1);
  EXPECT_EQ(ddp::device(), torch::Device(torch::kCPU));
  ::setenv("DDP_DEVICE", "gpu0", 1);
  EXPECT_THROW(ddp::device(), std::runtime_error);
  ::setenv("DDP_DEVICE", "cuda:0", 1);
  if (torch::cuda::is_available()) {
    EXPECT_EQ(ddp::device(), torch::Device(torch::kCUDA, 0));
  } else {
    EXPECT_THROW(ddp::device(), std::runtime_error);
  }
  ::setenv("DDP_DEVICE", "cuda:99", 1);
  EXPECT_THROW(ddp::device(), std::runtime_error);
  ::unsetenv("DDP_DEVICE");
  EXPECT_EQ(ddp::device().is_cuda(), torch::cuda::is_available());
}

// ddp::device(type): the program's choice of kind, on this process's device
// of that kind: CUDA at the local rank (or DDP_DEVICE), the CPU as it is.
TEST(Init, DeviceOfTheKindTheProgramChose) {
  struct Restore {
    ~Restore() { ::unsetenv("DDP_DEVICE"); }
  } restore;
  EXPECT_EQ(ddp::device(torch::kCPU), torch::Device(torch::kCPU));
  EXPECT_EQ(ddp::device(torch::kCUDA),
            torch::Device(torch::kCUDA, ddp::local_rank()));
  const auto chosen = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  EXPECT_EQ(ddp::device(chosen).type(), chosen);
  ::setenv("DDP_DEVICE", "cpu", 1);
  EXPECT_EQ(ddp::device(torch::kCUDA), torch::Device(torch::kCPU));
  EXPECT_EQ(ddp::device(torch::kCPU), torch::Device(torch::kCPU));
}

// The real torchrun of this LibTorch's PyTorch (test/runtime/CMakeLists.txt:
// the wheel's own, unpatched; Debian's python3-torch through
// torchrun_compat.py): its agent runs the store and sets
// TORCHELASTIC_USE_AGENT_STORE=True; the runtime joins as a client.
TEST(Init, UnderRealTorchrun) {
  auto python = words(DDP_TEST_PYTHON);
  auto check_argv = python;
  check_argv.insert(check_argv.end(), {"-c", "import torch.distributed.run"});
  const auto check = ddp_test::run_command({check_argv, {}}, 60);
  if (check.status != 0) {
    GTEST_SKIP() << "no torchrun here (" << DDP_TEST_PYTHON
                 << " with torch): " << check.output;
  }
  Command command = probe({}, {});
  command.argv = python;
  for (const auto& word : words(DDP_TEST_TORCHRUN)) {
    command.argv.push_back(word);
  }
  command.argv.insert(command.argv.end(),
                      {"--no_python", "--nproc_per_node", "2", "--master_port",
                       std::to_string(ddp_test::free_port()),
                       DDP_INIT_PROBE_PATH, "sum", "--local_rank=1"});
  const auto r = ddp_test::run_command(command, 180);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status, 0) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(
        contains(r.output, "rank=" + std::to_string(rank) +
                               " world=2 local_rank=" + std::to_string(rank) +
                               " local_world=2 distributed=1 "
                               "backend=gloo launcher=1"))
        << r.output;
    EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + " sum=3"))
        << r.output;
  }
}

TEST(Init, UnderRealTorchrunWorkersPrintOnlyWhatTheProgramPrints) {
  // A quiet start under torchrun too: with --tee every line of a worker
  // carries its prefix, and each is the program's own (torchrun's own lines,
  // unprefixed, are the launcher's).
  auto python = words(DDP_TEST_PYTHON);
  auto check_argv = python;
  check_argv.insert(check_argv.end(), {"-c", "import torch.distributed.run"});
  const auto check = ddp_test::run_command({check_argv, {}}, 60);
  if (check.status != 0) {
    GTEST_SKIP() << "no torchrun here (" << DDP_TEST_PYTHON
                 << " with torch): " << check.output;
  }
  Command command =
      probe({}, {{"DDP_DEBUG", ddp_test::unset_value()},
                 {"TORCH_CPP_LOG_LEVEL", ddp_test::unset_value()}});
  command.argv = python;
  for (const auto& word : words(DDP_TEST_TORCHRUN)) {
    command.argv.push_back(word);
  }
  command.argv.insert(command.argv.end(),
                      {"--no_python", "--nproc_per_node", "2", "--master_port",
                       std::to_string(ddp_test::free_port()), "--tee", "3",
                       DDP_INIT_PROBE_PATH, "sum"});
  const auto r = ddp_test::run_command(command, 180);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status, 0) << r.output;
  const std::regex worker("\\[[a-z]+[01]\\]:(.*)");
  const std::regex own("rank=[01] world=2 .*|rank [01] sum=3");
  std::istringstream lines(r.output);
  std::string line;
  int program_lines = 0;
  while (std::getline(lines, line)) {
    std::smatch match;
    if (!std::regex_match(line, match, worker)) {
      continue;
    }
    const std::string text = match[1];
    EXPECT_TRUE(std::regex_match(text, own))
        << "not the program's: " << line << "\n"
        << r.output;
    ++program_lines;
  }
  EXPECT_EQ(program_lines, 4) << r.output;
}

} // namespace
