// ddp::DistributedDataParallel: gradient bucketing and overlapped all-reduce,
// attached to autograd through post hooks on the parameters' gradient
// accumulators, the mechanism PyTorch's own Reducer uses.

#include <ddp/data_parallel.h>

#include "env_launcher.h"
#include "fault_report.h"
#include "join.h"
#include "profile.h"
#include "shm_allreduce.h"
#include "subgroups.h"
#include "unwrapped_check.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10/util/strides.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ddp {
namespace detail {
namespace {

constexpr const char* kWho = "ddp::DistributedDataParallel: ";

// The wrapper's collectives: a failure becomes a CollectiveError naming the
// collective, this rank and its host, recorded for the launcher.
void wait_for(const c10::intrusive_ptr<c10d::Work>& work, const Position& at) {
  try {
    wait_collective(work, at);
  } catch (const PositionsError&) {
    throw; // names every rank's position already
  } catch (const std::exception& e) {
    collective_failed((std::string(kWho) + at.what).c_str(), e);
  }
}

// DDP_COMM_HOOK overrides the option.
c10::optional<c10::ScalarType> comm_hook_dtype(CommHook hook) {
  if (const char* text = std::getenv("DDP_COMM_HOOK")) {
    const std::string value = text;
    if (value == "fp16") {
      hook = CommHook::kFp16;
    } else if (value == "bf16") {
      hook = CommHook::kBf16;
    } else if (value == "none" || value.empty()) {
      hook = CommHook::kNone;
    } else {
      TORCH_CHECK(false, kWho, "DDP_COMM_HOOK='", value,
                  "' is not a hook: use none, fp16 or bf16");
    }
  }
  switch (hook) {
  case CommHook::kFp16:
    return c10::kHalf;
  case CommHook::kBf16:
    return c10::kBFloat16;
  case CommHook::kNone:
    break;
  }
  return c10::nullopt;
}

// DDP_CHECK_SYNC overrides the option: how many synchronised backward
// passes apart the parameters are compared across ranks (0: never).
int64_t check_sync_every(int64_t option) {
  const char* text = std::getenv("DDP_CHECK_SYNC");
  if (text == nullptr || *text == '\0') {
    return option;
  }
  char* end = nullptr;
  const long long every = std::strtoll(text, &end, 10);
  TORCH_CHECK(end != text && *end == '\0' && every >= 0, kWho,
              "DDP_CHECK_SYNC='", text,
              "' is not a number of steps: use 0 (off) or a positive count");
  return every;
}

bool hierarchical_allowed_by_env() {
  const char* value = std::getenv("DDP_HIERARCHICAL");
  return value == nullptr || std::string(value) != "0";
}

// One bucket of the hierarchical all-reduce, on every rank of every host:
// the host's sum in shared memory, the hosts' sum over `leaders` (this
// host's first rank only; compressed under a comm hook), then that result,
// averaged, into every rank's region.
void hierarchical_allreduce(
    SharedMemoryGroup& shm,
    const c10::intrusive_ptr<c10d::ProcessGroup>& leaders,
    c10::optional<c10::ScalarType> hook, int64_t offset, int64_t numel,
    int64_t averaged, c10::ScalarType dtype, int world_size) {
  shm.allreduce(offset, numel, /*averaged=*/0, dtype);
  if (leaders) {
    auto view =
        torch::from_blob(static_cast<char*>(shm.local_region()) + offset,
                         {numel}, torch::dtype(dtype));
    if (hook) {
      auto compressed = view.to(*hook).div_(world_size);
      std::vector<torch::Tensor> tensors{compressed};
      leaders->allreduce(tensors)->wait();
      view.copy_(compressed);
    } else {
      std::vector<torch::Tensor> tensors{view};
      leaders->allreduce(tensors)->wait();
    }
  }
  // Under a hook the leader divided before the exchange (flags included:
  // only whether they are zero matters).
  shm.broadcast(offset, numel, /*root=*/0, hook ? 0 : averaged, world_size,
                dtype);
}

void wait_for(std::future<void>& done, const Position& at) {
  try {
    wait_collective(done, at);
  } catch (const PositionsError&) {
    throw;
  } catch (const std::exception& e) {
    collective_failed((std::string(kWho) + at.what).c_str(), e);
  }
}

// The wrapper whose backward pass holds the process group: only it launches
// buckets while backward runs; the others of the same pass launch theirs in
// their finalize, one wrapper after another, so that every wrapper's
// collectives are contiguous (what a joined rank replays, ddp::join).
std::atomic<const void*> launching_wrapper{nullptr};

// Per-parameter record in the shape check: ndim, dtype, requires_grad and up
// to kMaxDims sizes (a deeper tensor folds the rest into the last slot).
constexpr int64_t kMaxDims = 8;
constexpr int64_t kRecord = 3 + kMaxDims;

std::string shape_string(const int64_t* record) {
  std::ostringstream out;
  const int64_t ndim = record[0];
  if (ndim < 0) {
    return "<absent>";
  }
  out << '[';
  for (int64_t d = 0; d < std::min(ndim, kMaxDims); ++d) {
    out << (d ? ", " : "") << record[3 + d];
  }
  if (ndim > kMaxDims) {
    out << ", ...";
  }
  out << ']';
  out << ' ' << c10::toString(static_cast<c10::ScalarType>(record[1]));
  if (!record[2]) {
    out << " (frozen)";
  }
  return out.str();
}

// Packs tensors of any dtypes into one byte buffer, so that a single
// collective moves all of them bit-exactly.
torch::Tensor pack_bytes(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> bytes;
  bytes.reserve(tensors.size());
  for (const auto& t : tensors) {
    bytes.push_back(t.detach().contiguous().reshape({-1}).view(torch::kUInt8));
  }
  return torch::cat(bytes);
}

void unpack_bytes(const torch::Tensor& flat,
                  const std::vector<torch::Tensor>& tensors) {
  int64_t offset = 0;
  for (const auto& t : tensors) {
    const int64_t n = t.numel() * static_cast<int64_t>(t.element_size());
    auto src = flat.narrow(0, offset, n);
    auto dst = t.detach();
    if (dst.is_contiguous()) {
      // Byte-wise into the tensor itself: the packed offset of a wider dtype
      // need not be aligned for a view the other way round.
      dst.reshape({-1}).view(torch::kUInt8).copy_(src);
    } else {
      dst.copy_(src.clone().view(t.scalar_type()).view(t.sizes()));
    }
    offset += n;
  }
}

// The accumulators already managed by a live wrapper: two wrappers on one
// parameter would all-reduce (and average) its gradient twice.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::set<const torch::autograd::Node*>& registry() {
  static std::set<const torch::autograd::Node*> nodes;
  return nodes;
}

// ddp::join() where nothing may throw (a destructor, exit): its failure
// ends the job with one line. Skipped while an exception unwinds or the job
// is already failing: the peers may never join.
void join_or_end_job() noexcept {
  if (std::uncaught_exceptions() > 0 || job_is_failing()) {
    return;
  }
  try {
    ddp::join();
  } catch (const CollectiveError& e) {
    end_job(describe(e), FailureKind::kCollective);
  } catch (const std::exception& e) {
    end_job(describe(e), FailureKind::kException);
  }
}

} // namespace

