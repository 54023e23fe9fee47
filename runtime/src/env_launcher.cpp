#include "env_launcher.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace ddp {
namespace detail {
namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error("ddp::init: " + message);
}

std::optional<std::string> get(const Getenv& env, const char* name) {
  const char* value = env(name);
  if (value == nullptr) {
    return std::nullopt;
  }
  return std::string(value);
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return "";
  }
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

/// An integer variable in [min, max]; nullopt when unset.
std::optional<int> int_var(const Getenv& env, const char* name, long long min,
                           long long max, const char* what) {
  const auto text = get(env, name);
  if (!text) {
    return std::nullopt;
  }
  const auto value = parse_integer(trim(*text));
  if (!value || *value < min || *value > max) {
    fail(std::string(name) + "='" + *text + "' is not " + what);
  }
  return static_cast<int>(*value);
}

/// Leading integer of a Slurm tasks-per-node value like "2(x3),1".
std::optional<int> leading_int(const std::optional<std::string>& text) {
  if (!text || text->empty() || !std::isdigit((unsigned char)(*text)[0])) {
    return std::nullopt;
  }
  size_t end = 0;
  while (end < text->size() && std::isdigit((unsigned char)(*text)[end])) {
    ++end;
  }
  const auto value = parse_integer(text->substr(0, end));
  if (!value || *value <= 0 || *value > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return static_cast<int>(*value);
}

bool truthy(const std::optional<std::string>& text) {
  if (!text) {
    return false;
  }
  const auto value = lower(trim(*text));
  return value == "1" || value == "true" || value == "yes" || value == "on";
}

constexpr long long kMaxWorld = 1 << 24;

} // namespace

std::optional<long long> parse_integer(const std::string& text) {
  if (text.empty() || text.size() > 18) {
    return std::nullopt;
  }
  long long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    value = value * 10 + (c - '0');
  }
  return value;
}

Getenv process_environment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

std::optional<int> strip_local_rank(int& argc, char** argv) {
  if (argv == nullptr || argc <= 0) {
    return std::nullopt;
  }
  std::optional<int> found;
  auto parse = [](const std::string& flag, const std::string& text) {
    const auto value = parse_integer(text);
    if (!value || *value > std::numeric_limits<int>::max()) {
      fail("argument " + flag + " needs a non-negative integer, got '" + text +
           "'");
    }
    return static_cast<int>(*value);
  };
  int out = 1;
  for (int in = 1; in < argc; ++in) {
    const std::string arg = argv[in] ? argv[in] : "";
    bool matched = false;
    for (const char* flag : {"--local_rank", "--local-rank"}) {
      const std::string f = flag;
      if (arg == f) {
        if (in + 1 >= argc || argv[in + 1] == nullptr) {
          fail("argument " + f + " needs a value");
        }
        found = parse(f, argv[in + 1]);
        ++in;
        matched = true;
      } else if (arg.compare(0, f.size() + 1, f + "=") == 0) {
        found = parse(f, arg.substr(f.size() + 1));
        matched = true;
      }
      if (matched) {
        break;
      }
    }
    if (!matched) {
      argv[out++] = argv[in];
    }
  }
  argc = out;
  argv[argc] = nullptr;
  return found;
}

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  std::string entry;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') {
      ++depth;
    } else if (c == ']') {
      --depth;
    } else if (c == ',' && depth == 0) {
      break;
    }
    entry += c;
  }
  // Expand each bracket group to its first value.
  std::string host;
  size_t i = 0;
  while (i < entry.size()) {
    if (entry[i] != '[') {
      host += entry[i++];
      continue;
    }
    const auto close = entry.find(']', i);
    if (close == std::string::npos) {
      return "";
    }
    const std::string inside = entry.substr(i + 1, close - i - 1);
    host += inside.substr(0, inside.find_first_of(",-"));
    i = close + 1;
  }
  return trim(host);
}

