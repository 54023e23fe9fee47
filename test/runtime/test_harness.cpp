#include "multiprocess.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

// The harness itself: workers run with the launcher environment and can
// leave files for the parent.
TEST(Harness, WorkersSeeLauncherEnvironment) {
  ddp_test::RankOptions options;
  options.init = false;
  ddp_test::run_ranks(
      2,
      [] {
        ASSERT_NE(std::getenv("RANK"), nullptr);
        std::ofstream(ddp_test::shared_dir() + "/rank" + std::getenv("RANK"))
            << std::getenv("WORLD_SIZE");
      },
      options);
  if (!ddp_test::is_worker()) {
    for (int rank = 0; rank < 2; ++rank) {
      std::ifstream in(ddp_test::shared_dir() + "/rank" + std::to_string(rank));
      std::string world;
      in >> world;
      EXPECT_EQ(world, "2");
    }
  }
}

TEST(Harness, FailingWorkerIsReported) {
  ddp_test::RankOptions options;
  options.init = false;
  const auto statuses = ddp_test::run_ranks_status(
      2,
      [] {
        if (std::string(std::getenv("RANK")) == "1") {
          std::exit(7);
        }
      },
      options);
  if (!ddp_test::is_worker()) {
    ASSERT_EQ(statuses.size(), 2u);
    EXPECT_EQ(statuses[0], 0);
    EXPECT_EQ(statuses[1], 7);
  }
}
