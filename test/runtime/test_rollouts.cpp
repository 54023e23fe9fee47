// ddp::reseed_per_rank: rank 0 keeps its random streams, every other rank
// continues from its own seed, the same on every run; the streams of torch's
// generator and of a standard engine.

#include "multiprocess.h"

#include <ddp/ddp.h>
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <random>
#include <vector>

namespace {

// Each rank's draws after reseeding, gathered on every rank.
std::vector<torch::Tensor> draws_of_every_rank(int64_t seed) {
  torch::manual_seed(seed);
  torch::rand({4}); // the program's own draws before its rollouts
  ddp::reseed_per_rank();
  return ddp::all_gather(torch::rand({8}));
}

TEST(ReseedPerRank, RankZeroKeepsItsStreamOthersGetTheirOwn) {
  ddp_test::run_ranks(3, [] {
    const auto draws = draws_of_every_rank(7);
    // What one process draws at this point.
    torch::manual_seed(7);
    torch::rand({4});
    const auto alone = torch::rand({8});
    EXPECT_TRUE(torch::equal(draws[0], alone));
    EXPECT_FALSE(torch::equal(draws[1], draws[0]));
    EXPECT_FALSE(torch::equal(draws[2], draws[0]));
    EXPECT_FALSE(torch::equal(draws[2], draws[1]));
    // The same on every run: a second time gives the same streams.
    const auto again = draws_of_every_rank(7);
    for (size_t r = 0; r < draws.size(); ++r) {
      EXPECT_TRUE(torch::equal(again[r], draws[r])) << "rank " << r;
    }
  });
}

TEST(ReseedPerRank, StandardEngines) {
  ddp_test::run_ranks(2, [] {
    std::mt19937 engine(11);
    ddp::reseed_per_rank(engine);
    std::mt19937 alone(11);
    const auto mine = torch::tensor(
        {static_cast<int64_t>(engine()), static_cast<int64_t>(engine())});
    const auto both = ddp::all_gather(mine);
    EXPECT_EQ(both[0][0].item<int64_t>(), static_cast<int64_t>(alone()));
    EXPECT_FALSE(torch::equal(both[0], both[1]));
  });
}

TEST(ReseedPerRank, WithoutLauncherItChangesNothing) {
  torch::manual_seed(5);
  ddp::reseed_per_rank();
  const auto after = torch::rand({3});
  torch::manual_seed(5);
  EXPECT_TRUE(torch::equal(after, torch::rand({3})));
  std::minstd_rand engine(3), alone(3);
  ddp::reseed_per_rank(engine);
  EXPECT_EQ(engine(), alone());
}

} // namespace
