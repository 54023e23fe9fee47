// SyncBatchNorm inside ddp::DistributedDataParallel: N ranks x batch B equal
// one process x batch N*B with plain BatchNorm2d, K steps of SGD with
// momentum, and every rank ends with bit-identical parameters.

#include "multiprocess.h"

#include <ddp/data_parallel.h>
#include <ddp/distributed.h>
#include <ddp/sync_batch_norm.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

namespace {

void expect_close(const torch::Tensor& a, const torch::Tensor& b,
                  const std::string& what, double tol = 1e-5) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double diff =
      (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
  const double scale =
      std::max(1.0, b.to(torch::kDouble).abs().max().item<double>());
  EXPECT_LE(diff, tol * scale) << what << " on rank " << ddp::rank();
}

template <typename Norm> torch::nn::Sequential conv_net() {
  return torch::nn::Sequential(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 6, 3).padding(1)), Norm(6),
      torch::nn::ReLU(),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 4, 3).padding(1)), Norm(4),
      torch::nn::ReLU(), torch::nn::Flatten(), torch::nn::Linear(4 * 5 * 5, 3));
}

void check_ddp_with_sync_batch_norm() {
  const int64_t world = ddp::world_size();
  const int64_t local = 4;
  const int64_t total = local * world;
  const int64_t offset = local * ddp::rank();

  torch::manual_seed(5);
  auto reference = conv_net<torch::nn::BatchNorm2d>();
  auto model = conv_net<ddp::SyncBatchNorm2d>();
  {
    torch::NoGradGuard no_grad;
    auto from = reference->named_parameters();
    for (auto& p : model->named_parameters()) {
      p.value().copy_(from[p.key()]);
    }
  }
  ddp::DistributedDataParallel model_ddp(model);
  torch::optim::SGD ref_opt(reference->parameters(),
                            torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD opt(model->parameters(),
                        torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 4; ++step) {
    const torch::Tensor x = torch::randn({total, 3, 5, 5}) * 2 + 0.5;
    const torch::Tensor target = torch::randint(0, 3, {total});
    ref_opt.zero_grad();
    torch::nn::functional::cross_entropy(reference->forward(x), target)
        .backward();
    ref_opt.step();

    opt.zero_grad();
    // The training loop as migrated code writes it: mean loss per rank, DDP
    // averages the gradients.
    torch::nn::functional::cross_entropy(
        model->forward(x.narrow(0, offset, local)),
        target.narrow(0, offset, local))
        .backward();
    opt.step();
  }
  auto ref_params = reference->named_parameters();
  for (const auto& p : model->named_parameters()) {
    expect_close(p.value(), ref_params[p.key()], "parameter " + p.key());
    for (const auto& other : ddp::all_gather(p.value().detach())) {
      EXPECT_TRUE(torch::equal(other, p.value()))
          << p.key() << " differs across ranks";
    }
  }
  auto ref_buffers = reference->named_buffers();
  for (const auto& b : model->named_buffers()) {
    expect_close(b.value(), ref_buffers[b.key()], "buffer " + b.key());
  }
}

TEST(SyncBatchNormDdp, TwoRanksEqualGlobalBatch) {
  ddp_test::run_ranks(2, check_ddp_with_sync_batch_norm);
}

TEST(SyncBatchNormDdp, ThreeRanksEqualGlobalBatch) {
  ddp_test::run_ranks(3, check_ddp_with_sync_batch_norm);
}

} // namespace
