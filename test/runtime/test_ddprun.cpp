// The ddprun launcher: the environment it gives workers, failure handling,
// signal forwarding, output prefixes, a job of two ddprun "nodes" on
// loopback, usage errors, and quiet starts (no LibTorch lines unless
// DDP_DEBUG asks for them). Workers are the runtime's probe program
// (init_probe.cpp) or /bin/sh.

#include "libtorch_logging.h"
#include "multiprocess.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace {

using ddp_test::Command;

const std::vector<std::string> kLauncherVars = {"RANK",
                                                "WORLD_SIZE",
                                                "LOCAL_RANK",
                                                "LOCAL_WORLD_SIZE",
                                                "MASTER_ADDR",
                                                "MASTER_PORT",
                                                "OMP_NUM_THREADS",
                                                "DDP_TIMEOUT_SECONDS",
                                                "DDP_BACKEND",
                                                "TORCHELASTIC_USE_AGENT_STORE"};

Command ddprun(std::vector<std::string> args,
               std::vector<std::pair<std::string, std::string>> env = {}) {
  Command command;
  command.argv = {DDPRUN_PATH};
  command.argv.insert(command.argv.end(), args.begin(), args.end());
  for (const auto& var : kLauncherVars) {
    command.env.emplace_back(var, ddp_test::unset_value());
  }
  for (auto& kv : env) {
    command.env.push_back(kv);
  }
  return command;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

TEST(Ddprun, WorkersGetTorchrunEnvironment) {
  // Three nodes on loopback: node 1's workers get the torchrun variables;
  // MASTER_PORT is the rendezvous store's port, which node 0's ddprun chose
  // and handed out (--master-port is the ddpruns' own).
  const int master_port = ddp_test::free_port();
  std::vector<Command> nodes;
  for (int node = 0; node < 3; ++node) {
    nodes.push_back(ddprun(
        {"--nproc-per-node", "2", "--nnodes", "3", "--node-rank",
         std::to_string(node), "--master-addr", "127.0.0.1", "--master-port",
         std::to_string(master_port), "--", "/bin/sh", "-c",
         "echo \"env RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE "
         "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK "
         "GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE ROLE_RANK=$ROLE_RANK "
         "MASTER=$MASTER_ADDR:$MASTER_PORT OMP=$OMP_NUM_THREADS "
         "RESTARTS=$TORCHELASTIC_RESTART_COUNT "
         "RUN_ID_SET=${TORCHELASTIC_RUN_ID:+yes} "
         "ERROR_FILE=${TORCHELASTIC_ERROR_FILE}\""}));
  }
  const auto results = ddp_test::run_commands(nodes, 120);
  for (const auto& r : results) {
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status, 0) << r.output;
  }
  const auto& r = results[1];
  std::smatch store;
  ASSERT_TRUE(std::regex_search(r.output, store,
                                std::regex("MASTER=127\\.0\\.0\\.1:([0-9]+)")))
      << r.output;
  EXPECT_NE(std::stoi(store[1]), master_port) << r.output;
  for (int local = 0; local < 2; ++local) {
    const int rank = 2 + local;
    const std::string expected =
        "env RANK=" + std::to_string(rank) +
        " LOCAL_RANK=" + std::to_string(local) +
        " WORLD_SIZE=6 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 GROUP_WORLD_SIZE=3 "
        "ROLE_RANK=" +
        std::to_string(rank) + " MASTER=127.0.0.1:" + store[1].str() +
        " OMP=1 RESTARTS=0 RUN_ID_SET=yes ERROR_FILE=/tmp/ddprun-";
    EXPECT_TRUE(contains(r.output, expected)) << expected << "\n" << r.output;
    // Every node's workers got the same store.
    EXPECT_TRUE(
        contains(results[0].output, "MASTER=127.0.0.1:" + store[1].str()))
        << results[0].output;
  }
}

TEST(Ddprun, UnderscoreSpellingsAndExistingOmpThreads) {
  const auto r = ddp_test::run_command(
      ddprun({"--nproc_per_node=3", "--master_port=23457", "/bin/sh", "-c",
              "echo \"w=$WORLD_SIZE p=$MASTER_PORT a=$MASTER_ADDR "
              "omp=$OMP_NUM_THREADS\""},
             {{"OMP_NUM_THREADS", "4"}}));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count(r.output, "w=3 p=23457 a=127.0.0.1 omp=4"), 3) << r.output;
}

TEST(Ddprun, FreePortWhenNoneGiven) {
  const auto r = ddp_test::run_command(ddprun(
      {"--nproc-per-node", "2", "/bin/sh", "-c", "echo port=$MASTER_PORT"}));
  EXPECT_EQ(r.status, 0) << r.output;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(r.output, match, std::regex("port=([0-9]+)")))
      << r.output;
  const int port = std::stoi(match[1]);
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  // Both workers got the same one.
  EXPECT_EQ(count(r.output, "port=" + match[1].str()), 2) << r.output;
}

TEST(Ddprun, RunsAJobOfTheRuntime) {
  const auto r = ddp_test::run_command(
      ddprun({"--nproc-per-node", "3", DDP_INIT_PROBE_PATH, "sum"}), 180);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(
        contains(r.output, "rank=" + std::to_string(rank) +
                               " world=3 local_rank=" + std::to_string(rank) +
                               " local_world=3 distributed=1 "
                               "backend=gloo launcher=1"))
        << r.output;
    EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + " sum=6"))
        << r.output;
  }
}

TEST(Ddprun, LegacyLocalRankArgumentIsStripped) {
  const auto r = ddp_test::run_command(ddprun(
      {"--nproc-per-node", "1", DDP_INIT_PROBE_PATH, "--local_rank=0", "x"}));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "args=x argv_terminated=1")) << r.output;
}

TEST(Ddprun, TwoNodesOnLoopbackFormOneJob) {
  const std::string port = std::to_string(ddp_test::free_port());
  std::vector<Command> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(
        ddprun({"--nnodes", "2", "--node-rank", std::to_string(node),
                "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                "--master-port", port, "--tee", DDP_INIT_PROBE_PATH, "sum"},
               {{"DDP_TIMEOUT_SECONDS", "120"}}));
  }
  const auto results = ddp_test::run_commands(nodes, 240);
  for (int node = 0; node < 2; ++node) {
    const auto& r = results[static_cast<size_t>(node)];
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status, 0) << r.output;
    for (int local = 0; local < 2; ++local) {
      const int rank = node * 2 + local;
      const std::string prefix = "[rank" + std::to_string(rank) + "]: ";
      EXPECT_TRUE(contains(r.output,
                           prefix + "rank=" + std::to_string(rank) +
                               " world=4 local_rank=" + std::to_string(local) +
                               " local_world=2 distributed=1"))
          << r.output;
      // 1+2+3+4: all four ranks took part in one all-reduce.
      EXPECT_TRUE(contains(r.output,
                           prefix + "rank " + std::to_string(rank) + " sum=10"))
          << r.output;
    }
  }
}