EnvConfig read_environment(const Getenv& env, std::optional<int> local_rank_arg,
                           const std::string& backend,
                           std::chrono::milliseconds timeout) {
  EnvConfig config;

  // Options of the runtime itself.
  config.backend = lower(trim(backend));
  if (const auto value = get(env, "DDP_BACKEND")) {
    config.backend = lower(trim(*value));
    if (config.backend == "auto") {
      config.backend.clear();
    }
  }
  if (!config.backend.empty() && config.backend != "gloo" &&
      config.backend != "nccl") {
    fail("DDP_BACKEND='" + config.backend +
         "' is not a backend: use gloo, nccl or auto");
  }
  if (const auto value = get(env, "DDP_GROUP_OF_ONE")) {
    const auto text = trim(*value);
    if (text != "0" && text != "1" && !text.empty()) {
      fail("DDP_GROUP_OF_ONE='" + text + "' is not 0 or 1");
    }
    config.group_of_one = text == "1";
  }
  config.timeout = timeout;
  if (const auto text = get(env, "DDP_TIMEOUT_SECONDS")) {
    char* end = nullptr;
    errno = 0;
    const std::string trimmed = trim(*text);
    const double seconds = std::strtod(trimmed.c_str(), &end);
    if (trimmed.empty() || end == nullptr || *end != '\0' || errno != 0 ||
        !std::isfinite(seconds) || seconds <= 0 || seconds > 1e8) {
      fail("DDP_TIMEOUT_SECONDS='" + *text +
           "' is not a positive number of seconds");
    }
    config.timeout = std::chrono::milliseconds(
        std::max<long long>(1, std::llround(seconds * 1000.0)));
  }
  if (config.timeout.count() <= 0) {
    fail("the timeout must be positive (InitOptions.timeout)");
  }

  // A rank on this node, as LOCAL_RANK is: local_rank + 1 must not overflow.
  if (local_rank_arg && (*local_rank_arg < 0 || *local_rank_arg >= kMaxWorld)) {
    fail("--local_rank=" + std::to_string(*local_rank_arg) +
         " is out of range: a rank on this node is below " +
         std::to_string(kMaxWorld));
  }

  const char* rank_var = nullptr;
  const char* world_var = nullptr;
  const char* local_rank_var = nullptr;
  const char* local_world_var = nullptr;

  const bool torchrun = get(env, "RANK") || get(env, "WORLD_SIZE");
  const bool openmpi =
      get(env, "OMPI_COMM_WORLD_RANK") || get(env, "OMPI_COMM_WORLD_SIZE");
  const bool slurm = get(env, "SLURM_PROCID").has_value();
  if (torchrun) {
    config.launcher = LauncherKind::kTorchrun;
    rank_var = "RANK";
    world_var = "WORLD_SIZE";
    local_rank_var = "LOCAL_RANK";
    local_world_var = "LOCAL_WORLD_SIZE";
  } else if (openmpi) {
    config.launcher = LauncherKind::kOpenMPI;
    rank_var = "OMPI_COMM_WORLD_RANK";
    world_var = "OMPI_COMM_WORLD_SIZE";
    local_rank_var = "OMPI_COMM_WORLD_LOCAL_RANK";
    local_world_var = "OMPI_COMM_WORLD_LOCAL_SIZE";
  } else if (slurm) {
    config.launcher = LauncherKind::kSlurm;
    rank_var = "SLURM_PROCID";
    world_var =
        get(env, "SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_STEP_NUM_TASKS";
    local_rank_var = "SLURM_LOCALID";
    local_world_var = nullptr; // parsed below
  } else {
    // No launcher: one process, the program runs as before.
    if (config.group_of_one) {
      fail("DDP_GROUP_OF_ONE=1 needs a launcher's environment (ddprun "
           "--nproc-per-node 1, torchrun)");
    }
    config.local_rank = local_rank_arg.value_or(0);
    config.local_world_size = config.local_rank + 1;
    return config;
  }

  const auto world = int_var(env, world_var, 1, kMaxWorld,
                             "a positive integer (the number of processes)");
  if (!world) {
    fail(std::string(world_var) + " is not set but " + rank_var +
         " is: the launcher environment is incomplete");
  }
  config.world_size = *world;
  const auto rank = int_var(env, rank_var, 0, kMaxWorld,
                            "a non-negative integer (this process's rank)");
  if (!rank) {
    fail(std::string(rank_var) + " is not set but " + world_var +
         " is: the launcher environment is incomplete");
  }
  if (*rank >= config.world_size) {
    fail(std::string(rank_var) + "=" + std::to_string(*rank) +
         " is out of range: it must be smaller than " + world_var + "=" +
         std::to_string(config.world_size));
  }
  config.rank = *rank;

  // Local world size.
  std::optional<int> local_world;
  if (local_world_var != nullptr) {
    local_world = int_var(env, local_world_var, 1, kMaxWorld,
                          "a positive integer (processes on this node)");
  } else {
    for (const char* name :
         {"SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE",
          "SLURM_TASKS_PER_NODE"}) {
      if ((local_world = leading_int(get(env, name)))) {
        break;
      }
    }
    if (!local_world) {
      for (const char* name : {"SLURM_STEP_NUM_NODES", "SLURM_NNODES"}) {
        if (const auto nodes = leading_int(get(env, name))) {
          // In 64 bits: the node count may be as large as an int.
          local_world = static_cast<int>(
              (static_cast<long long>(config.world_size) + *nodes - 1) /
              *nodes);
          break;
        }
      }
    }
  }
  config.local_world_size =
      std::min(local_world.value_or(config.world_size), config.world_size);

  // Local rank: the environment, else --local_rank, else derived.
  auto local_rank = int_var(env, local_rank_var, 0, kMaxWorld,
                            "a non-negative integer (rank on this node)");
  if (!local_rank) {
    local_rank = local_rank_arg;
  }
  if (!local_rank) {
    local_rank = config.rank % config.local_world_size;
  }
  if (local_world && *local_rank >= *local_world) {
    fail(std::string(local_rank_var ? local_rank_var : "--local_rank") + "=" +
         std::to_string(*local_rank) +
         " is out of range: it must be smaller than the number of processes "
         "on this node (" +
         (local_world_var ? local_world_var : "SLURM_NTASKS_PER_NODE") + "=" +
         std::to_string(*local_world) + ")");
  }
  config.local_rank = *local_rank;
  if (config.local_world_size <= config.local_rank) {
    config.local_world_size = config.local_rank + 1;
  }

  // Where rank 0's store listens.
  const auto addr = get(env, "MASTER_ADDR");
  if (addr) {
    config.master_addr = trim(*addr);
    if (config.master_addr.empty()) {
      fail("MASTER_ADDR is set but empty");
    }
  }
  const auto port =
      int_var(env, "MASTER_PORT", 1, 65535, "a TCP port number (1-65535)");
  if (port) {
    config.master_port = *port;
  }
  if (config.world_size > 1 || config.group_of_one) {
    if (config.master_addr.empty()) {
      if (config.launcher == LauncherKind::kSlurm) {
        for (const char* name :
             {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
          if (const auto list = get(env, name)) {
            config.master_addr = first_slurm_host(*list);
            if (!config.master_addr.empty()) {
              break;
            }
          }
        }
      } else if (config.launcher == LauncherKind::kOpenMPI &&
                 config.local_world_size == config.world_size) {
        config.master_addr = "127.0.0.1"; // every rank on this node
      }
    }
    if (config.master_addr.empty()) {
      fail(std::string("MASTER_ADDR is not set: ") + world_var + "=" +
           std::to_string(config.world_size) +
           " needs the address of rank 0's host (set MASTER_ADDR and "
           "MASTER_PORT, or launch with ddprun/torchrun)");
    }
    if (config.master_port == 0) {
      if (config.launcher == LauncherKind::kSlurm) {
        const auto job = get(env, "SLURM_JOB_ID") ? get(env, "SLURM_JOB_ID")
                                                  : get(env, "SLURM_JOBID");
        const auto id = job ? parse_integer(trim(*job)) : std::nullopt;
        if (id) {
          // A port per job, so concurrent jobs on a node do not collide.
          config.master_port = 20000 + static_cast<int>(*id % 20000);
        }
      } else if (config.launcher == LauncherKind::kOpenMPI) {
        config.master_port = 29500;
      }
    }
    if (config.master_port == 0) {
      fail(std::string("MASTER_PORT is not set: ") + world_var + "=" +
           std::to_string(config.world_size) +
           " needs the port of rank 0's store (set MASTER_PORT, or launch "
           "with ddprun/torchrun)");
    }
  }

  if (config.launcher == LauncherKind::kTorchrun &&
      truthy(get(env, "TORCHELASTIC_USE_AGENT_STORE"))) {
    config.use_agent_store = true;
    const auto attempt = get(env, "TORCHELASTIC_RESTART_COUNT");
    config.store_prefix =
        "/worker/attempt_" + (attempt ? trim(*attempt) : std::string("0"));
  }
  return config;
}

} // namespace detail
} // namespace ddp