class Reducer;

// The test observer (ddp::testing) and the reducers it has not seen yet, so
// that those still alive at exit (ddp::distribute's) are reported then.
std::atomic<testing::WrapperObserver> wrapper_observer{nullptr};
void track_reducer(Reducer* reducer);
void untrack_reducer(Reducer* reducer);

// Post hook on a parameter's AccumulateGrad node: runs after the incoming
// gradient has been added to param.grad.
class ReadyHook : public torch::autograd::FunctionPostHook {
public:
  ReadyHook(Reducer* reducer, size_t index)
      : reducer_(reducer), index_(index) {}
  torch::autograd::variable_list
  operator()(const torch::autograd::variable_list& outputs,
             const torch::autograd::variable_list& /*inputs*/) override;

private:
  Reducer* reducer_;
  size_t index_;
};

class Reducer {
public:
  Reducer(torch::nn::Module& module, DistributedDataParallelOptions options)
      : options_(std::move(options)) {
    for (const auto& item : module.named_parameters(/*recurse=*/true)) {
      all_names_.push_back(item.key());
      all_params_.push_back(item.value());
    }
    for (const auto& item : module.named_buffers(/*recurse=*/true)) {
      if (item.value().defined()) {
        buffer_names_.push_back(item.key());
        buffers_.push_back(item.value());
      }
    }
    if (!ddp::is_distributed()) {
      track_reducer(this);
      return; // world size 1: a no-op wrapper
    }
    try {
      set_up();
    } catch (...) {
      // A wrapper that failed to build is no wrapper: nothing of it stays
      // registered (the checks at exit would find a dangling one).
      remove_hooks();
      throw;
    }
    track_reducer(this);
  }

  void set_up() {
    announce_program_collective(
        "the construction of a DistributedDataParallel");
    pg_ = ddp::process_group();
    TORCH_CHECK(pg_, kWho, "distributed, but no process group");
    // A group of one (DDP_GROUP_OF_ONE) goes the whole distributed way too.
    world_size_ = pg_->getSize();
    rank_ = pg_->getRank();
    hook_dtype_ = comm_hook_dtype(options_.comm_hook());
    check_sync_every_ = check_sync_every(options_.check_sync_every());
    check_hook_dtype();
    verify_shapes();
    broadcast_states();
    build_buckets();
    install_hooks();
    note_wrapper_constructed(); // the process is data parallel
  }

  ~Reducer() {
    join_at_end();
    check_at_end();
    report_final_state();
    untrack_reducer(this);
    remove_hooks();
  }

  // The end-of-training sync check: the ranks' parameters compared once
  // more when the wrapper ends (its destruction, ddp::shutdown, exit), so a
  // job whose ranks drifted apart never ends quietly. Parameters only:
  // buffers may legitimately differ after a last forward in training mode.
  // Skipped while an exception unwinds or the job is already failing: the
  // other ranks may never reach their check.
  void check_at_end() noexcept {
    if (!active() || end_checked_.exchange(true) ||
        std::uncaught_exceptions() > 0 || job_is_failing()) {
      return;
    }
    try {
      // As finalize() does: check_in_sync() runs under mutex_.
      std::lock_guard<std::mutex> lock(mutex_);
      check_in_sync(stats_.synced_backwards, /*at_end=*/true);
    } catch (const CollectiveError& e) {
      end_job(describe(e), FailureKind::kCollective);
    } catch (const std::exception& e) {
      end_job(describe(e), FailureKind::kException);
    }
  }

  // A wrapper that ends while peers may still step joins them first (its
  // own backward passes among theirs), as ddp::join() does.
  void join_at_end() noexcept {
    if (active() && !end_checked_) {
      join_or_end_job();
    }
  }

  // Hands the final parameters and buffers to the test observer, once.
  void report_final_state() noexcept {
    const auto observer = wrapper_observer.load();
    if (observer == nullptr || reported_.exchange(true)) {
      return;
    }
    try {
      testing::WrapperState state;
      state.rank = active() ? rank_ : ddp::rank();
      state.active = active();
      state.shared_memory = uses_shared_memory();
      state.hierarchical = hierarchical_;
      state.names = all_names_;
      state.names.insert(state.names.end(), buffer_names_.begin(),
                         buffer_names_.end());
      state.tensors = all_params_;
      state.tensors.insert(state.tensors.end(), buffers_.begin(),
                           buffers_.end());
      observer(state);
    } catch (const std::exception& e) {
      std::cerr << "ddp::testing: the wrapper observer failed: " << e.what()
                << '\n';
    }
  }

  bool active() const { return static_cast<bool>(pg_); }
  // A collective or check of this wrapper failed (the program may have
  // caught it): its end check would only fail again, or wait for a peer
  // that is gone.
  void mark_failed() { end_checked_ = true; }
  uint64_t number() const { return number_; }
  void set_number(uint64_t number) { number_ = number; }
  // Whether `module` still holds exactly the parameters this reducer hooked.
  bool holds_parameters_of(torch::nn::Module& module) const {
    const auto params = module.parameters(/*recurse=*/true);
    if (params.size() != all_params_.size()) {
      return false;
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (!params[i].is_same(all_params_[i])) {
        return false;
      }
    }
    return true;
  }
  const DistributedDataParallelOptions& options() const { return options_; }

  bool sync_enabled() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return sync_enabled_;
  }
  void set_sync_enabled(bool enabled) {
    std::lock_guard<std::mutex> lock(mutex_);
    sync_enabled_ = enabled;
  }

  DataParallelStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_ = {};
  }
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }
  bool uses_shared_memory() const { return static_cast<bool>(shm_); }
  bool uses_hierarchical_allreduce() const { return hierarchical_; }
  std::vector<std::vector<std::string>> bucket_parameter_names() const {
    std::vector<std::vector<std::string>> names;
    for (const auto& bucket : buckets_) {
      names.emplace_back();
      for (size_t slot : bucket.slots) {
        names.back().push_back(slots_[slot].name);
      }
    }
    return names;
  }

  // Called by a ReadyHook on the autograd engine's thread.
  void mark_ready(size_t index) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!sync_enabled_) {
      return; // no_sync: gradients accumulate locally
    }
    if (!in_backward_) {
      // Runs once the whole graph has executed, before backward() returns:
      // where buckets that never filled are launched and all are awaited.
      // If backward fails first, the engine drops the callback unrun; the
      // token's destructor then clears the half-done state, so the next
      // backward pass starts afresh instead of never synchronising again.
      struct Token {
        Reducer* reducer = nullptr;
        bool ran = false;
        ~Token() {
          if (reducer && !ran) {
            std::lock_guard<std::mutex> lock(reducer->mutex_);
            reducer->reset_backward_state();
          }
        }
      };
      auto token = std::make_shared<Token>();
      torch::autograd::Engine::get_default_engine().queue_callback([token] {
        token->ran = true;
        try {
          token->reducer->finalize();
        } catch (...) {
          token->reducer->mark_failed();
          throw;
        }
      });
      // Armed only once queued: were queue_callback to throw, the token
      // must not take mutex_, which this thread holds.
      token->reducer = this;
      in_backward_ = true;
      const void* none = nullptr;
      owns_launch_ = launching_wrapper.compare_exchange_strong(none, this);
      detail::profile::backward_started();
    }
    Slot& slot = slots_[index];
    if (slot.ready) {
      return; // reentrant backward fired the hook twice: already packed
    }
    slot.ready = true;
    pack(slot);
    Bucket& bucket = buckets_[slot.bucket];
    if (--bucket.pending == 0) {
      launch_in_order();
    }
  }