TEST(Ddprun, FailedWorkerEndsTheOthersWithItsExitCode) {
  // Rank 1 exits 7 after a barrier; ranks 0 and 2 would sleep 10 minutes.
  const auto r = ddp_test::run_command(
      ddprun({"--nproc-per-node", "3", "--grace-period", "2",
              DDP_INIT_PROBE_PATH, "fail", "1", "7"}),
      120);
  ASSERT_FALSE(r.timed_out) << "the other workers were not ended: " << r.output;
  EXPECT_EQ(r.status, 7) << r.output;
  EXPECT_TRUE(contains(r.output, "worker rank 1")) << r.output;
  EXPECT_TRUE(contains(r.output, "exited with code 7")) << r.output;
}

TEST(Ddprun, WorkerFailingMidTrainingEndsTheJob) {
  // The others are inside all-reduces when rank 2 exits 3. Their timeout is
  // 10 minutes and the test gives up after 2: the job must end because the
  // peer is gone, not because a timeout expired.
  const auto r = ddp_test::run_command(
      ddprun({"--nproc-per-node", "3", DDP_INIT_PROBE_PATH, "fail-train", "2",
              "3"},
             {{"DDP_TIMEOUT_SECONDS", "600"}}),
      120);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status, 3) << r.output;
  // One line names the cause; the others' broken all-reduces are not it.
  EXPECT_EQ(count(r.output, "ddprun: job failed:"), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "ddprun: job failed: worker rank 2 on "))
      << r.output;
  EXPECT_TRUE(contains(r.output, "exited with code 3")) << r.output;
  EXPECT_FALSE(contains(r.output, "terminate called")) << r.output;
}

TEST(Ddprun, SyncCheckStopsAJobWhoseRanksDiverged) {
  // The bias changed on rank 2 after step 3; checked every 2 steps: step 4.
  const auto r =
      ddp_test::run_command(ddprun({"--nproc-per-node", "3",
                                    DDP_TRAIN_PROBE_PATH, "desync", "10", "3"},
                                   {{"DDP_CHECK_SYNC", "2"}}),
                            120);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_NE(r.status, 0) << r.output;
  // Every rank ends with one line naming the parameter and the step.
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(
        count(r.output, "ddp: rank " + std::to_string(rank) + " of 3 on "), 1)
        << r.output;
  }
  // Each rank's line and ddprun's verdict.
  EXPECT_EQ(count(r.output, "out of sync at step 4: 'bias' differs"), 4)
      << r.output;
  EXPECT_FALSE(contains(r.output, "step 5")) << r.output;
  EXPECT_EQ(count(r.output, "ddprun: job failed:"), 1) << r.output;
}

TEST(Ddprun, RankWhosePeerExitedEndsWithOneLineAndARecord) {
  // Without a launcher's help: rank 1 exits after the barrier, rank 0's
  // all-reduce breaks and nothing catches the error. Rank 0 ends with one
  // line and exit code 1 (not std::terminate's abort), and records the
  // failure as a consequence for the launcher.
  const std::string port = std::to_string(ddp_test::free_port());
  const std::string record = std::filesystem::temp_directory_path() /
                             ("ddprun_record_" + std::to_string(::getpid()));
  std::filesystem::remove(record);
  std::vector<Command> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    Command command;
    command.argv = {DDP_INIT_PROBE_PATH, "fail-train", "1", "3"};
    for (const auto& var : kLauncherVars) {
      command.env.emplace_back(var, ddp_test::unset_value());
    }
    command.env.insert(
        command.env.end(),
        {{"RANK", std::to_string(rank)},
         {"WORLD_SIZE", "2"},
         {"LOCAL_RANK", std::to_string(rank)},
         {"LOCAL_WORLD_SIZE", "2"},
         {"MASTER_ADDR", "127.0.0.1"},
         {"MASTER_PORT", port},
         {"DDP_TIMEOUT_SECONDS", "600"},
         {"TORCHELASTIC_ERROR_FILE", record + (rank == 0 ? "" : ".rank1")}});
    ranks.push_back(command);
  }
  const auto results = ddp_test::run_commands(ranks, 120);
  const auto& r = results[0];
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(results[1].status, 3) << results[1].output;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "ddp: rank 0 of 2 on ")) << r.output;
  EXPECT_TRUE(
      contains(r.output, " ends: ddp::all_reduce failed on rank 0 of 2"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "terminate called")) << r.output;
  std::ifstream in(record);
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(text, "{\"message\": {\"message\": \"ddp::all_reduce "
                             "failed on rank 0 of 2"))
      << text;
  EXPECT_TRUE(contains(text, "\"ddp_kind\": \"collective\"")) << text;
  std::filesystem::remove(record);
  std::filesystem::remove(record + ".rank1");
}

TEST(Ddprun, CauseWinsOverAnEarlierConsequence) {
  // Rank 0 reports a broken collective and exits first; rank 1, which
  // ignores the SIGTERM that follows, then fails by itself: rank 1 is the
  // root cause, and ddprun exits with its code.
  const auto r = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "--grace-period", "5", "/bin/sh", "-c",
              "if [ $RANK = 0 ]; then printf '%s' '{\"message\": {\"message\": "
              "\"all-reduce broke\", \"extraInfo\": {\"ddp_kind\": "
              "\"collective\"}}}' > \"$TORCHELASTIC_ERROR_FILE\"; exit 1; fi; "
              "trap '' TERM; sleep 0.5; exit 4"}),
      120);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status, 4) << r.output;
  EXPECT_EQ(count(r.output, "ddprun: job failed:"), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "ddprun: job failed: worker rank 1 on "))
      << r.output;
  EXPECT_TRUE(contains(r.output, "exited with code 4")) << r.output;
}

TEST(Ddprun, StoppedWorkerFailsTheJobAfterTheHeartbeatTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "/bin/sh", "-c",
              "if [ $RANK = 1 ]; then kill -STOP $$; fi; exec sleep 600"},
             {{"DDP_TIMEOUT_SECONDS", "6"}}),
      120);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "ddprun: job failed: worker rank 1 on "))
      << r.output;
  EXPECT_TRUE(
      contains(r.output, ") was stopped by SIGSTOP and not continued for 3 s"))
      << r.output;
  // Heartbeat timeout 3 s (half the collective timeout), then the grace
  // period of the others' SIGTERM.
  EXPECT_LT(took, 60) << r.output;
}

