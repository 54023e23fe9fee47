// ddp::ZeroRedundancyOptimizer on 2 and 3 Gloo ranks over loopback: a model
// wrapped in DistributedDataParallel trains with the sharded optimizer as
// with the unsharded one, each rank holding only its share of the state.

#include "multiprocess.h"

#include <ddp/data_parallel.h>
#include <ddp/distributed.h>
#include <ddp/zero_redundancy_optimizer.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

// Parameters of several sizes (192, 24, 288, 12, 36, 3 elements), so the
// partition is uneven and every rank of 3 owns some.
struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 24));
    fc2 = register_module("fc2", torch::nn::Linear(24, 12));
    fc3 = register_module("fc3", torch::nn::Linear(12, 3));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::tanh(fc1->forward(x));
    x = torch::tanh(fc2->forward(x));
    return fc3->forward(x);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Mlp);

constexpr int64_t kBatch = 4; // per rank
constexpr int kSteps = 15;

// Every rank starts elsewhere; DistributedDataParallel broadcasts rank 0's.
Mlp make_net() {
  torch::manual_seed(11 + 100 * ddp::rank());
  return Mlp();
}

std::pair<torch::Tensor, torch::Tensor> local_batch(int step) {
  torch::manual_seed(1000 + step);
  const int64_t n = ddp::world_size() * kBatch;
  auto x = torch::randn({n, 8});
  auto y = torch::randn({n, 3});
  return {x.narrow(0, ddp::rank() * kBatch, kBatch),
          y.narrow(0, ddp::rank() * kBatch, kBatch)};
}

void train_step(Mlp& net, torch::optim::Optimizer& opt, int step,
                bool closure = false) {
  auto [x, y] = local_batch(step);
  auto compute = [&] {
    opt.zero_grad();
    auto loss = torch::mse_loss(net->forward(x), y);
    loss.backward();
    return loss;
  };
  if (closure) {
    auto loss = opt.step(compute);
    ASSERT_TRUE(loss.defined());
    EXPECT_GT(loss.item<double>(), 0.0);
  } else {
    compute();
    opt.step();
  }
}

void copy_parameters(Mlp& from, Mlp& to) {
  torch::NoGradGuard no_grad;
  auto src = from->parameters();
  auto dst = to->parameters();
  for (size_t i = 0; i < src.size(); ++i) {
    dst[i].copy_(src[i]);
  }
}

// max |a - b| <= 1e-5 for every parameter.
void expect_params_close(Mlp& a, Mlp& b, const std::string& what) {
  auto pa = a->named_parameters();
  auto pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    const double diff =
        (item.value() - pb[item.key()]).abs().max().item<double>();
    EXPECT_LE(diff, 1e-5) << what << ": parameter " << item.key()
                          << " differs by " << diff << " on rank "
                          << ddp::rank();
  }
}

// Every rank holds rank 0's parameters, bit for bit.
void expect_ranks_agree(Mlp& net) {
  std::vector<torch::Tensor> flat;
  for (const auto& p : net->parameters()) {
    flat.push_back(p.detach().reshape({-1}));
  }
  auto all = ddp::all_gather(torch::cat(flat));
  for (size_t r = 1; r < all.size(); ++r) {
    EXPECT_TRUE(torch::equal(all[r], all[0]))
        << "rank " << r << "'s parameters differ from rank 0's";
  }
}

int64_t total_numel(Mlp& net) {
  int64_t total = 0;
  for (const auto& p : net->parameters()) {
    total += p.numel();
  }
  return total;
}