private:
  struct Slot {
    torch::Tensor param;
    std::string name;
    size_t bucket = 0;
    size_t position = 0; // index within the bucket
    int64_t offset = 0;  // in elements, within the bucket's flat tensor
    int64_t numel = 0;
    bool ready = false;
    // What the parameter was when it was wrapped: a later to(dtype),
    // to(device) or a load of another size replaces it under the bucket.
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    c10::Device device = c10::Device(c10::kCPU);
    std::vector<int64_t> sizes;
  };
  struct Bucket {
    // [gradients..., one "has a gradient" flag per parameter]: the flags
    // ride along in the same all-reduce, so a parameter that no rank gave a
    // gradient keeps an undefined grad, as under PyTorch.
    torch::Tensor flat;
    int64_t grad_numel = 0;
    std::vector<size_t> slots;
    size_t pending = 0;
    bool launched = false;
    c10::intrusive_ptr<c10d::Work> work;
    // What the process group all-reduces under a comm hook: `flat` cast and
    // divided by the world size (copied back when it is done).
    torch::Tensor compressed;
    // Byte offset of `flat` in this rank's shared-memory region, when the
    // buckets live there (shm_), and the all-reduce in flight there.
    int64_t shm_offset = -1;
    std::future<void> shm_done;
    // Its all-reduce's place among the job's collectives (join.h).
    Position at;
  };

  // The parameter's slot in its bucket. An alias of the bucket's storage
  // rather than an autograd view: optimizers call detach_() on gradients,
  // which autograd refuses for views.
  torch::Tensor view_of(const Slot& slot) const {
    const auto& flat = buckets_[slot.bucket].flat;
    return torch::empty({0}, flat.options())
        .set_(flat.storage(), flat.storage_offset() + slot.offset,
              slot.param.sizes(), c10::contiguous_strides(slot.param.sizes()));
  }

  static bool is_view_of(const torch::Tensor& grad, const torch::Tensor& view) {
    return grad.defined() && grad.data_ptr() == view.data_ptr() &&
           grad.sizes() == view.sizes() && grad.strides() == view.strides();
  }

  // Copies a parameter's gradient into its bucket slot (zeros when it has
  // none). With gradient_as_bucket_view, param.grad becomes that slot, so
  // from the next step on autograd accumulates straight into the bucket.
  void pack(Slot& slot) {
    if (const auto change = replacement_of(slot)) {
      end_checked_ = true;
      throw std::runtime_error(*change);
    }
    torch::NoGradGuard no_grad;
    auto view = view_of(slot);
    auto& grad = slot.param.mutable_grad();
    const auto flag_index =
        buckets_[slot.bucket].grad_numel + static_cast<int64_t>(slot.position);
    auto flag = buckets_[slot.bucket].flat.narrow(0, flag_index, 1);
    if (!grad.defined()) {
      view.zero_();
      flag.fill_(0);
      return;
    }
    flag.fill_(1);
    if (is_view_of(grad, view)) {
      return;
    }
    view.copy_(grad);
    if (options_.gradient_as_bucket_view() && !grad.requires_grad()) {
      grad = view;
    }
  }

  // The one-line error for a parameter that no longer is what the wrapper
  // was built over (dtype, device or size), or nullopt.
  c10::optional<std::string> replacement_of(const Slot& slot) const {
    const auto& p = slot.param;
    if (p.scalar_type() == slot.dtype && p.device() == slot.device &&
        p.sizes() == c10::IntArrayRef(slot.sizes)) {
      return c10::nullopt;
    }
    return replaced_message(slot.name, slot.dtype, slot.device, slot.sizes, p);
  }

public:
  // The name of `param` among this wrapper's parameters when it was
  // replaced under it (its dtype, device or size changed), else nullopt.
  c10::optional<std::string> replaced_parameter(const at::TensorImpl* param) {
    for (const auto& slot : slots_) {
      if (slot.param.unsafeGetTensorImpl() == param) {
        if (auto change = replacement_of(slot)) {
          return change;
        }
        // The same parameter, unchanged, yet a new gradient accumulator:
        // set_data() with a tensor of another type and back.
        return replaced_message(slot.name, slot.dtype, slot.device, slot.sizes,
                                slot.param);
      }
    }
    return c10::nullopt;
  }

