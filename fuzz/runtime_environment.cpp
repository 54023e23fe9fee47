// Fuzz target: the runtime's reading of its launcher's environment
// (env_launcher.h).
//
// The input is an environment, one NAME=VALUE per line, then a line `--` and
// the program's arguments, one per line. strip_local_rank and
// read_environment either throw std::runtime_error ("ddp::init: ...") or give
// a configuration ddp::init can use as it is: ranks inside their worlds, a
// positive timeout, and an address and port wherever there is more than one
// process.

#include "FuzzCheck.h"
#include "env_launcher.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

bool is_init_error(const std::runtime_error &error) {
  return std::string(error.what()).rfind("ddp::init: ", 0) == 0;
}

bool is_local_rank_flag(const std::string &arg) {
  for (const std::string flag : {"--local_rank", "--local-rank"}) {
    if (arg == flag || arg.rfind(flag + "=", 0) == 0) {
      return true;
    }
  }
  return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string input(reinterpret_cast<const char *>(data), size);
  std::map<std::string, std::string> environment;
  std::vector<std::string> args = {"train"};
  bool in_args = false;
  size_t start = 0;
  while (start <= input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string::npos) {
      end = input.size();
    }
    const std::string line = input.substr(start, end - start);
    start = end + 1;
    if (in_args) {
      args.push_back(line);
    } else if (line == "--") {
      in_args = true;
    } else if (const auto equals = line.find('=');
               equals != std::string::npos) {
      environment[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }

  for (const auto &[name, value] : environment) {
    const auto number = ddp::detail::parse_integer(value);
    FUZZ_CHECK(!number || (*number >= 0 &&
                           std::to_string(*number).size() <= value.size()));
    ddp::detail::first_slurm_host(value);
  }

  std::vector<char *> argv;
  for (auto &arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  std::optional<int> local_rank_arg;
  try {
    local_rank_arg = ddp::detail::strip_local_rank(argc, argv.data());
    FUZZ_CHECK(argc >= 1 && argv[argc] == nullptr);
    for (int i = 1; i < argc; ++i) {
      FUZZ_CHECK(!is_local_rank_flag(argv[i]));
    }
    FUZZ_CHECK(!local_rank_arg || *local_rank_arg >= 0);
  } catch (const std::runtime_error &error) {
    FUZZ_CHECK(is_init_error(error));
  }

  const ddp::detail::Getenv getenv_fn = [&](const char *name) -> const char * {
    const auto found = environment.find(name);
    return found == environment.end() ? nullptr : found->second.c_str();
  };
  try {
    const auto config = ddp::detail::read_environment(
        getenv_fn, local_rank_arg, "", std::chrono::minutes(30));
    FUZZ_CHECK(config.world_size >= 1);
    FUZZ_CHECK(config.rank >= 0 && config.rank < config.world_size);
    FUZZ_CHECK(config.local_rank >= 0 &&
               config.local_rank < config.local_world_size);
    FUZZ_CHECK(config.timeout.count() > 0);
    FUZZ_CHECK(config.backend.empty() || config.backend == "gloo" ||
               config.backend == "nccl");
    FUZZ_CHECK(config.master_port >= 0 && config.master_port <= 65535);
    if (config.world_size > 1 || config.group_of_one) {
      FUZZ_CHECK(!config.master_addr.empty() && config.master_port > 0);
    }
  } catch (const std::runtime_error &error) {
    FUZZ_CHECK(is_init_error(error));
  }
  return 0;
}
