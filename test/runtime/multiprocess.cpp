#include "multiprocess.h"

#include <ddp/distributed.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

extern char** environ;

namespace ddp_test {
namespace {

constexpr const char* kWorkerVar = "DDP_TEST_WORKER";
constexpr const char* kDirVar = "DDP_TEST_DIR";

std::string current_test_filter() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "." + info->name();
}

std::string& last_dir() {
  static std::string dir;
  return dir;
}

std::vector<std::string>& dirs_to_remove() {
  static std::vector<std::string> dirs;
  return dirs;
}

void remove_dirs() {
  for (const auto& dir : dirs_to_remove()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
}

/// Whether this process has one thread: only then may it fork a worker
/// (a child of a process with other threads inherits locks those threads
/// held, and an OpenMP pool it cannot use).
bool single_threaded() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) {
      return std::atoi(line.c_str() + 8) == 1;
    }
  }
  return false;
}

/// A worker forked from the test process: LibTorch is loaded and its
/// operators registered already, which is most of a worker's CPU time when
/// it re-executes the test binary instead (about 0.9 s of CPU each, tens of
/// workers per suite). Only where the parent is as a fresh worker would be:
/// one thread, no process group (DDP_TEST_SPAWN=exec forces the exec).
bool fork_workers() {
  const char* spawn = std::getenv("DDP_TEST_SPAWN");
  if (spawn && std::string(spawn) == "exec") {
    return false;
  }
  return !ddp::is_initialized() && single_threaded();
}

/// In a forked worker: the environment the exec'd worker would get, then
/// the body; never returns. Its exit status is the test's verdict here, as
/// gtest's is in an exec'd worker.
[[noreturn]] void run_forked_worker(std::vector<std::string>& env,
                                    const std::function<void()>& body,
                                    const RankOptions& options) {
  ::clearenv();
  for (auto& entry : env) {
    ::putenv(entry.data());
  }
  // What OMP_NUM_THREADS sets in a process that starts with it.
  if (const char* threads = std::getenv("OMP_NUM_THREADS")) {
    torch::set_num_threads(std::max(1, std::atoi(threads)));
  }
  // The parent's folders are the parent's to remove.
  dirs_to_remove().clear();
  int status = 0;
  try {
    if (options.init) {
      ddp::init();
    }
    body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker: uncaught exception: %s\n", e.what());
    status = 1;
  }
  if (::testing::Test::HasFailure()) {
    status = 1;
  }
  std::fflush(nullptr);
  std::exit(status);
}

} // namespace

bool is_worker() { return std::getenv(kWorkerVar) != nullptr; }

std::string shared_dir() {
  const char* dir = std::getenv(kDirVar);
  return dir ? dir : last_dir();
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::vector<int> run_ranks_status(int world_size,
                                  const std::function<void()>& body,
                                  const RankOptions& options) {
  if (is_worker()) {
    if (options.init) {
      ddp::init();
    }
    body();
    // Exit status of the worker is gtest's verdict on this one test.
    return {};
  }

  std::string dir_template =
      (std::filesystem::temp_directory_path() / "ddp_test_XXXXXX").string();
  std::string dir = ::mkdtemp(dir_template.data());
  if (dirs_to_remove().empty()) {
    std::atexit(remove_dirs);
  }
  dirs_to_remove().push_back(dir);
  last_dir() = dir;
  const int port = free_port();
  const std::string filter = "--gtest_filter=" + current_test_filter();

  std::vector<pid_t> pids;
  const bool forked = fork_workers();
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      env_strings.emplace_back(*e);
    }
    auto set = [&](const std::string& key, const std::string& value) {
      env_strings.push_back(key + "=" + value);
    };
    set(kWorkerVar, "1");
    set(kDirVar, dir);
    set("RANK", std::to_string(rank));
    set("LOCAL_RANK", std::to_string(rank));
    set("WORLD_SIZE", std::to_string(world_size));
    set("LOCAL_WORLD_SIZE", std::to_string(world_size));
    set("MASTER_ADDR", "127.0.0.1");
    set("MASTER_PORT", std::to_string(port));
    // One intra-op thread per rank: 2 cores, up to 4 ranks.
    set("OMP_NUM_THREADS", "1");
    // Unit tests run backward passes without a wrapper on purpose (the
    // unwrapped-training warning has tests of its own); options.env may
    // turn it back on.
    set("DDP_WARN_UNWRAPPED", "0");
    // A rank waiting for a peer that crashed fails with the runtime's
    // message before the parent's kill (options.env may override).
    set("DDP_TIMEOUT_SECONDS",
        std::to_string(std::max(5, options.timeout_seconds * 5 / 6)));
    for (const auto& kv : options.env) {
      set(kv.first, kv.second);
    }
    // Later entries win in getenv? No: glibc returns the first match, so
    // drop earlier duplicates of every key set above.
    std::vector<std::string> deduped;
    for (size_t i = 0; i < env_strings.size(); ++i) {
      const auto key = env_strings[i].substr(0, env_strings[i].find('='));
      bool overridden = false;
      for (size_t j = i + 1; j < env_strings.size(); ++j) {
        if (env_strings[j].compare(0, key.size() + 1, key + "=") == 0) {
          overridden = true;
          break;
        }
      }
      if (!overridden) {
        deduped.push_back(env_strings[i]);
      }
    }
    if (forked) {
      std::fflush(nullptr);
      const pid_t pid = ::fork();
      if (pid == 0) {
        run_forked_worker(deduped, body, options);
      }
      if (pid < 0) {
        ADD_FAILURE() << "cannot fork worker " << rank;
        continue;
      }
      pids.push_back(pid);
      continue;
    }
    std::vector<char*> envp;
    for (auto& s : deduped) {
      envp.push_back(s.data());
    }
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe";
    std::string quiet = "--gtest_brief=1";
    std::vector<char*> argv = {exe.data(), const_cast<char*>(filter.c_str()),
                               quiet.data(), nullptr};
    pid_t pid = 0;
    if (::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(),
                      envp.data()) != 0) {
      ADD_FAILURE() << "cannot spawn worker " << rank;
      continue;
    }
    pids.push_back(pid);
  }

  std::vector<int> statuses(pids.size(), 0);
  std::vector<bool> done(pids.size(), false);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(options.timeout_seconds);
  size_t remaining = pids.size();
  while (remaining > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) {
        continue;
      }
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        --remaining;
        statuses[i] =
            WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (!done[i]) {
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], nullptr, 0);
          statuses[i] = -SIGKILL;
          done[i] = true;
        }
      }
      ADD_FAILURE() << "workers still running after " << options.timeout_seconds
                    << " s: killed (a hang)";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return statuses;
}