// 15 steps with the sharded and with the unsharded optimizer, each on its
// own DDP-wrapped copy of the model; `per_element`: state elements per
// parameter element.
template <typename Opt, typename Options>
void matches_unsharded(int world_size, Options options, int64_t per_element) {
  ddp_test::run_ranks(world_size, [options, per_element] {
    auto sharded = make_net();
    auto plain = make_net();
    ddp::DistributedDataParallel sharded_ddp(sharded);
    ddp::DistributedDataParallel plain_ddp(plain);
    ddp::ZeroRedundancyOptimizer<Opt> zero(sharded->parameters(), options);
    Opt reference(plain->parameters(), options);
    for (int step = 0; step < kSteps; ++step) {
      const bool closure = step % 3 == 2; // step(closure) as well
      train_step(sharded, zero, step, closure);
      train_step(plain, reference, step, closure);
    }
    expect_params_close(sharded, plain, "sharded vs unsharded");
    expect_ranks_agree(sharded);
    // The model moved: the comparison is not between two untrained models.
    auto fresh = make_net();
    ddp::DistributedDataParallel fresh_ddp(fresh); // rank 0's start
    EXPECT_GT(
        (sharded->fc1->weight - fresh->fc1->weight).abs().max().item<double>(),
        1e-3);

    // This rank's state: exactly that of the parameters it owns.
    const int64_t total = total_numel(sharded);
    int64_t owned = 0;
    int64_t largest = 0;
    auto params = sharded->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      largest = std::max(largest, params[i].numel());
      if (zero.owner(0, i) == ddp::rank()) {
        owned += params[i].numel();
      }
    }
    const int64_t mine = zero.local_state_numel();
    EXPECT_EQ(mine, per_element * owned) << "rank " << ddp::rank();
    EXPECT_GT(mine, 0) << "rank " << ddp::rank() << " owns nothing";
    const int64_t n = ddp::world_size();
    EXPECT_LE(mine, per_element * ((total + n - 1) / n + largest))
        << "rank " << ddp::rank();
    int64_t sum = mine;
    sum = ddp::all_reduce(sum);
    EXPECT_EQ(sum, per_element * total);
    int64_t unsharded = 0;
    for (const auto& entry : reference.state()) {
      unsharded += ddp::detail::zero_state_numel(*entry.second);
    }
    EXPECT_EQ(sum, unsharded);
  });
}

torch::optim::SGDOptions sgd_options() {
  return torch::optim::SGDOptions(0.05).momentum(0.9);
}
torch::optim::AdamOptions adam_options() {
  return torch::optim::AdamOptions(1e-2);
}
torch::optim::AdamWOptions adamw_options() {
  return torch::optim::AdamWOptions(1e-2).weight_decay(0.1);
}
// momentum and centered: three state tensors per parameter.
torch::optim::RMSpropOptions rmsprop_options() {
  return torch::optim::RMSpropOptions(1e-2).momentum(0.5).centered(true);
}

TEST(ZeroRedundancyOptimizer, SgdMomentumMatchesUnshardedTwoRanks) {
  matches_unsharded<torch::optim::SGD>(2, sgd_options(), 1);
}
TEST(ZeroRedundancyOptimizer, SgdMomentumMatchesUnshardedThreeRanks) {
  matches_unsharded<torch::optim::SGD>(3, sgd_options(), 1);
}
TEST(ZeroRedundancyOptimizer, AdamMatchesUnshardedTwoRanks) {
  matches_unsharded<torch::optim::Adam>(2, adam_options(), 2);
}
TEST(ZeroRedundancyOptimizer, AdamMatchesUnshardedThreeRanks) {
  matches_unsharded<torch::optim::Adam>(3, adam_options(), 2);
}
TEST(ZeroRedundancyOptimizer, AdamWMatchesUnshardedTwoRanks) {
  matches_unsharded<torch::optim::AdamW>(2, adamw_options(), 2);
}
TEST(ZeroRedundancyOptimizer, AdamWMatchesUnshardedThreeRanks) {
  matches_unsharded<torch::optim::AdamW>(3, adamw_options(), 2);
}
TEST(ZeroRedundancyOptimizer, RmspropMatchesUnshardedTwoRanks) {
  matches_unsharded<torch::optim::RMSprop>(2, rmsprop_options(), 3);
}
TEST(ZeroRedundancyOptimizer, RmspropMatchesUnshardedThreeRanks) {
  matches_unsharded<torch::optim::RMSprop>(3, rmsprop_options(), 3);
}

// PyTorch's partition: largest first, each to the least loaded rank (the
// lowest on a tie), over all groups together.
TEST(ZeroRedundancyOptimizer, PartitionIsGreedyBySize) {
  using ddp::detail::zero_partition;
  // Sorted: 288 (#2), 192 (#0), 36 (#4), 24 (#1), 12 (#3), 3 (#5).
  const std::vector<std::vector<int64_t>> mlp{{192, 24, 288, 12, 36, 3}};
  // 2 ranks: 288->0; 192->1; 36->1 (228); 24->1 (252); 12->1 (264); 3->1.
  EXPECT_EQ(zero_partition(mlp, 2),
            (std::vector<std::vector<int>>{{1, 1, 0, 1, 1, 1}}));
  // 3 ranks: 288->0; 192->1; 36->2; 24->2 (60); 12->2 (72); 3->2.
  EXPECT_EQ(zero_partition(mlp, 3),
            (std::vector<std::vector<int>>{{1, 2, 0, 2, 2, 2}}));
  // Two groups share one running load: 10->0, 8->1, 4->1 (12), 3->0 (13).
  EXPECT_EQ(zero_partition({{3, 10}, {8, 4}}, 2),
            (std::vector<std::vector<int>>{{0, 0}, {1, 1}}));
  // One rank owns everything.
  EXPECT_EQ(zero_partition(mlp, 1),
            (std::vector<std::vector<int>>{{0, 0, 0, 0, 0, 0}}));
}

