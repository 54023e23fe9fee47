// ddprun: starts N worker processes per node with the environment torchrun
// gives its workers, so a program migrated by ddpify (or any torchrun
// program) forms one data-parallel job. Plain C++17, POSIX and OpenSSL's
// libcrypto (the job token): no LibTorch.
//
//   ddprun --nproc-per-node N [--nnodes M --node-rank R --master-addr A
//          --master-port P] [--job-token-file F] [--max-restarts K] [--tee]
//          [--] PROGRAM ARGS...
//
// When a worker fails, the others get SIGTERM (SIGKILL after a grace period)
// and ddprun prints one line naming the root cause and exits with its code
// (128+signal when a signal ended it); with --max-restarts K it starts the
// whole job again instead, at most K times. SIGINT/SIGTERM sent to ddprun are
// forwarded to the workers. With several nodes the ddpruns watch each other
// (node_link.h): a failure anywhere ends every node's workers.

#include "job_token.h"
#include "node_link.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

constexpr const char* kUsage = R"(usage: ddprun [options] [--] PROGRAM [ARGS...]

Starts PROGRAM once per process of a data-parallel job on this node, with the
environment torchrun gives its workers (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, MASTER_ADDR, MASTER_PORT, ...).

options:
  --nproc-per-node N   processes on this node (default 1); also "auto"/"gpu"
                       (one per visible NVIDIA GPU, "auto" falls back to 1)
                       and "cpu" (one per CPU core)
  --nnodes M           number of nodes (default 1); run one ddprun per node
  --node-rank R        this node's index, 0..M-1 (default 0)
  --master-addr A      address of node 0, where rank 0's store listens
                       (default 127.0.0.1)
  --master-port P      port of that store (default: a free port on a single
                       node; 29500 with several nodes)
  --tee[=W]            prefix each output line with "[rankN]: "; W selects the
                       streams: 1 stdout, 2 stderr, 3 both (default 3), 0 none
  --prefix-output      same as --tee=3
  --grace-period S     seconds between SIGTERM and SIGKILL when the job is
                       ended (default 5)
  --run-id ID          TORCHELASTIC_RUN_ID given to the workers
  --max-restarts K     when a worker fails, end the job on every node and
                       start it again, at most K times (default 0: the job
                       fails); see "restarts" below
  --join-timeout S     with several nodes: how long node 0 waits for the
                       others to join, and they for node 0 (default:
                       DDP_TIMEOUT_SECONDS when set, else 600)
  --heartbeat-timeout S
                       with several nodes: a node's ddprun silent this long
                       is lost (default: half of DDP_TIMEOUT_SECONDS when
                       set, 3 to 30, else 30); a worker stopped (SIGSTOP)
                       this long fails the job too
  --job-token-file F   with several nodes: the job's secret, in a file only its
                       owner may read (chmod 600; at least 16 characters, e.g.
                       `openssl rand -hex 32`); every node needs the same one.
                       A ddprun proves it holds it (a challenge and an HMAC,
                       never the token itself) before it joins, and node 0
                       proves it back. Default: DDP_JOB_TOKEN when set
  --no-python, --standalone
                       accepted for torchrun compatibility (no effect)
  -h, --help           this help

Underscore spellings (--nproc_per_node, --node_rank, --master_addr,
--master_port) and --opt=value forms are accepted too.

With several nodes, node 0's ddprun listens on --master-addr:--master-port
for the other nodes' ddpruns; rank 0's rendezvous store gets a free port it
hands out (the workers' MASTER_PORT), on --master-addr too. Without a job
token any program that reaches that port can join as a node or end the job,
and the store is open to whoever learns its port; with one, only ddpruns
holding it join (the store itself has no token: see the runtime docs).

restarts: with --max-restarts K (every node the same K), a worker's failure
(exit code, signal, stopped) ends every worker on every node, and ddprun
prints one line on every node, e.g.
  ddprun: restarting the job (attempt 2 of 3): worker rank 1 on host0 ...
and starts them all again with a fresh rendezvous store (a new MASTER_PORT
unless --master-port was given on a single node). The workers get the
attempt's number in TORCHELASTIC_RESTART_COUNT (0, 1, ...) and K in
TORCHELASTIC_MAX_RESTARTS. Nothing in memory survives a restart: a program
resumes from its own checkpoint, as under torchrun. A signal sent to ddprun,
a node lost, or a node that never joined ends the job without a restart.
The exit status is the last attempt's.

exit status: 0 when every worker exits 0; otherwise the code of the root
cause, on every node: the first worker that failed by itself (its exit code,
128+signal when a signal ended it), 128+signal for a ddprun that was sent
SIGINT or SIGTERM, 1 for a node lost, a worker stopped, or a node that never
joined; 2 for a usage error; 127 when PROGRAM cannot be started.
)";

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0; // 0: choose
  int tee = 0;         // bit 1: stdout, bit 2: stderr
  double grace_seconds = 5;
  std::string run_id;
  std::optional<double> join_timeout;
  std::optional<double> heartbeat_timeout;
  int max_restarts = 0;
  std::optional<std::string> job_token; // --job-token-file or DDP_JOB_TOKEN
  std::vector<std::string> command;
  // Decided in main(), not options.
  int store_port = 0;          // the workers' MASTER_PORT (rank 0's store)
  bool own_store_port = false; // ddprun chose it: a new one every attempt
  int restart_count = 0;       // the attempt's TORCHELASTIC_RESTART_COUNT
  std::string error_dir;       // where each worker's TORCHELASTIC_ERROR_FILE is
};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "ddprun: error: " << message << "\n"
            << "Run 'ddprun --help' for the options.\n";
  std::exit(2);
}

