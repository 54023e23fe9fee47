#include <ddp/sync_batch_norm.h>

#include <ddp/distributed.h>

#include <ATen/ops/native_batch_norm_backward.h>

#include <atomic>
#include <string>
#include <vector>

#include "c10d_compat.h"

// LibTorch 1.x declares BatchNormImplBase<D, Derived>::pretty_print in its
// header but keeps the definition private to libtorch_cpu (the Debian 1.13
// build does not export it), while the vtables of any class deriving from
// BatchNorm{1,2,3}dImpl refer to it. This definition, instantiated for the
// three bases, fills that gap; it prints what LibTorch prints. Later releases
// define it in the header, where a second definition is an error
// (c10d_compat.h says which).
#if DDP_COMPAT_DEFINE_BATCHNORM_PRETTY_PRINT
namespace torch {
namespace nn {
template <size_t D, typename Derived>
void BatchNormImplBase<D, Derived>::pretty_print(std::ostream& stream) const {
  const std::string name = "torch::nn::BatchNorm" + std::to_string(D) + "d";
  ddp::detail::print_sync_batch_norm(stream, name.c_str(), this->options);
}
template void
BatchNormImplBase<1, BatchNorm1dImpl>::pretty_print(std::ostream&) const;
template void
BatchNormImplBase<2, BatchNorm2dImpl>::pretty_print(std::ostream&) const;
template void
BatchNormImplBase<3, BatchNorm3dImpl>::pretty_print(std::ostream&) const;
} // namespace nn
} // namespace torch
#endif