private:
  static std::string replaced_message(const std::string& name,
                                      c10::ScalarType dtype, c10::Device device,
                                      const std::vector<int64_t>& sizes,
                                      const torch::Tensor& now) {
    std::ostringstream msg;
    msg << kWho << "parameter '" << name
        << "' was replaced after the model was wrapped (it was "
        << c10::toString(dtype) << ' ' << c10::IntArrayRef(sizes) << " on "
        << device << ", it is " << c10::toString(now.scalar_type()) << ' '
        << now.sizes() << " on " << now.device()
        << "): its gradients are no longer averaged, so the ranks would "
           "train apart. Wrap the model after its last to(dtype), "
           "to(device) or load";
    return msg.str();
  }

  // Buckets go out strictly in index order on every rank: collectives are
  // matched by launch order, so an out-of-order bucket waits its turn.
  void launch_in_order() {
    if (!owns_launch_ || peers_joined()) {
      return; // launched in finalize()
    }
    launch_ready();
  }
  void launch_ready() {
    while (next_bucket_ < buckets_.size() &&
           buckets_[next_bucket_].pending == 0) {
      launch(buckets_[next_bucket_++]);
    }
  }

  void launch(Bucket& bucket) {
    // The last element counts the ranks that take this step (ddp::join).
    bucket.flat.narrow(0, bucket.flat.numel() - 1, 1).fill_(shadowing_ ? 0 : 1);
    bucket.at =
        begin_collective("gradient all-reduce", static_cast<int64_t>(number_),
                         stats_.synced_backwards + 1);
    if (hierarchical_) {
      // Captured by value: the worker thread may outlive this reducer.
      bucket.shm_done = shm_worker_->run(
          [shm = shm_, leaders = leaders_pg_, hook = hook_dtype_,
           offset = bucket.shm_offset, numel = bucket.flat.numel(),
           averaged = bucket.grad_numel, dtype = bucket.flat.scalar_type(),
           world = world_size_] {
            hierarchical_allreduce(*shm, leaders, hook, offset, numel, averaged,
                                   dtype, world);
          });
    } else if (shm_worker_) {
      // Averaged there: two barriers around one pass, on the worker thread.
      bucket.shm_done =
          shm_worker_->allreduce(bucket.shm_offset, bucket.flat.numel(),
                                 bucket.grad_numel, bucket.flat.scalar_type());
    } else if (shm_) {
      // The same, here and now (no core to spare for a thread).
      const BlockingCollective blocking(bucket.at);
      shm_->allreduce(bucket.shm_offset, bucket.flat.numel(), bucket.grad_numel,
                      bucket.flat.scalar_type());
    } else if (hook_dtype_) {
      // As PyTorch's fp16_compress_hook: cast, divide, all-reduce.
      bucket.compressed = bucket.flat.to(*hook_dtype_).div_(world_size_);
      std::vector<torch::Tensor> tensors{bucket.compressed};
      bucket.work = pg_->allreduce(tensors);
    } else {
      std::vector<torch::Tensor> tensors{bucket.flat};
      bucket.work = pg_->allreduce(tensors);
    }
    bucket.launched = true;
    ++stats_.allreduces;
    stats_.bytes +=
        bucket.flat.numel() *
        static_cast<int64_t>(hook_dtype_ ? c10::elementSize(*hook_dtype_)
                                         : bucket.flat.element_size());
  }

  // Caller holds mutex_.
  void reset_backward_state() {
    in_backward_ = false;
    next_bucket_ = 0;
    if (owns_launch_) {
      owns_launch_ = false;
      launching_wrapper.store(nullptr);
    }
    for (auto& slot : slots_) {
      slot.ready = false;
    }
    for (auto& bucket : buckets_) {
      bucket.pending = bucket.slots.size();
      bucket.launched = false;
      bucket.work.reset();
      bucket.shm_done = {};
    }
  }

  void finalize() {
    std::lock_guard<std::mutex> lock(mutex_);
    // Whatever happens below, the next backward pass starts afresh.
    struct Reset {
      Reducer* r;
      ~Reset() { r->reset_backward_state(); }
    } reset{this};

    // Parameters that got no gradient in this pass: their current grad (or
    // zeros) joins the all-reduce, so every rank launches every bucket.
    for (size_t b = next_bucket_; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      for (size_t s : bucket.slots) {
        if (!slots_[s].ready) {
          pack(slots_[s]);
        }
      }
      bucket.pending = 0;
    }
    // While a peer has joined, a header tells it what this pass is.
    const int root = peers_joined()
                         ? announce_backward(static_cast<int64_t>(number_),
                                             stats_.synced_backwards + 1)
                         : 0;
    synchronize(root);
  }

public:
  // ddp::join: this rank's part, with no gradients of its own, in its
  // peers' synchronised backward pass `step` (buffers from `root`). The
  // program's gradients are left alone.
  void shadow_backward(int64_t step, int root) {
    std::lock_guard<std::mutex> lock(mutex_);
    struct Reset {
      Reducer* r;
      ~Reset() {
        r->shadowing_ = false;
        r->reset_backward_state();
      }
    } reset{this};
    shadowing_ = true;
    stats_.synced_backwards = step - 1;
    for (auto& bucket : buckets_) {
      bucket.flat.zero_();
      bucket.pending = 0;
    }
    synchronize(root);
  }

  // Every live wrapper's state becomes `root`'s when the last rank joins.
  void take_state_of(int root) {
    std::lock_guard<std::mutex> lock(mutex_);
    broadcast_states(root, "final parameter broadcast");
  }