std::optional<long long> parse_int(const std::string& text) {
  if (text.empty() || text.size() > 12) {
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

int int_option(const std::string& name, const std::string& text, long long min,
               long long max) {
  const auto value = parse_int(text);
  if (!value || *value < min || *value > max) {
    usage_error(name + " needs an integer in [" + std::to_string(min) + ", " +
                std::to_string(max) + "], got '" + text + "'");
  }
  return static_cast<int>(*value);
}

int count_nvidia_gpus() {
  int count = 0;
  if (DIR* dir = ::opendir("/dev")) {
    while (const dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.size() > 6 && name.compare(0, 6, "nvidia") == 0 &&
          parse_int(name.substr(6))) {
        ++count;
      }
    }
    ::closedir(dir);
  }
  // CUDA_VISIBLE_DEVICES narrows what the workers can see.
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    const std::string list = visible;
    if (list.empty()) {
      return 0;
    }
    int listed = 1;
    for (char c : list) {
      listed += c == ',';
    }
    count = std::min(count, listed);
  }
  return count;
}

int nproc_value(const std::string& text) {
  if (text == "auto" || text == "gpu") {
    const int gpus = count_nvidia_gpus();
    if (gpus > 0) {
      return gpus;
    }
    if (text == "gpu") {
      usage_error("--nproc-per-node gpu: no NVIDIA GPU is visible");
    }
    return 1;
  }
  if (text == "cpu") {
    const unsigned cores = std::thread::hardware_concurrency();
    return cores > 0 ? static_cast<int>(cores) : 1;
  }
  return int_option("--nproc-per-node", text, 1, 4096);
}

std::string normalise(std::string flag) {
  for (auto& c : flag) {
    if (c == '_') {
      c = '-';
    }
  }
  return flag;
}