TEST(Ddprun, KilledWorkerGives128PlusSignal) {
  const auto r = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "/bin/sh", "-c",
              "if [ $RANK = 1 ]; then kill -KILL $$; fi; exec sleep 600"}),
      120);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status, 128 + SIGKILL) << r.output;
  EXPECT_TRUE(contains(r.output, "ddprun: job failed: worker rank 1 on "))
      << r.output;
  EXPECT_TRUE(contains(r.output, ") was killed by SIGKILL")) << r.output;
}

TEST(Ddprun, WorkerIgnoringSigtermIsKilledAfterTheGracePeriod) {
  const auto r = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "--grace-period", "1", "/bin/sh", "-c",
              "if [ $RANK = 1 ]; then exit 4; fi; trap '' TERM; "
              "while :; do sleep 1; done"}),
      120);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status, 4) << r.output;
}

TEST(Ddprun, RestartedJobSucceedsInItsSecondAttempt) {
  // Rank 1 exits 3 after step 2 of attempt 0; from attempt 1 on the job
  // trains to the end (a new DistributedDataParallel: a fresh store).
  const auto r = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "--max-restarts", "3", "--tee=2",
              DDP_TRAIN_PROBE_PATH, "fail-first", "1", "5", "2"}),
      180);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count(r.output, "ddprun: restarting the job"), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "ddprun: restarting the job (attempt 2 of "
                                 "4): worker rank 1 on "))
      << r.output;
  EXPECT_TRUE(contains(r.output, "exited with code 3\n")) << r.output;
  EXPECT_FALSE(contains(r.output, "ddprun: job failed")) << r.output;
  EXPECT_EQ(count(r.output, "failing in attempt"), 1) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string p = "[rank" + std::to_string(rank) + "]: ";
    // Each attempt's number, and the limit, reached every worker.
    EXPECT_EQ(count(r.output, p + "attempt 0 of max 3\n"), 1) << r.output;
    EXPECT_EQ(count(r.output, p + "attempt 1 of max 3\n"), 1) << r.output;
    // Only the second attempt trained to the end.
    EXPECT_EQ(count(r.output, p + "done\n"), 1) << r.output;
  }
  EXPECT_FALSE(contains(r.output, "attempt 2 of max")) << r.output;
}

TEST(Ddprun, JobThatAlwaysFailsExhaustsItsRestarts) {
  const auto r = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "--max-restarts", "2", "--tee=2",
              DDP_TRAIN_PROBE_PATH, "fail-first", "1000", "5", "1"}),
      180);
  ASSERT_FALSE(r.timed_out) << r.output;
  // The last attempt's status, and one line per restart.
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_EQ(count(r.output, "ddprun: restarting the job"), 2) << r.output;
  EXPECT_EQ(count(r.output, "ddprun: restarting the job (attempt 2 of 3): "
                            "worker rank 1 on "),
            1)
      << r.output;
  EXPECT_EQ(count(r.output, "ddprun: restarting the job (attempt 3 of 3): "
                            "worker rank 1 on "),
            1)
      << r.output;
  EXPECT_EQ(count(r.output, "ddprun: job failed: worker rank 1 on "), 1)
      << r.output;
  for (int attempt = 0; attempt < 3; ++attempt) {
    EXPECT_EQ(count(r.output, "[rank1]: failing in attempt " +
                                  std::to_string(attempt) + "\n"),
              1)
        << r.output;
  }
  EXPECT_FALSE(contains(r.output, "attempt 3 of max")) << r.output;
}

TEST(Ddprun, NoRestartWithMaxRestartsZero) {
  // Given or by default: the first failure ends the job, as without it.
  for (const bool given : {true, false}) {
    std::vector<std::string> args = {"--nproc-per-node", "2", "--tee=2"};
    if (given) {
      args.insert(args.end(), {"--max-restarts", "0"});
    }
    args.insert(args.end(),
                {DDP_TRAIN_PROBE_PATH, "fail-first", "1", "5", "2"});
    const auto r = ddp_test::run_command(ddprun(args), 180);
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status, 3) << r.output;
    EXPECT_FALSE(contains(r.output, "restarting")) << r.output;
    EXPECT_EQ(count(r.output, "ddprun: job failed: worker rank 1 on "), 1)
        << r.output;
    EXPECT_EQ(count(r.output, "attempt 0 of max 0\n"), 2) << r.output;
    EXPECT_FALSE(contains(r.output, "attempt 1")) << r.output;
  }
}

TEST(Ddprun, TwoNodesOnLoopbackRestartTogether) {
  // Rank 1 (node 1) fails in attempt 0: both nodes restart, say so, and the
  // second attempt succeeds on both.
  const std::string port = std::to_string(ddp_test::free_port());
  std::vector<Command> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(
        ddprun({"--nnodes", "2", "--node-rank", std::to_string(node),
                "--nproc-per-node", "1", "--master-addr", "127.0.0.1",
                "--master-port", port, "--max-restarts", "2", "--tee=2",
                DDP_TRAIN_PROBE_PATH, "fail-first", "1", "5", "2"},
               {{"DDP_TIMEOUT_SECONDS", "60"}}));
  }
  const auto results = ddp_test::run_commands(nodes, 240);
  for (int node = 0; node < 2; ++node) {
    const auto& r = results[static_cast<size_t>(node)];
    const std::string p = "[rank" + std::to_string(node) + "]: ";
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(count(r.output, "ddprun: restarting the job"), 1) << r.output;
    EXPECT_TRUE(contains(r.output, "ddprun: restarting the job (attempt 2 of "
                                   "3): worker rank 1 on "))
        << r.output;
    EXPECT_TRUE(contains(r.output, "exited with code 3\n")) << r.output;
    EXPECT_FALSE(contains(r.output, "job failed")) << r.output;
    EXPECT_EQ(count(r.output, p + "attempt 0 of max 2\n"), 1) << r.output;
    EXPECT_EQ(count(r.output, p + "attempt 1 of max 2\n"), 1) << r.output;
    EXPECT_EQ(count(r.output, p + "done\n"), 1) << r.output;
  }
}