namespace ddp {
namespace detail {
namespace {

std::atomic<int64_t> collective_count{0};

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Dimensions reduced per channel: all but dimension 1.
std::vector<int64_t> reduce_dims(const torch::Tensor& input) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) {
    dims.push_back(d);
  }
  return dims;
}

// A per-channel vector (C) shaped to broadcast against the input (N, C, ...).
torch::Tensor per_channel(const torch::Tensor& v, int64_t input_dim) {
  std::vector<int64_t> shape(static_cast<size_t>(input_dim), 1);
  shape[1] = v.size(0);
  return v.view(shape);
}

// Half and bfloat16 inputs are normalised with float statistics, as
// LibTorch's own batch norm does.
torch::ScalarType compute_type(const torch::Tensor& input) {
  const auto t = input.scalar_type();
  return (t == torch::kHalf || t == torch::kBFloat16) ? torch::kFloat : t;
}

// The elementwise half of synchronised batch norm, with global statistics
// already known: y = (x - mean) * invstd * weight + bias. Its backward needs
// global sums of dy and dy*(x-mean) for the input gradient, hence a custom
// autograd function with its own all-reduce.
struct SyncBatchNormFunction
    : public torch::autograd::Function<SyncBatchNormFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input,
                               c10::optional<torch::Tensor> weight,
                               c10::optional<torch::Tensor> bias,
                               const torch::Tensor& mean,
                               const torch::Tensor& var,
                               const torch::Tensor& invstd, double eps,
                               double total_count) {
    const torch::Tensor w = weight.value_or(torch::Tensor());
    const torch::Tensor b = bias.value_or(torch::Tensor());
    ctx->save_for_backward({input, w, mean, invstd});
    ctx->saved_data["count"] = total_count;
    ctx->saved_data["has_bias"] = b.defined();
    // Eval-mode batch norm with the global statistics as "running" ones is
    // exactly the normalisation we need, in LibTorch's fused kernel.
    return torch::batch_norm(input, w, b, mean, var, /*training=*/false,
                             /*momentum=*/0.0, eps,
                             at::globalContext().userEnabledCuDNN());
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& input = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& mean = saved[2];
    const torch::Tensor& invstd = saved[3];
    const double total = ctx->saved_data["count"].toDouble();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();

    const auto ct = mean.scalar_type();
    const torch::Tensor x = input.to(ct);
    const torch::Tensor dy = grad_outputs[0].to(ct).contiguous();
    const int64_t dim = x.dim();
    const int64_t channels = mean.size(0);

    // Local per-channel sums in one fused pass of LibTorch's own backward
    // kernel (train mode uses the mean and invstd given): it returns
    // sum(dy*(x-mean))*invstd and sum(dy) without materialising x-mean.
    torch::Tensor sum_dy_xmu_invstd = torch::zeros({channels}, mean.options());
    torch::Tensor sum_dy = torch::zeros({channels}, mean.options());
    if (x.numel() > 0) { // the kernel divides by the local count
      const auto local = at::native_batch_norm_backward(
          dy, x, weight.defined() ? weight.to(ct) : torch::ones_like(mean),
          c10::nullopt, c10::nullopt, mean, invstd, /*train=*/true,
          /*eps=*/0.0, {false, true, true});
      sum_dy_xmu_invstd = std::get<1>(local);
      sum_dy = std::get<2>(local);
    }

    torch::Tensor grad_input;
    if (ctx->needs_input_grad(0)) {
      // The input gradient depends on every rank's data through the batch
      // statistics: one all-reduce of both sums, packed.
      torch::Tensor packed =
          torch::cat({sum_dy, sum_dy_xmu_invstd / invstd}).to(torch::kDouble);
      ++collective_count;
      ddp::all_reduce(packed, ReduceOp::kSum);
      const torch::Tensor mean_dy = packed.slice(0, 0, channels) / total;
      const torch::Tensor mean_dy_xmu =
          packed.slice(0, channels, 2 * channels) / total;
      // dx = (dy - mean_dy - (x - mean) * invstd^2 * mean_dy_xmu) * invstd * w
      //    = (x - mean) * c1 + c0 + dy * s, with per-channel c1, c0, s. The
      // first two terms are one fused pass of eval-mode batch norm (unit
      // variance, eps 0), which subtracts the mean before scaling: no
      // cancellation when |mean| >> std. The dy term is a second pass.
      const torch::Tensor inv = invstd.to(torch::kDouble);
      const torch::Tensor s =
          weight.defined() ? inv * weight.to(torch::kDouble) : inv;
      const torch::Tensor c1 = -(inv * inv * mean_dy_xmu) * s;
      const torch::Tensor c0 = -mean_dy * s;
      grad_input = torch::batch_norm(x, c1.to(ct), c0.to(ct), mean,
                                     torch::ones_like(mean), /*training=*/false,
                                     /*momentum=*/0.0, /*eps=*/0.0,
                                     /*cudnn_enabled=*/false);
      grad_input.addcmul_(dy, per_channel(s.to(ct), dim));
      grad_input = grad_input.to(input.scalar_type());
    }
    // Local weight and bias gradients, as in PyTorch: DistributedDataParallel
    // sums (averages) them across ranks.
    torch::Tensor grad_weight;
    torch::Tensor grad_bias;
    if (weight.defined()) {
      grad_weight = sum_dy_xmu_invstd.to(weight.scalar_type());
    }
    if (has_bias) {
      grad_bias = sum_dy.to(weight.defined() ? weight.scalar_type() : ct);
    }
    return {grad_input,      grad_weight,     grad_bias,       torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

} // namespace

bool sync_batch_norm_active() { return ddp::is_distributed(); }

int64_t sync_batch_norm_collectives() { return collective_count.load(); }

torch::Tensor
sync_batch_norm_train(const torch::Tensor& input, const torch::Tensor& weight,
                      const torch::Tensor& bias, torch::Tensor& running_mean,
                      torch::Tensor& running_var,
                      torch::Tensor& num_batches_tracked,
                      const torch::nn::BatchNormOptions& options) {
  const int64_t channels = input.size(1);
  const int64_t local_count = channels > 0 ? input.numel() / channels : 0;
  const auto dims = reduce_dims(input);

  // Local count, mean and biased variance, packed for one all-gather. Double
  // precision: the merge below then loses nothing to the exchange.
  torch::Tensor packed = torch::zeros(
      {2 * channels + 1}, torch::dtype(torch::kDouble).device(input.device()));
  if (local_count > 0) {
    torch::NoGradGuard no_grad;
    const torch::Tensor x = input.detach().to(compute_type(input));
    // LibTorch's var_mean is a Welford reduction: no sum of squares.
    const auto var_mean = torch::var_mean(x, dims, /*unbiased=*/false);
    packed[0] = static_cast<double>(local_count);
    packed.slice(0, 1, 1 + channels).copy_(std::get<1>(var_mean));
    packed.slice(0, 1 + channels).copy_(std::get<0>(var_mean));
  }
  ++collective_count;
  const torch::Tensor all = torch::stack(ddp::all_gather(packed)); // (W, 2C+1)

  // Parallel variance (Chan et al.) for k groups: with n = sum n_i and
  // mean = sum n_i m_i / n, M2 = sum M2_i + sum n_i (m_i - mean)^2. Every term
  // is non-negative, so nothing cancels; empty ranks weigh nothing.
  const torch::Tensor counts = all.select(1, 0).unsqueeze(1); // (W, 1)
  const torch::Tensor means = all.slice(1, 1, 1 + channels);  // (W, C)
  const torch::Tensor vars = all.slice(1, 1 + channels);      // (W, C)
  const double total = counts.sum().item<double>();
  TORCH_CHECK(total > 1,
              "Expected more than 1 value per channel when training, got ",
              total, " over all ranks (local input size ", input.sizes(), ")");
  const torch::Tensor mean = (counts * means).sum(0) / total;
  const torch::Tensor var =
      (counts * (vars + (means - mean).pow(2))).sum(0) / total;

  if (options.track_running_stats()) {
    // The running-average factor exactly as BatchNormImplBase::forward.
    double factor = options.momentum().value_or(0.0);
    if (num_batches_tracked.defined()) {
      num_batches_tracked += 1;
      if (!options.momentum().has_value()) {
        factor = 1.0 / num_batches_tracked.item<double>();
      }
    }
    if (running_mean.defined()) {
      torch::NoGradGuard no_grad;
      // Unbiased variance in the running estimate, as LibTorch's kernel.
      const torch::Tensor unbiased = var * (total / (total - 1));
      running_mean.copy_(running_mean.to(torch::kDouble) * (1 - factor) +
                         mean * factor);
      running_var.copy_(running_var.to(torch::kDouble) * (1 - factor) +
                        unbiased * factor);
    }
  }

  // Statistics in the dtype the kernel expects with these parameters.
  const auto stat_type = weight.defined()         ? weight.scalar_type()
                         : running_mean.defined() ? running_mean.scalar_type()
                                                  : compute_type(input);
  const double eps = options.eps();
  const torch::Tensor invstd = (var + eps).rsqrt().to(stat_type);
  return SyncBatchNormFunction::apply(
      input,
      weight.defined() ? c10::optional<torch::Tensor>(weight) : c10::nullopt,
      bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt,
      mean.to(stat_type), var.to(stat_type), invstd, eps, total);
}

void print_sync_batch_norm(std::ostream& stream, const char* name,
                           const torch::nn::BatchNormOptions& options) {
  stream << std::boolalpha << name << "(" << options.num_features()
         << ", eps=" << options.eps() << ", momentum=";
  if (options.momentum().has_value()) {
    stream << *options.momentum();
  } else {
    stream << "None";
  }
  stream << ", affine=" << options.affine()
         << ", track_running_stats=" << options.track_running_stats() << ")";
}

} // namespace detail