// StepLR on the sharded optimizer changes the learning rate it steps with,
// as on the unsharded one.
TEST(ZeroRedundancyOptimizer, StepLRSchedulesTheShardedOptimizer) {
  ddp_test::run_ranks(2, [] {
    auto sharded = make_net();
    auto plain = make_net();
    ddp::DistributedDataParallel sharded_ddp(sharded);
    ddp::DistributedDataParallel plain_ddp(plain);
    ddp::ZeroRedundancyOptimizer<torch::optim::Adam> zero(sharded->parameters(),
                                                          adam_options());
    torch::optim::Adam reference(plain->parameters(), adam_options());
    torch::optim::StepLR zero_sched(zero, 5, 0.5);
    torch::optim::StepLR ref_sched(reference, 5, 0.5);
    for (int step = 0; step < kSteps; ++step) {
      const double before = zero.param_groups()[0].options().get_lr();
      train_step(sharded, zero, step);
      train_step(plain, reference, step);
      // The inner optimizer stepped with the scheduled rate.
      EXPECT_DOUBLE_EQ(
          zero.local_optimizer().param_groups()[0].options().get_lr(), before)
          << "at step " << step;
      zero_sched.step();
      ref_sched.step();
      const double lr = zero.param_groups()[0].options().get_lr();
      EXPECT_DOUBLE_EQ(lr, reference.param_groups()[0].options().get_lr())
          << "after step " << step;
    }
    // Halved at least twice.
    EXPECT_LT(zero.param_groups()[0].options().get_lr(), 1e-2 * 0.3);
    expect_params_close(sharded, plain, "with StepLR");
  });
}

// Two parameter groups with their own learning rates.
TEST(ZeroRedundancyOptimizer, SeveralParameterGroups) {
  ddp_test::run_ranks(3, [] {
    auto sharded = make_net();
    auto plain = make_net();
    ddp::DistributedDataParallel sharded_ddp(sharded);
    ddp::DistributedDataParallel plain_ddp(plain);
    auto groups = [](Mlp& net) {
      std::vector<torch::optim::OptimizerParamGroup> g;
      g.emplace_back(net->fc1->parameters());
      std::vector<torch::Tensor> rest = net->fc2->parameters();
      for (const auto& p : net->fc3->parameters()) {
        rest.push_back(p);
      }
      g.emplace_back(rest, std::make_unique<torch::optim::AdamOptions>(1e-3));
      return g;
    };
    ddp::ZeroRedundancyOptimizer<torch::optim::Adam> zero(groups(sharded),
                                                          adam_options());
    torch::optim::Adam reference(groups(plain), adam_options());
    ASSERT_EQ(zero.param_groups().size(), 2u);
    ASSERT_EQ(zero.local_optimizer().param_groups().size(), 2u);
    EXPECT_DOUBLE_EQ(
        zero.local_optimizer().param_groups()[1].options().get_lr(), 1e-3);
    for (int step = 0; step < kSteps; ++step) {
      train_step(sharded, zero, step);
      train_step(plain, reference, step);
    }
    expect_params_close(sharded, plain, "two groups");
    expect_ranks_agree(sharded);
    int64_t sum = zero.local_state_numel();
    sum = ddp::all_reduce(sum);
    EXPECT_EQ(sum, 2 * total_numel(sharded));
  });
}

