#include "profile.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

namespace ddp {
namespace detail {
namespace profile {
namespace {

struct Profile {
  std::mutex mutex;
  int rank = 0;
  int world_size = 1;
  double started_before_init = -1; // seconds from exec to ddp::init
  Clock::time_point init_start;
  Clock::time_point init_end;
  Clock::time_point first_backward;
  Clock::time_point last_backward_end;
  Clock::time_point pass_start;
  long long passes = 0;
  Clock::duration waited{};
  Clock::duration checked{};
  Clock::duration collectives{};
  long long collective_count = 0;
};

Profile& state() {
  static Profile* p = new Profile(); // outlives static destructors
  return *p;
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

/// The process's age: now (CLOCK_BOOTTIME) less its start time, field 22 of
/// /proc/self/stat in clock ticks since boot; -1 where unknown.
double process_age() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)),
                   std::istreambuf_iterator<char>());
  const auto close = text.rfind(')'); // the command may hold spaces
  if (close == std::string::npos) {
    return -1;
  }
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && (fields >> field); ++i) {
    if (i == 22) {
      timespec now{};
      const long ticks = ::sysconf(_SC_CLK_TCK);
      if (ticks <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &now) != 0) {
        return -1;
      }
      const double start = std::strtod(field.c_str(), nullptr) / ticks;
      return static_cast<double>(now.tv_sec) + now.tv_nsec * 1e-9 - start;
    }
  }
  return -1;
}

void report() {
  Profile& p = state();
  std::lock_guard<std::mutex> lock(p.mutex);
  const auto end = Clock::now();
  std::ostringstream line;
  line.setf(std::ios::fixed);
  line.precision(3);
  line << "ddp: profile rank " << p.rank << " of " << p.world_size << ":";
  if (p.started_before_init >= 0) {
    line << " start-up " << p.started_before_init << " s,";
  }
  line << " init " << seconds(p.init_end - p.init_start) << " s,";
  if (p.passes == 0) {
    line << " no synchronised backward pass, after init "
         << seconds(end - p.init_end) << " s";
  } else {
    line << " before the first backward "
         << seconds(p.first_backward - p.init_end) << " s, training "
         << seconds(p.last_backward_end - p.first_backward) << " s ("
         << p.passes << " backward passes; waiting for gradients "
         << seconds(p.waited) << " s, sync checks " << seconds(p.checked)
         << " s), after the last backward "
         << seconds(end - p.last_backward_end) << " s";
  }
  line << "; the program's collectives " << seconds(p.collectives) << " s ("
       << p.collective_count << ")\n";
  const std::string text = line.str();
  // One write: the ranks' lines do not interleave.
  (void)!::write(STDERR_FILENO, text.data(), text.size());
}

} // namespace

bool enabled() {
  static const bool on = [] {
    const char* value = std::getenv("DDP_PROFILE");
    return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
  }();
  return on;
}

void init_started() {
  if (!enabled()) {
    return;
  }
  Profile& p = state();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.started_before_init = process_age();
  p.init_start = Clock::now();
}

void init_finished(int rank, int world_size) {
  if (!enabled()) {
    return;
  }
  {
    Profile& p = state();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.rank = rank;
    p.world_size = world_size;
    p.init_end = Clock::now();
  }
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(report); });
}

void backward_started() {
  if (!enabled()) {
    return;
  }
  Profile& p = state();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.pass_start = Clock::now();
  if (p.passes == 0) {
    p.first_backward = p.pass_start;
  }
}

void backward_finished(Clock::duration waited, Clock::duration checked) {
  if (!enabled()) {
    return;
  }
  Profile& p = state();
  std::lock_guard<std::mutex> lock(p.mutex);
  ++p.passes;
  p.waited += waited;
  p.checked += checked;
  p.last_backward_end = Clock::now();
}

void collective(Clock::duration took) {
  Profile& p = state();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.collectives += took;
  ++p.collective_count;
}

} // namespace profile
} // namespace detail
} // namespace ddp