private:
  // The collectives of one synchronised backward pass, the same on every
  // rank, joined or not: the buckets in order, the buffers, the sync check.
  // Caller holds mutex_; every bucket is packed.
  void synchronize(int root) {
    const int64_t step = stats_.synced_backwards + 1;
    launch_ready();

    c10::intrusive_ptr<c10d::Work> buffer_work;
    torch::Tensor buffer_flat;
    Position buffer_at;
    if (options_.broadcast_buffers() && !buffers_.empty()) {
      // Overlaps the wait below; rank 0's running statistics win (the
      // lowest stepping rank's while a rank has joined), as with PyTorch's
      // per-forward buffer broadcast.
      buffer_flat = pack_bytes(buffers_);
      std::vector<torch::Tensor> tensors{buffer_flat};
      c10d::BroadcastOptions opts;
      opts.rootRank = root;
      buffer_at = begin_collective("buffer broadcast",
                                   static_cast<int64_t>(number_), step);
      buffer_work = pg_->broadcast(tensors, opts);
      ++stats_.broadcasts;
      stats_.bytes += buffer_flat.numel();
    }

    torch::NoGradGuard no_grad;
    const auto wait_start = detail::profile::Clock::now();
    // Under a comm hook the flags and the count were divided by the world
    // size too, except in the shared-memory all-reduce of one host.
    const bool divided = hook_dtype_ && (hierarchical_ || !shm_);
    int fewest_stepping = world_size_;
    for (auto& bucket : buckets_) {
      const auto tail = static_cast<int64_t>(bucket.slots.size()) + 1;
      bool averaged = true;
      if (bucket.shm_done.valid()) {
        wait_for(bucket.shm_done, bucket.at);
      } else if (bucket.work) {
        wait_for(bucket.work, bucket.at);
        if (bucket.compressed.defined()) {
          bucket.flat.copy_(bucket.compressed); // divided before the sum
          bucket.compressed = torch::Tensor();
        } else {
          averaged = false; // summed: divided below
        }
      }
      auto flags = bucket.flat.narrow(0, bucket.grad_numel, tail)
                       .to(torch::kCPU, torch::kFloat);
      const float* flag = flags.data_ptr<float>();
      const float count_value = flag[tail - 1];
      const int stepping = static_cast<int>(
          std::lround(divided ? count_value * world_size_ : count_value));
      fewest_stepping = std::min(fewest_stepping, stepping);
      auto grads = bucket.flat.narrow(0, 0, bucket.grad_numel);
      if (!averaged) {
        grads.div_(std::max(stepping, 1));
      } else if (stepping > 0 && stepping < world_size_) {
        // The mean over the ranks that took this step (ddp::join).
        grads.mul_(static_cast<double>(world_size_) / stepping);
      }
      if (shadowing_) {
        continue; // a joined rank's gradients stay its own
      }
      for (size_t i = 0; i < bucket.slots.size(); ++i) {
        if (flag[i] == 0) {
          continue; // no rank had a gradient: leave it undefined
        }
        Slot& slot = slots_[bucket.slots[i]];
        auto view = view_of(slot);
        auto& grad = slot.param.mutable_grad();
        if (is_view_of(grad, view)) {
          continue;
        }
        if (grad.defined() && !grad.requires_grad()) {
          grad.copy_(view);
        } else if (options_.gradient_as_bucket_view()) {
          grad = view;
        } else {
          grad = view.clone();
        }
      }
    }
    if (buffer_work) {
      wait_for(buffer_work, buffer_at);
      if (rank_ != root) {
        unpack_bytes(buffer_flat, buffers_);
      }
    }
    const auto check_start = detail::profile::Clock::now();
    ++stats_.synced_backwards;
    if (!shadowing_) {
      count_own_backward();
      saw_stepping_ranks(fewest_stepping, world_size_);
    }
    if (check_sync_every_ > 0 &&
        stats_.synced_backwards % check_sync_every_ == 0) {
      try {
        check_in_sync(stats_.synced_backwards, /*at_end=*/false);
      } catch (...) {
        // Said once: a program that catches it gets no second error at the
        // wrapper's end.
        end_checked_ = true;
        throw;
      }
    }
    const auto end = detail::profile::Clock::now();
    detail::profile::backward_finished(check_start - wait_start,
                                       end - check_start);
  }

  // The sync check: one checksum per parameter (and buffer, when they are
  // kept equal), all-gathered; every rank sees the same table, so every
  // rank throws the same error, naming the first tensor that differs.
  void check_in_sync(int64_t step, bool at_end) {
    const size_t n =
        all_params_.size() +
        (options_.broadcast_buffers() && !at_end ? buffers_.size() : 0);
    if (n == 0) {
      return;
    }
    // Parameters, then buffers: the i-th tensor and its name.
    auto tensor = [&](size_t i) -> const torch::Tensor& {
      return i < all_params_.size() ? all_params_[i]
                                    : buffers_[i - all_params_.size()];
    };
    auto name = [&](size_t i) -> const std::string& {
      return i < all_names_.size() ? all_names_[i]
                                   : buffer_names_[i - all_names_.size()];
    };
    torch::NoGradGuard no_grad;
    const auto device = collective_device();
    std::vector<torch::Tensor> sums;
    sums.reserve(n + 1);
    for (size_t i = 0; i < n; ++i) {
      sums.push_back(tensor(i).detach().sum(torch::kDouble).to(device));
    }
    // Whether this rank's parameters count: a joined rank's are those of
    // the step it joined at (ddp::join) until the last rank joins.
    sums.push_back(torch::full({}, shadowing_ ? 0.0 : 1.0,
                               torch::dtype(torch::kDouble).device(device)));
    const std::vector<torch::Tensor> table =
        gather_rows(torch::stack(sums),
                    at_end ? "end-of-training sync check" : "sync check", step);
    ++stats_.sync_checks;
    std::vector<int> compared;
    for (int r = 0; r < world_size_; ++r) {
      if (table[r].data_ptr<double>()[n] != 0) {
        compared.push_back(r);
      }
    }
    for (size_t i = 0; i < n && compared.size() > 1; ++i) {
      // Bits, not values: a NaN every rank holds is in sync.
      const double mine = table[compared[0]].data_ptr<double>()[i];
      bool same = true;
      for (size_t k = 1; k < compared.size() && same; ++k) {
        const double theirs = table[compared[k]].data_ptr<double>()[i];
        same = std::memcmp(&mine, &theirs, sizeof(double)) == 0;
      }
      if (same) {
        continue;
      }
      std::ostringstream msg;
      msg << kWho << "the ranks are out of sync "
          << (at_end ? "at the end of training, after step " : "at step ")
          << step << ": '" << name(i)
          << "' differs (its sum: " << std::setprecision(17);
      constexpr size_t kShown = 8;
      for (size_t k = 0; k < compared.size() && k < kShown; ++k) {
        msg << (k ? ", " : "") << "rank " << compared[k] << " "
            << table[compared[k]].data_ptr<double>()[i];
      }
      if (compared.size() > kShown) {
        msg << ", ...";
      }
      msg << "); something changed it on some ranks only (an update outside "
             "the optimizer, a rank-dependent branch, a load on one rank)";
      throw std::runtime_error(msg.str());
    }
  }

  // All ranks must hold the same parameters (count, shapes, dtypes, frozen
  // or not), or the buckets would not line up and the job would hang.
  // Where the backend takes tensors: NCCL only moves CUDA tensors, so the
  // wrapper's own small collectives (shape check, shared-memory vote) go
  // there too.
  static torch::Device collective_device() {
    return ddp::backend_name() == "nccl" ? ddp::device()
                                         : torch::Device(torch::kCPU);
  }

  // Every rank's `local` (one row each, in rank order, on the CPU): one
  // all-gather on the process group, a failure named by `what`.
  std::vector<torch::Tensor> gather_rows(const torch::Tensor& local,
                                         const char* what, int64_t step = -1) {
    std::vector<torch::Tensor> input{local.to(collective_device())};
    std::vector<std::vector<torch::Tensor>> gathered(1);
    for (int i = 0; i < world_size_; ++i) {
      gathered[0].push_back(torch::empty_like(input[0]));
    }
    const auto at = begin_collective(what, static_cast<int64_t>(number_), step);
    wait_for(pg_->allgather(gathered, input), at);
    std::vector<torch::Tensor> rows;
    for (const auto& row : gathered[0]) {
      rows.push_back(row.cpu());
    }
    return rows;
  }

  void verify_shapes() {
    const int64_t count = static_cast<int64_t>(all_params_.size());
    auto max_count =
        torch::tensor({count}, torch::kLong).to(collective_device());
    {
      std::vector<torch::Tensor> t{max_count};
      c10d::AllreduceOptions opts;
      opts.reduceOp = c10d::ReduceOp::MAX;
      const auto at = begin_collective("parameter shape check",
                                       static_cast<int64_t>(number_));
      wait_for(pg_->allreduce(t, opts), at);
    }
    const int64_t n = max_count.item<int64_t>();
    auto local = torch::full({1 + n * kRecord}, -1, torch::kLong);
    auto* rec = local.data_ptr<int64_t>();
    rec[0] = count;
    for (int64_t i = 0; i < count; ++i) {
      const auto& p = all_params_[i];
      int64_t* r = rec + 1 + i * kRecord;
      r[0] = p.dim();
      r[1] = static_cast<int64_t>(p.scalar_type());
      r[2] = p.requires_grad() ? 1 : 0;
      for (int64_t d = 0; d < p.dim(); ++d) {
        if (d < kMaxDims) {
          r[3 + d] = p.size(d);
        } else {
          r[3 + kMaxDims - 1] = r[3 + kMaxDims - 1] * 31 + p.size(d);
        }
      }
    }
    const std::vector<torch::Tensor> table =
        gather_rows(local, "parameter shape check");

    // Every rank sees the same table, so every rank throws the same error.
    const int64_t* ref = table[0].data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      for (int other = 1; other < world_size_; ++other) {
        const int64_t* cmp = table[other].data_ptr<int64_t>();
        const int64_t* a = ref + 1 + i * kRecord;
        const int64_t* b = cmp + 1 + i * kRecord;
        if (std::equal(a, a + kRecord, b)) {
          continue;
        }
        std::ostringstream msg;
        msg << kWho << "parameter ";
        if (i < count) {
          msg << '\'' << all_names_[i] << "' ";
        }
        msg << "(#" << i << " in named_parameters()) is " << shape_string(a)
            << " on rank 0 but " << shape_string(b) << " on rank " << other
            << "; rank 0 has " << ref[0] << " parameters, rank " << other
            << " has " << cmp[0] << ". Every rank must build the same model.";
        throw std::runtime_error(msg.str());
      }
    }
  }

  void broadcast_states(int root = 0,
                        const char* what = "parameter broadcast") {
    std::vector<torch::Tensor> states = all_params_;
    states.insert(states.end(), buffers_.begin(), buffers_.end());
    // Chunks of at most 256 MiB, so a large model does not need twice its
    // size in one temporary.
    constexpr int64_t kChunk = int64_t{256} << 20;
    torch::NoGradGuard no_grad;
    size_t begin = 0;
    while (begin < states.size()) {
      size_t end = begin;
      int64_t bytes = 0;
      while (end < states.size() &&
             (end == begin ||
              bytes + states[end].numel() * states[end].element_size() <=
                  kChunk)) {
        bytes += states[end].numel() * states[end].element_size();
        ++end;
      }
      std::vector<torch::Tensor> chunk(states.begin() + begin,
                                       states.begin() + end);
      auto flat = pack_bytes(chunk);
      std::vector<torch::Tensor> t{flat};
      c10d::BroadcastOptions opts;
      opts.rootRank = root;
      const auto at = begin_collective(what, static_cast<int64_t>(number_));
      wait_for(pg_->broadcast(t, opts), at);
      if (rank_ != root) {
        unpack_bytes(flat, chunk);
      }
      begin = end;
    }
  }

  // Reverse registration order approximates the order in which backward
  // produces gradients. Buckets hold one dtype and device each.
  void build_buckets() {
    struct Open {
      std::vector<size_t> slots;
      int64_t bytes = 0;
    };
    std::map<std::pair<int, std::string>, Open> open;
    std::vector<std::vector<size_t>> closed;
    const auto cap =
        static_cast<int64_t>(options_.bucket_cap_mb() * 1024 * 1024);
    const auto first_cap =
        std::min(cap, static_cast<int64_t>(options_.first_bucket_cap_mb() *
                                           1024 * 1024));
    for (size_t i = all_params_.size(); i-- > 0;) {
      const auto& p = all_params_[i];
      if (!p.requires_grad()) {
        continue; // frozen: never gets a gradient, never communicated
      }
      TORCH_CHECK(p.layout() == torch::kStrided, kWho, "parameter '",
                  all_names_[i],
                  "' is not dense (sparse gradients are not "
                  "supported)");
      Slot slot;
      slot.param = p;
      slot.name = all_names_[i];
      slot.numel = p.numel();
      slot.dtype = p.scalar_type();
      slot.device = p.device();
      slot.sizes = p.sizes().vec();
      slots_.push_back(std::move(slot));
      auto key =
          std::make_pair(static_cast<int>(p.scalar_type()), p.device().str());
      Open& bucket = open[key];
      bucket.slots.push_back(slots_.size() - 1);
      bucket.bytes += p.numel() * static_cast<int64_t>(p.element_size());
      if (bucket.bytes >= (closed.empty() ? first_cap : cap)) {
        closed.push_back(std::move(bucket.slots));
        open.erase(key);
      }
    }
    for (auto& item : open) {
      closed.push_back(std::move(item.second.slots));
    }
    // Keyed buckets closed out of order: sort by their first parameter.
    std::stable_sort(closed.begin(), closed.end(),
                     [](const auto& a, const auto& b) { return a[0] < b[0]; });
    int64_t shm_bytes = 0;
    for (auto& members : closed) {
      Bucket bucket;
      int64_t offset = 0;
      for (size_t pos = 0; pos < members.size(); ++pos) {
        Slot& slot = slots_[members[pos]];
        slot.bucket = buckets_.size();
        slot.position = pos;
        slot.offset = offset;
        offset += slot.numel;
      }
      const auto& first = slots_[members[0]].param;
      bucket.grad_numel = offset;
      // [gradients..., a flag per parameter, the count of stepping ranks]
      bucket.flat =
          torch::zeros({offset + static_cast<int64_t>(members.size()) + 1},
                       first.options().requires_grad(false));
      bucket.shm_offset = shm_bytes;
      shm_bytes += (bucket.flat.nbytes() + 63) / 64 * 64;
      bucket.slots = std::move(members);
      bucket.pending = bucket.slots.size();
      buckets_.push_back(std::move(bucket));
    }
    move_buckets_to_shared_memory(shm_bytes);
  }

  // A thread of its own lets a shared-memory all-reduce overlap the rest of
  // backward, but only where a core is free for it: where the ranks' compute
  // threads fill the host, it takes its core from backward (2 ranks on 2
  // cores ran 20-40 % slower with it). DDP_SHM_THREAD=0/1 decides instead.
  bool shared_memory_thread_pays_off() const {
    if (const char* forced = std::getenv("DDP_SHM_THREAD")) {
      return std::string(forced) != "0";
    }
    const unsigned cores = std::thread::hardware_concurrency();
    const auto needed = static_cast<unsigned>(world_size_) *
                        static_cast<unsigned>(at::get_num_threads() + 1);
    return cores >= needed;
  }

  // Gloo all-reduces bfloat16 only from some 2.x release on: asked once,
  // on every rank alike (the type is refused before anything is sent).
  void check_hook_dtype() {
    if (hook_dtype_ != c10::kBFloat16 || ddp::backend_name() != "gloo") {
      return;
    }
    bool supported = true;
    try {
      std::vector<torch::Tensor> probe{torch::zeros({1}, torch::kBFloat16)};
      pg_->allreduce(probe)->wait();
    } catch (const std::exception&) {
      supported = false;
    }
    TORCH_CHECK(supported, kWho,
                "the bf16 comm hook needs a Gloo that all-reduces bfloat16, "
                "and this LibTorch's does not (LibTorch 1.13's cannot): use "
                "fp16 (DDP_COMM_HOOK=fp16)");
  }

  // Whether `mine` holds on every rank (a collective: every rank asks).
  bool every_rank_agrees(bool mine) {
    auto agreed = torch::tensor({mine ? 1 : 0}, torch::kInt);
    std::vector<torch::Tensor> tensors{agreed};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::MIN;
    const auto at =
        begin_collective("shared-memory vote", static_cast<int64_t>(number_));
    wait_for(pg_->allreduce(tensors, opts), at);
    return agreed.item<int>() != 0;
  }

  // The job's ranks grouped by the /dev/shm they share (ascending, in the
  // order of their first rank).
  std::vector<std::vector<int>> ranks_by_host() {
    const auto gathered = ddp::all_gather(
        torch::tensor({shared_memory_host_key()}, torch::kLong));
    std::vector<std::vector<int>> hosts;
    std::vector<int64_t> keys;
    for (int r = 0; r < world_size_; ++r) {
      const int64_t k = gathered[static_cast<size_t>(r)].item<int64_t>();
      const auto at = std::find(keys.begin(), keys.end(), k);
      if (at == keys.end()) {
        keys.push_back(k);
        hosts.push_back({r});
      } else {
        hosts[static_cast<size_t>(at - keys.begin())].push_back(r);
      }
    }
    return hosts;
  }

  // Ranks of one host with CPU buckets all-reduce through shared memory
  // (shm_allreduce.h) instead of Gloo's sockets. All ranks decide together:
  // the buckets must live in the segment on every rank or on none.
  void move_buckets_to_shared_memory(int64_t bytes) {
    // Every rank has the same backend. The segment is set up through Gloo,
    // and NCCL has shared-memory transports of its own.
    if (ddp::backend_name() != "gloo") {
      return;
    }
    bool wanted = options_.shared_memory() && shared_memory_allowed_by_env() &&
                  !buckets_.empty();
    for (const auto& bucket : buckets_) {
      wanted = wanted && bucket.flat.device().is_cpu();
    }
    if (!every_rank_agrees(wanted)) {
      return;
    }
    // Which ranks share a /dev/shm: one host, several, or one rank each.
    const auto hosts = ranks_by_host();
    if (hosts.size() == 1) {
      shm_ = SharedMemoryGroup::create(pg_, bytes, collective_timeout());
      if (!shm_) {
        return;
      }
      if (shared_memory_thread_pays_off()) {
        shm_worker_ = std::make_unique<SharedMemoryWorker>(shm_);
      }
    } else {
      bool shared = false;
      for (const auto& ranks : hosts) {
        shared = shared || ranks.size() > 1;
      }
      if (!shared || !options_.hierarchical() ||
          !hierarchical_allowed_by_env()) {
        return;
      }
      // Names every rank derives alike: this wrapper's place in the job.
      static int wrappers = 0;
      const std::string name = "ddp" + std::to_string(wrappers++);
      std::vector<int> leaders;
      for (size_t h = 0; h < hosts.size(); ++h) {
        leaders.push_back(hosts[h][0]);
        if (std::find(hosts[h].begin(), hosts[h].end(), rank_) !=
            hosts[h].end()) {
          host_pg_ =
              new_gloo_subgroup(hosts[h], name + "_host" + std::to_string(h));
        }
      }
      leaders_pg_ = new_gloo_subgroup(leaders, name + "_leaders");
      auto shm =
          SharedMemoryGroup::create(host_pg_, bytes, collective_timeout());
      // Every host has its segment, or no rank uses one.
      if (!every_rank_agrees(static_cast<bool>(shm))) {
        leaders_pg_.reset();
        host_pg_.reset();
        return;
      }
      shm_ = shm;
      hierarchical_ = true;
      // The hosts' exchange waits on the network: on a thread of its own it
      // overlaps backward without taking a core from it.
      shm_worker_ = std::make_unique<SharedMemoryWorker>(shm_);
    }
    char* region = static_cast<char*>(shm_->local_region());
    for (auto& bucket : buckets_) {
      // The storage keeps the mapping alive: gradients may outlive the
      // wrapper as views of their bucket.
      auto flat = torch::from_blob(
          region + bucket.shm_offset, bucket.flat.sizes(),
          [keep = shm_](void*) {}, bucket.flat.options());
      flat.zero_();
      bucket.flat = flat;
    }
  }

  void install_hooks() {
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (size_t i = 0; i < slots_.size(); ++i) {
      auto acc = torch::autograd::impl::grad_accumulator(slots_[i].param);
      TORCH_CHECK(acc, kWho, "parameter '", slots_[i].name,
                  "' is not a leaf that requires grad");
      if (!registry().insert(acc.get()).second) {
        // Undo what is installed so far before failing.
        for (size_t j = 0; j < accumulators_.size(); ++j) {
          accumulators_[j]->del_post_hook(hook_keys_[j]);
          registry().erase(accumulators_[j].get());
        }
        accumulators_.clear();
        hook_keys_.clear();
        TORCH_CHECK(false, kWho, "parameter '", slots_[i].name,
                    "' is already managed by another DistributedDataParallel");
      }
      hook_keys_.push_back(
          acc->add_post_hook(std::make_unique<ReadyHook>(this, i)));
      // The parameter holds its accumulator only weakly: keep it (and so
      // the hook) alive.
      accumulators_.push_back(std::move(acc));
    }
  }

  void remove_hooks() {
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (size_t j = 0; j < accumulators_.size(); ++j) {
      accumulators_[j]->del_post_hook(hook_keys_[j]);
      registry().erase(accumulators_[j].get());
    }
    accumulators_.clear();
    hook_keys_.clear();
  }

  DistributedDataParallelOptions options_;
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  std::shared_ptr<SharedMemoryGroup> shm_;
  std::unique_ptr<SharedMemoryWorker> shm_worker_;
  // The hierarchical all-reduce: the ranks of this host, and (on the host's
  // first rank only) one rank per host.
  bool hierarchical_ = false;
  c10::intrusive_ptr<c10d::ProcessGroup> host_pg_;
  c10::intrusive_ptr<c10d::ProcessGroup> leaders_pg_;
  c10::optional<c10::ScalarType> hook_dtype_;
  int64_t check_sync_every_ = 0;
  int world_size_ = 1;
  int rank_ = 0;
  std::vector<std::string> all_names_;
  std::vector<torch::Tensor> all_params_;
  std::vector<std::string> buffer_names_;
  std::vector<torch::Tensor> buffers_;
  std::atomic<bool> reported_{false};
  std::atomic<bool> end_checked_{false};
  uint64_t number_ = 0;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;

  mutable std::mutex mutex_;
  bool sync_enabled_ = true;
  bool in_backward_ = false;
  // This pass launches its buckets as they fill (launching_wrapper).
  bool owns_launch_ = false;
  // In shadow_backward(): taking part with no gradients (ddp::join).
  bool shadowing_ = false;
  size_t next_bucket_ = 0;
  DataParallelStats stats_;
};