Options parse_args(int argc, char** argv) {
  Options options;
  bool port_given = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      break; // PROGRAM
    }
    std::string flag = arg;
    std::optional<std::string> inline_value;
    const auto eq = arg.find('=');
    if (arg.compare(0, 2, "--") == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    flag = normalise(flag);
    auto value = [&]() -> std::string {
      if (inline_value) {
        return *inline_value;
      }
      if (i + 1 >= argc) {
        usage_error(flag + " needs a value");
      }
      return argv[++i];
    };
    if (flag == "-h" || flag == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (flag == "--nproc-per-node") {
      options.nproc_per_node = nproc_value(value());
    } else if (flag == "--nnodes") {
      const std::string text = value();
      if (text.find(':') != std::string::npos) {
        usage_error("--nnodes " + text +
                    ": elastic node ranges are not supported; give a number");
      }
      options.nnodes = int_option("--nnodes", text, 1, 65536);
    } else if (flag == "--node-rank") {
      options.node_rank = int_option("--node-rank", value(), 0, 65535);
    } else if (flag == "--master-addr") {
      options.master_addr = value();
      if (options.master_addr.empty()) {
        usage_error("--master-addr needs a host name or address");
      }
    } else if (flag == "--master-port") {
      options.master_port = int_option("--master-port", value(), 1, 65535);
      port_given = true;
    } else if (flag == "--tee") {
      if (inline_value) {
        options.tee = int_option("--tee", *inline_value, 0, 3);
      } else if (i + 1 < argc && std::strlen(argv[i + 1]) == 1 &&
                 argv[i + 1][0] >= '0' && argv[i + 1][0] <= '3') {
        options.tee = argv[++i][0] - '0';
      } else {
        options.tee = 3;
      }
    } else if (flag == "--prefix-output") {
      options.tee = 3;
    } else if (flag == "--grace-period") {
      const std::string text = value();
      char* end = nullptr;
      const double seconds = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(seconds >= 0) || seconds > 3600) {
        usage_error("--grace-period needs a number of seconds, got '" + text +
                    "'");
      }
      options.grace_seconds = seconds;
    } else if (flag == "--run-id") {
      options.run_id = value();
    } else if (flag == "--max-restarts") {
      options.max_restarts = int_option("--max-restarts", value(), 0, 1000000);
    } else if (flag == "--join-timeout" || flag == "--heartbeat-timeout") {
      const std::string text = value();
      char* end = nullptr;
      const double seconds = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(seconds > 0) || seconds > 1e6) {
        usage_error(flag + " needs a positive number of seconds, got '" + text +
                    "'");
      }
      (flag == "--join-timeout" ? options.join_timeout
                                : options.heartbeat_timeout) = seconds;
    } else if (flag == "--job-token-file") {
      std::string error;
      options.job_token = ddprun::read_token_file(value(), error);
      if (!options.job_token) {
        usage_error(error);
      }
    } else if (flag == "--no-python" || flag == "--standalone") {
      if (inline_value) {
        usage_error(flag + " takes no value");
      }
    } else {
      usage_error("unknown option '" + arg + "'");
    }
  }
  for (; i < argc; ++i) {
    options.command.emplace_back(argv[i]);
  }
  if (options.command.empty()) {
    usage_error("no PROGRAM to run");
  }
  if (options.node_rank >= options.nnodes) {
    usage_error("--node-rank " + std::to_string(options.node_rank) +
                " must be smaller than --nnodes " +
                std::to_string(options.nnodes));
  }
  if (!port_given) {
    options.master_port = 0; // decided in main()
  }
  if (const char* token = std::getenv("DDP_JOB_TOKEN");
      token != nullptr && !options.job_token) {
    if (const std::string problem = ddprun::token_problem(token);
        !problem.empty()) {
      usage_error("DDP_JOB_TOKEN " + problem);
    }
    options.job_token = token;
  }
  return options;
}

// --- signals ---------------------------------------------------------------

volatile sig_atomic_t g_forward_signal = 0;

void on_signal(int sig, siginfo_t* info, void*) {
  // A terminal's Ctrl-C already reached the workers (same process group):
  // only signals sent to ddprun alone are forwarded.
  if (info != nullptr && info->si_code == SI_KERNEL) {
    if (g_forward_signal == 0) {
      g_forward_signal = -sig;
    }
    return;
  }
  g_forward_signal = sig;
}

void install_handlers() {
  struct sigaction action{};
  action.sa_sigaction = on_signal;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  // A closed output pipe must not kill the launcher.
  ::signal(SIGPIPE, SIG_IGN);
}

// --- workers ---------------------------------------------------------------

struct Stream {
  int fd = -1;
  int out_fd = 1; // where prefixed lines go
  std::string pending;
};

struct Worker {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  bool running = false;
  int code = 0;
  std::optional<ddprun::Clock::time_point> stopped_since;
  int stop_signal = 0;
  bool stop_reported = false; // as a cause, after the heartbeat timeout
  bool signalled = false;     // ddprun sent it SIGTERM/SIGINT/SIGKILL
  bool killed = false;        // ... and SIGKILL (after the grace period)
  Stream out;
  Stream err;
};

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return;
    }
    done += static_cast<size_t>(n);
  }
}

/// Reads what is available; emits complete lines with the prefix. Returns
/// false at end of file.
bool pump(Stream& stream, const std::string& prefix) {
  char buffer[65536];
  const ssize_t n = ::read(stream.fd, buffer, sizeof(buffer));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
    return true;
  }
  if (n <= 0) {
    if (!stream.pending.empty()) {
      write_all(stream.out_fd, prefix + stream.pending + "\n");
      stream.pending.clear();
    }
    ::close(stream.fd);
    stream.fd = -1;
    return false;
  }
  stream.pending.append(buffer, static_cast<size_t>(n));
  std::string lines;
  size_t start = 0;
  for (size_t nl; (nl = stream.pending.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    lines += prefix;
    lines.append(stream.pending, start, nl + 1 - start);
  }
  stream.pending.erase(0, start);
  if (!lines.empty()) {
    write_all(stream.out_fd, lines);
  }
  return true;
}

std::string error_file(const Options& o, int rank) {
  return o.error_dir + "/rank" + std::to_string(rank) + ".json";
}