TEST(Ddprun, NodesMustAgreeOnMaxRestarts) {
  const std::string port = std::to_string(ddp_test::free_port());
  std::vector<Command> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(ddprun({"--nnodes", "2", "--node-rank",
                            std::to_string(node), "--master-port", port,
                            "--max-restarts", node == 0 ? "1" : "0", "true"}));
  }
  const auto results = ddp_test::run_commands(nodes, 120);
  for (const auto& r : results) {
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_TRUE(contains(r.output, "was started with --max-restarts 0, node "
                                   "0 with 1"))
        << r.output;
  }
}

/// Starts ddprun with two sleeping workers, sends it `sig` once both are
/// up, and checks it ends with 128+sig and leaves no worker behind (with
/// `max_restarts`: not restarted).
void check_signal_forwarded(int sig, int max_restarts = 0) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ddprun_signal_" + std::to_string(::getpid()) + "_" +
                    std::to_string(sig));
  std::filesystem::create_directories(dir);
  const auto output_file = dir / "output";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string path = DDPRUN_PATH;
    const std::string probe = DDP_INIT_PROBE_PATH;
    const std::string d = dir.string();
    const std::string restarts = std::to_string(max_restarts);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    for (const char* var :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) {
      ::unsetenv(var);
    }
    const int out =
        ::open(output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execl(path.c_str(), path.c_str(), "--nproc-per-node", "2",
            "--max-restarts", restarts.c_str(), probe.c_str(), "ready-sleep",
            d.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  // Wait until both workers are in their sleep.
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::vector<pid_t> workers;
  while (workers.size() < 2 && std::chrono::steady_clock::now() < give_up) {
    workers.clear();
    for (int rank = 0; rank < 2; ++rank) {
      std::ifstream in(dir / ("ready" + std::to_string(rank)));
      pid_t worker = 0;
      if (in >> worker) {
        workers.push_back(worker);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(workers.size(), 2u) << "workers did not start";
  ::kill(pid, sig);
  int status = 0;
  pid_t done = 0;
  while (std::chrono::steady_clock::now() < give_up &&
         (done = ::waitpid(pid, &status, WNOHANG)) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done != pid) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "ddprun did not end after signal " << sig;
  }
  std::ifstream in(output_file);
  const std::string output((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << output;
  EXPECT_FALSE(contains(output, "restarting")) << output;
  // ddprun reaped its workers: they no longer exist.
  for (pid_t worker : workers) {
    EXPECT_EQ(::kill(worker, 0), -1) << "worker " << worker << " still runs";
  }
  std::filesystem::remove_all(dir);
}

TEST(Ddprun, SigtermIsForwardedToWorkers) { check_signal_forwarded(SIGTERM); }

TEST(Ddprun, SigintIsForwardedToWorkers) { check_signal_forwarded(SIGINT); }

TEST(Ddprun, SignalIsNotRestartedFrom) { check_signal_forwarded(SIGTERM, 3); }

TEST(Ddprun, PrefixedOutputPerRank) {
  const auto r = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "--tee", "/bin/sh", "-c",
              "echo out$RANK; echo err$RANK >&2; printf 'tail%s' $RANK"}));
  EXPECT_EQ(r.status, 0) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string p = "[rank" + std::to_string(rank) + "]: ";
    EXPECT_TRUE(contains(r.output, p + "out" + std::to_string(rank) + "\n"))
        << r.output;
    EXPECT_TRUE(contains(r.output, p + "err" + std::to_string(rank) + "\n"))
        << r.output;
    EXPECT_TRUE(contains(r.output, p + "tail" + std::to_string(rank) + "\n"))
        << r.output;
  }
  // Without --tee nothing is prefixed.
  const auto plain = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "/bin/sh", "-c", "echo out$RANK"}));
  EXPECT_EQ(plain.status, 0);
  EXPECT_FALSE(contains(plain.output, "[rank")) << plain.output;
  EXPECT_TRUE(contains(plain.output, "out1")) << plain.output;
}

TEST(Ddprun, UsageErrors) {
  struct Case {
    std::vector<std::string> args;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, 2, "no PROGRAM"},
      {{"--nproc-per-node", "0", "true"}, 2, "--nproc-per-node"},
      {{"--nproc-per-node", "x", "true"}, 2, "--nproc-per-node"},
      {{"--nnodes", "2", "--node-rank", "2", "true"}, 2, "--node-rank 2"},
      {{"--nnodes", "1:4", "true"}, 2, "elastic"},
      {{"--max-restarts", "x", "true"}, 2, "--max-restarts"},
      {{"--master-port", "70000", "true"}, 2, "--master-port"},
      {{"--bogus", "true"}, 2, "unknown option '--bogus'"},
      {{"--nproc-per-node"}, 2, "needs a value"},
      {{"/nonexistent/program"}, 127, "cannot run '/nonexistent/program'"},
  };
  for (const auto& c : cases) {
    const auto r = ddp_test::run_command(ddprun(c.args));
    EXPECT_EQ(r.status, c.status) << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.message << "\n" << r.output;
  }
  const auto help = ddp_test::run_command(ddprun({"--help"}));
  EXPECT_EQ(help.status, 0);
  EXPECT_TRUE(contains(help.output, "usage: ddprun")) << help.output;
  EXPECT_TRUE(contains(help.output, "--nproc-per-node")) << help.output;
}

// --- Job tokens and limits (issue 26, points 4 and 5) -----------------------

/// A connection to 127.0.0.1:port, retried for `seconds` until someone
/// listens (-1 if nobody did).
int connect_local(int port, int seconds = 60) {
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < give_up) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      return fd;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

/// The next line `fd` sends within `ms` ("" if none).
std::string read_line(int fd, int ms = 10000) {
  std::string line;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  char c = 0;
  while (std::chrono::steady_clock::now() < give_up) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) {
      continue;
    }
    if (::recv(fd, &c, 1, 0) != 1 || c == '\n') {
      return line;
    }
    line += c;
  }
  return line;
}

/// Seconds until the other side closes `fd`, or -1 if it did not within
/// `limit`.
double seconds_until_closed(int fd, double limit) {
  const auto start = std::chrono::steady_clock::now();
  char buffer[256];
  for (;;) {
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (waited > limit) {
      return -1;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0 && ::recv(fd, buffer, sizeof(buffer), 0) <= 0) {
      return waited;
    }
  }
}

