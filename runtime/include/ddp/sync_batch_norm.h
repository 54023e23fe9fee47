#pragma once

// SyncBatchNorm1d/2d/3d: batch normalisation whose batch statistics span every
// rank of the process group, drop-in for torch::nn::BatchNorm{1,2,3}d.
//
// Each Impl derives from the matching torch::nn::BatchNorm{1,2,3}dImpl, takes
// the same options (torch::nn::BatchNormOptions or a feature count) and
// registers the same parameters and buffers (weight, bias, running_mean,
// running_var, num_batches_tracked), so a checkpoint written by one loads
// into the other and `module->as<torch::nn::BatchNorm2d>()` keeps working.
//
// Training forward, when the world has more than one rank: each rank computes
// its element count, mean and biased variance per channel, ONE all-gather
// exchanges them and every rank merges them with the parallel-variance
// formula (Chan et al.), in double precision: exact for uneven local batches,
// a rank with an empty batch included. Backward does ONE all-reduce of the
// packed per-channel (sum dy, sum dy*(x-mean)). Eval mode, world size 1 or no
// process group: plain batch norm (the base class forward).
//
// Caveat: forward() is not virtual in LibTorch, so a call through a pointer to
// the base Impl (`bn->as<torch::nn::BatchNorm2d>()->forward(x)`) runs plain
// batch norm. Calls through the ddp holder, a Sequential or AnyModule run the
// synchronised version.

#include <ddp/distributed.h>

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <ostream>

namespace ddp {

namespace detail {

/// Shared body of the three forward()s: synchronised batch norm in training,
/// the caller's plain fallback otherwise (see sync_batch_norm.cpp).
torch::Tensor sync_batch_norm_train(const torch::Tensor& input,
                                    const torch::Tensor& weight,
                                    const torch::Tensor& bias,
                                    torch::Tensor& running_mean,
                                    torch::Tensor& running_var,
                                    torch::Tensor& num_batches_tracked,
                                    const torch::nn::BatchNormOptions& options);

/// Whether forward() in training mode synchronises (world size > 1 and a
/// process group exists).
bool sync_batch_norm_active();

/// Collectives issued by SyncBatchNorm layers in this process so far (forward
/// all-gathers plus backward all-reduces); for tests and benchmarks.
int64_t sync_batch_norm_collectives();

void print_sync_batch_norm(std::ostream& stream, const char* name,
                           const torch::nn::BatchNormOptions& options);

} // namespace detail

/// Synchronised torch::nn::BatchNorm1d: input (N, C) or (N, C, L).
class SyncBatchNorm1dImpl : public torch::nn::BatchNorm1dImpl {
public:
  using torch::nn::BatchNorm1dImpl::BatchNorm1dImpl;

  torch::Tensor forward(const torch::Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  /// A SyncBatchNorm1dImpl (the inherited Cloneable would make a plain one).
  std::shared_ptr<torch::nn::Module> clone(
      const c10::optional<torch::Device>& device = c10::nullopt) const override;
};
TORCH_MODULE(SyncBatchNorm1d);

/// Synchronised torch::nn::BatchNorm2d: input (N, C, H, W).
class SyncBatchNorm2dImpl : public torch::nn::BatchNorm2dImpl {
public:
  using torch::nn::BatchNorm2dImpl::BatchNorm2dImpl;

  torch::Tensor forward(const torch::Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  std::shared_ptr<torch::nn::Module> clone(
      const c10::optional<torch::Device>& device = c10::nullopt) const override;
};
TORCH_MODULE(SyncBatchNorm2d);

/// Synchronised torch::nn::BatchNorm3d: input (N, C, D, H, W).
class SyncBatchNorm3dImpl : public torch::nn::BatchNorm3dImpl {
public:
  using torch::nn::BatchNorm3dImpl::BatchNorm3dImpl;

  torch::Tensor forward(const torch::Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  std::shared_ptr<torch::nn::Module> clone(
      const c10::optional<torch::Device>& device = c10::nullopt) const override;
};
TORCH_MODULE(SyncBatchNorm3d);

} // namespace ddp
