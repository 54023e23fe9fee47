#pragma once

// Multi-process test harness: a test body runs in N ranks on Gloo over
// loopback, each rank a process with the launcher environment set (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free
// MASTER_PORT). Where the test process has one thread and no process group,
// it forks the ranks (LibTorch is loaded and initialized already: about
// 0.9 s of CPU a rank); else, or with DDP_TEST_SPAWN=exec, the test binary
// re-executes itself once per rank, filtered to the calling test.
// In the workers, ddp::init() runs before the body; gtest assertions that fail
// there make the worker exit non-zero, which fails the test in the parent.

#include "test_paths.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ddp_test {

struct RankOptions {
  /// Extra environment for the workers (applied after the launcher's).
  std::vector<std::pair<std::string, std::string>> env;
  /// The parent kills every worker and fails the test after this long. The
  /// workers get DDP_TIMEOUT_SECONDS = 5/6 of it (unless `env` sets it), so
  /// a rank left alone by a crashed peer fails with a message first.
  int timeout_seconds = 180;
  /// Whether the workers call ddp::init() before the body.
  bool init = true;
};

/// In the parent: spawns `world_size` workers running this same test and
/// expects each to exit 0. In a worker: runs `body` (after ddp::init()).
void run_ranks(int world_size, const std::function<void()>& body,
               const RankOptions& options = {});

/// Same, but returns the workers' exit statuses (in rank order) instead of
/// expecting zero; for tests of failures. -signal for a killed worker.
std::vector<int> run_ranks_status(int world_size,
                                  const std::function<void()>& body,
                                  const RankOptions& options = {});

/// True inside a worker process.
bool is_worker();

/// A directory shared by the parent and all workers of the current (in the
/// parent: the last) run_ranks call, removed when the test binary exits:
/// where workers leave results for the parent to compare.
std::string shared_dir();

/// A free TCP port on 127.0.0.1.
int free_port();

/// A command for run_commands: argv[0] is looked up in PATH. `env` is
/// applied over this process's environment; a value of "\x01unset" removes
/// the variable.
struct Command {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
};

struct CommandResult {
  /// Exit code, or 128 + signal as a shell reports it; -1 if never started.
  int status = -1;
  /// stdout and stderr, interleaved.
  std::string output;
  /// Killed (SIGKILL) after timeout_seconds.
  bool timed_out = false;
};

/// Runs the commands concurrently and waits for all of them; a command still
/// running after timeout_seconds is killed and marked timed_out.
std::vector<CommandResult> run_commands(const std::vector<Command>& commands,
                                        int timeout_seconds = 120);
CommandResult run_command(const Command& command, int timeout_seconds = 120);

/// The value that removes a variable in Command::env.
inline const char* unset_value() { return "\x01unset"; }

} // namespace ddp_test