/// The addresses that sockets listening on `port` are bound to, from
/// /proc/net/tcp and /proc/net/tcp6 ("0.0.0.0", "::", "127.0.0.1", ...).
std::set<std::string> listen_addresses(int port) {
  std::set<std::string> found;
  for (const bool v6 : {false, true}) {
    std::ifstream in(v6 ? "/proc/net/tcp6" : "/proc/net/tcp");
    std::string line;
    std::getline(in, line); // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const auto colon = local.find(':');
      if (state != "0A" || colon == std::string::npos ||
          std::stoi(local.substr(colon + 1), nullptr, 16) != port) {
        continue;
      }
      // 32-bit words in host (little-endian) order.
      unsigned char bytes[16] = {};
      const size_t size = v6 ? 16 : 4;
      for (size_t i = 0; i < size; ++i) {
        const size_t word = i / 4, in_word = 3 - i % 4;
        bytes[i] = static_cast<unsigned char>(
            std::stoi(local.substr(word * 8 + in_word * 2, 2), nullptr, 16));
      }
      char text[INET6_ADDRSTRLEN] = "";
      ::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes, text, sizeof(text));
      found.insert(text);
    }
  }
  return found;
}

std::string write_token_file(const std::filesystem::path& path,
                             const std::string& token, mode_t mode = 0600) {
  std::ofstream(path) << token << "\n";
  ::chmod(path.c_str(), mode);
  return path.string();
}

std::filesystem::path test_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ddprun_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

/// Lines of `output` that ddprun printed.
int ddprun_lines(const std::string& output) {
  return count("\n" + output, "\nddprun: ");
}

const char* const kToken = "job-token-for-the-tests-0123456789";

TEST(Ddprun, JobTokenAdmitsOnlyTheJobsNodes) {
  // Node 0 has the token; a ddprun without one and one with another token
  // are refused (one line on each side) while node 0 waits on; a node with
  // the token (from DDP_JOB_TOKEN) joins and the job runs. No output holds
  // the token, and no worker gets it.
  const auto dir = test_dir("token");
  const std::string good = write_token_file(dir / "good", kToken);
  const std::string other =
      write_token_file(dir / "other", "another-token-0123456789");
  const std::string port = std::to_string(ddp_test::free_port());
  const std::string workers = "echo worker$RANK token=${DDP_JOB_TOKEN:-none}";
  Command node0 = ddprun({"--nnodes", "2", "--node-rank", "0", "--master-port",
                          port, "--job-token-file", good, "--join-timeout",
                          "60", "/bin/sh", "-c", workers});
  const std::string node1 = std::string(DDPRUN_PATH) +
                            " --nnodes 2 --node-rank 1 --master-port " + port;
  Command others = ddprun({});
  others.argv = {"/bin/sh", "-c",
                 node1 + " true; echo no-token rc=$?; " + node1 +
                     " --job-token-file " + other +
                     " true; echo other-token rc=$?; DDP_JOB_TOKEN=" + kToken +
                     " " + node1 + " /bin/sh -c '" + workers +
                     "'; echo right-token rc=$?"};
  const auto results = ddp_test::run_commands({node0, others}, 120);
  const auto& zero = results[0];
  const auto& one = results[1];
  ASSERT_FALSE(zero.timed_out) << zero.output;
  ASSERT_FALSE(one.timed_out) << one.output;
  EXPECT_EQ(zero.status, 0) << zero.output;
  EXPECT_EQ(count(zero.output, "ddprun: refused a ddprun from 127.0.0.1 "
                               "(node 1 on "),
            2)
      << zero.output;
  EXPECT_TRUE(contains(zero.output, "): it has no job token\n")) << zero.output;
  EXPECT_TRUE(contains(zero.output, "): it holds another job token\n"))
      << zero.output;
  EXPECT_EQ(ddprun_lines(zero.output), 2) << zero.output;
  EXPECT_TRUE(contains(zero.output, "worker0 token=none")) << zero.output;
  EXPECT_TRUE(contains(one.output, "no-token rc=2")) << one.output;
  EXPECT_TRUE(contains(one.output, "other-token rc=2")) << one.output;
  EXPECT_TRUE(contains(one.output, "right-token rc=0")) << one.output;
  EXPECT_TRUE(contains(one.output, "refused this node: node 0's ddprun on "))
      << one.output;
  EXPECT_TRUE(contains(one.output, "needs the job's token")) << one.output;
  EXPECT_TRUE(contains(one.output, "this node holds another token"))
      << one.output;
  EXPECT_TRUE(contains(one.output, "worker1 token=none")) << one.output;
  EXPECT_EQ(ddprun_lines(one.output), 2) << one.output;
  EXPECT_FALSE(contains(zero.output + one.output, kToken));
  std::filesystem::remove_all(dir);
}

TEST(Ddprun, NodeWithATokenRefusesNodeZeroWithout) {
  const auto dir = test_dir("token_alone");
  const std::string token = write_token_file(dir / "token", kToken);
  const std::string port = std::to_string(ddp_test::free_port());
  const auto results = ddp_test::run_commands(
      {ddprun({"--nnodes", "2", "--node-rank", "0", "--master-port", port,
               "--join-timeout", "8", "true"}),
       ddprun({"--nnodes", "2", "--node-rank", "1", "--master-port", port,
               "--job-token-file", token, "true"})},
      120);
  ASSERT_FALSE(results[0].timed_out);
  ASSERT_FALSE(results[1].timed_out);
  EXPECT_EQ(results[1].status, 2) << results[1].output;
  EXPECT_TRUE(contains(results[1].output,
                       "has no job token, this node has one: refused"))
      << results[1].output;
  EXPECT_TRUE(
      contains(results[0].output, "it has a job token, node 0 has none"))
      << results[0].output;
  // Node 0 waited on for its real node 1.
  EXPECT_EQ(results[0].status, 1) << results[0].output;
  EXPECT_TRUE(contains(results[0].output, "node(s) 1 of 2 never joined"))
      << results[0].output;
  std::filesystem::remove_all(dir);
}

TEST(Ddprun, NodeRefusesACoordinatorThatCannotProveTheToken) {
  // The test plays node 0 without the token: node 1 sends its proof (not
  // the token), finds the answer wrong, and believes no `start`.
  const int port = ddp_test::free_port();
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int yes = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
            0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ddp_test::CommandResult result;
  std::thread node([&] {
    result = ddp_test::run_command(
        ddprun({"--nnodes", "2", "--node-rank", "1", "--master-port",
                std::to_string(port), "/bin/sh", "-c", "echo worker-started"},
               {{"DDP_JOB_TOKEN", kToken}}),
        60);
  });
  const int fd = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  const std::string challenge(64, 'a');
  const std::string hello = "hello " + challenge + "\n";
  ASSERT_EQ(::send(fd, hello.data(), hello.size(), 0),
            static_cast<ssize_t>(hello.size()));
  const std::string join = read_line(fd);
  EXPECT_TRUE(std::regex_match(
      join, std::regex("join 1 2 1 \\S+ 0 [0-9a-f]{64} [0-9a-f]{64}")))
      << join;
  EXPECT_FALSE(contains(join, kToken)) << join;
  const std::string answer = "welcome " + std::string(64, 'b') + "\nstart " +
                             std::to_string(port) + "\n";
  ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
  node.join();
  ::close(fd);
  ::close(listener);
  ASSERT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.status, 2) << result.output;
  EXPECT_TRUE(contains(result.output,
                       "did not prove it holds the job token (another job's, "
                       "or not a ddprun): refused it"))
      << result.output;
  EXPECT_FALSE(contains(result.output, "worker-started")) << result.output;
  EXPECT_EQ(ddprun_lines(result.output), 1) << result.output;
}

