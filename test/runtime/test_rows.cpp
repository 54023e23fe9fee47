// ddp::RowShard: a full batch sharded by rows gives the one-process
// gradient, loss and counts on 2 and 3 Gloo ranks, also when the rows do not
// divide by the world size; without a launcher it changes nothing.

#include "multiprocess.h"

#include <ddp/ddp.h>
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace {

TEST(RowShard, BlocksCoverEveryRowOnceInRankOrder) {
  ddp_test::run_ranks(3, [] {
    ddp::RowShard rows(7001);
    EXPECT_TRUE(rows.is_sharded());
    // 7001 = 2334 + 2334 + 2333.
    const std::vector<int64_t> begins{0, 2334, 4668};
    const std::vector<int64_t> counts{2334, 2334, 2333};
    EXPECT_EQ(rows.begin(), begins[ddp::rank()]);
    EXPECT_EQ(rows.count(), counts[ddp::rank()]);
    EXPECT_EQ(rows.total_rows(), 7001);
    // The blocks' weights average to one: a mean stays a mean.
    EXPECT_NEAR(ddp::all_reduce(rows.mean_weight()), 3.0, 1e-12);
    const auto x = torch::arange(7001).reshape({7001, 1});
    const auto mine = rows.of(x);
    EXPECT_EQ(mine.size(0), rows.count());
    EXPECT_EQ(mine[0].item<int64_t>(), rows.begin());
    EXPECT_EQ(rows.global_sum(mine.sum().item<int64_t>()), 7001 * 7000 / 2);
    // A tensor of another length is no row of this batch.
    EXPECT_THROW(rows.of(torch::zeros({7000, 1})), c10::Error);
  });
}

TEST(RowShard, FewerRowsThanRanksKeepEveryRowEverywhere) {
  ddp_test::run_ranks(3, [] {
    ddp::RowShard rows(2);
    EXPECT_FALSE(rows.is_sharded());
    EXPECT_EQ(rows.count(), 2);
    EXPECT_EQ(rows.mean_weight(), 1.0);
    EXPECT_EQ(rows.sum_weight(), 1.0);
    EXPECT_EQ(rows.global_sum(int64_t{5}), 5);
  });
}

TEST(RowShard, WithoutLauncherItChangesNothing) {
  ddp::RowShard rows(6001);
  EXPECT_FALSE(rows.is_sharded());
  const auto x = torch::randn({6001, 3});
  EXPECT_TRUE(rows.of(x).is_same(x));
  EXPECT_EQ(rows.mean_weight(), 1.0);
  const auto loss = x.mean();
  EXPECT_TRUE(torch::equal(rows.global_mean(loss), loss));
  EXPECT_EQ(rows.global_sum(3.5), 3.5);
}

// One full-batch step of `loss_of` through a DistributedDataParallel over the
// rank's rows, weighted by `weighted`, against the same step in one process
// over all rows (every rank computes it itself): the gradients and the
// printed global loss agree.
void expect_one_process_gradient(
    int64_t n,
    const std::function<torch::Tensor(torch::Tensor, torch::Tensor,
                                      torch::Tensor)>& loss_of,
    bool is_mean, bool classes) {
  torch::manual_seed(4);
  auto x = torch::randn({n, 5});
  auto y =
      classes ? torch::randint(0, 3, {n}, torch::kLong) : torch::randn({n, 3});
  torch::nn::Sequential reference(torch::nn::Linear(5, 8),
                                  torch::nn::Functional(torch::tanh),
                                  torch::nn::Linear(8, 3));
  torch::nn::Sequential model(torch::nn::Linear(5, 8),
                              torch::nn::Functional(torch::tanh),
                              torch::nn::Linear(8, 3));
  {
    torch::NoGradGuard no_grad;
    const auto from = reference->parameters();
    const auto to = model->parameters();
    for (size_t i = 0; i < from.size(); ++i) {
      to[i].copy_(from[i]);
    }
  }
  const auto full_loss = loss_of(reference->forward(x), y, x);
  full_loss.backward();

  ddp::DistributedDataParallel model_ddp(model);
  ddp::RowShard rows(n);
  const auto x_mine = rows.of(x), y_mine = rows.of(y);
  const auto loss = loss_of(model->forward(x_mine), y_mine, x_mine);
  (is_mean ? rows.mean_weighted(loss) : rows.sum_weighted(loss)).backward();

  const auto want = reference->parameters();
  const auto got = model->parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(torch::allclose(got[i].grad(), want[i].grad(), 1e-4, 1e-5))
        << "parameter " << i << " on rank " << ddp::rank() << ": "
        << (got[i].grad() - want[i].grad()).abs().max().item<double>();
  }
  const auto global = is_mean ? rows.global_mean(loss) : rows.global_sum(loss);
  EXPECT_NEAR(global.item<double>(), full_loss.item<double>(),
              1e-5 * std::abs(full_loss.item<double>()));
}

class RowShardGradient : public ::testing::TestWithParam<int> {};

TEST_P(RowShardGradient, MeanLossesOnUnevenRows) {
  ddp_test::run_ranks(GetParam(), [] {
    // 6001 and 601 rows: uneven on 2 and on 3 ranks. Float sums in
    // another order: within 1e-4 (an unweighted shard is off by ~1/N).
    expect_one_process_gradient(
        6001,
        [](torch::Tensor out, torch::Tensor y, torch::Tensor) {
          return torch::mse_loss(out, y);
        },
        /*is_mean=*/true, /*classes=*/false);
    expect_one_process_gradient(
        601,
        [](torch::Tensor out, torch::Tensor y, torch::Tensor) {
          return torch::smooth_l1_loss(out, y);
        },
        true, false);
    expect_one_process_gradient(
        601,
        [](torch::Tensor out, torch::Tensor y, torch::Tensor) {
          return torch::cross_entropy_loss(out, y);
        },
        true, true);
  });
}

TEST_P(RowShardGradient, SumLossesOnUnevenRows) {
  ddp_test::run_ranks(GetParam(), [] {
    expect_one_process_gradient(
        601,
        [](torch::Tensor out, torch::Tensor y, torch::Tensor) {
          return torch::l1_loss(out, y, at::Reduction::Sum);
        },
        /*is_mean=*/false, /*classes=*/false);
    expect_one_process_gradient(
        601,
        [](torch::Tensor out, torch::Tensor y, torch::Tensor) {
          return torch::nll_loss(torch::log_softmax(out, 1), y, {},
                                 at::Reduction::Sum);
        },
        false, true);
  });
}

TEST_P(RowShardGradient, PlainAverageOfShardMeansIsNotTheMean) {
  // Why the weight: without it, 2 ranks of 3001 and 3000 rows average two
  // means, which is not the mean of 6001 rows. The test can fail.
  ddp_test::run_ranks(GetParam(), [] {
    torch::manual_seed(9);
    const auto x = torch::randn({6001, 1}) +
                   torch::arange(6001).reshape({6001, 1}) / 1000.0;
    ddp::RowShard rows(6001);
    const auto mine = rows.of(x);
    auto plain = mine.mean().to(torch::kDouble);
    ddp::all_reduce(plain, ddp::ReduceOp::kMean);
    const double exact = x.mean().item<double>();
    EXPECT_GT(std::abs(plain.item<double>() - exact), 1e-6);
    EXPECT_NEAR(rows.global_mean(mine.mean()).item<double>(), exact, 1e-5);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, RowShardGradient, ::testing::Values(2, 3));

} // namespace
