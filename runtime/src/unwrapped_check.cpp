// The safety net for training that is not data parallel (unwrapped_check.h).
//
// LibTorch has no hook on Optimizer::step(), so the net watches what a step
// leaves behind. Autograd runs every node under a RecordFunction of scope
// BACKWARD_FUNCTION; a global callback limited to that scope sees the first
// node of each backward pass and, there, the pass's whole graph
// (get_current_graph_task_nodes_in_graph). Its AccumulateGrad nodes are the
// leaves that get a gradient. A leaf whose accumulator no wrapper hooked is
// remembered with a fingerprint of its values; when it comes back in a later
// pass with other values, something updated it in place between the two
// passes: an optimizer stepped a parameter that no wrapper covers, and every
// rank trains its own copy. A wrapped parameter that reappears with a new
// accumulator was replaced under its wrapper (to(dtype) after the wrap).

#include "unwrapped_check.h"

#include "fault_report.h"

#include <ddp/data.h>

#include <ATen/record_function.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/graph_task.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace ddp {
namespace detail {
namespace {

// A leaf outside every wrapper that got a gradient, as last seen.
struct Leaf {
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> tensor;
  double sum = 0; // its values' sum when last seen
  int64_t pass = 0;
  std::string consumer; // the autograd node that used it, for the message
};

struct UnwrappedCheck {
  std::atomic<bool> armed{false};
  bool allow = false; // DDP_ALLOW_UNWRAPPED=1: warn once and go on
  bool quiet = false; // DDP_WARN_UNWRAPPED=0 (older name): not even warn
  int rank = 0;
  int world_size = 1;
  std::mutex mutex; // guards what follows
  bool started = false;
  bool warned = false;
  int64_t passes = 0;
  std::unordered_map<const c10::TensorImpl*, Leaf> leaves;
};

// Never destroyed: read at exit and from autograd's threads.
UnwrappedCheck& check() {
  static auto* state = new UnwrappedCheck;
  return *state;
}

bool env_is(const char* name, const char* value) {
  const char* text = std::getenv(name);
  return text != nullptr && std::strcmp(text, value) == 0;
}

std::string describe_leaf(const torch::Tensor& tensor,
                          const std::string& consumer) {
  std::ostringstream out;
  out << c10::toString(tensor.scalar_type()) << ' ' << tensor.sizes() << " on "
      << tensor.device();
  if (!consumer.empty()) {
    out << ", used by " << consumer;
  }
  return out.str();
}

// What tells a stepped leaf: LibTorch 1.13's optimizers update
// `p.data()`, which has a version counter of its own, so the values
// themselves are compared. Only leaves outside every wrapper pay for it.
double fingerprint(const torch::Tensor& leaf) {
  torch::NoGradGuard no_grad;
  return leaf.detach().sum(torch::kDouble).item<double>();
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// The node whose edge leads to `accumulator` (what used the leaf in the
// forward pass): only to name it.
std::string consumer_of(const std::unordered_set<torch::autograd::Node*>& graph,
                        const torch::autograd::Node* accumulator) {
  for (const auto* node : graph) {
    for (const auto& edge : node->next_edges()) {
      if (edge.function.get() == accumulator) {
        return node->name();
      }
    }
  }
  return {};
}

// Caller holds the mutex. Ends the job, or warns once where allowed.
void found_unwrapped(UnwrappedCheck& s, const std::string& leaf,
                     int64_t stepped_after) {
  if (s.allow) {
    if (!s.quiet && !s.warned && s.rank == 0) {
      s.warned = true;
      const std::string line =
          "ddp: warning: an optimizer steps a parameter that no "
          "ddp::DistributedDataParallel covers (" +
          leaf +
          "): every rank trains its own copy of it, as "
          "DDP_ALLOW_UNWRAPPED=1 allows.\n";
      std::fputs(line.c_str(), stderr);
      std::fflush(stderr);
    }
    return;
  }
  end_job("an optimizer steps a parameter that no "
          "ddp::DistributedDataParallel covers (" +
              leaf + "; updated after backward pass " +
              std::to_string(stepped_after) +
              "): every rank would train its own copy of the model. Wrap the "
              "model that owns it with ddp::DistributedDataParallel after "
              "placing it (or call ddp::distribute(model)); "
              "DDP_ALLOW_UNWRAPPED=1 lets a program that means to train "
              "independent copies go on",
          FailureKind::kException);
}

// One backward pass's graph: its leaves against the wrappers' accumulators.
void scan(const std::unordered_set<torch::autograd::Node*>& graph) {
  auto& s = check();
  std::lock_guard<std::mutex> lock(s.mutex);
  const int64_t pass = ++s.passes;
  for (auto* node : graph) {
    auto* accumulator = dynamic_cast<torch::autograd::AccumulateGrad*>(node);
    if (accumulator == nullptr || is_wrapped_accumulator(accumulator)) {
      continue;
    }
    const auto& variable = accumulator->variable;
    if (!variable.defined()) {
      continue;
    }
    const c10::TensorImpl* key = variable.unsafeGetTensorImpl();
    if (auto replaced = wrapped_parameter_replaced(key)) {
      end_job(*replaced, FailureKind::kException);
    }
    const double sum = fingerprint(variable);
    auto found = s.leaves.find(key);
    if (found != s.leaves.end() && !found->second.tensor.expired()) {
      if (!same_bits(sum, found->second.sum)) {
        found_unwrapped(s, describe_leaf(variable, found->second.consumer),
                        found->second.pass);
      }
      found->second.sum = sum;
      found->second.pass = pass;
      continue;
    }
    if (found != s.leaves.end()) {
      s.leaves.erase(found); // a dead leaf's address, reused
    }
    s.leaves.emplace(
        key,
        Leaf{c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(
                 variable.getIntrusivePtr()),
             sum, pass, consumer_of(graph, accumulator)});
  }
  // Leaves that died (a batch's input that required grad) are forgotten.
  if (s.leaves.size() > 64) {
    for (auto it = s.leaves.begin(); it != s.leaves.end();) {
      it = it->second.tensor.expired() ? s.leaves.erase(it) : std::next(it);
    }
  }
}

// The first node of each backward pass: nodes run in decreasing sequence
// number within a pass (AccumulateGrad, numbered -1 here, aside), so a
// higher number, or another graph, starts a new pass.
std::unique_ptr<at::ObserverContext>
on_backward_node(const at::RecordFunction& fn) {
  if (!check().armed.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  const auto* graph = torch::autograd::get_current_graph_task_nodes_in_graph();
  if (graph == nullptr) {
    return nullptr;
  }
  thread_local const void* last_graph = nullptr;
  thread_local int64_t last_sequence = -1;
  const int64_t sequence = static_cast<int64_t>(fn.seqNr());
  const bool new_pass =
      graph != last_graph || (sequence >= 0 && sequence > last_sequence);
  if (sequence >= 0) {
    last_sequence = sequence;
  }
  last_graph = graph;
  if (new_pass) {
    scan(*graph);
  }
  return nullptr;
}

// A step after the last backward pass (a program that ends right after it)
// shows at exit.
void check_at_exit() {
  auto& s = check();
  if (!s.armed.load() || job_is_failing()) {
    return;
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& item : s.leaves) {
    auto tensor = item.second.tensor.lock();
    if (!tensor) {
      continue;
    }
    const torch::Tensor leaf(std::move(tensor));
    if (!same_bits(fingerprint(leaf), item.second.sum)) {
      found_unwrapped(s, describe_leaf(leaf, item.second.consumer),
                      item.second.pass);
      return;
    }
  }
}

} // namespace

void arm_unwrapped_check(int rank, int world_size) {
  if (world_size <= 1) {
    return;
  }
  auto& s = check();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.started) {
      return;
    }
    s.started = true;
    s.rank = rank;
    s.world_size = world_size;
    s.quiet = env_is("DDP_WARN_UNWRAPPED", "0");
    s.allow = s.quiet || env_is("DDP_ALLOW_UNWRAPPED", "1");
    if (s.quiet) {
      return; // the older switch: no watch at all (what the benchmark's
              // "off" measures against)
    }
    at::addGlobalCallback(at::RecordFunctionCallback(on_backward_node)
                              .scopes({at::RecordScope::BACKWARD_FUNCTION}));
    s.armed.store(true);
  }
  // Runs at exit() and on return from main; not after a crash or _Exit.
  std::atexit(check_at_exit);
}

void note_wrapper_constructed() {}

void check_unwrapped_training() {}

} // namespace detail
} // namespace ddp