TEST(Ddprun, JobTokenErrors) {
  const auto dir = test_dir("token_errors");
  struct Case {
    std::vector<std::string> args;
    std::vector<std::pair<std::string, std::string>> env;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--job-token-file", write_token_file(dir / "open", kToken, 0644)},
       {},
       "has mode 0644: others than its owner may read or change it"},
      {{"--job-token-file", write_token_file(dir / "empty", "")},
       {},
       "is empty"},
      {{"--job-token-file", (dir / "missing").string()},
       {},
       "cannot read --job-token-file"},
      {{}, {{"DDP_JOB_TOKEN", "short"}}, "DDP_JOB_TOKEN is shorter than 16"},
      {{}, {{"DDP_JOB_TOKEN", ""}}, "DDP_JOB_TOKEN is empty"},
  };
  for (const auto& c : cases) {
    auto args = c.args;
    args.push_back("true");
    const auto r = ddp_test::run_command(ddprun(args, c.env));
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.message << "\n" << r.output;
  }
  std::filesystem::remove_all(dir);
}

TEST(Ddprun, OversizeLineAndSilentConnectionAreClosedWithOneLineEach) {
  const int port = ddp_test::free_port();
  const std::string p = std::to_string(port);
  auto node = [&](int rank) {
    return ddprun({"--nnodes", "2", "--node-rank", std::to_string(rank),
                   "--master-port", p, "--join-timeout", "60", "/bin/sh", "-c",
                   "echo worker$RANK"});
  };
  Command late = node(1);
  late.argv.insert(late.argv.begin(),
                   {"/bin/sh", "-c", "sleep 13; exec \"$@\"", "sh"});
  std::vector<ddp_test::CommandResult> results;
  std::thread job(
      [&] { results = ddp_test::run_commands({node(0), late}, 120); });
  const int oversize = connect_local(port);
  const int silent = connect_local(port);
  ASSERT_GE(oversize, 0);
  ASSERT_GE(silent, 0);
  EXPECT_EQ(read_line(oversize).substr(0, 6), "hello ");
  EXPECT_EQ(read_line(silent).substr(0, 6), "hello ");
  const std::string big(5000, 'x');
  ::send(oversize, big.data(), big.size(), MSG_NOSIGNAL);
  const double oversize_closed = seconds_until_closed(oversize, 5);
  const double silent_closed = seconds_until_closed(silent, 14);
  job.join();
  ::close(oversize);
  ::close(silent);
  EXPECT_GE(oversize_closed, 0) << "the oversize line's connection stayed";
  EXPECT_GE(silent_closed, 7) << "closed before the handshake timeout";
  EXPECT_LT(silent_closed, 0 + 14) << "the silent connection stayed";
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status, 0) << r.output;
  }
  const std::string& zero = results[0].output;
  EXPECT_EQ(count(zero, "ddprun: closed the connection from 127.0.0.1: it "
                        "sent a line over 4096 bytes\n"),
            1)
      << zero;
  EXPECT_EQ(count(zero, "ddprun: closed the connection from 127.0.0.1: it "
                        "did not join within 10 s\n"),
            1)
      << zero;
  EXPECT_EQ(ddprun_lines(zero), 2) << zero;
  EXPECT_TRUE(contains(results[1].output, "worker1")) << results[1].output;
}

TEST(Ddprun, AThousandConnectionsAtOnceLeaveTheJobAlone) {
  // While two nodes join and run an all-reduce, 1000 connections open at
  // once at node 0's port: half send a line that is no `join` at once, all
  // close after 4 s. Node 0 keeps its file descriptors (ulimit -n is often
  // 1024), the job succeeds, and node 0 prints a few lines, not a thousand.
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < 1100 && limit.rlim_max >= 1100) {
    limit.rlim_cur = 1100;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  ASSERT_GE(limit.rlim_cur, 1100u) << "the test needs 1100 descriptors";
  const int port = ddp_test::free_port();
  const std::string p = std::to_string(port);
  auto node = [&](int rank) {
    auto command = ddprun({"--nnodes", "2", "--node-rank", std::to_string(rank),
                           "--nproc-per-node", "2", "--master-port", p, "--tee",
                           DDP_INIT_PROBE_PATH, "sum"},
                          {{"DDP_TIMEOUT_SECONDS", "120"}});
    return command;
  };
  Command late = node(1);
  late.argv.insert(late.argv.begin(),
                   {"/bin/sh", "-c", "sleep 2; exec \"$@\"", "sh"});
  // Node 0's own descriptor limit stays the usual one.
  Command zero = node(0);
  zero.argv.insert(zero.argv.begin(),
                   {"/bin/sh", "-c", "ulimit -n 1024; exec \"$@\"", "sh"});
  std::vector<ddp_test::CommandResult> results;
  std::thread job([&] { results = ddp_test::run_commands({zero, late}, 240); });
  const int first = connect_local(port);
  ASSERT_GE(first, 0);
  std::vector<int> flood{first};
  for (int i = 1; i < 1000; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    flood.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (size_t i = 0; i < flood.size(); i += 2) {
    ::send(flood[i], "GET / HTTP/1.0\n", 15, MSG_NOSIGNAL);
  }
  std::this_thread::sleep_for(std::chrono::seconds(4));
  for (int fd : flood) {
    ::close(fd);
  }
  job.join();
  ASSERT_EQ(results.size(), 2u);
  for (int n = 0; n < 2; ++n) {
    const auto& r = results[static_cast<size_t>(n)];
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status, 0) << r.output;
    for (int local = 0; local < 2; ++local) {
      const int rank = n * 2 + local;
      EXPECT_TRUE(contains(r.output, "[rank" + std::to_string(rank) +
                                         "]: rank " + std::to_string(rank) +
                                         " sum=10"))
          << r.output;
    }
  }
  const std::string& out = results[0].output;
  // Five lines per 10 s and one that counts the rest, a window or two.
  EXPECT_LE(ddprun_lines(out), 12) << out;
  EXPECT_TRUE(contains(out, "connections are joining already")) << out;
  EXPECT_TRUE(contains(out, "more connection(s) that were not the job's "
                            "nodes were closed"))
      << out;
}

