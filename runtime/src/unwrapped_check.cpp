// The safety net for unwrapped training (unwrapped_check.h). LibTorch has no
// hook on Optimizer::step(), so a backward pass stands for a training step:
// autograd runs every node under a RecordFunction of scope
// BACKWARD_FUNCTION, which a global callback limited to that scope sees
// without touching the forward pass.

#include "unwrapped_check.h"

#include <ddp/data.h>

#include <ATen/record_function.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace ddp {
namespace detail {
namespace {

struct UnwrappedCheck {
  // Under a launcher, enabled, and neither a wrapper nor the warning yet.
  std::atomic<bool> armed{false};
  std::atomic<bool> backward_seen{false};
  std::atomic<int> wrappers{0};
  int rank = 0;
  int world_size = 1;
  std::mutex mutex; // guards what follows
  bool started = false;
  bool has_callback = false;
  at::CallbackHandle callback = 0;
};

// Never destroyed: read at exit and from autograd's threads.
UnwrappedCheck& check() {
  static auto* state = new UnwrappedCheck;
  return *state;
}

bool enabled_by_environment() {
  const char* value = std::getenv("DDP_WARN_UNWRAPPED");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

std::unique_ptr<at::ObserverContext>
on_backward_node(const at::RecordFunction& /*fn*/) {
  check().backward_seen.store(true, std::memory_order_relaxed);
  return nullptr;
}

void stop_watching() {
  auto& s = check();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.has_callback) {
    at::removeCallback(s.callback);
    s.has_callback = false;
  }
}

void warn_once() {
  auto& s = check();
  if (!s.armed.exchange(false) || s.wrappers.load() > 0 || s.rank != 0) {
    return;
  }
  // One write, so that it is not interleaved with other output.
  std::fprintf(
      stderr,
      "ddp: warning: backward passes ran under a launcher (world size %d), "
      "but no ddp::DistributedDataParallel was constructed in this process "
      "(nor ddp::distribute called) after ddp::init: gradients are never "
      "averaged across ranks, so every rank trains its own copy of the "
      "model. Wrap the model with ddp::DistributedDataParallel after placing "
      "it on its device (model->to(device)). DDP_WARN_UNWRAPPED=0 turns this "
      "warning off.\n",
      s.world_size);
  std::fflush(stderr);
}

void check_at_exit() {
  auto& s = check();
  if (s.armed.load() && s.backward_seen.load()) {
    warn_once();
  }
}

} // namespace

void arm_unwrapped_check(int rank, int world_size) {
  if (world_size <= 1 || !enabled_by_environment()) {
    return;
  }
  auto& s = check();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.started || s.wrappers.load() > 0) {
      return;
    }
    s.started = true;
    s.rank = rank;
    s.world_size = world_size;
    s.callback = at::addGlobalCallback(
        at::RecordFunctionCallback(on_backward_node)
            .scopes({at::RecordScope::BACKWARD_FUNCTION}));
    s.has_callback = true;
    s.armed.store(true);
  }
  // Runs at exit() and on return from main; not after a crash or _Exit.
  std::atexit(check_at_exit);
}

void note_wrapper_constructed() {
  auto& s = check();
  s.wrappers.fetch_add(1);
  s.armed.store(false);
  stop_watching();
}

void check_unwrapped_training() {
  auto& s = check();
  if (!s.armed.load(std::memory_order_relaxed) ||
      !s.backward_seen.load(std::memory_order_relaxed)) {
    return;
  }
  stop_watching();
  warn_once();
}

} // namespace detail
} // namespace ddp
