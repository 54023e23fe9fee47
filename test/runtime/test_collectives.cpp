// Collective helpers of the ddp runtime on Gloo over loopback, at 2 and 3
// ranks, and their no-op behaviour without a launcher.

#include "multiprocess.h"

#include <ddp/distributed.h>
#include <ddp/rollouts.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace {

int world_last(int world) { return world - 1; }

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, InitSeesTheJob) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [world] {
    EXPECT_TRUE(ddp::is_initialized());
    EXPECT_TRUE(ddp::is_distributed());
    EXPECT_EQ(ddp::world_size(), world);
    EXPECT_EQ(ddp::rank(), std::stoi(std::getenv("RANK")));
    EXPECT_EQ(ddp::local_rank(), ddp::rank());
    EXPECT_EQ(ddp::local_world_size(), world);
    EXPECT_EQ(ddp::is_main_process(), ddp::rank() == 0);
    EXPECT_EQ(ddp::launcher(), ddp::Launcher::kTorchrun);
    EXPECT_EQ(ddp::backend_name(), "gloo");
    EXPECT_EQ(ddp::device(), torch::Device(torch::kCPU));
    ASSERT_TRUE(ddp::process_group());
    EXPECT_EQ(ddp::process_group()->getSize(), world);
    EXPECT_EQ(ddp::process_group()->getRank(), ddp::rank());
    ddp::barrier();
  });
}

TEST_P(Collectives, AllReduceTensorOps) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [world] {
    const int r = ddp::rank();
    // Rank r holds {r+1, 10*(r+1)}.
    auto make = [r] {
      return torch::tensor({double(r + 1), 10.0 * (r + 1)}, torch::kFloat64);
    };
    const double n = world;
    const double sum1 = n * (n + 1) / 2;

    auto t = make();
    ddp::all_reduce(t); // default: sum
    EXPECT_DOUBLE_EQ(t[0].item<double>(), sum1);
    EXPECT_DOUBLE_EQ(t[1].item<double>(), 10 * sum1);

    t = make();
    ddp::all_reduce(t, ddp::ReduceOp::kMean);
    EXPECT_DOUBLE_EQ(t[0].item<double>(), sum1 / n);
    EXPECT_DOUBLE_EQ(t[1].item<double>(), 10 * sum1 / n);

    t = make();
    ddp::all_reduce(t, ddp::ReduceOp::kMax);
    EXPECT_DOUBLE_EQ(t[0].item<double>(), n);
    EXPECT_DOUBLE_EQ(t[1].item<double>(), 10 * n);

    t = make();
    ddp::all_reduce(t, ddp::ReduceOp::kMin);
    EXPECT_DOUBLE_EQ(t[0].item<double>(), 1);
    EXPECT_DOUBLE_EQ(t[1].item<double>(), 10);

    // A non-contiguous view is reduced in place too.
    auto base = torch::zeros({2, 3});
    base.select(1, 1).fill_(float(r + 1));
    auto column = base.select(1, 1);
    ASSERT_FALSE(column.is_contiguous());
    ddp::all_reduce(column);
    EXPECT_FLOAT_EQ(base[0][1].item<float>(), float(sum1));
    EXPECT_FLOAT_EQ(base[1][1].item<float>(), float(sum1));
    EXPECT_FLOAT_EQ(base[0][0].item<float>(), 0.f);

    // Integer tensors: kMean truncates.
    auto ints = torch::tensor({int64_t(r)}, torch::kInt64);
    ddp::all_reduce(ints, ddp::ReduceOp::kMean);
    EXPECT_EQ(ints.item<int64_t>(), (world * (world - 1) / 2) / world);
  });
}

