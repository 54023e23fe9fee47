// ddp::load and ddp::exists_on_main: a checkpoint that rank 0 saved in its
// own working directory, read back by every rank running in a directory of
// its own (hosts without a shared disk), on 2 Gloo ranks.

#include "multiprocess.h"

#include <ddp/ddp.h>
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <string>

namespace {

// Each rank in a working directory of its own, empty.
void enter_own_directory() {
  const auto dir = std::filesystem::path(ddp_test::shared_dir()) /
                   ("rank" + std::to_string(ddp::rank()));
  std::filesystem::create_directories(dir);
  std::filesystem::current_path(dir);
}

double checksum(torch::nn::Module& module) {
  double sum = 0;
  for (const auto& p : module.parameters()) {
    sum += p.detach().sum(torch::kDouble).item<double>();
  }
  return sum;
}

TEST(Checkpoint, EveryRankLoadsWhatRankZeroSavedWithoutSharedDisk) {
  ddp_test::run_ranks(2, [] {
    enter_own_directory();
    // Different weights on each rank, so that a load that did nothing shows.
    torch::manual_seed(ddp::rank() + 1);
    torch::nn::Linear model(4, 3);
    torch::optim::Adam optimizer(model->parameters(),
                                 torch::optim::AdamOptions(0.01));
    optimizer.zero_grad();
    model->forward(torch::randn({8, 4})).sum().backward();
    optimizer.step();
    if (ddp::is_main_process()) {
      torch::save(model, "model.pt");
      torch::save(optimizer, "optimizer.pt");
      torch::save(torch::arange(5), "tensor.pt");
    }
    ddp::barrier();
    // Only rank 0's directory holds the files.
    EXPECT_EQ(std::filesystem::exists("model.pt"), ddp::rank() == 0);
    ASSERT_TRUE(ddp::exists_on_main("model.pt"));
    EXPECT_FALSE(ddp::exists_on_main("missing.pt"));

    torch::manual_seed(100 + ddp::rank());
    torch::nn::Linear resumed(4, 3);
    torch::optim::Adam resumed_optimizer(resumed->parameters(),
                                         torch::optim::AdamOptions(0.01));
    ddp::load(resumed, "model.pt");
    ddp::load(resumed_optimizer, "optimizer.pt");
    torch::Tensor tensor;
    ddp::load(tensor, "tensor.pt");

    EXPECT_TRUE(torch::equal(tensor, torch::arange(5)));
    // Every rank holds rank 0's saved parameters.
    const double mine = checksum(*resumed);
    EXPECT_EQ(ddp::all_reduce(mine, ddp::ReduceOp::kMax),
              ddp::all_reduce(mine, ddp::ReduceOp::kMin));
    if (ddp::rank() == 0) {
      EXPECT_EQ(mine, checksum(*model));
    }
    // The optimizer's state came along (Adam's moments, one per parameter).
    EXPECT_EQ(resumed_optimizer.state().size(), 2u);
  });
}

TEST(Checkpoint, AFileRankZeroCannotReadIsTheSameErrorOnEveryRank) {
  ddp_test::run_ranks(2, [] {
    enter_own_directory();
    torch::nn::Linear model(4, 3);
    std::string error;
    try {
      ddp::load(model, "never-saved.pt");
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_NE(error.find("ddp::load: rank 0 cannot read 'never-saved.pt'"),
              std::string::npos)
        << error;
    // The job goes on: the next collective matches.
    EXPECT_EQ(ddp::all_reduce(int64_t{1}), 2);
  });
}

TEST(Checkpoint, WithoutLauncherItIsTorchLoad) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ddp-checkpoint-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "model.pt").string();
  torch::nn::Linear model(2, 2);
  torch::save(model, path);
  torch::nn::Linear other(2, 2);
  EXPECT_TRUE(ddp::exists_on_main(path));
  ddp::load(other, path);
  EXPECT_TRUE(torch::equal(other->weight, model->weight));
  std::filesystem::remove_all(dir);
}

} // namespace