torch::autograd::variable_list
ReadyHook::operator()(const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list& /*inputs*/) {
  try {
    reducer_->mark_ready(index_);
  } catch (...) {
    reducer_->mark_failed();
    throw;
  }
  return outputs;
}

namespace {

std::mutex& live_reducers_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
// In the order of construction, which is the same on every rank: the end
// checks at exit are collectives and must run in one order everywhere.
std::map<uint64_t, Reducer*>& live_reducers() {
  static auto* reducers = new std::map<uint64_t, Reducer*>;
  return *reducers;
}
uint64_t next_reducer_number = 0;

std::vector<Reducer*> live_reducers_in_order() {
  std::lock_guard<std::mutex> lock(live_reducers_mutex());
  std::vector<Reducer*> reducers;
  for (const auto& item : live_reducers()) {
    reducers.push_back(item.second);
  }
  return reducers;
}

void report_live_reducers_at_exit() {
  // Those still alive at exit (ddp::distribute's, or a wrapper on the stack
  // of a program that called exit()) are checked and reported now.
  check_live_wrappers_at_end();
  for (Reducer* reducer : live_reducers_in_order()) {
    reducer->report_final_state();
  }
}

} // namespace

void check_live_wrappers_at_end() {
  // Peers that still step are joined first (their wrappers' backward
  // passes), so that every rank reaches the checks below together.
  join_or_end_job();
  for (Reducer* reducer : live_reducers_in_order()) {
    reducer->check_at_end();
  }
}