TEST_P(Collectives, AllReduceScalars) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [world] {
    const int r = ddp::rank();
    EXPECT_DOUBLE_EQ(ddp::all_reduce(0.5 * (r + 1)),
                     0.5 * world * (world + 1) / 2);
    EXPECT_DOUBLE_EQ(ddp::all_reduce(double(r), ddp::ReduceOp::kMean),
                     (world - 1) / 2.0);
    EXPECT_DOUBLE_EQ(ddp::all_reduce(double(r), ddp::ReduceOp::kMax),
                     world - 1);
    EXPECT_DOUBLE_EQ(ddp::all_reduce(double(r) - 5, ddp::ReduceOp::kMin), -5);
    EXPECT_EQ(ddp::all_reduce(int64_t(r + 1)),
              int64_t(world * (world + 1) / 2));
    EXPECT_EQ(ddp::all_reduce(int64_t(r), ddp::ReduceOp::kMax),
              int64_t(world - 1));
    EXPECT_EQ(ddp::all_reduce(int64_t(r), ddp::ReduceOp::kMin), int64_t(0));
    // Beyond double's exact range: the int64 path does not go through double.
    const int64_t big = (int64_t(1) << 60) + 1;
    EXPECT_EQ(ddp::all_reduce(r == 0 ? big : int64_t(0)), big);
    // Other numbers (R11's int and size_t counts, float sums) travel as
    // int64_t or double and come back in their own type.
    static_assert(std::is_same<decltype(ddp::all_reduce(int(1))), int>::value,
                  "an int comes back as an int");
    static_assert(
        std::is_same<decltype(ddp::all_reduce(size_t(1))), size_t>::value,
        "a size_t comes back as a size_t");
    static_assert(std::is_same<decltype(ddp::all_reduce(1.0f)), float>::value,
                  "a float comes back as a float");
    EXPECT_EQ(ddp::all_reduce(r + 1), world * (world + 1) / 2);
    EXPECT_EQ(ddp::all_reduce(r, ddp::ReduceOp::kMax), world - 1);
    EXPECT_EQ(ddp::all_reduce(size_t(r + 1)), size_t(world * (world + 1) / 2));
    EXPECT_FLOAT_EQ(ddp::all_reduce(0.5f * (r + 1)),
                    0.5f * world * (world + 1) / 2);
  });
}

TEST_P(Collectives, AllReduceContainersElementwise) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [world] {
    const int r = ddp::rank();
    const int64_t n = world;
    // Per-class counts: rank r counts r+1 in class 0 and 2(r+1) in class 2.
    std::vector<int64_t> counts{r + 1, 0, 2 * (r + 1)};
    ddp::all_reduce(counts);
    EXPECT_EQ(counts, (std::vector<int64_t>{n * (n + 1) / 2, 0, n * (n + 1)}));

    std::array<int, 2> small{{r, 1}};
    ddp::all_reduce(small);
    EXPECT_EQ(small[0], n * (n - 1) / 2);
    EXPECT_EQ(small[1], n);

    float sums[2] = {0.5f * (r + 1), 1.0f};
    ddp::all_reduce(sums);
    EXPECT_FLOAT_EQ(sums[0], 0.5f * n * (n + 1) / 2);
    EXPECT_FLOAT_EQ(sums[1], float(n));

    std::vector<double> maxima{double(r), -double(r)};
    ddp::all_reduce(maxima, ddp::ReduceOp::kMax);
    EXPECT_DOUBLE_EQ(maxima[0], double(n - 1));
    EXPECT_DOUBLE_EQ(maxima[1], 0.0);

    std::vector<size_t> empty;
    ddp::all_reduce(empty); // nothing to send, no hang
    ddp::barrier();
  });
}

TEST_P(Collectives, AllGatherInRankOrder) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [world] {
    const int r = ddp::rank();
    auto mine = torch::full({2, 2}, float(r * 3 + 1));
    const auto all = ddp::all_gather(mine);
    ASSERT_EQ(int(all.size()), world);
    for (int i = 0; i < world; ++i) {
      EXPECT_EQ(all[i].sizes(), mine.sizes());
      EXPECT_TRUE(torch::equal(all[i], torch::full({2, 2}, float(i * 3 + 1))))
          << "slot " << i;
    }
    // The input is untouched.
    EXPECT_TRUE(torch::equal(mine, torch::full({2, 2}, float(r * 3 + 1))));
  });
}

TEST_P(Collectives, BroadcastFromAnyRoot) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [world] {
    const int r = ddp::rank();
    for (int src = 0; src < world; ++src) {
      auto t = torch::full({3}, float(100 * r + 7));
      ddp::broadcast(t, src);
      EXPECT_TRUE(torch::equal(t, torch::full({3}, float(100 * src + 7))))
          << "src " << src;
    }
    auto t = torch::zeros({1});
    EXPECT_THROW(ddp::broadcast(t, world), std::invalid_argument);
    EXPECT_THROW(ddp::broadcast(t, -1), std::invalid_argument);
  });
}

TEST_P(Collectives, SharedSeedIsTheSameOnEveryRank) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [world] {
    const int r = ddp::rank();
    // Seeds of each integer type a program draws (random_device's unsigned,
    // time's time_t, a 64-bit engine's seed), each rank's own argument: the
    // n-th call gives every rank the same value, and calls differ.
    std::vector<int64_t> drawn;
    for (int i = 0; i < 4; ++i) {
      drawn.push_back(ddp::shared_seed(3000000000u + unsigned(r)));
      drawn.push_back(ddp::shared_seed(int64_t(-5) - r));
      drawn.push_back(static_cast<int64_t>(
          ddp::shared_seed(uint64_t(0xfedcba9876543210ull) + uint64_t(r))));
    }
    const auto mine = torch::tensor(drawn, torch::kInt64);
    const auto all = ddp::all_gather(mine);
    ASSERT_EQ(all.size(), size_t(world));
    for (int other = 1; other < world; ++other) {
      EXPECT_TRUE(torch::equal(all[other], all[0])) << "rank " << other;
    }
    std::set<int64_t> distinct(drawn.begin(), drawn.end());
    EXPECT_EQ(distinct.size(), drawn.size()) << "calls repeat a seed";
  });
}

