#pragma once

// Internal: reading the launcher's environment and the legacy --local_rank
// argument. Free of LibTorch so it compiles fast and is unit-testable with a
// fake environment (test/runtime/test_init_env.cpp).

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace ddp {
namespace detail {

enum class LauncherKind { kNone, kTorchrun, kSlurm, kOpenMPI };

/// What the environment says about this process and its job.
struct EnvConfig {
  LauncherKind launcher = LauncherKind::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  /// Empty (and port 0) when world_size == 1 and none was given.
  std::string master_addr;
  int master_port = 0;
  /// torchrun's TORCHELASTIC_USE_AGENT_STORE: the store already runs in the
  /// agent; every rank is a client, keys live under store_prefix.
  bool use_agent_store = false;
  std::string store_prefix;
  /// "gloo", "nccl" or "" (automatic).
  std::string backend;
  std::chrono::milliseconds timeout{0};
  /// DDP_GROUP_OF_ONE=1: a process group (and so hooks, buckets and
  /// collectives) even in a world of one process, for checks of the
  /// distributed path on one device (scripts/gpu-check.sh).
  bool group_of_one = false;
};

/// Returns the value of an environment variable, or nullptr.
using Getenv = std::function<const char*(const char*)>;

/// Reads the environment. `local_rank_arg` is the value of a --local_rank
/// argument, used when the environment has no local rank. `backend` and
/// `timeout` are the program's defaults (InitOptions), overridden by
/// DDP_BACKEND and DDP_TIMEOUT_SECONDS. Throws std::runtime_error naming the
/// variable on bad values.
EnvConfig read_environment(const Getenv& getenv_fn,
                           std::optional<int> local_rank_arg,
                           const std::string& backend,
                           std::chrono::milliseconds timeout);

/// The process's environment (::getenv).
Getenv process_environment();

/// The timeout of the process group ddp::init made (distributed.cpp).
std::chrono::milliseconds collective_timeout();

/// Removes --local_rank N, --local_rank=N, --local-rank N, --local-rank=N
/// from argv (argc adjusted, argv[argc] == nullptr) and returns the last
/// value found. Throws std::runtime_error on a missing or bad value.
std::optional<int> strip_local_rank(int& argc, char** argv);

/// First host name of a Slurm host list ("node[03-05,9],gpu1" -> "node03").
std::string first_slurm_host(const std::string& nodelist);

/// Parses a whole non-negative decimal integer; nullopt on anything else.
std::optional<long long> parse_integer(const std::string& text);

} // namespace detail
} // namespace ddp