std::vector<std::string> worker_environment(const Options& o, int local_rank,
                                            const std::string& run_id) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq != std::string::npos) {
      env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
    }
  }
  const int world = o.nnodes * o.nproc_per_node;
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  // What torchrun sets for its workers.
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["WORLD_SIZE"] = std::to_string(world);
  env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
  env["GROUP_RANK"] = std::to_string(o.node_rank);
  env["GROUP_WORLD_SIZE"] = std::to_string(o.nnodes);
  env["ROLE_RANK"] = std::to_string(rank);
  env["ROLE_WORLD_SIZE"] = std::to_string(world);
  env["ROLE_NAME"] = "default";
  env["MASTER_ADDR"] = o.master_addr;
  env["MASTER_PORT"] = std::to_string(o.store_port);
  if (!o.error_dir.empty()) {
    // Where the runtime (or torchelastic's record decorator) writes why the
    // worker failed: ddprun reads it to tell a cause from a consequence.
    env["TORCHELASTIC_ERROR_FILE"] = error_file(o, rank);
  }
  env["TORCHELASTIC_RUN_ID"] = run_id;
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(o.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(o.max_restarts);
  // Rank 0 of the job runs the rendezvous store, not ddprun.
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  if (env.find("OMP_NUM_THREADS") == env.end()) {
    env["OMP_NUM_THREADS"] = "1";
  }
  // The job's secret is ddprun's, not the workers'.
  env.erase("DDP_JOB_TOKEN");
  std::vector<std::string> result;
  for (const auto& kv : env) {
    result.push_back(kv.first + "=" + kv.second);
  }
  return result;
}

bool start_worker(const Options& o, Worker& w, const std::string& run_id) {
  auto env_strings = worker_environment(o, w.local_rank, run_id);
  std::vector<char*> envp;
  for (auto& s : env_strings) {
    envp.push_back(s.data());
  }
  envp.push_back(nullptr);
  std::vector<std::string> args = o.command;
  std::vector<char*> argv;
  for (auto& s : args) {
    argv.push_back(s.data());
  }
  argv.push_back(nullptr);

  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  // Close-on-exec everywhere: no worker inherits another's pipes (dup2
  // below clears the flag on the worker's own stdout/stderr).
  if ((o.tee & 1) && ::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return false;
  }
  if ((o.tee & 2) && ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return false;
  }
  // The child reports an exec failure through this pipe.
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    return false;
  }

  const pid_t pid = ::fork();
  if (pid < 0) {
    return false;
  }
  if (pid == 0) {
    // Child: default signal dispositions, redirected output, then exec.
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::close(exec_pipe[0]);
    if (out_pipe[1] >= 0) {
      ::dup2(out_pipe[1], 1);
      ::close(out_pipe[0]);
      ::close(out_pipe[1]);
    }
    if (err_pipe[1] >= 0) {
      ::dup2(err_pipe[1], 2);
      ::close(err_pipe[0]);
      ::close(err_pipe[1]);
    }
    environ = envp.data();
    ::execvp(argv[0], argv.data());
    const int error = errno;
    (void)!::write(exec_pipe[1], &error, sizeof(error));
    ::_exit(127);
  }
  ::close(exec_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  w.pid = pid;
  w.running = true;
  if (out_pipe[0] >= 0) {
    ::close(out_pipe[1]);
    w.out.fd = out_pipe[0];
    w.out.out_fd = 1;
  }
  if (err_pipe[0] >= 0) {
    ::close(err_pipe[1]);
    w.err.fd = err_pipe[0];
    w.err.out_fd = 2;
  }
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    std::cerr << "ddprun: cannot run '" << o.command[0]
              << "': " << std::strerror(child_errno) << "\n";
    return false;
  }
  return true;
}

int status_code(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  if (WIFSIGNALED(status)) {
    return 128 + WTERMSIG(status);
  }
  return 1;
}

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0') {
    return "this host";
  }
  return buffer;
}

/// The JSON string that starts at text[pos] ('"'), unescaped.
std::string json_string_at(const std::string& text, size_t pos) {
  std::string out;
  for (size_t i = pos + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      break;
    }
    if (c != '\\' || i + 1 >= text.size()) {
      out += c;
      continue;
    }
    const char e = text[++i];
    switch (e) {
    case 'n':
    case 'r':
    case 't':
      out += ' ';
      break;
    case 'u':
      i += 4; // control characters only (the runtime escapes nothing else)
      out += ' ';
      break;
    default:
      out += e;
    }
  }
  return out;
}

struct ErrorRecord {
  std::string message;
  bool collective = false; // the runtime says: a peer's failure broke it
};

