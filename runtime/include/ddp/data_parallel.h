#pragma once

// ddp::DistributedDataParallel: data-parallel training for the LibTorch C++
// frontend, the counterpart of torch.nn.parallel.DistributedDataParallel.
//
//   Net model;
//   model->to(device);
//   ddp::DistributedDataParallel model_ddp(model);
//   ... model->forward(x); loss.backward(); optimizer.step();  // unchanged
//
// Unlike PyTorch's Python wrapper, the training loop keeps calling the
// original model: the wrapper attaches to the parameters' autograd graph
// (post hooks on their gradient accumulators) rather than to forward(). It
// is in effect for as long as the wrapper object lives (RAII).
//
// Construction: parameter shapes are verified across ranks (the first
// mismatch is named), then parameters and buffers are broadcast from rank 0.
// During backward: gradients are packed into buckets (reverse registration
// order, a small first bucket, `bucket_cap_mb` for the others); each bucket is
// all-reduced asynchronously as soon as all its gradients are ready; before
// backward() returns every bucket is finished and param.grad holds the
// average over ranks. Parameters that get no gradient on some rank never hang
// the job (see docs/runtime-ddp.md for the exact semantics).
//
// With world size 1 (no launcher) the wrapper installs nothing: a no-op.

#include <ddp/distributed.h>

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ddp {

/// Compression of the gradients that cross the process group, as PyTorch's
/// DDP communication hooks `fp16_compress_hook` and `bf16_compress_hook` do:
/// each bucket is cast to the narrow type and divided by the world size,
/// all-reduced, and cast back. Half the bytes on the wire; the average is
/// exact up to that type's rounding.
enum class CommHook { kNone, kFp16, kBf16 };

/// Options of DistributedDataParallel, named as in PyTorch where they exist.
struct DistributedDataParallelOptions {
  /// Size cap of every gradient bucket but the first, in MiB.
  TORCH_ARG(double, bucket_cap_mb) = 25.0;
  /// Size cap of the first bucket (the last layers' gradients, ready first),
  /// in MiB: small so that the first all-reduce starts early.
  TORCH_ARG(double, first_bucket_cap_mb) = 1.0;
  /// Keep buffers (BatchNorm running statistics) equal to rank 0's: they are
  /// broadcast at construction and after every synchronised backward pass.
  TORCH_ARG(bool, broadcast_buffers) = true;
  /// Make param.grad a view into the bucket after the first step, which saves
  /// a copy into and out of the bucket per step (PyTorch's
  /// gradient_as_bucket_view).
  TORCH_ARG(bool, gradient_as_bucket_view) = true;
  /// When every rank runs on this host and the gradients are on the CPU,
  /// keep the buckets in POSIX shared memory and all-reduce them there
  /// instead of through the process group's sockets (Gloo): the same
  /// result, bit for bit on every rank, without the copies through the
  /// kernel. Falls back to the process group when a rank cannot map the
  /// segment. The environment variable DDP_SHM=0 turns it off.
  TORCH_ARG(bool, shared_memory) = true;
  /// When the ranks span several hosts and some host has several of them
  /// (CPU gradients, Gloo): a two-level all-reduce. The ranks of a host sum
  /// through shared memory, one rank per host all-reduces the host's sum over
  /// the process group, and the result comes back through shared memory: the
  /// network carries one copy per host, not one per rank. Every rank ends
  /// with the same bits. Needs shared_memory; DDP_HIERARCHICAL=0 turns it
  /// off.
  TORCH_ARG(bool, hierarchical) = true;
  /// What crosses the process group (see CommHook); in the hierarchical
  /// all-reduce, the hosts' exchange. Nothing is compressed within a host.
  /// The environment variable DDP_COMM_HOOK (none, fp16, bf16) overrides it.
  TORCH_ARG(CommHook, comm_hook) = CommHook::kNone;
  /// Every this many synchronised backward passes, compare a checksum of
  /// each parameter across the ranks (and of each buffer, when
  /// broadcast_buffers keeps them equal): one all-gather of one double per
  /// tensor. Parameters that differ (a rank changed one behind the
  /// wrapper's back) end every rank with an error naming the first that
  /// differs, the step and the ranks' checksums. 0: never. The environment
  /// variable DDP_CHECK_SYNC overrides it. Whatever the period, the
  /// parameters are compared once more when the wrapper ends (its
  /// destruction, ddp::shutdown() or exit), and a difference ends the job
  /// with one line.
  TORCH_ARG(int64_t, check_sync_every) = 256;
};

/// Communication counters, cumulative since construction or reset_stats().
struct DataParallelStats {
  /// Backward passes that communicated (not counting no_sync ones).
  int64_t synced_backwards = 0;
  /// All-reduces of gradient buckets (one per bucket per synced backward).
  int64_t allreduces = 0;
  /// Broadcasts of buffers (one per synced backward when the module has
  /// buffers and broadcast_buffers is on).
  int64_t broadcasts = 0;
  /// Payload bytes handed to those collectives (per rank).
  int64_t bytes = 0;
  /// Sync checks made (DistributedDataParallelOptions::check_sync_every);
  /// not counted in collectives() or bytes.
  int64_t sync_checks = 0;

  int64_t collectives() const { return allreduces + broadcasts; }
};

namespace detail {
class Reducer;
} // namespace detail

/// RAII guard returned by DistributedDataParallel::no_sync(): while it lives,
/// backward passes accumulate gradients locally without any communication;
/// the first synchronised backward pass after it all-reduces the sum.
class NoSyncGuard {
public:
  explicit NoSyncGuard(std::shared_ptr<detail::Reducer> reducer);
  NoSyncGuard(NoSyncGuard&& other) noexcept;
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(NoSyncGuard&&) = delete;
  ~NoSyncGuard();

private:
  std::shared_ptr<detail::Reducer> reducer_;
  bool previous_ = true;
};

/// The part that does not depend on the module's type.
class DistributedDataParallelBase {
public:
  /// Does nothing (no hooks, no communication) unless ddp::is_distributed().
  explicit DistributedDataParallelBase(torch::nn::Module& module,
                                       DistributedDataParallelOptions options);
  DistributedDataParallelBase(DistributedDataParallelBase&&) noexcept;
  DistributedDataParallelBase&
  operator=(DistributedDataParallelBase&&) noexcept;
  DistributedDataParallelBase(const DistributedDataParallelBase&) = delete;
  DistributedDataParallelBase&
  operator=(const DistributedDataParallelBase&) = delete;
  /// Removes the hooks: the model trains locally again.
  ~DistributedDataParallelBase();

  /// `auto guard = model_ddp.no_sync();` for gradient accumulation.
  [[nodiscard]] NoSyncGuard no_sync();
  /// PyTorch's require_backward_grad_sync, as a setter.
  void set_require_backward_grad_sync(bool enabled);
  bool require_backward_grad_sync() const;

  /// False when world size is 1: the wrapper is a no-op.
  bool is_active() const;
  const DistributedDataParallelOptions& options() const;
  DataParallelStats stats() const;
  void reset_stats();
  /// Whether this wrapper manages exactly `module`'s current parameters.
  bool wraps(torch::nn::Module& module) const;
  /// Number of gradient buckets (one all-reduce each per synced backward).
  int64_t bucket_count() const;
  /// Whether the buckets are all-reduced through shared memory
  /// (DistributedDataParallelOptions::shared_memory) rather than the
  /// process group.
  bool uses_shared_memory() const;
  /// Whether it all-reduces in two levels (the `hierarchical` option took
  /// effect: several hosts, shared memory within each).
  bool uses_hierarchical_allreduce() const;
  /// Names (from named_parameters()) of the parameters in each bucket, in
  /// the order they are packed.
  std::vector<std::vector<std::string>> bucket_parameter_names() const;

private:
  const std::shared_ptr<detail::Reducer>& checked_reducer() const;

  std::shared_ptr<detail::Reducer> reducer_;
};

/// Wraps a module held by a TORCH_MODULE holder, a std::shared_ptr, or by
/// value (passed by reference, not owned: it must outlive the wrapper). The
/// template argument is deduced: `ddp::DistributedDataParallel d(model);`.
template <typename M = torch::nn::Module>
class DistributedDataParallel : public DistributedDataParallelBase {
  template <typename T>
  using IfDerived = std::enable_if_t<std::is_base_of<M, T>::value, int>;

public:
  using ModuleType = M;

  template <typename Impl, IfDerived<Impl> = 0>
  explicit DistributedDataParallel(const torch::nn::ModuleHolder<Impl>& holder,
                                   DistributedDataParallelOptions options = {})
      : DistributedDataParallel(std::shared_ptr<M>(holder.ptr()),
                                std::move(options)) {}

  template <typename Impl, IfDerived<Impl> = 0>
  explicit DistributedDataParallel(std::shared_ptr<Impl> module,
                                   DistributedDataParallelOptions options = {})
      : DistributedDataParallelBase(checked(module.get()), std::move(options)),
        module_(std::move(module)) {}

  /// Not owning: `module` must outlive the wrapper.
  template <typename Impl, IfDerived<Impl> = 0>
  explicit DistributedDataParallel(Impl& module,
                                   DistributedDataParallelOptions options = {})
      : DistributedDataParallel(
            std::shared_ptr<M>(std::shared_ptr<M>(), &module),
            std::move(options)) {}

  /// Not owning: `*module` must outlive the wrapper.
  template <typename Impl, IfDerived<Impl> = 0>
  explicit DistributedDataParallel(Impl* module,
                                   DistributedDataParallelOptions options = {})
      : DistributedDataParallel(
            std::shared_ptr<M>(std::shared_ptr<M>(), &checked(module)),
            std::move(options)) {}

  M& module() const { return *module_; }
  const std::shared_ptr<M>& module_ptr() const { return module_; }
  M* operator->() const { return module_.get(); }
  M& operator*() const { return *module_; }

  /// Pass-through to the module's forward(); calling the module directly is
  /// equally fine.
  template <typename... Args> decltype(auto) forward(Args&&... args) {
    return module_->forward(std::forward<Args>(args)...);
  }
  template <typename... Args> decltype(auto) operator()(Args&&... args) {
    return module_->forward(std::forward<Args>(args)...);
  }

private:
  template <typename T> static T& checked(T* module) {
    TORCH_CHECK(module != nullptr,
                "ddp::DistributedDataParallel: the module is null");
    return *module;
  }

  std::shared_ptr<M> module_;
};

// Deduction guides, so migrated code needs no template argument (C++17;
// C++14 code spells `ddp::DistributedDataParallel<>`).
#if __cplusplus >= 201703L
template <typename Impl>
DistributedDataParallel(const torch::nn::ModuleHolder<Impl>&)
    -> DistributedDataParallel<Impl>;
template <typename Impl>
DistributedDataParallel(const torch::nn::ModuleHolder<Impl>&,
                        DistributedDataParallelOptions)
    -> DistributedDataParallel<Impl>;
template <typename Impl>
DistributedDataParallel(std::shared_ptr<Impl>) -> DistributedDataParallel<Impl>;
template <typename Impl>
DistributedDataParallel(std::shared_ptr<Impl>, DistributedDataParallelOptions)
    -> DistributedDataParallel<Impl>;
template <
    typename Impl,
    std::enable_if_t<std::is_base_of<torch::nn::Module, Impl>::value, int> = 0>
DistributedDataParallel(Impl&) -> DistributedDataParallel<Impl>;
template <
    typename Impl,
    std::enable_if_t<std::is_base_of<torch::nn::Module, Impl>::value, int> = 0>
DistributedDataParallel(Impl&, DistributedDataParallelOptions)
    -> DistributedDataParallel<Impl>;
template <typename Impl>
DistributedDataParallel(Impl*) -> DistributedDataParallel<Impl>;
template <typename Impl>
DistributedDataParallel(Impl*, DistributedDataParallelOptions)
    -> DistributedDataParallel<Impl>;
#endif

/// Wraps `module` for the rest of the process, for code where no object can
/// hold the wrapper (a placement inside a constructor or a helper function).
/// Idempotent: calling it again for a module it already wraps returns the
/// same wrapper, so a helper called every epoch is fine. The wrapper keeps
/// the parameters' autograd nodes alive until exit, so prefer the RAII
/// object where a scope fits.
DistributedDataParallelBase&
distribute(torch::nn::Module& module,
           DistributedDataParallelOptions options = {});
template <typename Impl>
DistributedDataParallelBase&
distribute(const torch::nn::ModuleHolder<Impl>& holder,
           DistributedDataParallelOptions options = {}) {
  return distribute(static_cast<torch::nn::Module&>(*holder.ptr()),
                    std::move(options));
}
template <typename Impl>
DistributedDataParallelBase&
distribute(const std::shared_ptr<Impl>& module,
           DistributedDataParallelOptions options = {}) {
  TORCH_CHECK(module != nullptr, "ddp::distribute: the module is null");
  return distribute(static_cast<torch::nn::Module&>(*module),
                    std::move(options));
}
template <typename Impl>
DistributedDataParallelBase&
distribute(Impl* module, DistributedDataParallelOptions options = {}) {
  TORCH_CHECK(module != nullptr, "ddp::distribute: the module is null");
  return distribute(static_cast<torch::nn::Module&>(*module),
                    std::move(options));
}

/// For an optimizer built where no statement can come before it (a class
/// member's initializer, `torch::optim::Adam opt{net->parameters(), ...};`):
/// places `module` on `device`, wraps it for the rest of the process
/// (ddp::distribute) and returns its parameters, so
/// `opt{ddp::distributed_parameters(net), ...}` trains the wrapped model.
template <typename Impl>
std::vector<torch::Tensor> distributed_parameters(
    Impl& module, torch::Device device = ddp::device(),
    std::enable_if_t<std::is_base_of<torch::nn::Module, Impl>::value, int> =
        0) {
  module.to(device);
  distribute(module);
  return module.parameters();
}
/// The same for a TORCH_MODULE holder or a std::shared_ptr.
template <typename Holder>
std::vector<torch::Tensor> distributed_parameters(
    Holder module, torch::Device device = ddp::device(),
    std::enable_if_t<!std::is_base_of<torch::nn::Module, Holder>::value, int> =
        0) {
  return distributed_parameters(*module, device);
}

/// For tensors trained outside any module (an actor-critic's temperature
/// `log_alpha = torch::zeros({1}).requires_grad_()` with an optimizer of its
/// own): broadcasts rank 0's values and averages their gradients across
/// ranks at every backward pass, as a wrapper does for a module's
/// parameters, for the rest of the process. Returns the same tensors, so
/// `torch::optim::Adam opt(ddp::distributed_tensors({log_alpha}), ...)`
/// trains them in sync. Idempotent for tensors it already serves.
std::vector<torch::Tensor>
distributed_tensors(const std::vector<torch::Tensor>& tensors);

namespace testing {

/// What a DistributedDataParallel wraps, as it stands when the wrapper ends.
struct WrapperState {
  /// ddp::rank() of this process (0 without a launcher).
  int rank = 0;
  /// Whether the wrapper communicated (world size > 1).
  bool active = false;
  /// Whether its gradients were all-reduced through shared memory
  /// (DistributedDataParallelBase::uses_shared_memory()) rather than the
  /// process group.
  bool shared_memory = false;
  /// Whether that was the hierarchical all-reduce (several hosts).
  bool hierarchical = false;
  /// Parameter names (named_parameters()), then buffer names
  /// (named_buffers()), in registration order; `tensors` matches them.
  std::vector<std::string> names;
  std::vector<torch::Tensor> tensors;
};

using WrapperObserver = void (*)(const WrapperState& state);

/// Test hook, not for training code: `observer` is called with the wrapped
/// module's final state when a wrapper ends (a DistributedDataParallel is
/// destroyed; the wrappers of ddp::distribute() at exit), on every rank and
/// at world size 1 too. The end-to-end tests hash every rank's parameters
/// through it without touching the program under test. Returns the previous
/// observer; nullptr removes it.
WrapperObserver set_wrapper_observer(WrapperObserver observer);

} // namespace testing

} // namespace ddp
