// ddp::SyncBatchNorm{1,2,3}d: the drop-in properties in one process, and in 2
// and 3 ranks on Gloo the equality with plain BatchNorm over the global batch
// (outputs, running statistics, input and weight/bias gradients), even and
// uneven local batches, an empty local batch included.

#include "multiprocess.h"

#include <ddp/distributed.h>
#include <ddp/sync_batch_norm.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace {

// |a - b| <= tol * max(1, max|b|), elementwise maximum.
void expect_close(const torch::Tensor& a, const torch::Tensor& b,
                  const std::string& what, double tol = 1e-5) {
  ASSERT_TRUE(a.defined()) << what << ": undefined";
  ASSERT_TRUE(b.defined()) << what << ": reference undefined";
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  if (a.numel() == 0) {
    return;
  }
  const double diff =
      (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
  const double scale =
      std::max(1.0, b.to(torch::kDouble).abs().max().item<double>());
  EXPECT_LE(diff, tol * scale) << what << " on rank " << ddp::rank();
}

// Trains the synchronised layer on this rank's slice of a global batch and
// plain batch norm on the whole batch, a few steps, comparing everything.
template <typename Sync, typename Plain>
void check_against_global_batch(const std::vector<int64_t>& counts,
                                const std::vector<int64_t>& tail,
                                const torch::nn::BatchNormOptions& options,
                                int steps = 3) {
  const int64_t world = ddp::world_size();
  const int64_t rank = ddp::rank();
  ASSERT_EQ(static_cast<int64_t>(counts.size()), world);
  ASSERT_TRUE(ddp::is_distributed());
  const int64_t total =
      std::accumulate(counts.begin(), counts.end(), int64_t{0});
  const int64_t offset =
      std::accumulate(counts.begin(), counts.begin() + rank, int64_t{0});
  const int64_t local = counts[rank];

  torch::manual_seed(1234); // same global data on every rank
  Plain plain(options);
  Sync sync(options);
  if (options.affine()) {
    torch::NoGradGuard no_grad;
    plain->weight.uniform_(0.5, 1.5);
    plain->bias.normal_();
    sync->weight.copy_(plain->weight);
    sync->bias.copy_(plain->bias);
  }
  std::vector<int64_t> shape{total, options.num_features()};
  shape.insert(shape.end(), tail.begin(), tail.end());

  for (int step = 0; step < steps; ++step) {
    const std::string at = " (step " + std::to_string(step) + ")";
    const torch::Tensor x = torch::randn(shape) * 3 + 2;
    const torch::Tensor g = torch::randn(shape);

    const torch::Tensor x_ref = x.clone().requires_grad_();
    const torch::Tensor y_ref = plain->forward(x_ref);
    (y_ref * g).sum().backward();

    const torch::Tensor x_mine =
        x.narrow(0, offset, local).clone().requires_grad_();
    const torch::Tensor y_mine = sync->forward(x_mine);
    (y_mine * g.narrow(0, offset, local)).sum().backward();

    expect_close(y_mine, y_ref.narrow(0, offset, local), "output" + at);
    expect_close(x_mine.grad(), x_ref.grad().narrow(0, offset, local),
                 "input gradient" + at);
    if (options.affine()) {
      // Local weight/bias gradients, summed across ranks as DDP would.
      torch::Tensor gw = sync->weight.grad().clone();
      torch::Tensor gb = sync->bias.grad().clone();
      ddp::all_reduce(gw);
      ddp::all_reduce(gb);
      expect_close(gw, plain->weight.grad(), "weight gradient" + at);
      expect_close(gb, plain->bias.grad(), "bias gradient" + at);
      sync->weight.mutable_grad().zero_();
      sync->bias.mutable_grad().zero_();
      plain->weight.mutable_grad().zero_();
      plain->bias.mutable_grad().zero_();
    }
  }
  if (options.track_running_stats()) {
    expect_close(sync->running_mean, plain->running_mean, "running_mean");
    expect_close(sync->running_var, plain->running_var, "running_var");
    EXPECT_EQ(sync->num_batches_tracked.template item<int64_t>(), steps);
  }
  // Eval: plain batch norm with the (equal) running statistics, no collective.
  sync->eval();
  plain->eval();
  const auto before = ddp::detail::sync_batch_norm_collectives();
  const torch::Tensor x = torch::randn(shape);
  expect_close(sync->forward(x), plain->forward(x), "eval output");
  EXPECT_EQ(ddp::detail::sync_batch_norm_collectives(), before);
}

using torch::nn::BatchNormOptions;

// ---------------------------------------------------------------------------
// Several ranks.

TEST(SyncBatchNormRanks, Matches2dEvenTwoRanks) {
  ddp_test::run_ranks(2, [] {
    check_against_global_batch<ddp::SyncBatchNorm2d, torch::nn::BatchNorm2d>(
        {4, 4}, {5, 3}, BatchNormOptions(6));
  });
}

TEST(SyncBatchNormRanks, Matches2dUnevenThreeRanks) {
  ddp_test::run_ranks(3, [] {
    check_against_global_batch<ddp::SyncBatchNorm2d, torch::nn::BatchNorm2d>(
        {2, 7, 1}, {4, 4}, BatchNormOptions(5).momentum(0.3));
  });
}

TEST(SyncBatchNormRanks, EmptyLocalBatchThreeRanks) {
  ddp_test::run_ranks(3, [] {
    check_against_global_batch<ddp::SyncBatchNorm2d, torch::nn::BatchNorm2d>(
        {3, 0, 6}, {2, 3}, BatchNormOptions(4));
  });
}

TEST(SyncBatchNormRanks, Matches1dTwoRanks) {
  ddp_test::run_ranks(2, [] {
    // (N, C), uneven, cumulative moving average (momentum None).
    check_against_global_batch<ddp::SyncBatchNorm1d, torch::nn::BatchNorm1d>(
        {3, 8}, {}, BatchNormOptions(7).momentum(c10::nullopt));
    // (N, C, L), without affine parameters.
    check_against_global_batch<ddp::SyncBatchNorm1d, torch::nn::BatchNorm1d>(
        {5, 2}, {9}, BatchNormOptions(3).affine(false));
  });
}

TEST(SyncBatchNormRanks, Matches3dThreeRanks) {
  ddp_test::run_ranks(3, [] {
    check_against_global_batch<ddp::SyncBatchNorm3d, torch::nn::BatchNorm3d>(
        {2, 3, 1}, {3, 2, 4}, BatchNormOptions(4).eps(1e-3));
  });
}

TEST(SyncBatchNormRanks, NoRunningStatsStillSynchronises) {
  ddp_test::run_ranks(2, [] {
    check_against_global_batch<ddp::SyncBatchNorm2d, torch::nn::BatchNorm2d>(
        {2, 5}, {3, 3}, BatchNormOptions(3).track_running_stats(false));
  });
}

// Large mean, small spread: a sum-of-squares variance in float would lose
// every digit; the merged variance must match a double-precision reference.
TEST(SyncBatchNormRanks, StableForLargeMean) {
  ddp_test::run_ranks(2, [] {
    const std::vector<int64_t> counts{37, 91};
    const int64_t offset = ddp::rank() == 0 ? 0 : counts[0];
    torch::manual_seed(7);
    const torch::Tensor x = torch::randn({128, 3, 4, 4}) + 3000.0;
    ddp::SyncBatchNorm2d sync(BatchNormOptions(3).momentum(1.0));
    sync->forward(x.narrow(0, offset, counts[ddp::rank()]));
    torch::nn::BatchNorm2d reference(BatchNormOptions(3).momentum(1.0));
    reference->to(torch::kDouble);
    reference->forward(x.to(torch::kDouble));
    expect_close(sync->running_var, reference->running_var,
                 "running_var (unbiased batch variance)", 1e-4);
    expect_close(sync->running_mean, reference->running_mean, "running_mean",
                 1e-6);
  });
}

// A small ConvNet trained K steps of SGD with momentum: SyncBatchNorm on
// uneven local batches (gradients summed across ranks by hand, the loss
// normalised by the global batch) equals BatchNorm2d on the global batch.
TEST(SyncBatchNormRanks, ConvNetTrainingMatchesGlobalBatch) {
  ddp_test::run_ranks(2, [] {
    const std::vector<int64_t> counts{3, 5};
    const int64_t total = 8;
    const int64_t rank = ddp::rank();
    const int64_t offset = rank == 0 ? 0 : counts[0];
    torch::manual_seed(11);
    torch::nn::Sequential reference(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).padding(1)),
        torch::nn::BatchNorm2d(4), torch::nn::ReLU(), torch::nn::Flatten(),
        torch::nn::Linear(4 * 6 * 6, 5));
    torch::nn::Sequential model(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).padding(1)),
        ddp::SyncBatchNorm2d(4), torch::nn::ReLU(), torch::nn::Flatten(),
        torch::nn::Linear(4 * 6 * 6, 5));
    {
      torch::NoGradGuard no_grad;
      auto from = reference->named_parameters();
      for (auto& p : model->named_parameters()) {
        p.value().copy_(from[p.key()]);
      }
    }
    torch::optim::SGD ref_opt(reference->parameters(),
                              torch::optim::SGDOptions(0.05).momentum(0.9));
    torch::optim::SGD opt(model->parameters(),
                          torch::optim::SGDOptions(0.05).momentum(0.9));
    for (int step = 0; step < 4; ++step) {
      const torch::Tensor x = torch::randn({total, 3, 6, 6});
      const torch::Tensor target = torch::randint(0, 5, {total});
      ref_opt.zero_grad();
      torch::nn::functional::cross_entropy(reference->forward(x), target)
          .backward();
      ref_opt.step();

      opt.zero_grad();
      const torch::Tensor out =
          model->forward(x.narrow(0, offset, counts[rank]));
      torch::nn::functional::cross_entropy(
          out, target.narrow(0, offset, counts[rank]),
          torch::nn::functional::CrossEntropyFuncOptions().reduction(
              torch::kSum))
          .div(static_cast<double>(total))
          .backward();
      for (auto& p : model->parameters()) {
        ddp::all_reduce(p.mutable_grad());
      }
      opt.step();
    }
    auto ref_params = reference->named_parameters();
    for (const auto& p : model->named_parameters()) {
      expect_close(p.value(), ref_params[p.key()], "parameter " + p.key());
    }
    auto ref_buffers = reference->named_buffers();
    for (const auto& b : model->named_buffers()) {
      expect_close(b.value().to(torch::kDouble),
                   ref_buffers[b.key()].to(torch::kDouble),
                   "buffer " + b.key());
    }
  });
}

