// ddp::join: ranks that take different numbers of steps (each update the
// mean over the ranks that took it, every rank ending with the same
// parameters), and desyncs named within seconds, with every rank's position.

#include "multiprocess.h"

#include <ddp/ddp.h>
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

namespace {

constexpr double kLr = 0.1;

// Rank r's sample at step t: the same in the job and in the reference.
std::pair<torch::Tensor, torch::Tensor> sample(int rank, int step) {
  auto gen = at::detail::createCPUGenerator(1000 * rank + step);
  return {torch::randn({8, 4}, gen), torch::randn({8, 2}, gen)};
}

torch::Tensor flat(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> parts;
  for (const auto& t : tensors) {
    parts.push_back(t.detach().reshape({-1}));
  }
  return torch::cat(parts);
}

// What N ranks that take steps[r] SGD steps each must end with: at step t,
// the mean gradient of the ranks with steps[r] >= t. Fresh leaves every
// step, so the runtime's safety net for unwrapped training stays out of it.
torch::Tensor reference(const std::vector<int>& steps) {
  torch::manual_seed(0);
  torch::nn::Linear init(4, 2);
  auto w = init->weight.detach().clone();
  auto b = init->bias.detach().clone();
  const int last = *std::max_element(steps.begin(), steps.end());
  for (int t = 1; t <= last; ++t) {
    auto gw = torch::zeros_like(w);
    auto gb = torch::zeros_like(b);
    int stepping = 0;
    for (size_t r = 0; r < steps.size(); ++r) {
      if (steps[r] < t) {
        continue;
      }
      ++stepping;
      auto lw = w.clone().requires_grad_();
      auto lb = b.clone().requires_grad_();
      auto [x, y] = sample(static_cast<int>(r), t);
      auto loss = torch::mse_loss(torch::linear(x, lw, lb), y);
      auto grads = torch::autograd::grad({loss}, {lw, lb});
      gw += grads[0];
      gb += grads[1];
    }
    w -= kLr * gw / stepping;
    b -= kLr * gb / stepping;
  }
  return flat({w, b});
}

// Every rank's parameters, gathered: rank 0's first.
std::vector<torch::Tensor> everyones(const torch::Tensor& mine) {
  return ddp::all_gather(mine.contiguous());
}

// Trains steps[rank] steps, joins (explicitly, or by the wrapper's end),
// and returns the parameters.
torch::Tensor train_uneven(const std::vector<int>& steps, bool explicit_join) {
  torch::manual_seed(0);
  torch::nn::Linear model(4, 2);
  {
    ddp::DistributedDataParallel ddp_model(model);
    torch::optim::SGD optimizer(model->parameters(), kLr);
    for (int t = 1; t <= steps[ddp::rank()]; ++t) {
      auto [x, y] = sample(ddp::rank(), t);
      optimizer.zero_grad();
      torch::mse_loss(ddp_model->forward(x), y).backward();
      optimizer.step();
    }
    if (explicit_join) {
      ddp::join();
    }
  } // the wrapper's end joins too
  return flat(model->parameters());
}

void expect_uneven_steps_train_like_the_reference(
    const std::vector<int>& steps, bool explicit_join = true,
    ddp_test::RankOptions options = {}) {
  ddp_test::run_ranks(
      static_cast<int>(steps.size()),
      [steps, explicit_join] {
        const auto mine = train_uneven(steps, explicit_join);
        const auto all = everyones(mine);
        for (size_t r = 1; r < all.size(); ++r) {
          EXPECT_TRUE(torch::equal(all[r], all[0]))
              << "rank " << r << " ended apart from rank 0";
        }
        EXPECT_TRUE(torch::allclose(mine, reference(steps), 1e-5, 1e-6))
            << mine << "\nexpected\n"
            << reference(steps);
      },
      options);
}

TEST(Join, ARankThatEndsOneStepEarly) {
  expect_uneven_steps_train_like_the_reference({5, 6});
}

TEST(Join, ARankThatEndsManyStepsEarlyTakesPartInTheSyncChecks) {
  ddp_test::RankOptions options;
  options.env = {{"DDP_CHECK_SYNC", "4"}};
  expect_uneven_steps_train_like_the_reference({2, 23}, true, options);
}

TEST(Join, RankZeroSteppingLongest) {
  expect_uneven_steps_train_like_the_reference({9, 3});
}

TEST(Join, ThreeRanksEndingAtThreeTimes) {
  expect_uneven_steps_train_like_the_reference({3, 12, 7});
}

TEST(Join, TheWrappersEndJoinsWithoutAnExplicitCall) {
  expect_uneven_steps_train_like_the_reference({4, 9}, /*explicit_join=*/false);
}

TEST(Join, OverGlooSocketsToo) {
  ddp_test::RankOptions options;
  options.env = {{"DDP_SHM", "0"}};
  expect_uneven_steps_train_like_the_reference({6, 2, 4}, true, options);
}

TEST(Join, EvenStepsJoinAtOnceAndTheJobGoesOnAfterIt) {
  ddp_test::run_ranks(2, [] {
    const auto first = train_uneven({3, 3}, true);
    // A second phase after the first join: its own uneven steps.
    const auto second = train_uneven({2, 5}, true);
    const auto all = everyones(torch::cat({first, second}));
    EXPECT_TRUE(torch::equal(all[0], all[1]));
    EXPECT_TRUE(torch::allclose(second, reference({2, 5}), 1e-5, 1e-6));
  });
}

// An actor-critic's shape: two wrapped networks, the actor's loss reaching
// the critic's parameters, the critic's forward run twice before its
// backward, the graph retained across two backward calls.
TEST(Join, SeveralWrappersWithARetainedGraph) {
  ddp_test::run_ranks(2, [] {
    torch::manual_seed(0);
    torch::nn::Linear actor(4, 2);
    torch::nn::Linear critic(2, 1);
    ddp::DistributedDataParallel ddp_actor(actor);
    ddp::DistributedDataParallel ddp_critic(critic);
    torch::optim::Adam actor_opt(actor->parameters(), 1e-2);
    torch::optim::Adam critic_opt(critic->parameters(), 1e-2);
    const int steps = ddp::rank() == 0 ? 4 : 11;
    for (int t = 1; t <= steps; ++t) {
      auto [x, y] = sample(ddp::rank(), t);
      auto action = ddp_actor->forward(x);
      auto q1 = ddp_critic->forward(action);
      auto q2 = ddp_critic->forward(action * 0.5);
      auto critic_loss = (q1 - y.narrow(1, 0, 1)).pow(2).mean() +
                         (q2 - y.narrow(1, 1, 1)).pow(2).mean();
      critic_opt.zero_grad();
      critic_loss.backward({}, /*retain_graph=*/true);
      critic_opt.step();
      auto actor_loss = -ddp_critic->forward(action).mean();
      actor_opt.zero_grad();
      actor_loss.backward();
      actor_opt.step();
    }
    ddp::join();
    const auto all = everyones(
        torch::cat({flat(actor->parameters()), flat(critic->parameters())}));
    EXPECT_TRUE(torch::equal(all[0], all[1]));
  });
}

// A soft actor-critic's temperature: a bare tensor with an optimizer of its
// own, its gradient averaged like a wrapped parameter's.
TEST(DistributedTensors, ABareTensorTrainsInSync) {
  ddp_test::run_ranks(2, [] {
    auto log_alpha =
        torch::full({1}, 0.25 * (ddp::rank() + 1)).requires_grad_();
    const auto same = ddp::distributed_tensors({log_alpha});
    ASSERT_EQ(same.size(), 1u);
    EXPECT_TRUE(same[0].is_same(log_alpha));
    EXPECT_EQ(log_alpha.item<float>(), 0.25f); // rank 0's
    ddp::distributed_tensors({log_alpha});     // idempotent
    torch::optim::SGD opt({log_alpha}, 1.0);
    for (int t = 0; t < 3; ++t) {
      opt.zero_grad();
      // Rank r's gradient is r + 1: the mean is 1.5.
      (log_alpha * (ddp::rank() + 1.0)).sum().backward();
      EXPECT_FLOAT_EQ(log_alpha.grad().item<float>(), 1.5f);
      opt.step();
    }
    EXPECT_FLOAT_EQ(log_alpha.item<float>(), 0.25f - 4.5f);
  });
}

// The desync tests: each rank writes the error it ended with, and how long
// after the mismatch, then leaves without the exit's checks.
void expect_named_desync(
    int world, const std::function<void()>& body,
    const std::function<void(int rank, const std::string&)>& check,
    double within_seconds = 10) {
  ddp_test::RankOptions options;
  options.timeout_seconds = 120;
  const auto statuses = ddp_test::run_ranks_status(
      world,
      [body] {
        const auto start = std::chrono::steady_clock::now();
        std::string message = "no error";
        try {
          body();
        } catch (const ddp::CollectiveError& e) {
          message = e.what();
        }
        const double seconds = std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() - start)
                                   .count();
        std::ofstream(ddp_test::shared_dir() + "/rank" +
                      std::to_string(ddp::rank()))
            << seconds << '\n'
            << message;
        std::_Exit(3);
      },
      options);
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(statuses[r], 3) << "rank " << r;
    std::ifstream in(ddp_test::shared_dir() + "/rank" + std::to_string(r));
    double seconds = 0;
    in >> seconds;
    std::string message((std::istreambuf_iterator<char>(in >> std::ws)),
                        std::istreambuf_iterator<char>());
    EXPECT_LT(seconds, within_seconds) << "rank " << r << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
    check(r, message);
    if (std::getenv("DDP_TEST_SHOW"))
      std::cerr << message << "\n";
  }
}

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos)
      << "'" << part << "' not in: " << text;
}