/// What a worker wrote to its TORCHELASTIC_ERROR_FILE: torchelastic's layout
/// {"message": {"message": "...", "extraInfo": {..., "ddp_kind": "..."}}}
/// (or {"message": "..."}).
std::optional<ErrorRecord> read_error_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return std::nullopt;
  }
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  ErrorRecord record;
  size_t pos = text.find("\"message\"");
  while (pos != std::string::npos) {
    size_t value = text.find_first_not_of(" \t\r\n:", pos + 9);
    if (value == std::string::npos) {
      break;
    }
    if (text[value] == '"') {
      record.message = json_string_at(text, value);
      break;
    }
    pos = text.find("\"message\"", value); // the nested object's
  }
  record.collective =
      text.find("\"ddp_kind\": \"collective\"") != std::string::npos;
  return record;
}

void remove_error_dir(const std::string& dir) {
  if (dir.empty()) {
    return;
  }
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* entry = ::readdir(d)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") {
        ::unlink((dir + "/" + name).c_str());
      }
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

/// Why a worker ended, as one Failure.
ddprun::Failure worker_failure(const Options& o, const Worker& w, int status,
                               const std::string& host) {
  ddprun::Failure failure;
  failure.rank = w.rank;
  failure.code = status_code(status);
  const std::string who = "worker rank " + std::to_string(w.rank) + " on " +
                          host + " (pid " + std::to_string(w.pid) + ")";
  std::optional<ErrorRecord> record;
  if (!o.error_dir.empty()) {
    record = read_error_file(error_file(o, w.rank));
  }
  if (WIFSIGNALED(status)) {
    failure.text =
        who + " was killed by " + ddprun::signal_name(WTERMSIG(status));
  } else {
    failure.text = who + " exited with code " + std::to_string(failure.code);
  }
  if (record && !record->message.empty()) {
    failure.text += ": " + record->message;
  }
  if (record && record->collective) {
    failure.kind = ddprun::Failure::Kind::kConsequence;
  }
  return failure;
}

double default_timeout_seconds(const char* variable) {
  if (const char* text = std::getenv(variable)) {
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    if (end != text && *end == '\0' && seconds > 0) {
      return seconds;
    }
  }
  return 0;
}

/// One node's part of a job: its workers, their output and exits, and the
/// job's verdict (this node's alone, or every node's through the link).
class Job {
public:
  explicit Job(Options options)
      : options_(std::move(options)), host_(host_name()) {
    // The collective timeout the workers get bounds how long ddprun waits.
    const double collective_timeout =
        default_timeout_seconds("DDP_TIMEOUT_SECONDS");
    join_seconds_ = options_.join_timeout.value_or(
        collective_timeout > 0 ? collective_timeout : 600);
    heartbeat_seconds_ = options_.heartbeat_timeout.value_or(
        collective_timeout > 0
            ? std::min(30.0, std::max(3.0, collective_timeout / 2))
            : 30.0);
    heartbeat_ = std::chrono::milliseconds(
        static_cast<long long>(heartbeat_seconds_ * 1000));
    node_name_ = "ddprun on " + host_ +
                 (options_.nnodes > 1
                      ? " (node " + std::to_string(options_.node_rank) + ")"
                      : std::string());
  }

  /// With several nodes: joins the others and learns the store's port.
  /// Returns 0, or the exit status when the job failed before it started.
  int join_nodes() {
    if (options_.nnodes <= 1) {
      return 0;
    }
    ddprun::LinkConfig config;
    config.nnodes = options_.nnodes;
    config.node_rank = options_.node_rank;
    config.nproc_per_node = options_.nproc_per_node;
    config.master_addr = options_.master_addr;
    config.master_port = options_.master_port;
    config.host = host_;
    config.join_timeout =
        std::chrono::milliseconds(static_cast<long long>(join_seconds_ * 1000));
    config.heartbeat_timeout = heartbeat_;
    config.max_restarts = options_.max_restarts;
    config.token = options_.job_token;
    link_.emplace(config);
    Failure why;
    const int store_port = link_->join(interrupted(), why);
    if (store_port == 0) {
      std::cerr << "ddprun: job failed: " << why.text << "\n";
      return why.code;
    }
    options_.store_port = store_port;
    return 0;
  }

  /// Starts this node's workers, each with its error file; the first that
  /// cannot start fails the job.
  void start_workers() {
    char error_dir[] = "/tmp/ddprun-XXXXXX";
    if (::mkdtemp(error_dir) != nullptr) {
      options_.error_dir = error_dir;
    }
    workers_.resize(static_cast<size_t>(options_.nproc_per_node));
    for (int l = 0; l < options_.nproc_per_node; ++l) {
      Worker& w = workers_[static_cast<size_t>(l)];
      w.local_rank = l;
      w.rank = options_.node_rank * options_.nproc_per_node + l;
      if (!start_worker(options_, w, options_.run_id)) {
        if (!w.running) {
          std::cerr << "ddprun: cannot start worker " << w.rank << ": "
                    << std::strerror(errno) << "\n";
        }
        failed_here_ = true;
        report({Failure::Kind::kCause, 127, w.rank,
                "worker rank " + std::to_string(w.rank) + " on " + host_ +
                    " could not start '" + options_.command[0] + "'"});
        end_job(SIGTERM);
        break;
      }
    }
    for (const auto& w : workers_) {
      running_ += w.running ? 1 : 0;
    }
  }