TEST(SyncBatchNormRanks, OneCollectiveForwardAndBackwardPerLayer) {
  ddp_test::run_ranks(2, [] {
    torch::nn::Sequential model(ddp::SyncBatchNorm1d(4),
                                torch::nn::Linear(4, 4),
                                ddp::SyncBatchNorm1d(4));
    const torch::Tensor x = torch::randn({5, 4}).requires_grad_();
    const auto start = ddp::detail::sync_batch_norm_collectives();
    const torch::Tensor y = model->forward(x);
    const auto after_forward = ddp::detail::sync_batch_norm_collectives();
    EXPECT_EQ(after_forward - start, 2) << "forward: one per layer";
    y.sum().backward();
    EXPECT_EQ(ddp::detail::sync_batch_norm_collectives() - after_forward, 2)
        << "backward: one per layer";
    // An input that needs no gradient needs no backward exchange either
    // (only the second layer's input does here).
    const torch::Tensor x2 = torch::randn({5, 4});
    const torch::Tensor y2 = model->forward(x2);
    const auto after_forward2 = ddp::detail::sync_batch_norm_collectives();
    y2.sum().backward();
    EXPECT_EQ(ddp::detail::sync_batch_norm_collectives() - after_forward2, 1);
  });
}

TEST(SyncBatchNormRanks, TooFewValuesIsAClearError) {
  ddp_test::run_ranks(2, [] {
    ddp::SyncBatchNorm1d sync(3);
    // One value per channel over all ranks: undefined variance.
    const torch::Tensor x = torch::randn({ddp::rank() == 0 ? 1 : 0, 3});
    try {
      sync->forward(x);
      ADD_FAILURE() << "expected an error";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("Expected more than 1 value"),
                std::string::npos)
          << e.what();
    }
  });
}