void train_steps(ddp::DistributedDataParallel<torch::nn::LinearImpl>& wrapper,
                 torch::nn::Linear& model, int steps) {
  torch::optim::SGD optimizer(model->parameters(), kLr);
  for (int t = 1; t <= steps; ++t) {
    auto [x, y] = sample(ddp::rank(), t);
    optimizer.zero_grad();
    torch::mse_loss(wrapper->forward(x), y).backward();
    optimizer.step();
  }
}

TEST(Desync, ASyncCheckAgainstAGradientAllReduceIsNamedInSeconds) {
  expect_named_desync(
      2,
      [] {
        // Rank 0 alone compares the parameters after every step: a
        // rank-dependent setting.
        if (ddp::rank() == 0) {
          setenv("DDP_CHECK_SYNC", "1", 1);
        }
        torch::manual_seed(0);
        torch::nn::Linear model(4, 2);
        ddp::DistributedDataParallel wrapper(model);
        train_steps(wrapper, model, 3);
      },
      [](int rank, const std::string& message) {
        expect_has(message, "rank " + std::to_string(rank) + " (this rank)");
        expect_has(message, "the sync check of wrapper 0 at step 1");
        expect_has(message, "the gradient all-reduce of wrapper 0 at step 2");
      });
}

TEST(Desync, TwoDifferentWrappersAreNamed) {
  expect_named_desync(
      2,
      [] {
        torch::manual_seed(0);
        torch::nn::Linear first(4, 2);
        torch::nn::Linear second(4, 2);
        ddp::DistributedDataParallel a(first);
        ddp::DistributedDataParallel b(second);
        auto& mine = ddp::rank() == 0 ? a : b;
        auto& model = ddp::rank() == 0 ? first : second;
        train_steps(mine, model, 2);
      },
      [](int, const std::string& message) {
        expect_has(message, "the gradient all-reduce of wrapper 0 at step 1");
        expect_has(message, "the gradient all-reduce of wrapper 1 at step 1");
      });
}