  /// A thread blocked in waitpid records exits the moment they happen, so
  /// the worker that failed first is known even when the others fail a few
  /// milliseconds later (their collectives break when it exits). Signals
  /// stay with the main thread.
  void start_reaper() {
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigset_t previous;
    ::pthread_sigmask(SIG_BLOCK, &block, &previous);
    reaper_ = std::thread([this] { reap(); });
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }

  /// One round of supervision (every 20 ms or as output comes); false once
  /// the job is over on this node (and, with several nodes, settled).
  bool supervise() {
    decide(Clock::now());
    if (running_ == 0) {
      if (!link_) {
        return false;
      }
      if (!failed_here_ && !done_reported_ && !restarting_) {
        done_reported_ = true;
        link_->report_done();
      }
      if (link_->settled()) {
        return false;
      }
    }
    forward_signal();
    pump_output();
    take_exits();
    fail_stopped_workers();
    kill_after_grace();
    return true;
  }

  /// After an attempt that ended with a restarting verdict: the next
  /// attempt's store and state (every node's, together). False, with the
  /// exit `status`, when the job is over: no restart, or a signal to ddprun
  /// or a lost node since.
  bool restart(int& status) {
    if (!restarting_) {
      return false;
    }
    std::optional<Failure> own;
    if (signalled_ != 0) {
      own = signal_failure(signalled_); // a signal is not restarted from
    }
    if (link_) {
      Failure why;
      const int store_port = link_->restart(own, interrupted(), why);
      if (store_port == 0) {
        std::cerr << "ddprun: job failed: " << why.text << "\n";
        status = why.code;
        return false;
      }
      options_.store_port = store_port;
    } else if (own) {
      std::cerr << "ddprun: job failed: " << own->text << "\n";
      status = own->code;
      return false;
    } else if (options_.own_store_port) {
      const int port = ddprun::free_port();
      options_.store_port = port > 0 ? port : options_.store_port;
    }
    ++options_.restart_count;
    local_root_ = ddprun::RootCause(kLocalCauseWindow);
    workers_.clear();
    running_ = 0;
    failed_here_ = false;
    done_reported_ = false;
    restarting_ = false;
    verdict_.reset();
    kill_at_.reset();
    exits_.clear();
    return true;
  }

  /// The output left in the pipes and the error files gone; the job's exit
  /// status.
  int finish() {
    reaper_.join();
    // Whatever output is left in the pipes (not waiting for a grandchild
    // that still holds one open).
    for (auto& w : workers_) {
      for (Stream* s : {&w.out, &w.err}) {
        const std::string prefix = "[rank" + std::to_string(w.rank) + "]: ";
        while (s->fd >= 0) {
          pollfd fd{s->fd, POLLIN, 0};
          if (::poll(&fd, 1, 200) <= 0) {
            s->pending += s->pending.empty() ? "" : "\n";
            if (!s->pending.empty()) {
              write_all(s->out_fd, prefix + s->pending);
            }
            ::close(s->fd);
            s->fd = -1;
            break;
          }
          pump(*s, prefix);
        }
      }
    }
    remove_error_dir(options_.error_dir);
    return verdict_ ? verdict_->code : 0;
  }

private:
  using Clock = ddprun::Clock;
  using Failure = ddprun::Failure;
  static constexpr std::chrono::seconds kLocalCauseWindow{2};

  /// Asked while ddprun waits for other nodes: a signal sent to it.
  std::function<std::optional<Failure>()> interrupted() const {
    return [this]() -> std::optional<Failure> {
      const int sig = g_forward_signal;
      if (sig == 0) {
        return std::nullopt;
      }
      return signal_failure(sig < 0 ? -sig : sig);
    };
  }

  /// A signal sent to ddprun, as the job's cause.
  Failure signal_failure(int sig) const {
    return Failure{Failure::Kind::kCause, 128 + sig, -1,
                   node_name_ + " was sent " + ddprun::signal_name(sig)};
  }

  void report(const Failure& failure) {
    if (link_) {
      link_->report(failure, Clock::now());
    } else {
      local_root_.report(failure, Clock::now());
    }
  }