// ---------------------------------------------------------------------------
// One process (no ddp::init): drop-in properties.

TEST(SyncBatchNorm, IsABatchNorm) {
  ddp::SyncBatchNorm2d bn(torch::nn::BatchNorm2dOptions(8).momentum(0.2));
  EXPECT_NE(bn->as<torch::nn::BatchNorm2d>(), nullptr);
  EXPECT_NE(bn->as<torch::nn::BatchNorm2dImpl>(), nullptr);
  std::shared_ptr<torch::nn::Module> as_module = bn.ptr();
  EXPECT_NE(as_module->as<torch::nn::BatchNorm2d>(), nullptr);
  EXPECT_EQ(as_module->as<torch::nn::BatchNorm1d>(), nullptr);
  // A base holder can hold it (given a pointer to the base Impl).
  torch::nn::BatchNorm2d base(
      std::shared_ptr<torch::nn::BatchNorm2dImpl>(bn.ptr()));
  EXPECT_EQ(base->options.momentum(), 0.2);
  ddp::SyncBatchNorm1d one(16);
  ddp::SyncBatchNorm3d three(torch::nn::BatchNormOptions(2));
  EXPECT_NE(one->as<torch::nn::BatchNorm1d>(), nullptr);
  EXPECT_NE(three->as<torch::nn::BatchNorm3d>(), nullptr);
}

TEST(SyncBatchNorm, SameParameterAndBufferNames) {
  ddp::SyncBatchNorm2d sync(4);
  torch::nn::BatchNorm2d plain(4);
  EXPECT_EQ(sync->named_parameters().keys(), plain->named_parameters().keys());
  EXPECT_EQ(sync->named_buffers().keys(), plain->named_buffers().keys());
  EXPECT_EQ(sync->named_buffers().keys(),
            (std::vector<std::string>{"running_mean", "running_var",
                                      "num_batches_tracked"}));
}