// Not a collective: a seed drawn on one rank only (an environment reset that
// happens there alone) neither waits for the others nor is waited for.
TEST_P(Collectives, SharedSeedIsNoCollective) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [] {
    if (ddp::rank() == world_last(ddp::world_size())) {
      for (int i = 0; i < 1000; ++i) {
        ddp::shared_seed(unsigned(i));
      }
    }
    ddp::barrier();
    // Ranks that drew in step draw alike again only if they called alike:
    // the others are 1000 calls behind.
    const auto next = static_cast<int64_t>(ddp::shared_seed(1u));
    const auto all = ddp::all_gather(torch::tensor({next}, torch::kInt64));
    EXPECT_TRUE(torch::equal(all[0], all[ddp::world_size() > 2 ? 1 : 0]));
  });
}

// ddp::rollout_seed: a stream of each rank's own, counted apart from
// shared_seed's. Ranks whose episodes reset unequally often still draw
// shared_seed's n-th value alike; the rollout seeds differ by rank and are
// the argument itself with one process.
TEST_P(Collectives, RolloutSeedCountsApartFromSharedSeed) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [] {
    const int r = ddp::rank();
    const auto first = static_cast<int64_t>(ddp::rollout_seed(42u));
    for (int i = 0; i < 10 * r + 3; ++i) {
      ddp::rollout_seed(unsigned(i));
    }
    const auto shared = static_cast<int64_t>(ddp::shared_seed(1u));
    const auto all =
        ddp::all_gather(torch::tensor({first, shared}, torch::kInt64));
    std::set<int64_t> firsts;
    for (const auto& row : all) {
      firsts.insert(row[0].item<int64_t>());
      EXPECT_EQ(row[1].item<int64_t>(), all[0][1].item<int64_t>())
          << "rollout_seed's calls moved shared_seed's value";
    }
    EXPECT_EQ(firsts.size(), all.size()) << "two ranks share a rollout seed";
  });
}

TEST(CollectivesRolloutSeed, OneProcessKeepsTheSeed) {
  // No launcher, no init: the program draws exactly what it drew before.
  EXPECT_EQ(ddp::rollout_seed(42u), 42u);
  EXPECT_EQ(ddp::rollout_seed(int64_t(-3)), -3);
}

TEST_P(Collectives, OutputStreamPrintsOnTheMainProcessOnly) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [] {
    std::ostringstream text;
    std::ostream& out = ddp::output_stream(text);
    out << "rank " << ddp::rank() << std::fixed << 1.5 << std::endl;
    // Every rank's stream stays good, as the program's checks expect.
    EXPECT_TRUE(out.good());
    EXPECT_EQ(&out == &text, ddp::is_main_process());
    EXPECT_EQ(text.str(), ddp::is_main_process() ? "rank 01.500000\n" : "");
  });
}

TEST(CollectivesSharedSeed, BeforeInitUnderALauncherThrows) {
  ddp_test::RankOptions options;
  options.init = false;
  ddp_test::run_ranks(
      2,
      [] {
        try {
          ddp::shared_seed(7u);
          ADD_FAILURE() << "no error before ddp::init()";
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("before ddp::init()"),
                    std::string::npos)
              << e.what();
        }
      },
      options);
}

TEST_P(Collectives, BarrierOrdersFileWrites) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [world] {
    const int r = ddp::rank();
    const std::string dir = ddp_test::shared_dir();
    std::ofstream(dir + "/before" + std::to_string(r)) << r;
    ddp::barrier();
    // After the barrier every rank has written its file.
    for (int i = 0; i < world; ++i) {
      std::ifstream in(dir + "/before" + std::to_string(i));
      int value = -1;
      in >> value;
      EXPECT_EQ(value, i) << "rank " << i
                          << " had not written before the barrier";
    }
    ddp::barrier();
  });
}