c10::optional<std::string>
wrapped_parameter_replaced(const at::TensorImpl* param) {
  for (Reducer* reducer : live_reducers_in_order()) {
    if (auto message = reducer->replaced_parameter(param)) {
      return message;
    }
  }
  return c10::nullopt;
}

bool is_wrapped_accumulator(const torch::autograd::Node* node) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return registry().count(node) != 0;
}

Reducer* live_reducer(int64_t number) {
  std::lock_guard<std::mutex> lock(live_reducers_mutex());
  const auto at = live_reducers().find(static_cast<uint64_t>(number));
  return at == live_reducers().end() ? nullptr : at->second;
}

void track_reducer(Reducer* reducer) {
  // Registered after LibTorch's statics exist, so it runs before they go.
  static const bool at_exit = std::atexit(report_live_reducers_at_exit) == 0;
  (void)at_exit;
  static const bool joinable = [] {
    JoinParticipants participants;
    participants.shadow_backward = [](int64_t wrapper, int64_t step, int root) {
      Reducer* reducer = live_reducer(wrapper);
      if (reducer == nullptr || !reducer->active()) {
        return false;
      }
      reducer->shadow_backward(step, root);
      return true;
    };
    participants.take_state_of = [](int root) {
      for (Reducer* reducer : live_reducers_in_order()) {
        if (reducer->active()) {
          reducer->take_state_of(root);
        }
      }
    };
    set_join_participants(std::move(participants));
    return true;
  }();
  (void)joinable;
  std::lock_guard<std::mutex> lock(live_reducers_mutex());
  reducer->set_number(next_reducer_number++);
  live_reducers().emplace(reducer->number(), reducer);
}