TEST(Ddprun, StoreAndCoordinatorListenOnTheMasterAddressOnly) {
  // Two nodes on loopback: node 0's ddprun (--master-port) and rank 0's
  // rendezvous store (the workers' MASTER_PORT) listen on 127.0.0.1, not
  // on every interface (0.0.0.0 or ::), with this build's LibTorch.
  const auto dir = test_dir("listen");
  const int port = ddp_test::free_port();
  std::vector<Command> nodes;
  for (int n = 0; n < 2; ++n) {
    nodes.push_back(ddprun({"--nnodes", "2", "--node-rank", std::to_string(n),
                            "--master-addr", "127.0.0.1", "--master-port",
                            std::to_string(port), DDP_INIT_PROBE_PATH,
                            "ready-sleep", dir.string()},
                           {{"DDP_TIMEOUT_SECONDS", "60"}}));
  }
  std::vector<ddp_test::CommandResult> results;
  std::thread job([&] { results = ddp_test::run_commands(nodes, 180); });
  std::vector<pid_t> workers;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (workers.size() < 2 && std::chrono::steady_clock::now() < give_up) {
    workers.clear();
    for (int rank = 0; rank < 2; ++rank) {
      std::ifstream in(dir / ("ready" + std::to_string(rank)));
      pid_t pid = 0;
      if (in >> pid) {
        workers.push_back(pid);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int store_port = 0;
  if (!workers.empty()) {
    std::ifstream in("/proc/" + std::to_string(workers[0]) + "/environ");
    std::string var;
    while (std::getline(in, var, '\0')) {
      if (var.rfind("MASTER_PORT=", 0) == 0) {
        store_port = std::stoi(var.substr(12));
      }
    }
  }
  const auto coordinator = listen_addresses(port);
  const auto store = listen_addresses(store_port);
  for (pid_t pid : workers) {
    ::kill(pid, SIGKILL);
  }
  job.join();
  ASSERT_EQ(workers.size(), 2u) << "workers did not start";
  ASSERT_GT(store_port, 0);
  EXPECT_NE(store_port, port);
  EXPECT_EQ(coordinator, std::set<std::string>{"127.0.0.1"});
  EXPECT_EQ(store, std::set<std::string>{"127.0.0.1"});
  for (const auto& r : results) {
    EXPECT_FALSE(r.timed_out) << r.output;
  }
  std::filesystem::remove_all(dir);
}

TEST(Ddprun, HostNameOnLoopbackListensOnEveryInterfaceWithOneLine) {
  // Debian's /etc/hosts maps the host name to 127.0.1.1: listening there
  // would leave other hosts out, so node 0's ddprun and rank 0's store
  // listen on every interface and say so, once each.
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  const std::string host = name;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (host.empty() ||
      ::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) {
    GTEST_SKIP() << "the host name does not resolve";
  }
  const bool loopback =
      (ntohl(reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr.s_addr) >>
       24) == 127;
  ::freeaddrinfo(found);
  if (!loopback) {
    GTEST_SKIP() << host << " is not a loopback address here";
  }
  const std::string port = std::to_string(ddp_test::free_port());
  std::vector<Command> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(ddprun({"--nnodes", "2", "--node-rank",
                            std::to_string(node), "--master-addr", host,
                            "--master-port", port, DDP_INIT_PROBE_PATH, "sum"},
                           {{"DDP_TIMEOUT_SECONDS", "120"}}));
  }
  const auto results = ddp_test::run_commands(nodes, 240);
  for (const auto& r : results) {
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status, 0) << r.output;
  }
  const std::string& zero = results[0].output;
  EXPECT_EQ(count(zero, "ddprun: --master-addr " + host +
                            " is a loopback address on "),
            1)
      << zero;
  EXPECT_EQ(count(zero, "ddp: MASTER_ADDR=" + host +
                            " is a loopback address on this host"),
            1)
      << zero;
  EXPECT_TRUE(contains(zero, "rank 0 sum=3")) << zero;
}

/// The prefix `ddprun --tee` gives each line of a rank.
const std::string kRank = "\\[rank[01]\\]: ";

/// The lines of `output` that no pattern matches.
std::vector<std::string> foreign_lines(const std::string& output,
                                       const std::vector<std::regex>& own) {
  std::vector<std::string> foreign;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    const bool known = std::any_of(own.begin(), own.end(), [&](const auto& re) {
      return std::regex_match(line, re);
    });
    if (!known) {
      foreign.push_back(line);
    }
  }
  return foreign;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) {
    text += line + "\n";
  }
  return text;
}

TEST(QuietStart, TwoRanksPrintOnlyWhatTheProgramPrints) {
  // A healthy start on Gloo over loopback: the store, the group, the
  // wrapper's groups and a training loop. Every line, stdout and stderr,
  // is the program's own (ddprun says nothing with OMP_NUM_THREADS set;
  // --tee keeps the ranks' lines whole and says whose they are):
  // no glog preamble, no c10d warning, no Gloo connection line.
  const std::vector<std::pair<std::string, std::string>> env = {
      {"OMP_NUM_THREADS", "1"},
      {"DDP_DEBUG", ddp_test::unset_value()},
      {"TORCH_CPP_LOG_LEVEL", ddp_test::unset_value()}};
  const auto sum = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "--tee", DDP_INIT_PROBE_PATH, "sum"},
             env),
      180);
  ASSERT_FALSE(sum.timed_out) << sum.output;
  EXPECT_EQ(sum.status, 0) << sum.output;
  EXPECT_EQ(count(sum.output, " sum=3\n"), 2) << sum.output;
  EXPECT_EQ(joined(foreign_lines(sum.output,
                                 {std::regex(kRank + "rank=[01] world=2 .*"),
                                  std::regex(kRank + "rank [01] sum=3")})),
            "")
      << sum.output;

  const auto train = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "--tee", DDP_TRAIN_PROBE_PATH, "wrap"},
             env),
      180);
  ASSERT_FALSE(train.timed_out) << train.output;
  EXPECT_EQ(train.status, 0) << train.output;
  EXPECT_EQ(count(train.output, "done\n"), 2) << train.output;
  EXPECT_EQ(
      joined(foreign_lines(train.output, {std::regex(kRank + "step [0-9]+"),
                                          std::regex(kRank + "done")})),
      "")
      << train.output;
}