// consolidate_state_dict(0) + torch::save on rank 0, torch::load on every
// rank into a fresh optimizer: 5 more steps equal 5 more of the original.
// The file is what the unsharded optimizer saves: it loads that too.
template <typename Opt, typename Options>
void save_and_resume(Options options) {
  ddp_test::run_ranks(3, [options] {
    const std::string path = ddp_test::shared_dir() + "/zero_opt.pt";
    auto net = make_net();
    ddp::DistributedDataParallel net_ddp(net);
    ddp::ZeroRedundancyOptimizer<Opt> zero(net->parameters(), options);
    for (int step = 0; step < 10; ++step) {
      train_step(net, zero, step);
    }
    zero.consolidate_state_dict(0);
    if (ddp::rank() == 0) {
      torch::save(zero, path);
    } else {
      // Only rank 0 holds the consolidated state.
      EXPECT_THROW(torch::save(zero, path + ".other"), std::runtime_error);
    }
    ddp::barrier();

    auto resumed = make_net();
    copy_parameters(net, resumed);
    ddp::DistributedDataParallel resumed_ddp(resumed);
    ddp::ZeroRedundancyOptimizer<Opt> loaded(resumed->parameters(), options);
    torch::load(loaded, path);
    EXPECT_EQ(loaded.local_state_numel(), zero.local_state_numel());

    auto unsharded = make_net();
    copy_parameters(net, unsharded);
    ddp::DistributedDataParallel unsharded_ddp(unsharded);
    Opt plain(unsharded->parameters(), options);
    torch::load(plain, path);

    auto restarted = make_net(); // the same parameters, no optimizer state
    copy_parameters(net, restarted);
    ddp::DistributedDataParallel restarted_ddp(restarted);
    ddp::ZeroRedundancyOptimizer<Opt> fresh(restarted->parameters(), options);

    for (int step = 10; step < 15; ++step) {
      train_step(net, zero, step);
      train_step(resumed, loaded, step);
      train_step(unsharded, plain, step);
      train_step(restarted, fresh, step);
    }
    expect_params_close(resumed, net, "loaded vs continued");
    expect_params_close(unsharded, net, "unsharded loaded vs continued");
    expect_ranks_agree(resumed);
    // Without the state the steps differ: the comparison can fail.
    double apart = 0;
    auto a = restarted->parameters();
    auto b = net->parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      apart = std::max(apart, (a[i] - b[i]).abs().max().item<double>());
    }
    EXPECT_GT(apart, 1e-4);
  });
}

TEST(ZeroRedundancyOptimizer, SaveOnRankZeroLoadOnEveryRankAdam) {
  save_and_resume<torch::optim::Adam>(adam_options());
}
TEST(ZeroRedundancyOptimizer, SaveOnRankZeroLoadOnEveryRankSgdMomentum) {
  save_and_resume<torch::optim::SGD>(sgd_options());
}

// More ranks than parameters: rank 2 owns nothing, steps nothing, and still
// takes part in the broadcasts and the checkpoint.
TEST(ZeroRedundancyOptimizer, ARankWithoutParameters) {
  ddp_test::run_ranks(3, [] {
    const std::string path = ddp_test::shared_dir() + "/small.pt";
    torch::manual_seed(5 + ddp::rank());
    torch::nn::Linear sharded(4, 2); // weight (8) and bias (2)
    torch::manual_seed(5 + ddp::rank());
    torch::nn::Linear plain(4, 2);
    ddp::DistributedDataParallel sharded_ddp(sharded);
    ddp::DistributedDataParallel plain_ddp(plain);
    ddp::ZeroRedundancyOptimizer<torch::optim::Adam> zero(sharded->parameters(),
                                                          adam_options());
    torch::optim::Adam reference(plain->parameters(), adam_options());
    EXPECT_EQ(zero.owner(0, 0), 0);
    EXPECT_EQ(zero.owner(0, 1), 1);
    auto run = [](torch::nn::Linear& net, torch::optim::Optimizer& opt,
                  int step) {
      torch::manual_seed(2000 + step);
      auto x = torch::randn({3, 4});
      opt.zero_grad();
      net->forward(x).pow(2).mean().backward();
      opt.step();
    };
    for (int step = 0; step < 5; ++step) {
      run(sharded, zero, step);
      run(plain, reference, step);
    }
    EXPECT_EQ(zero.local_state_numel(), ddp::rank() == 0   ? 16
                                        : ddp::rank() == 1 ? 4
                                                           : 0);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_LE((sharded->parameters()[i] - plain->parameters()[i])
                    .abs()
                    .max()
                    .item<double>(),
                1e-5);
    }
    zero.consolidate_state_dict(2);
    if (ddp::rank() == 2) {
      torch::save(zero, path);
    }
    ddp::barrier();
    ddp::ZeroRedundancyOptimizer<torch::optim::Adam> loaded(plain->parameters(),
                                                            adam_options());
    torch::load(loaded, path);
    EXPECT_EQ(loaded.local_state_numel(), zero.local_state_numel());
  });
}

// An unsharded optimizer's checkpoint resumes sharded training.
TEST(ZeroRedundancyOptimizer, LoadsTheUnshardedOptimizersCheckpoint) {
  ddp_test::run_ranks(2, [] {
    const std::string path = ddp_test::shared_dir() + "/adam.pt";
    auto net = make_net();
    ddp::DistributedDataParallel net_ddp(net);
    torch::optim::Adam plain(net->parameters(), adam_options());
    for (int step = 0; step < 5; ++step) {
      train_step(net, plain, step);
    }
    if (ddp::rank() == 0) {
      torch::save(plain, path);
    }
    ddp::barrier();
    auto resumed = make_net();
    copy_parameters(net, resumed);
    ddp::DistributedDataParallel resumed_ddp(resumed);
    ddp::ZeroRedundancyOptimizer<torch::optim::Adam> zero(resumed->parameters(),
                                                          adam_options());
    torch::load(zero, path);
    for (int step = 5; step < 10; ++step) {
      train_step(net, plain, step);
      train_step(resumed, zero, step);
    }
    expect_params_close(resumed, net, "sharded resumed from unsharded");
  });
}