void untrack_reducer(Reducer* reducer) {
  std::lock_guard<std::mutex> lock(live_reducers_mutex());
  live_reducers().erase(reducer->number());
}

} // namespace detail

namespace testing {
WrapperObserver set_wrapper_observer(WrapperObserver observer) {
  return detail::wrapper_observer.exchange(observer);
}
} // namespace testing

NoSyncGuard::NoSyncGuard(std::shared_ptr<detail::Reducer> reducer)
    : reducer_(std::move(reducer)) {
  previous_ = reducer_->sync_enabled();
  reducer_->set_sync_enabled(false);
}

NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : reducer_(std::move(other.reducer_)), previous_(other.previous_) {}

NoSyncGuard::~NoSyncGuard() {
  if (reducer_) {
    reducer_->set_sync_enabled(previous_);
  }
}

DistributedDataParallelBase::DistributedDataParallelBase(
    torch::nn::Module& module, DistributedDataParallelOptions options)
    : reducer_(std::make_shared<detail::Reducer>(module, std::move(options))) {}

DistributedDataParallelBase::DistributedDataParallelBase(
    DistributedDataParallelBase&&) noexcept = default;
DistributedDataParallelBase& DistributedDataParallelBase::operator=(
    DistributedDataParallelBase&&) noexcept = default;
DistributedDataParallelBase::~DistributedDataParallelBase() = default;

const std::shared_ptr<detail::Reducer>&
DistributedDataParallelBase::checked_reducer() const {
  TORCH_CHECK(reducer_,
              "ddp::DistributedDataParallel: used after being moved from");
  return reducer_;
}

NoSyncGuard DistributedDataParallelBase::no_sync() {
  return NoSyncGuard(checked_reducer());
}
void DistributedDataParallelBase::set_require_backward_grad_sync(bool enabled) {
  checked_reducer()->set_sync_enabled(enabled);
}
bool DistributedDataParallelBase::require_backward_grad_sync() const {
  return checked_reducer()->sync_enabled();
}
bool DistributedDataParallelBase::is_active() const {
  return checked_reducer()->active();
}
const DistributedDataParallelOptions&
DistributedDataParallelBase::options() const {
  return checked_reducer()->options();
}
DataParallelStats DistributedDataParallelBase::stats() const {
  return checked_reducer()->stats();
}
void DistributedDataParallelBase::reset_stats() {
  checked_reducer()->reset_stats();
}
bool DistributedDataParallelBase::wraps(torch::nn::Module& module) const {
  return reducer_ && checked_reducer()->holds_parameters_of(module);
}
bool DistributedDataParallelBase::uses_shared_memory() const {
  return checked_reducer()->uses_shared_memory();
}

bool DistributedDataParallelBase::uses_hierarchical_allreduce() const {
  return checked_reducer()->uses_hierarchical_allreduce();
}

int64_t DistributedDataParallelBase::bucket_count() const {
  return checked_reducer()->bucket_count();
}
std::vector<std::vector<std::string>>
DistributedDataParallelBase::bucket_parameter_names() const {
  return checked_reducer()->bucket_parameter_names();
}

DistributedDataParallelBase&
distribute(torch::nn::Module& module, DistributedDataParallelOptions options) {
  // Never destroyed: wrappers live until exit, and tearing them down among
  // LibTorch's own static destructors would be fragile.
  static auto* mutex = new std::mutex;
  static auto* wrappers =
      new std::map<const torch::nn::Module*,
                   std::unique_ptr<DistributedDataParallelBase>>;
  std::lock_guard<std::mutex> lock(*mutex);
  auto& slot = (*wrappers)[&module];
  if (slot && slot->wraps(module)) {
    return *slot;
  }
  // A new module at a dead one's address: drop the stale wrapper first.
  slot.reset();
  slot =
      std::make_unique<DistributedDataParallelBase>(module, std::move(options));
  return *slot;
}

std::vector<torch::Tensor>
distributed_tensors(const std::vector<torch::Tensor>& tensors) {
  // The modules that hold them, alive until exit (as distribute's wrappers).
  static auto* mutex = new std::mutex;
  static auto* holders = new std::vector<std::shared_ptr<torch::nn::Module>>;
  std::lock_guard<std::mutex> lock(*mutex);
  auto served = [&](const torch::Tensor& t) {
    for (const auto& holder : *holders) {
      for (const auto& p : holder->parameters()) {
        if (p.is_same(t)) {
          return true;
        }
      }
    }
    return false;
  };
  auto holder = std::make_shared<torch::nn::Module>("ddp::distributed_tensors");
  size_t added = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    TORCH_CHECK(t.defined(), "ddp::distributed_tensors: tensor #", i,
                " is undefined");
    TORCH_CHECK(t.is_leaf(), "ddp::distributed_tensors: tensor #", i,
                " is not a leaf (it was computed from others); pass the "
                "tensor the optimizer updates");
    if (served(t)) {
      continue;
    }
    holder->register_parameter("tensor" + std::to_string(i), t,
                               t.requires_grad());
    ++added;
  }
  if (added > 0) {
    distribute(*holder);
    holders->push_back(std::move(holder));
  }
  return tensors;
}

} // namespace ddp
