// How a rank of a job fails: see fault_report.h.

#include "fault_report.h"

#include <signal.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ddp {
namespace detail {
namespace {

std::atomic<bool> g_recorded{false};
std::atomic<bool> g_failing{false};
std::atomic<bool> g_collective_failed{false};
int g_rank = 0;
int g_world_size = 1;
std::terminate_handler g_previous = nullptr;

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
        out += escaped;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

bool write_file(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      ::unlink(temporary.c_str());
      return false;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return ::rename(temporary.c_str(), path.c_str()) == 0;
}

[[noreturn]] void on_terminate() {
  const std::exception_ptr current = std::current_exception();
  if (!current) {
    if (g_previous != nullptr) {
      g_previous();
    }
    std::abort();
  }
  std::string message;
  try {
    std::rethrow_exception(current);
  } catch (const std::exception& e) {
    message = describe(e);
  } catch (...) {
    message = "an exception that is not a std::exception";
  }
  end_job(message, FailureKind::kException);
}

} // namespace

bool job_is_failing() { return g_failing.load(); }

void end_job(const std::string& message, FailureKind kind) {
  // The first caller speaks; another thread failing at the same time waits
  // for it to end the process.
  if (g_failing.exchange(true)) {
    for (;;) {
      ::pause();
    }
  }
  record_failure(message, kind);
  // What the program printed so far still reaches its reader.
  std::fflush(nullptr);
  const std::string line = "ddp: rank " + std::to_string(g_rank) + " of " +
                           std::to_string(g_world_size) + " on " + host_name() +
                           " ends: " + message + "\n";
  (void)!::write(2, line.data(), line.size());
  std::_Exit(1);
}

std::string describe(const std::exception& e) {
  std::string what = e.what();
  const auto backtrace = what.find("\nException raised from");
  if (backtrace != std::string::npos) {
    what.erase(backtrace);
  }
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) {
    what.pop_back();
  }
  return what;
}

bool a_collective_failed() { return g_collective_failed.load(); }

void record_failure(const std::string& message, FailureKind kind) {
  if (kind == FailureKind::kCollective) {
    g_collective_failed = true;
  }
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0' || g_recorded.exchange(true)) {
    return;
  }
  // Only ever a regular file: never replace /dev/null or a fifo by a rename.
  struct stat existing{};
  if (::stat(path, &existing) == 0 && !S_ISREG(existing.st_mode)) {
    return;
  }
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  // torchelastic's layout (what torchrun's agent reads), with ddp's kind.
  const std::string text =
      "{\"message\": {\"message\": " + json_string(message) +
      ", \"extraInfo\": {\"py_callstack\": \"\", \"timestamp\": \"" +
      std::to_string(seconds) + "\", \"ddp_kind\": \"" +
      (kind == FailureKind::kCollective ? "collective" : "exception") +
      "\", \"ddp_host\": " + json_string(host_name()) + "}}}\n";
  write_file(path, text);
}

void install_fault_handler(int rank, int world_size) {
  g_rank = rank;
  g_world_size = world_size;
  // A peer that ends closes its connections; a write to one then raises
  // SIGPIPE, whose default ends this rank with no word. Ignored (where the
  // program left the default, as Python does), the write fails and the
  // collective throws, naming the rank and the operation.
  struct sigaction current{};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL) {
    struct sigaction ignore{};
    ignore.sa_handler = SIG_IGN;
    ::sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, nullptr);
  }
  std::terminate_handler previous = std::set_terminate(on_terminate);
  if (previous != on_terminate) {
    g_previous = previous;
  }
}

const std::string& host_name() {
  static const std::string name = [] {
    char buffer[256] = {};
    if (::gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0') {
      return std::string("this host");
    }
    return std::string(buffer);
  }();
  return name;
}

} // namespace detail
} // namespace ddp