TEST(Desync, AProgramCollectiveAfterAPeerJoinedIsNamed) {
  expect_named_desync(
      2,
      [] {
        torch::manual_seed(0);
        torch::nn::Linear model(4, 2);
        ddp::DistributedDataParallel wrapper(model);
        train_steps(wrapper, model, ddp::rank() == 0 ? 1 : 3);
        if (ddp::rank() == 1) {
          ddp::all_reduce(1.0); // a reduced metric, once more than rank 0
        }
        ddp::join();
      },
      [](int, const std::string& message) {
        expect_has(message, "ddp::all_reduce");
        expect_has(message, "ddp::join");
      });
}

// A peer that computes for longer than the desync delay, or that the
// others wait for together in one collective, is no desync.
TEST(Desync, AHealthySlowPeerIsWaitedFor) {
  ddp_test::RankOptions options;
  options.env = {{"DDP_DESYNC_SECONDS", "1"}};
  ddp_test::run_ranks(
      3,
      [] {
        torch::manual_seed(0);
        torch::nn::Linear model(4, 2);
        ddp::DistributedDataParallel wrapper(model);
        torch::optim::SGD optimizer(model->parameters(), kLr);
        for (int t = 1; t <= 2; ++t) {
          auto [x, y] = sample(ddp::rank(), t);
          if (ddp::rank() == 2) {
            std::this_thread::sleep_for(std::chrono::milliseconds(3500));
          }
          optimizer.zero_grad();
          torch::mse_loss(wrapper->forward(x), y).backward();
          optimizer.step();
        }
        if (ddp::rank() == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(3500));
        }
        ddp::barrier();
        const auto all = everyones(flat(model->parameters()));
        EXPECT_TRUE(torch::equal(all[0], all[1]));
        EXPECT_TRUE(torch::equal(all[0], all[2]));
      },
      options);
}

} // namespace
