// Linked into the migrated example by the end-to-end test (never part of the
// example's sources): when a ddp::DistributedDataParallel ends, appends
//
//   <rank> <hash> tensors=<n> bytes=<b> active=<0|1> shm=<0|1>
//
// to $DDPIFY_E2E_HASH_FILE, the hash being FNV-1a 64 over the name, dtype,
// shape and raw bytes of every parameter and buffer in order; and one line
// per tensor, `<rank> <wrapper#> <hash> <name>`, to the same path plus
// ".tensors", so a mismatch can be traced to the first differing tensor.

#include <ddp/data_parallel.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct Fnv1a {
  uint64_t value = 14695981039346656037ULL;
  void add(const void *data, size_t size) {
    const auto *bytes = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < size; ++i) {
      value = (value ^ bytes[i]) * 1099511628211ULL;
    }
  }
  void add(const std::string &text) { add(text.data(), text.size() + 1); }
};

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(value));
  return text;
}

// One write() per call with O_APPEND: lines of concurrent ranks never mix.
void append(const std::string &path, const std::string &text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) {
    std::perror(("ddpify e2e hook: " + path).c_str());
    return;
  }
  if (::write(fd, text.data(), text.size()) !=
      static_cast<ssize_t>(text.size())) {
    std::perror(("ddpify e2e hook: " + path).c_str());
  }
  ::close(fd);
}

void observe(const ddp::testing::WrapperState &state) {
  const char *path = std::getenv("DDPIFY_E2E_HASH_FILE");
  if (path == nullptr || *path == '\0') {
    return;
  }
  static std::atomic<int> wrappers{0};
  const int wrapper = wrappers++;
  const std::string rank = std::to_string(state.rank);
  Fnv1a total;
  int64_t bytes = 0;
  std::string details;
  for (size_t i = 0; i < state.tensors.size(); ++i) {
    const auto tensor = state.tensors[i].detach().to(torch::kCPU).contiguous();
    Fnv1a one;
    one.add(state.names[i]);
    one.add(std::string(c10::toString(tensor.scalar_type())));
    for (const int64_t size : tensor.sizes()) {
      one.add(&size, sizeof size);
    }
    one.add(tensor.data_ptr(), tensor.nbytes());
    bytes += static_cast<int64_t>(tensor.nbytes());
    total.add(&one.value, sizeof one.value);
    details += rank + " " + std::to_string(wrapper) + " " + hex(one.value) +
               " " + state.names[i] + "\n";
  }
  append(std::string(path) + ".tensors", details);
  append(path, rank + " " + hex(total.value) +
                   " tensors=" + std::to_string(state.tensors.size()) +
                   " bytes=" + std::to_string(bytes) +
                   " active=" + (state.active ? "1" : "0") +
                   " shm=" + (state.shared_memory ? "1" : "0") + "\n");
}

// Registered before main() runs, i.e. before any wrapper exists.
[[maybe_unused]] const bool registered =
    (ddp::testing::set_wrapper_observer(&observe), true);

} // namespace