TEST(SyncBatchNorm, PrettyPrintNamesIt) {
  std::ostringstream out;
  out << *ddp::SyncBatchNorm2d(8);
  EXPECT_EQ(out.str(), "ddp::SyncBatchNorm2d(8, eps=1e-05, momentum=0.1, "
                       "affine=true, track_running_stats=true)");
  std::ostringstream none;
  none << *ddp::SyncBatchNorm1d(BatchNormOptions(3).momentum(c10::nullopt));
  EXPECT_EQ(none.str(), "ddp::SyncBatchNorm1d(3, eps=1e-05, momentum=None, "
                        "affine=true, track_running_stats=true)");
}

template <typename Module>
void train_a_bit(Module& m, std::vector<int64_t> shape) {
  {
    torch::NoGradGuard no_grad;
    m->weight.uniform_(0.5, 1.5);
    m->bias.normal_();
  }
  for (int i = 0; i < 3; ++i) {
    m->forward(torch::randn(shape) * 2 + 1);
  }
}

template <typename A, typename B> void expect_same_state(A& a, B& b) {
  for (const auto& p : a->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), b->named_parameters()[p.key()]))
        << p.key();
  }
  for (const auto& p : a->named_buffers()) {
    EXPECT_TRUE(torch::equal(p.value(), b->named_buffers()[p.key()]))
        << p.key();
  }
}

TEST(SyncBatchNorm, CheckpointsLoadBothWays) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ddp_sbn_ckpt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string from_plain = (dir / "plain.pt").string();
  const std::string from_sync = (dir / "sync.pt").string();

  torch::nn::BatchNorm2d plain(5);
  train_a_bit(plain, {4, 5, 3, 3});
  torch::save(plain, from_plain);
  ddp::SyncBatchNorm2d sync(5);
  torch::load(sync, from_plain);
  expect_same_state(plain, sync);

  ddp::SyncBatchNorm1d sync1(6);
  train_a_bit(sync1, {8, 6});
  torch::save(sync1, from_sync);
  torch::nn::BatchNorm1d plain1(6);
  torch::load(plain1, from_sync);
  expect_same_state(sync1, plain1);
  EXPECT_EQ(plain1->num_batches_tracked.item<int64_t>(), 3);

  // Inside a model: a Sequential saved with plain layers loads into one with
  // synchronised layers.
  torch::nn::Sequential plain_net(torch::nn::Conv2d(2, 3, 1),
                                  torch::nn::BatchNorm2d(3));
  torch::nn::Sequential sync_net(torch::nn::Conv2d(2, 3, 1),
                                 ddp::SyncBatchNorm2d(3));
  for (int i = 0; i < 2; ++i) {
    plain_net->forward(torch::randn({3, 2, 4, 4}));
  }
  torch::save(plain_net, from_plain);
  torch::load(sync_net, from_plain);
  expect_same_state(plain_net, sync_net);
  std::filesystem::remove_all(dir);
}

TEST(SyncBatchNorm, CloneKeepsTheType) {
  ddp::SyncBatchNorm2d bn(3);
  train_a_bit(bn, {4, 3, 2, 2});
  bn->eval();
  const auto copy = bn->clone();
  auto typed = std::dynamic_pointer_cast<ddp::SyncBatchNorm2dImpl>(copy);
  ASSERT_NE(typed, nullptr);
  EXPECT_FALSE(typed->is_training());
  expect_same_state(bn, typed);
  // Deep: changing the copy leaves the original alone.
  typed->running_mean.add_(1);
  EXPECT_FALSE(torch::equal(typed->running_mean, bn->running_mean));
  EXPECT_TRUE(typed->weight.requires_grad());
}

TEST(SyncBatchNorm, WorldSizeOneIsPlainBatchNorm) {
  ASSERT_FALSE(ddp::is_distributed());
  torch::manual_seed(0);
  ddp::SyncBatchNorm2d sync(4);
  torch::nn::BatchNorm2d plain(4);
  for (int i = 0; i < 3; ++i) {
    const auto x = torch::randn({6, 4, 3, 3});
    EXPECT_TRUE(torch::equal(sync->forward(x), plain->forward(x)));
  }
  EXPECT_TRUE(torch::equal(sync->running_var, plain->running_var));
  const auto before = ddp::detail::sync_batch_norm_collectives();
  sync->forward(torch::randn({6, 4, 3, 3})).sum().backward();
  EXPECT_EQ(ddp::detail::sync_batch_norm_collectives(), before);
}

TEST(SyncBatchNorm, BadInputRankIsAClearError) {
  ddp::SyncBatchNorm2d bn(4);
  EXPECT_THROW(bn->forward(torch::randn({4, 4})), c10::Error);
}

} // namespace