std::vector<CommandResult> run_commands(const std::vector<Command>& commands,
                                        int timeout_seconds) {
  struct Running {
    pid_t pid = -1;
    int fd = -1;
    bool done = false;
  };
  std::vector<CommandResult> results(commands.size());
  std::vector<Running> running(commands.size());
  for (size_t c = 0; c < commands.size(); ++c) {
    const auto& command = commands[c];
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      const auto key = entry.substr(0, entry.find('='));
      bool replaced = false;
      for (const auto& kv : command.env) {
        replaced = replaced || kv.first == key;
      }
      if (!replaced) {
        env_strings.push_back(entry);
      }
    }
    for (const auto& kv : command.env) {
      if (kv.second != unset_value()) {
        env_strings.push_back(kv.first + "=" + kv.second);
      }
    }
    std::vector<char*> envp;
    for (auto& s : env_strings) {
      envp.push_back(s.data());
    }
    envp.push_back(nullptr);
    std::vector<std::string> args = command.argv;
    std::vector<char*> argv;
    for (auto& s : args) {
      argv.push_back(s.data());
    }
    argv.push_back(nullptr);
    int fds[2];
    if (args.empty() || ::pipe2(fds, O_CLOEXEC) != 0) {
      continue;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::execvpe(argv[0], argv.data(), envp.data());
      std::fprintf(stderr, "cannot exec %s: %s\n", argv[0],
                   std::strerror(errno));
      ::_exit(127);
    }
    ::close(fds[1]);
    if (pid < 0) {
      ::close(fds[0]);
      continue;
    }
    running[c].pid = pid;
    running[c].fd = fds[0];
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  for (;;) {
    bool any = false;
    for (size_t c = 0; c < commands.size(); ++c) {
      auto& r = running[c];
      if (r.pid < 0 || r.done) {
        continue;
      }
      any = true;
      pollfd pfd{r.fd, POLLIN, 0};
      while (r.fd >= 0 && ::poll(&pfd, 1, 0) > 0) {
        char buffer[4096];
        const ssize_t n = ::read(r.fd, buffer, sizeof(buffer));
        if (n <= 0) {
          ::close(r.fd);
          r.fd = -1;
          break;
        }
        results[c].output.append(buffer, static_cast<size_t>(n));
      }
      int status = 0;
      if (::waitpid(r.pid, &status, WNOHANG) == r.pid) {
        r.done = true;
        results[c].status =
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        // The rest of the output (not waiting for grandchildren).
        while (r.fd >= 0) {
          pollfd rest{r.fd, POLLIN, 0};
          char buffer[4096];
          ssize_t n = 0;
          if (::poll(&rest, 1, 200) <= 0 ||
              (n = ::read(r.fd, buffer, sizeof(buffer))) <= 0) {
            ::close(r.fd);
            r.fd = -1;
            break;
          }
          results[c].output.append(buffer, static_cast<size_t>(n));
        }
      }
    }
    if (!any) {
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t c = 0; c < commands.size(); ++c) {
        auto& r = running[c];
        if (r.pid >= 0 && !r.done) {
          ::kill(r.pid, SIGKILL);
          ::waitpid(r.pid, nullptr, 0);
          r.done = true;
          results[c].timed_out = true;
          results[c].status = 128 + SIGKILL;
        }
        if (r.fd >= 0) {
          ::close(r.fd);
          r.fd = -1;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return results;
}

CommandResult run_command(const Command& command, int timeout_seconds) {
  return run_commands({command}, timeout_seconds).front();
}

void run_ranks(int world_size, const std::function<void()>& body,
               const RankOptions& options) {
  const auto statuses = run_ranks_status(world_size, body, options);
  for (size_t rank = 0; rank < statuses.size(); ++rank) {
    EXPECT_EQ(statuses[rank], 0) << "rank " << rank << " failed";
  }
}

} // namespace ddp_test