// One process, no process group: one rank owns everything; save needs no
// consolidation.
TEST(ZeroRedundancyOptimizer, WithoutProcessGroupActsAsTheWrappedOptimizer) {
  auto sharded = make_net();
  auto plain = make_net();
  ddp::ZeroRedundancyOptimizer<torch::optim::Adam> zero(sharded->parameters(),
                                                        adam_options());
  torch::optim::Adam reference(plain->parameters(), adam_options());
  for (int step = 0; step < 5; ++step) {
    train_step(sharded, zero, step);
    train_step(plain, reference, step);
  }
  expect_params_close(sharded, plain, "world size 1");
  EXPECT_EQ(zero.local_state_numel(), 2 * total_numel(sharded));
  std::ostringstream bytes;
  torch::save(zero, bytes);
  auto copy = make_net();
  copy_parameters(sharded, copy);
  torch::optim::Adam loaded(copy->parameters(), adam_options());
  std::istringstream in(bytes.str());
  torch::load(loaded, in);
  for (int step = 5; step < 8; ++step) {
    train_step(sharded, zero, step);
    train_step(copy, loaded, step);
  }
  expect_params_close(copy, sharded, "world size 1 saved");
}

// Misuse: clear errors.
TEST(ZeroRedundancyOptimizer, RefusesAnEmptyParameterList) {
  try {
    ddp::ZeroRedundancyOptimizer<torch::optim::Adam> zero(
        std::vector<torch::Tensor>{}, adam_options());
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("empty parameter list"),
              std::string::npos)
        << e.what();
  }
}

TEST(ZeroRedundancyOptimizer, RefusesParametersOnSeveralDevices) {
  auto cpu = torch::zeros({4}, torch::requires_grad());
  auto meta = torch::zeros(
      {4}, torch::TensorOptions().device(torch::kMeta).requires_grad(true));
  try {
    ddp::ZeroRedundancyOptimizer<torch::optim::SGD> zero(
        std::vector<torch::Tensor>{cpu, meta}, sgd_options());
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("several devices (cpu and meta"), std::string::npos)
        << message;
  }
}

TEST(ZeroRedundancyOptimizer, RefusesParametersAddedAfterConstruction) {
  auto net = make_net();
  ddp::ZeroRedundancyOptimizer<torch::optim::SGD> zero(net->fc1->parameters(),
                                                       sgd_options());
  zero.add_param_group(
      torch::optim::OptimizerParamGroup(net->fc2->parameters()));
  try {
    zero.step();
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("added after construction"),
              std::string::npos)
        << e.what();
  }
}

TEST(ZeroRedundancyOptimizer, RefusesRanksWithOtherParameters) {
  ddp_test::run_ranks(2, [] {
    auto net = make_net();
    // Rank 1 leaves out the last layer.
    std::vector<torch::Tensor> params = net->fc1->parameters();
    for (const auto& p : net->fc2->parameters()) {
      params.push_back(p);
    }
    if (ddp::rank() == 0) {
      for (const auto& p : net->fc3->parameters()) {
        params.push_back(p);
      }
    }
    try {
      ddp::ZeroRedundancyOptimizer<torch::optim::Adam> zero(params,
                                                            adam_options());
      ADD_FAILURE() << "no error on rank " << ddp::rank();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("the ranks' parameters differ"),
                std::string::npos)
          << e.what();
    }
  });
}

TEST(ZeroRedundancyOptimizer, SaveWithoutConsolidationIsAnError) {
  ddp_test::run_ranks(2, [] {
    auto net = make_net();
    ddp::DistributedDataParallel net_ddp(net);
    ddp::ZeroRedundancyOptimizer<torch::optim::Adam> zero(net->parameters(),
                                                          adam_options());
    train_step(net, zero, 0);
    zero.consolidate_state_dict(0);
    train_step(net, zero, 1); // the consolidated state is stale now
    std::ostringstream out;
    try {
      torch::save(zero, out);
      FAIL() << "no error on rank " << ddp::rank();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("consolidate_state_dict"),
                std::string::npos)
          << e.what();
    }
  });
}

} // namespace