  /// Signals every running worker, and bounds how long they may take.
  void end_job(int sig) {
    for (auto& w : workers_) {
      if (w.running) {
        ::kill(w.pid, sig);
        // A stopped worker only acts on the signal once continued.
        ::kill(w.pid, SIGCONT);
        w.signalled = true;
      }
    }
    if (!kill_at_) {
      kill_at_ = Clock::now() +
                 std::chrono::milliseconds(
                     static_cast<long long>(options_.grace_seconds * 1000));
    }
  }

  void reap() {
    for (;;) {
      int status = 0;
      // Stops and continues too: a stopped worker stalls every collective.
      const pid_t pid = ::waitpid(-1, &status, WUNTRACED | WCONTINUED);
      if (pid > 0) {
        // When this thread ran late, several workers may have exited since:
        // take them all in one round. Which of them is the cause is not
        // their order (waitpid returns the oldest child first) but what each
        // says (RootCause).
        std::vector<std::pair<pid_t, int>> round{{pid, status}};
        for (;;) {
          int more_status = 0;
          const pid_t more =
              ::waitpid(-1, &more_status, WNOHANG | WUNTRACED | WCONTINUED);
          if (more <= 0) {
            break;
          }
          round.emplace_back(more, more_status);
        }
        std::lock_guard<std::mutex> lock(exits_mutex_);
        exits_.insert(exits_.end(), round.begin(), round.end());
      } else if (errno != EINTR) {
        return; // ECHILD: no children left
      }
    }
  }

  /// The job's root cause, once known: said once, and every worker ended.
  void decide(Clock::time_point now) {
    if (verdict_) {
      if (link_) {
        link_->service(now);
      }
      return;
    }
    if (link_) {
      link_->service(now);
      verdict_ = link_->verdict();
      restarting_ = link_->restarting();
    } else {
      verdict_ = local_root_.decide(now, running_ == 0);
      restarting_ = verdict_ && ddprun::restartable(*verdict_) &&
                    options_.restart_count < options_.max_restarts;
    }
    if (verdict_) {
      if (restarting_) {
        std::cerr << "ddprun: restarting the job (attempt "
                  << options_.restart_count + 2 << " of "
                  << options_.max_restarts + 1 << "): " << verdict_->text
                  << "\n";
      } else {
        std::cerr << "ddprun: job failed: " << verdict_->text
                  << (running_ > 0 ? "; ending the workers on " + host_ : "")
                  << "\n";
      }
      if (running_ > 0) {
        end_job(SIGTERM);
      }
    }
  }

  /// Forwards a signal sent to ddprun to the workers.
  void forward_signal() {
    if (g_forward_signal == 0) {
      return;
    }
    const int sig = g_forward_signal;
    g_forward_signal = 0;
    signalled_ = sig < 0 ? -sig : sig;
    if (!verdict_ && !failed_here_) {
      failed_here_ = true;
      report(signal_failure(sig < 0 ? -sig : sig));
    }
    if (sig > 0) {
      end_job(sig);
    } else if (!kill_at_) {
      // The workers got it from the terminal; bound their shutdown.
      kill_at_ = Clock::now() +
                 std::chrono::milliseconds(
                     static_cast<long long>(options_.grace_seconds * 1000));
    }
  }