// MASTER_ADDR set to this host's own non-loopback address, as on a cluster:
// Gloo binds the interface that routes to the master.
TEST(CollectivesNetwork, MasterOnANonLoopbackAddress) {
  std::string address;
  if (ifaddrs* list = nullptr; ::getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a != nullptr && address.empty(); a = a->ifa_next) {
      if (a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET &&
          !(a->ifa_flags & IFF_LOOPBACK) && (a->ifa_flags & IFF_UP)) {
        char text[INET_ADDRSTRLEN] = {0};
        ::inet_ntop(AF_INET,
                    &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr,
                    text, sizeof(text));
        address = text;
      }
    }
    ::freeifaddrs(list);
  }
  if (address.empty()) {
    GTEST_SKIP() << "this host has no non-loopback IPv4 address";
  }
  ddp_test::RankOptions options;
  options.env = {{"MASTER_ADDR", address}};
  ddp_test::run_ranks(
      2,
      [address] {
        EXPECT_EQ(std::string(std::getenv("MASTER_ADDR")), address);
        EXPECT_EQ(ddp::all_reduce(int64_t(ddp::rank() + 1)), 3);
      },
      options);
}

// Every rank opens the same file through ddp::output_path and writes its own
// line: the main process's line is the file, the others go to the null
// device, and every rank's stream is open (its checks behave alike).
TEST_P(Collectives, OutputPathWritesOnlyOnTheMainProcess) {
  const int world = GetParam();
  ddp_test::run_ranks(world, [world] {
    const std::string dir = ::testing::TempDir() + "ddp_output_path_" +
                            std::to_string(world) + "_" +
                            std::getenv("MASTER_PORT");
    if (ddp::is_main_process()) {
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
    }
    ddp::barrier();
    const std::string text = dir + "/text.log";
    const std::filesystem::path fs_path = std::filesystem::path(dir) / "p.log";
    {
      std::ofstream by_string(ddp::output_path(text));
      std::ofstream by_path(ddp::output_path(fs_path), std::ios::app);
      FILE* by_c = std::fopen(ddp::output_path((dir + "/c.log").c_str()), "w");
      ASSERT_TRUE(by_string.is_open());
      ASSERT_TRUE(by_path.is_open());
      ASSERT_NE(by_c, nullptr);
      by_string << "rank " << ddp::rank() << "\n";
      by_path << "rank " << ddp::rank() << "\n";
      std::fprintf(by_c, "rank %d\n", ddp::rank());
      std::fclose(by_c);
    }
    EXPECT_EQ(ddp::output_path(text),
              ddp::is_main_process() ? text : std::string("/dev/null"));
    ddp::barrier();
    if (ddp::is_main_process()) {
      for (const char* name : {"/text.log", "/p.log", "/c.log"}) {
        std::ifstream in(dir + name);
        std::stringstream content;
        content << in.rdbuf();
        EXPECT_EQ(content.str(), "rank 0\n") << name;
      }
      std::filesystem::remove_all(dir);
    }
    (void)world;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(2, 3),
                         [](const auto& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// Without a launcher (the test process itself, no RANK/WORLD_SIZE): one
// process, no process group, helpers leave values as they are.
TEST(CollectivesNoLauncher, HelpersAreNoOps) {
  if (ddp_test::is_worker() || std::getenv("RANK") ||
      std::getenv("WORLD_SIZE") || std::getenv("SLURM_PROCID") ||
      std::getenv("OMPI_COMM_WORLD_RANK")) {
    GTEST_SKIP() << "runs only outside any launcher";
  }
  EXPECT_EQ(ddp::shared_seed(5u), 5u); // Before init, with no launcher.
  ddp::init();
  EXPECT_TRUE(ddp::is_initialized());
  EXPECT_FALSE(ddp::is_distributed());
  EXPECT_EQ(ddp::launcher(), ddp::Launcher::kNone);
  EXPECT_EQ(ddp::world_size(), 1);
  EXPECT_EQ(ddp::rank(), 0);
  EXPECT_TRUE(ddp::is_main_process());
  EXPECT_FALSE(ddp::process_group());
  EXPECT_EQ(ddp::backend_name(), "none");
  ddp::barrier();
  auto t = torch::tensor({1.5, -2.0});
  ddp::all_reduce(t, ddp::ReduceOp::kMean);
  EXPECT_TRUE(torch::equal(t, torch::tensor({1.5, -2.0})));
  EXPECT_EQ(ddp::all_reduce(3.25, ddp::ReduceOp::kSum), 3.25);
  EXPECT_EQ(ddp::all_reduce(int64_t(-4), ddp::ReduceOp::kMax), -4);
  const auto gathered = ddp::all_gather(t);
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_TRUE(torch::equal(gathered[0], t));
  ddp::broadcast(t, 0);
  EXPECT_TRUE(torch::equal(t, torch::tensor({1.5, -2.0})));
  EXPECT_THROW(ddp::broadcast(t, 1), std::invalid_argument);
  EXPECT_EQ(ddp::shared_seed(4000000000u), 4000000000u);
  EXPECT_EQ(&ddp::output_stream(std::cout), &std::cout);
  ddp::shutdown();
}

} // namespace