namespace {

// Copy with fresh tensors, keeping the concrete SyncBatchNorm type.
template <typename Impl>
std::shared_ptr<torch::nn::Module>
clone_sync(const Impl& self, const c10::optional<torch::Device>& device) {
  torch::NoGradGuard no_grad;
  auto copy = std::make_shared<Impl>(self.options);
  copy->train(self.is_training());
  auto copy_tensors =
      [&](const torch::OrderedDict<std::string, torch::Tensor>& from,
          torch::OrderedDict<std::string, torch::Tensor> to) {
        for (const auto& item : from) {
          const torch::Tensor& src = item.value();
          torch::Tensor* dst = to.find(item.key());
          if (!src.defined() || dst == nullptr || !dst->defined()) {
            continue;
          }
          dst->set_data(device ? src.data().to(*device, /*non_blocking=*/false,
                                               /*copy=*/true)
                               : src.data().clone());
          dst->set_requires_grad(src.requires_grad());
        }
      };
  copy_tensors(self.named_parameters(/*recurse=*/false),
               copy->named_parameters(/*recurse=*/false));
  copy_tensors(self.named_buffers(/*recurse=*/false),
               copy->named_buffers(/*recurse=*/false));
  return copy;
}

} // namespace

#define DDP_SYNC_BATCH_NORM_DEFINE(D)                                          \
  torch::Tensor SyncBatchNorm##D##dImpl::forward(const torch::Tensor& input) { \
    if (!is_training() || !detail::sync_batch_norm_active()) {                 \
      return torch::nn::BatchNorm##D##dImpl::forward(input);                   \
    }                                                                          \
    _check_input_dim(input);                                                   \
    return detail::sync_batch_norm_train(input, weight, bias, running_mean,    \
                                         running_var, num_batches_tracked,     \
                                         options);                             \
  }                                                                            \
  void SyncBatchNorm##D##dImpl::pretty_print(std::ostream& stream) const {     \
    detail::print_sync_batch_norm(stream, "ddp::SyncBatchNorm" #D "d",         \
                                  options);                                    \
  }                                                                            \
  std::shared_ptr<torch::nn::Module> SyncBatchNorm##D##dImpl::clone(           \
      const c10::optional<torch::Device>& device) const {                      \
    return clone_sync(*this, device);                                          \
  }

DDP_SYNC_BATCH_NORM_DEFINE(1)
DDP_SYNC_BATCH_NORM_DEFINE(2)
DDP_SYNC_BATCH_NORM_DEFINE(3)

#undef DDP_SYNC_BATCH_NORM_DEFINE

} // namespace ddp