  /// The workers' output, each line prefixed with its rank.
  void pump_output() {
    std::vector<pollfd> fds;
    std::vector<Stream*> streams;
    for (auto& w : workers_) {
      for (Stream* s : {&w.out, &w.err}) {
        if (s->fd >= 0) {
          fds.push_back(pollfd{s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    if (fds.empty()) {
      ::usleep(20 * 1000);
      return;
    }
    if (::poll(fds.data(), fds.size(), 20) <= 0) {
      return;
    }
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) {
        Worker* owner = nullptr;
        for (auto& w : workers_) {
          if (&w.out == streams[k] || &w.err == streams[k]) {
            owner = &w;
          }
        }
        pump(*streams[k], "[rank" + std::to_string(owner->rank) + "]: ");
      }
    }
  }

  /// Exits, stops and continues, in the order they happened.
  void take_exits() {
    std::vector<std::pair<pid_t, int>> exited;
    {
      std::lock_guard<std::mutex> lock(exits_mutex_);
      exited.swap(exits_);
    }
    std::vector<Failure> failures;
    for (const auto& [pid, status] : exited) {
      for (auto& w : workers_) {
        if (w.pid != pid || !w.running) {
          continue;
        }
        if (WIFSTOPPED(status)) {
          w.stopped_since = Clock::now();
          w.stop_signal = WSTOPSIG(status);
          if (!verdict_) {
            report({Failure::Kind::kStopped, 1, w.rank,
                    "worker rank " + std::to_string(w.rank) + " on " + host_ +
                        " (pid " + std::to_string(w.pid) + ") was stopped by " +
                        ddprun::signal_name(w.stop_signal)});
          }
          continue;
        }
        if (WIFCONTINUED(status)) {
          if (w.stopped_since && !verdict_) {
            if (link_) {
              link_->resumed(w.rank);
            } else {
              local_root_.resumed(w.rank);
            }
          }
          w.stopped_since.reset();
          continue;
        }
        w.running = false;
        w.code = status_code(status);
        --running_;
        // Workers that ddprun itself ended say nothing about the cause. A
        // SIGKILL is ddprun's only once it sent one: a worker killed from
        // outside just before ddprun's SIGTERM (its exit reaped in the next
        // round) is the cause, not one ddprun ended.
        const bool ended_here =
            w.signalled && WIFSIGNALED(status) &&
            (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGINT ||
             (WTERMSIG(status) == SIGKILL && w.killed));
        if (w.code != 0 && !verdict_ && !ended_here) {
          failures.push_back(worker_failure(options_, w, status, host_));
        }
      }
    }
    // Reported once the whole round is in: a worker that died in it before
    // ddprun ended the others is not mistaken for one that ddprun ended.
    for (const auto& failure : failures) {
      report(failure);
      if (!failed_here_) {
        failed_here_ = true;
        // A failed worker ends the job whatever the cause.
        end_job(SIGTERM);
      }
    }
  }

  /// A worker stopped for the heartbeat timeout is the job's failure.
  void fail_stopped_workers() {
    for (auto& w : workers_) {
      if (w.running && w.stopped_since && !w.stop_reported && !verdict_ &&
          Clock::now() - *w.stopped_since >= heartbeat_) {
        w.stop_reported = true;
        failed_here_ = true;
        std::ostringstream seconds;
        seconds << heartbeat_seconds_;
        report({Failure::Kind::kCause, 1, w.rank,
                "worker rank " + std::to_string(w.rank) + " on " + host_ +
                    " (pid " + std::to_string(w.pid) + ") was stopped by " +
                    ddprun::signal_name(w.stop_signal) +
                    " and not continued for " + seconds.str() + " s"});
        end_job(SIGTERM);
      }
    }
  }

  /// Workers still running when the grace period is over are killed.
  void kill_after_grace() {
    if (running_ == 0 || !kill_at_ || Clock::now() < *kill_at_) {
      return;
    }
    for (auto& w : workers_) {
      if (w.running) {
        ::kill(w.pid, SIGKILL);
        w.signalled = true;
        w.killed = true;
      }
    }
    kill_at_ = Clock::now() + std::chrono::hours(1);
  }

  Options options_;
  std::string host_;
  std::string node_name_;
  double join_seconds_ = 0;
  double heartbeat_seconds_ = 0;
  std::chrono::milliseconds heartbeat_{0};
  std::optional<ddprun::NodeLink> link_;
  ddprun::RootCause local_root_{kLocalCauseWindow}; // a single node's
  std::vector<Worker> workers_;
  size_t running_ = 0;
  bool failed_here_ = false; // a worker failed here, or ddprun was signalled
  bool done_reported_ = false;
  bool restarting_ = false; // the verdict restarts the job
  int signalled_ = 0;       // a signal sent to ddprun (not restarted from)
  std::optional<Failure> verdict_;
  std::optional<Clock::time_point> kill_at_;
  std::mutex exits_mutex_;
  std::vector<std::pair<pid_t, int>> exits_;
  std::thread reaper_;
};

} // namespace

int main(int argc, char** argv) {
  Options options = parse_args(argc, argv);
  if (options.master_port == 0) {
    const int port = options.nnodes == 1 ? ddprun::free_port() : 0;
    options.master_port = port > 0 ? port : 29500;
    options.own_store_port = port > 0;
  }
  options.store_port = options.master_port;
  if (options.run_id.empty()) {
    options.run_id = "ddprun-" + std::to_string(::getpid()) + "-" +
                     std::to_string(options.master_port);
  }
  if (options.nproc_per_node > 1 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    std::cerr << "ddprun: OMP_NUM_THREADS is not set: using 1 thread per "
                 "process (set it to tune)\n";
  }
  install_handlers();
  Job job(std::move(options));
  if (const int failed = job.join_nodes()) {
    return failed;
  }
  int status = 0;
  do {
    job.start_workers();
    job.start_reaper();
    while (job.supervise()) {
    }
    status = job.finish();
  } while (job.restart(status));
  return status;
}