TEST(Profile, EachRankSaysWhereItsTimeWent) {
  // DDP_PROFILE=1: at exit every rank prints one line of its phases, and
  // counts every synchronised backward pass of the probe's training loop
  // (one per "step N" line it wrote).
  const auto run = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "--tee", DDP_TRAIN_PROBE_PATH, "wrap"},
             {{"OMP_NUM_THREADS", "1"}, {"DDP_PROFILE", "1"}}),
      180);
  ASSERT_FALSE(run.timed_out) << run.output;
  EXPECT_EQ(run.status, 0) << run.output;
  const std::regex line(
      "\\[rank([01])\\]: ddp: profile rank ([01]) of 2: start-up [0-9.]+ s, "
      "init [0-9.]+ s, before the first backward [0-9.]+ s, training "
      "[0-9.]+ s \\(([0-9]+) backward passes; waiting for gradients [0-9.]+ "
      "s, sync checks [0-9.]+ s\\), after the last backward [0-9.]+ s; the "
      "program's collectives [0-9.]+ s \\([0-9]+\\)");
  std::istringstream lines(run.output);
  std::string text;
  std::set<std::string> ranks;
  while (std::getline(lines, text)) {
    std::smatch m;
    if (!std::regex_match(text, m, line)) {
      continue;
    }
    EXPECT_EQ(m[1].str(), m[2].str()) << text;
    ranks.insert(m[2].str());
    const std::string prefix = "[rank" + m[2].str() + "]: step ";
    EXPECT_EQ(std::stoi(m[3].str()), count(run.output, prefix)) << run.output;
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"})) << run.output;

  // Off by default: no such line.
  const auto quiet = ddp_test::run_command(
      ddprun(
          {"--nproc-per-node", "2", DDP_TRAIN_PROBE_PATH, "wrap"},
          {{"OMP_NUM_THREADS", "1"}, {"DDP_PROFILE", ddp_test::unset_value()}}),
      180);
  EXPECT_EQ(quiet.status, 0) << quiet.output;
  EXPECT_FALSE(contains(quiet.output, "ddp: profile")) << quiet.output;
}

TEST(QuietStart, DebugSwitchBringsLibTorchsLoggingBack) {
  // DDP_DEBUG=1: c10d's own lines (INFO: the store listening, each client
  // connecting) come back on stderr; TORCH_CPP_LOG_LEVEL is honoured as
  // PyTorch honours it.
  const auto debug = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "--tee", DDP_INIT_PROBE_PATH, "sum"},
             {{"OMP_NUM_THREADS", "1"},
              {"DDP_DEBUG", "1"},
              {"TORCH_CPP_LOG_LEVEL", ddp_test::unset_value()}}),
      180);
  ASSERT_FALSE(debug.timed_out) << debug.output;
  EXPECT_EQ(debug.status, 0) << debug.output;
  const auto foreign =
      foreign_lines(debug.output, {std::regex(kRank + "rank=[01] world=2 .*"),
                                   std::regex(kRank + "rank [01] sum=3")});
  EXPECT_TRUE(std::any_of(foreign.begin(), foreign.end(), [](const auto& l) {
    return contains(l, "[c10d]");
  })) << debug.output;

  const auto level = ddp_test::run_command(
      ddprun({"--nproc-per-node", "2", "--tee", DDP_INIT_PROBE_PATH, "sum"},
             {{"OMP_NUM_THREADS", "1"},
              {"DDP_DEBUG", ddp_test::unset_value()},
              {"TORCH_CPP_LOG_LEVEL", "INFO"}}),
      180);
  EXPECT_EQ(level.status, 0) << level.output;
  EXPECT_TRUE(contains(level.output, "[c10d]")) << level.output;
}

TEST(QuietStart, ARealC10dErrorStillReachesTheUser) {
  // Only the start-up noise is gone, not c10d's levels: a rank that cannot
  // reach its store still gets c10d's own error line before the runtime's.
  Command command;
  command.argv = {DDP_INIT_PROBE_PATH, "sum"};
  command.env = {{"RANK", "1"},
                 {"WORLD_SIZE", "2"},
                 {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", std::to_string(ddp_test::free_port())},
                 {"DDP_TIMEOUT_SECONDS", "2"},
                 {"DDP_DEBUG", ddp_test::unset_value()},
                 {"TORCH_CPP_LOG_LEVEL", ddp_test::unset_value()},
                 {"TORCHELASTIC_USE_AGENT_STORE", ddp_test::unset_value()}};
  const auto r = ddp_test::run_command(command, 60);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\[c10d\\] .*timed out")))
      << r.output;
  EXPECT_TRUE(contains(r.output, "could not reach the master")) << r.output;
}

TEST(QuietStart, GlooConnectionLineIsHeldBackOnlyWhenEveryPeerIsConnected) {
  // The line the Gloo of LibTorch 2.x writes to std::cout at each group.
  std::ostringstream out;
  {
    ddp::detail::GlooBannerFilter filter(out.rdbuf());
    std::ostream through(&filter);
    through << "epoch 1\n"
            << "[Gloo] Rank " << 1 << " is connected to " << 3
            << " peer ranks. Expected number of connected peer ranks is : " << 3
            << std::endl
            << "[Gloo] Rank 2 is connected to 2 peer ranks. Expected number "
               "of connected peer ranks is : 3\n"
            << "[Gloo] Rank 2 is NOT connected to: [3]\n"
            << "[Gloo] Rank 0 is connected to 1 peer ranks. Expected number "
               "of connected peer ranks is : 1 and more\n"
            << "[Glo";
    through.flush();
    // A line not yet ended may still be Gloo's: held until it ends or the
    // filter goes.
    EXPECT_EQ(out.str().find("[Glo\n"), std::string::npos);
    through << "b] x\n"
            << "loss 0.5";
  }
  EXPECT_EQ(out.str(),
            "epoch 1\n"
            "[Gloo] Rank 2 is connected to 2 peer ranks. Expected number of "
            "connected peer ranks is : 3\n"
            "[Gloo] Rank 2 is NOT connected to: [3]\n"
            "[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of "
            "connected peer ranks is : 1 and more\n"
            "[Glob] x\n"
            "loss 0.5");
  EXPECT_TRUE(ddp::detail::is_healthy_gloo_banner(
      "[Gloo] Rank 0 is connected to 0 peer ranks. Expected number of "
      "connected peer ranks is : 0"));
  EXPECT_FALSE(ddp::detail::is_healthy_gloo_banner(
      "[Gloo] Rank 0 is connected to 0 peer ranks. Expected number of "
      "connected peer ranks is : 1"));
}

} // namespace
