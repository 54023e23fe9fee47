// ddp::DistributedDataParallel on 2 and 3 Gloo ranks over loopback: the
// result of N ranks with batch B must equal one process with batch N*B.

#include "multiprocess.h"

#include <ddp/data_parallel.h>
#include <ddp/distributed.h>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <dirent.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

// Linear and Conv2d layers, as the issue asks.
struct ConvNetImpl : torch::nn::Module {
  ConvNetImpl() {
    conv1 = register_module(
        "conv1",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).padding(1)));
    conv2 = register_module(
        "conv2", torch::nn::Conv2d(
                     torch::nn::Conv2dOptions(4, 6, 3).stride(2).padding(1)));
    fc1 = register_module("fc1", torch::nn::Linear(6 * 4 * 4, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 5));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv1->forward(x));
    x = torch::relu(conv2->forward(x));
    x = torch::relu(fc1->forward(x.flatten(1)));
    return fc2->forward(x);
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(ConvNet);

constexpr int64_t kBatch = 4; // per rank
constexpr int kSteps = 5;

// The global batch of one step, the same on every rank and in the reference.
std::pair<torch::Tensor, torch::Tensor> global_batch(int step, int64_t size) {
  torch::manual_seed(1000 + step);
  return {torch::randn({size, 3, 8, 8}), torch::randn({size, 5})};
}

std::pair<torch::Tensor, torch::Tensor> local_batch(int step) {
  const int64_t n = ddp::world_size();
  auto [x, y] = global_batch(step, n * kBatch);
  return {x.narrow(0, ddp::rank() * kBatch, kBatch),
          y.narrow(0, ddp::rank() * kBatch, kBatch)};
}

// Rank 0's initial weights: every rank starts elsewhere, so the test also
// proves the constructor's broadcast.
ConvNet make_net(int seed) {
  torch::manual_seed(seed);
  return ConvNet();
}

std::unique_ptr<torch::optim::SGD> make_sgd(torch::nn::Module& m) {
  return std::make_unique<torch::optim::SGD>(
      m.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
}

// |a - b| <= 1e-5 relative to the size of the reference tensor.
void expect_close(const torch::Tensor& a, const torch::Tensor& b,
                  const std::string& what) {
  ASSERT_TRUE(a.defined()) << what;
  ASSERT_TRUE(b.defined()) << what;
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double diff = (a - b).abs().max().item<double>();
  const double scale = b.abs().max().item<double>();
  EXPECT_LE(diff, 1e-5 * std::max(scale, 1e-3))
      << what << ": max difference " << diff << " at scale " << scale;
}

void expect_modules_close(torch::nn::Module& a, torch::nn::Module& b) {
  auto pa = a.named_parameters();
  auto pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    expect_close(item.value(), pb[item.key()], item.key());
  }
}

void write_bytes(torch::nn::Module& m, const std::string& tag) {
  std::ofstream out(ddp_test::shared_dir() + "/" + tag + "_rank" +
                        std::to_string(ddp::rank()),
                    std::ios::binary);
  for (const auto& p : m.parameters()) {
    auto c = p.detach().contiguous();
    out.write(static_cast<const char*>(c.data_ptr()),
              static_cast<std::streamsize>(c.nbytes()));
  }
  for (const auto& b : m.buffers()) {
    auto c = b.detach().contiguous();
    out.write(static_cast<const char*>(c.data_ptr()),
              static_cast<std::streamsize>(c.nbytes()));
  }
}

// In the parent: every rank's file holds the same bytes.
void expect_identical_files(const std::string& tag, int world_size) {
  std::vector<std::string> contents;
  for (int r = 0; r < world_size; ++r) {
    std::ifstream in(ddp_test::shared_dir() + "/" + tag + "_rank" +
                         std::to_string(r),
                     std::ios::binary);
    ASSERT_TRUE(in.good()) << "rank " << r << " left no " << tag;
    contents.emplace_back(std::istreambuf_iterator<char>(in),
                          std::istreambuf_iterator<char>());
  }
  ASSERT_FALSE(contents[0].empty());
  for (int r = 1; r < world_size; ++r) {
    EXPECT_TRUE(contents[r] == contents[0])
        << tag << ": rank " << r << " differs from rank 0";
  }
}

// Reference: one process, batch N*B, the same steps.
ConvNet train_reference(int steps, int world_size) {
  auto ref = make_net(7);
  auto opt = make_sgd(*ref);
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = global_batch(step, world_size * kBatch);
    opt->zero_grad();
    torch::mse_loss(ref->forward(x), y).backward();
    opt->step();
  }
  return ref;
}

void matches_single_process(int world_size) {
  ddp_test::run_ranks(world_size, [] {
    auto model = make_net(7 + 100 * ddp::rank());
    ddp::DistributedDataParallel model_ddp(model);
    ASSERT_TRUE(model_ddp.is_active());
    auto opt = make_sgd(*model);
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = local_batch(step);
      opt->zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      opt->step();
    }
    auto ref = train_reference(kSteps, ddp::world_size());
    expect_modules_close(*model, *ref);
    const auto stats = model_ddp.stats();
    EXPECT_EQ(stats.synced_backwards, kSteps);
    EXPECT_EQ(stats.allreduces, kSteps * model_ddp.bucket_count());
    EXPECT_EQ(stats.broadcasts, 0); // no buffers in this model
    write_bytes(*model, "params");
  });
  if (!ddp_test::is_worker()) {
    expect_identical_files("params", world_size);
  }
}

TEST(DataParallel, TwoRanksMatchOneProcessWithGlobalBatch) {
  matches_single_process(2);
}

TEST(DataParallel, ThreeRanksMatchOneProcessWithGlobalBatch) {
  matches_single_process(3);
}

// Ranks of one host all-reduce through shared memory by default; the result
// is the same as through Gloo: bit for bit with 2 ranks ((a + b) / 2 either
// way), to rounding with 3 (another summation order). DDP_SHM=0 and
// shared_memory(false) turn it off.
void shared_memory_matches_process_group(
    int world_size, const ddp_test::RankOptions& options = {}) {
  ddp_test::run_ranks(
      world_size,
      [] {
        auto shm_model = make_net(7 + 100 * ddp::rank());
        auto gloo_model = make_net(7 + 100 * ddp::rank());
        ddp::DistributedDataParallel shm_ddp(shm_model);
        ddp::DistributedDataParallel gloo_ddp(
            gloo_model,
            ddp::DistributedDataParallelOptions().shared_memory(false));
        ASSERT_TRUE(shm_ddp.uses_shared_memory());
        ASSERT_FALSE(gloo_ddp.uses_shared_memory());
        auto shm_opt = make_sgd(*shm_model);
        auto gloo_opt = make_sgd(*gloo_model);
        for (int step = 0; step < kSteps; ++step) {
          auto [x, y] = local_batch(step);
          shm_opt->zero_grad();
          gloo_opt->zero_grad();
          torch::mse_loss(shm_model->forward(x), y).backward();
          torch::mse_loss(gloo_model->forward(x), y).backward();
          shm_opt->step();
          gloo_opt->step();
        }
        EXPECT_EQ(shm_ddp.stats().allreduces, kSteps * shm_ddp.bucket_count());
        auto shm_params = shm_model->named_parameters();
        for (const auto& item : gloo_model->named_parameters()) {
          if (ddp::world_size() == 2) {
            EXPECT_TRUE(torch::equal(shm_params[item.key()], item.value()))
                << item.key();
          } else {
            expect_close(shm_params[item.key()], item.value(), item.key());
          }
        }
        // The segment's name is gone once every rank has mapped it.
        DIR* dir = opendir("/dev/shm");
        if (dir != nullptr) {
          while (dirent* entry = readdir(dir)) {
            const std::string name = entry->d_name;
            EXPECT_NE(name.rfind("ddp-" + std::to_string(getpid()), 0), 0u)
                << "left in /dev/shm: " << name;
          }
          closedir(dir);
        }
        write_bytes(*shm_model, "params");
      },
      options);
  if (!ddp_test::is_worker()) {
    expect_identical_files("params", world_size);
  }
}

// A comm hook (fp16 / bf16 compression of the all-reduce, as PyTorch's
// fp16_compress_hook): 2 ranks train the ConvNet 40 steps; the final loss on
// a fixed batch is the uncompressed run's within `tolerance` (relative), and
// both ranks end with the same bits. Shared memory off: what the hook
// compresses is what crosses the process group.
void trains_like_uncompressed(ddp::CommHook hook, double tolerance) {
  ddp_test::run_ranks(2, [hook, tolerance] {
    auto train = [](ddp::CommHook with) {
      auto model = make_net(7 + 100 * ddp::rank());
      ddp::DistributedDataParallel model_ddp(
          model,
          ddp::DistributedDataParallelOptions().shared_memory(false).comm_hook(
              with));
      auto opt = make_sgd(*model);
      for (int step = 0; step < 40; ++step) {
        auto [x, y] = local_batch(step % 8);
        opt->zero_grad();
        torch::mse_loss(model->forward(x), y).backward();
        opt->step();
      }
      auto [x, y] = global_batch(99, 16);
      return std::make_pair(
          model, torch::mse_loss(model->forward(x), y).item<double>());
    };
    const auto plain = train(ddp::CommHook::kNone);
    auto compressed = train(hook);
    const double difference = std::abs(compressed.second - plain.second);
    EXPECT_LE(difference, tolerance * plain.second)
        << "loss " << compressed.second << " compressed, " << plain.second
        << " uncompressed";
    // And it trained: the loss fell from the untrained model's.
    auto [x, y] = global_batch(99, 16);
    const double untrained =
        torch::mse_loss(make_net(7)->forward(x), y).item<double>();
    EXPECT_LT(compressed.second, untrained);
    write_bytes(*compressed.first, "hooked");
  });
  if (!ddp_test::is_worker()) {
    expect_identical_files("hooked", 2);
  }
}

TEST(DataParallel, Fp16CommHookTrainsToTheSameLoss) {
  trains_like_uncompressed(ddp::CommHook::kFp16, 1e-2);
}

TEST(DataParallel, Bf16CommHookTrainsToTheSameLossWhereGlooHasBf16) {
#if TORCH_VERSION_MAJOR >= 2
  trains_like_uncompressed(ddp::CommHook::kBf16, 3e-2);
#else
  // LibTorch 1.13's Gloo has no bfloat16: a clear error at construction.
  ddp_test::run_ranks(2, [] {
    auto model = make_net(7);
    try {
      ddp::DistributedDataParallel model_ddp(
          model,
          ddp::DistributedDataParallelOptions().shared_memory(false).comm_hook(
              ddp::CommHook::kBf16));
      ADD_FAILURE() << "no error for the bf16 hook on LibTorch 1.13's Gloo";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("use fp16 (DDP_COMM_HOOK=fp16)"),
                std::string::npos)
          << e.what();
    }
  });
#endif
}

TEST(DataParallel, CommHookFromTheEnvironment) {
  ddp_test::RankOptions options;
  options.env = {{"DDP_COMM_HOOK", "fp16"}};
  ddp_test::run_ranks(
      2,
      [] {
        auto model = make_net(7);
        ddp::DistributedDataParallel model_ddp(
            model, ddp::DistributedDataParallelOptions().shared_memory(false));
        auto [x, y] = local_batch(0);
        torch::mse_loss(model->forward(x), y).backward();
        // fp16 on the wire: half the bytes of the float32 buckets.
        // and one flag per parameter, one count of stepping ranks a bucket
        int64_t numel = model_ddp.bucket_count();
        for (const auto& p : model->parameters()) {
          numel += p.numel() + 1;
        }
        EXPECT_EQ(model_ddp.stats().bytes, numel * 2);
      },
      options);
}

TEST(DataParallel, SharedMemoryMatchesProcessGroupTwoRanks) {
  shared_memory_matches_process_group(2);
}

TEST(DataParallel, SharedMemoryMatchesProcessGroupThreeRanks) {
  shared_memory_matches_process_group(3);
}

// The same with the all-reduce on a thread of its own (chosen by default
// only where cores are free for it).
TEST(DataParallel, SharedMemoryThreadMatchesProcessGroup) {
  ddp_test::RankOptions options;
  options.env = {{"DDP_SHM_THREAD", "1"}};
  shared_memory_matches_process_group(2, options);
}

// Buckets of other dtypes: float64 takes the same loop as float32, float16
// the tensor path; both agree with the process group.
TEST(DataParallel, SharedMemoryOtherDtypes) {
  ddp_test::run_ranks(2, [] {
    for (const auto dtype : {torch::kFloat64, torch::kFloat16}) {
      auto shm_model = make_net(7 + ddp::rank());
      auto gloo_model = make_net(7 + ddp::rank());
      shm_model->to(dtype);
      gloo_model->to(dtype);
      ddp::DistributedDataParallel shm_ddp(shm_model);
      ddp::DistributedDataParallel gloo_ddp(
          gloo_model,
          ddp::DistributedDataParallelOptions().shared_memory(false));
      ASSERT_TRUE(shm_ddp.uses_shared_memory());
      // Gradients straight from the parameters: no half-precision kernels
      // needed on the CPU.
      torch::manual_seed(ddp::rank());
      for (auto& p : shm_model->parameters()) {
        (p.to(torch::kFloat64) * torch::rand_like(p, torch::kFloat64))
            .sum()
            .backward();
      }
      torch::manual_seed(ddp::rank());
      for (auto& p : gloo_model->parameters()) {
        (p.to(torch::kFloat64) * torch::rand_like(p, torch::kFloat64))
            .sum()
            .backward();
      }
      auto shm_params = shm_model->named_parameters();
      for (const auto& item : gloo_model->named_parameters()) {
        const auto& want = item.value().grad();
        const auto& got = shm_params[item.key()].grad();
        ASSERT_TRUE(got.defined()) << item.key();
        EXPECT_EQ(got.scalar_type(), dtype);
        EXPECT_TRUE(torch::allclose(got.to(torch::kFloat64),
                                    want.to(torch::kFloat64), 1e-3, 1e-3))
            << item.key() << " " << c10::toString(dtype);
      }
    }
  });
}

TEST(DataParallel, SharedMemoryOffByEnvironment) {
  ddp_test::RankOptions options;
  options.env = {{"DDP_SHM", "0"}};
  ddp_test::run_ranks(
      2,
      [] {
        auto model = make_net(7);
        ddp::DistributedDataParallel model_ddp(model);
        EXPECT_FALSE(model_ddp.uses_shared_memory());
        model->forward(torch::randn({2, 3, 8, 8})).sum().backward();
        EXPECT_EQ(model_ddp.stats().synced_backwards, 1);
      },
      options);
}

// A rank that exits in the middle of training: its peer, waiting in a
// shared-memory all-reduce, fails with an error that names it, long before
// the timeout (60 s here).
void shared_memory_peer_exit_is_an_error(const std::string& thread) {
  ddp_test::RankOptions options;
  options.env = {{"DDP_TIMEOUT_SECONDS", "60"}, {"DDP_SHM_THREAD", thread}};
  const auto statuses = ddp_test::run_ranks_status(
      2,
      [] {
        auto model = make_net(7);
        ddp::DistributedDataParallel model_ddp(model);
        ASSERT_TRUE(model_ddp.uses_shared_memory());
        if (ddp::rank() == 1) {
          std::_Exit(5);
        }
        std::string message;
        const auto start = std::chrono::steady_clock::now();
        try {
          model->forward(torch::randn({2, 3, 8, 8})).sum().backward();
        } catch (const std::exception& e) {
          message = e.what();
        }
        const double seconds = std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() - start)
                                   .count();
        std::ofstream(ddp_test::shared_dir() + "/error") << seconds << "\n"
                                                         << message;
      },
      options);
  if (ddp_test::is_worker()) {
    return;
  }
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[1], 5);
  EXPECT_EQ(statuses[0], 0);
  std::ifstream in(ddp_test::shared_dir() + "/error");
  double seconds = 0;
  in >> seconds;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("rank 1 (pid"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("exited during a gradient all-reduce"),
            std::string::npos)
      << text.str();
  EXPECT_LT(seconds, 30) << text.str();
}

TEST(DataParallel, SharedMemoryPeerExitIsAnError) {
  shared_memory_peer_exit_is_an_error("0");
}

TEST(DataParallel, SharedMemoryThreadPeerExitIsAnError) {
  shared_memory_peer_exit_is_an_error("1");
}

// The three ways a program can hold its model.
TEST(DataParallel, SharedPtrByValueAndRawPointerModules) {
  ddp_test::run_ranks(2, [] {
    torch::manual_seed(7 + 100 * ddp::rank());
    auto shared = std::make_shared<ConvNetImpl>();
    torch::manual_seed(7 + 100 * ddp::rank());
    ConvNetImpl by_value;
    torch::manual_seed(7 + 100 * ddp::rank());
    auto owner = std::make_unique<ConvNetImpl>();
    ConvNetImpl* raw = owner.get();
    ddp::DistributedDataParallel ddp_shared(shared);
    ddp::DistributedDataParallel ddp_value(by_value);
    ddp::DistributedDataParallel ddp_raw(raw);
    static_assert(
        std::is_same<decltype(ddp_raw),
                     ddp::DistributedDataParallel<ConvNetImpl>>::value);
    EXPECT_EQ(&ddp_raw.module(), raw);
    static_assert(
        std::is_same<decltype(ddp_shared),
                     ddp::DistributedDataParallel<ConvNetImpl>>::value);
    static_assert(
        std::is_same<decltype(ddp_value),
                     ddp::DistributedDataParallel<ConvNetImpl>>::value);
    EXPECT_EQ(&ddp_value.module(), &by_value);
    EXPECT_EQ(ddp_shared.operator->(), shared.get());
    auto opt_shared = make_sgd(*shared);
    auto opt_value = make_sgd(by_value);
    auto opt_raw = make_sgd(*raw);
    for (int step = 0; step < 2; ++step) {
      auto [x, y] = local_batch(step);
      opt_shared->zero_grad();
      opt_value->zero_grad();
      opt_raw->zero_grad();
      // Through the wrapper's pass-through and through the module itself.
      torch::mse_loss(ddp_shared(x), y).backward();
      torch::mse_loss(by_value.forward(x), y).backward();
      torch::mse_loss(raw->forward(x), y).backward();
      opt_shared->step();
      opt_value->step();
      opt_raw->step();
    }
    auto ref = train_reference(2, ddp::world_size());
    expect_modules_close(*shared, *ref);
    expect_modules_close(by_value, *ref);
    expect_modules_close(*raw, *ref);
  });
}

// A branch that only some ranks take, and one that no rank takes.
struct BranchyImpl : torch::nn::Module {
  BranchyImpl() {
    trunk = register_module("trunk", torch::nn::Linear(6, 8));
    sometimes = register_module("sometimes", torch::nn::Linear(8, 3));
    always = register_module("always", torch::nn::Linear(8, 3));
    never = register_module("never", torch::nn::Linear(8, 3));
  }
  torch::Tensor forward(torch::Tensor x, bool use_sometimes) {
    auto h = torch::tanh(trunk->forward(x));
    auto out = always->forward(h);
    if (use_sometimes) {
      out = out + sometimes->forward(h);
    }
    return out;
  }
  torch::nn::Linear trunk{nullptr}, sometimes{nullptr}, always{nullptr},
      never{nullptr};
};
TORCH_MODULE(Branchy);

TEST(DataParallel, UnusedParametersDoNotHang) {
  ddp_test::run_ranks(3, [] {
    torch::manual_seed(3);
    Branchy model;
    torch::manual_seed(3);
    Branchy ref; // the same weights, trained on the global batch locally
    ddp::DistributedDataParallel model_ddp(model,
                                           ddp::DistributedDataParallelOptions()
                                               .bucket_cap_mb(0.0001)
                                               .first_bucket_cap_mb(0.0001));
    ASSERT_GT(model_ddp.bucket_count(), 2);
    const int n = ddp::world_size();
    for (int step = 0; step < 3; ++step) {
      torch::manual_seed(50 + step);
      auto x = torch::randn({n * 2, 6});
      auto y = torch::randn({n * 2, 3});
      // Rank 0 uses `sometimes` on even steps only: in the other steps no
      // rank does, and its grad stays as the last synced step left it.
      const bool use = ddp::rank() == 0 && step % 2 == 0;
      model->zero_grad();
      auto lx = x.narrow(0, ddp::rank() * 2, 2);
      auto ly = y.narrow(0, ddp::rank() * 2, 2);
      torch::mse_loss(model->forward(lx, use), ly).backward();

      // Expected: the mean over ranks of each rank's local gradient, where a
      // rank without the branch contributes zero.
      ref->zero_grad();
      for (int r = 0; r < n; ++r) {
        auto rx = x.narrow(0, r * 2, 2);
        auto ry = y.narrow(0, r * 2, 2);
        auto loss =
            torch::mse_loss(ref->forward(rx, r == 0 && step % 2 == 0), ry);
        (loss / n).backward();
      }
      for (const auto& item : ref->named_parameters()) {
        const auto& got = model->named_parameters()[item.key()].grad();
        if (item.key().rfind("never", 0) == 0) {
          // No rank ever gave it a gradient: undefined, as under PyTorch.
          EXPECT_FALSE(got.defined()) << item.key();
          continue;
        }
        if (!item.value().grad().defined()) {
          EXPECT_FALSE(got.defined()) << item.key();
          continue;
        }
        expect_close(got, item.value().grad(), item.key());
      }
    }
    write_bytes(*model, "params");
  });
  if (!ddp_test::is_worker()) {
    expect_identical_files("params", 3);
  }
}

TEST(DataParallel, NoSyncAccumulatesAndSynchronisesOnce) {
  ddp_test::run_ranks(2, [] {
    auto model = make_net(7 + 100 * ddp::rank());
    ddp::DistributedDataParallel model_ddp(model);
    auto ref = make_net(7);
    const int n = ddp::world_size();
    constexpr int kMicro = 3;
    model->zero_grad();
    for (int micro = 0; micro < kMicro; ++micro) {
      auto [x, y] = local_batch(micro);
      if (micro + 1 < kMicro) {
        auto guard = model_ddp.no_sync();
        EXPECT_FALSE(model_ddp.require_backward_grad_sync());
        torch::mse_loss(model->forward(x), y).backward();
        EXPECT_EQ(model_ddp.stats().collectives(), 0) << "no_sync communicated";
      } else {
        EXPECT_TRUE(model_ddp.require_backward_grad_sync());
        torch::mse_loss(model->forward(x), y).backward();
      }
    }
    const auto stats = model_ddp.stats();
    EXPECT_EQ(stats.synced_backwards, 1);
    EXPECT_EQ(stats.allreduces, model_ddp.bucket_count());

    // Reference: sum over micro-batches of the global-batch gradient.
    ref->zero_grad();
    for (int micro = 0; micro < kMicro; ++micro) {
      auto [x, y] = global_batch(micro, n * kBatch);
      torch::mse_loss(ref->forward(x), y).backward();
    }
    for (const auto& item : ref->named_parameters()) {
      expect_close(model->named_parameters()[item.key()].grad(),
                   item.value().grad(), item.key());
    }
  });
}

// Two backward passes before one step: each all-reduces its own part.
TEST(DataParallel, TwoBackwardPassesPerStep) {
  ddp_test::run_ranks(2, [] {
    auto model = make_net(7 + 100 * ddp::rank());
    ddp::DistributedDataParallel model_ddp(model);
    auto opt = make_sgd(*model);
    auto ref = make_net(7);
    auto ref_opt = make_sgd(*ref);
    const int n = ddp::world_size();
    for (int step = 0; step < 3; ++step) {
      auto [x, y] = local_batch(step);
      opt->zero_grad();
      auto out = model->forward(x);
      torch::mse_loss(out, y).backward(torch::Tensor(), /*retain_graph=*/true);
      (out.abs().mean() * 0.1).backward();
      opt->step();

      auto [gx, gy] = global_batch(step, n * kBatch);
      ref_opt->zero_grad();
      auto ref_out = ref->forward(gx);
      torch::mse_loss(ref_out, gy).backward(torch::Tensor(), true);
      (ref_out.abs().mean() * 0.1).backward();
      ref_opt->step();
    }
    EXPECT_EQ(model_ddp.stats().synced_backwards, 6);
    expect_modules_close(*model, *ref);
  });
}

// A GAN: two wrapped models, the generator's gradient flowing through the
// discriminator.
TEST(DataParallel, TwoModels) {
  ddp_test::run_ranks(2, [] {
    auto make = [](int seed) {
      torch::manual_seed(seed);
      return std::make_pair(
          torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::Tanh(),
                                torch::nn::Linear(8, 6)),
          torch::nn::Sequential(torch::nn::Linear(6, 8), torch::nn::Tanh(),
                                torch::nn::Linear(8, 1)));
    };
    auto [gen, disc] = make(11 + ddp::rank());
    auto [ref_gen, ref_disc] = make(11);
    ddp::DistributedDataParallel gen_ddp(gen);
    ddp::DistributedDataParallel disc_ddp(disc);
    torch::optim::SGD gen_opt(gen->parameters(), 0.1);
    torch::optim::SGD disc_opt(disc->parameters(), 0.1);
    torch::optim::SGD ref_gen_opt(ref_gen->parameters(), 0.1);
    torch::optim::SGD ref_disc_opt(ref_disc->parameters(), 0.1);
    const int n = ddp::world_size();
    constexpr int64_t b = 3;
    auto step = [](torch::nn::Sequential& g, torch::nn::Sequential& d,
                   torch::optim::SGD& g_opt, torch::optim::SGD& d_opt,
                   const torch::Tensor& noise, const torch::Tensor& real) {
      d_opt.zero_grad();
      auto fake = g->forward(noise);
      auto d_loss =
          torch::mse_loss(d->forward(real), torch::ones({real.size(0), 1})) +
          torch::mse_loss(d->forward(fake.detach()),
                          torch::zeros({real.size(0), 1}));
      d_loss.backward();
      d_opt.step();
      g_opt.zero_grad();
      torch::mse_loss(d->forward(fake), torch::ones({real.size(0), 1}))
          .backward();
      g_opt.step();
    };
    for (int it = 0; it < 3; ++it) {
      torch::manual_seed(70 + it);
      auto noise = torch::randn({n * b, 4});
      auto real = torch::randn({n * b, 6});
      step(gen, disc, gen_opt, disc_opt, noise.narrow(0, ddp::rank() * b, b),
           real.narrow(0, ddp::rank() * b, b));
      step(ref_gen, ref_disc, ref_gen_opt, ref_disc_opt, noise, real);
    }
    expect_modules_close(*gen, *ref_gen);
    expect_modules_close(*disc, *ref_disc);
    // The discriminator took part in both backward passes of every step,
    // the generator only in the second one.
    EXPECT_EQ(disc_ddp.stats().synced_backwards, 6);
    EXPECT_EQ(gen_ddp.stats().synced_backwards, 3);
  });
}

TEST(DataParallel, ShapeMismatchIsNamed) {
  ddp_test::run_ranks(2, [] {
    torch::nn::Sequential model(torch::nn::Linear(4, 5),
                                torch::nn::Linear(5, ddp::rank() == 0 ? 2 : 3));
    try {
      ddp::DistributedDataParallel model_ddp(model);
      ADD_FAILURE() << "no error on rank " << ddp::rank();
    } catch (const std::exception& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("'1.weight'"), std::string::npos) << what;
      EXPECT_NE(what.find("[2, 5]"), std::string::npos) << what;
      EXPECT_NE(what.find("[3, 5]"), std::string::npos) << what;
      EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
    }
  });
}

TEST(DataParallel, ParameterCountMismatchIsAnError) {
  ddp_test::run_ranks(3, [] {
    torch::nn::Sequential model(torch::nn::Linear(4, 5));
    if (ddp::rank() == 2) {
      model->push_back(torch::nn::Linear(5, 5));
    }
    try {
      ddp::DistributedDataParallel model_ddp(model);
      ADD_FAILURE() << "no error on rank " << ddp::rank();
    } catch (const std::exception& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("#2"), std::string::npos) << what;
      EXPECT_NE(what.find("rank 2 has 4"), std::string::npos) << what;
    }
  });
}

// An MLP whose layers are 4 KiB and 40 KiB of float32 parameters.
torch::nn::Sequential small_mlp() {
  return torch::nn::Sequential(torch::nn::Linear(32, 32), torch::nn::ReLU(),
                               torch::nn::Linear(32, 320), torch::nn::ReLU(),
                               torch::nn::Linear(320, 10));
}

TEST(DataParallel, BucketsFollowCapsInReverseOrder) {
  ddp_test::run_ranks(2, [] {
    auto model = small_mlp();
    // 0.01 MiB = 10485 bytes: the first bucket closes as soon as it holds
    // 4 KiB; later ones at 10 KiB.
    ddp::DistributedDataParallel model_ddp(
        model, ddp::DistributedDataParallelOptions()
                   .first_bucket_cap_mb(4096.0 / (1 << 20))
                   .bucket_cap_mb(0.01));
    const std::vector<std::vector<std::string>> expected = {
        {"4.bias", "4.weight"},  // 40 + 12800 bytes >= 4 KiB
        {"2.bias", "2.weight"},  // 1280 + 40960 >= 10 KiB
        {"0.bias", "0.weight"}}; // the rest
    EXPECT_EQ(model_ddp.bucket_parameter_names(), expected);
    EXPECT_EQ(model_ddp.bucket_count(), 3);

    ddp::DistributedDataParallel<> defaults(small_mlp());
    EXPECT_EQ(defaults.bucket_count(), 1); // 55 KiB: one bucket under 1 MiB

    torch::optim::SGD opt(model->parameters(), 0.1);
    for (int step = 0; step < 4; ++step) {
      opt.zero_grad();
      model->forward(torch::randn({2, 32})).sum().backward();
      opt.step();
    }
    const auto stats = model_ddp.stats();
    EXPECT_EQ(stats.allreduces, 4 * 3);
    // Per bucket: the gradients plus one float flag per parameter and the
    // count of the ranks that step (ddp::join).
    const int64_t numel = 32 * 32 + 32 + 320 * 32 + 320 + 10 * 320 + 10;
    EXPECT_EQ(stats.bytes, 4 * (numel + 6 + 3) * 4);
  });
}

TEST(DataParallel, FrozenParametersAreNotCommunicated) {
  ddp_test::run_ranks(2, [] {
    torch::manual_seed(ddp::rank());
    auto model = small_mlp();
    model[0]->as<torch::nn::Linear>()->weight.set_requires_grad(false);
    model[0]->as<torch::nn::Linear>()->bias.set_requires_grad(false);
    ddp::DistributedDataParallel model_ddp(model);
    for (const auto& bucket : model_ddp.bucket_parameter_names()) {
      for (const auto& name : bucket) {
        EXPECT_NE(name.rfind("0.", 0), 0u) << name;
      }
    }
    model->forward(torch::randn({2, 32})).sum().backward();
    EXPECT_FALSE(model[0]->as<torch::nn::Linear>()->weight.grad().defined());
    // Broadcast still covered the frozen weights.
    write_bytes(*model, "frozen");
  });
  if (!ddp_test::is_worker()) {
    expect_identical_files("frozen", 2);
  }
}

// Buffers (BatchNorm running statistics) follow rank 0.
TEST(DataParallel, BuffersFollowRankZero) {
  ddp_test::run_ranks(2, [] {
    torch::manual_seed(ddp::rank());
    torch::nn::Sequential model(torch::nn::Linear(4, 6),
                                torch::nn::BatchNorm1d(6),
                                torch::nn::Linear(6, 1));
    ddp::DistributedDataParallel model_ddp(model);
    torch::optim::SGD opt(model->parameters(), 0.1);
    for (int step = 0; step < 3; ++step) {
      torch::manual_seed(100 * ddp::rank() + step); // different data per rank
      opt.zero_grad();
      model->forward(torch::randn({5, 4})).pow(2).mean().backward();
      opt.step();
    }
    EXPECT_EQ(model_ddp.stats().broadcasts, 3);
    write_bytes(*model, "with_buffers");
  });
  if (!ddp_test::is_worker()) {
    expect_identical_files("with_buffers", 2);
  }
}

TEST(DataParallel, DestructionDetachesAndDoubleWrapIsAnError) {
  ddp_test::run_ranks(2, [] {
    auto model = small_mlp();
    {
      ddp::DistributedDataParallel model_ddp(model);
      EXPECT_THROW(ddp::DistributedDataParallel again(model), std::exception);
    }
    // Gone: gradients stay local. Rank r runs a batch of r + 1 rows, so the
    // last bias gradient of sum() is r + 1 locally and 1.5 when averaged.
    auto bias = model[4]->as<torch::nn::Linear>()->bias;
    const int64_t rows = ddp::rank() + 1;
    model->forward(torch::randn({rows, 32})).sum().backward();
    EXPECT_TRUE(torch::equal(bias.grad(), torch::full({10}, double(rows))))
        << bias.grad();
    // A new wrapper attaches again.
    ddp::DistributedDataParallel model_ddp(model);
    model->zero_grad();
    model->forward(torch::randn({rows, 32})).sum().backward();
    EXPECT_TRUE(torch::equal(bias.grad(), torch::full({10}, 1.5)))
        << bias.grad();
    EXPECT_EQ(model_ddp.stats().synced_backwards, 1);
  });
}

// A placement inside a helper: the wrapper lives on without an object.
void place_and_wrap(torch::nn::Sequential& model) {
  model->to(torch::kCPU);
  ddp::distribute(model);
}

TEST(DataParallel, DistributeKeepsTheWrapperForTheModelsLifetime) {
  ddp_test::run_ranks(2, [] {
    auto model = small_mlp();
    place_and_wrap(model);
    place_and_wrap(model); // a helper called again (every epoch) is fine
    auto& wrapper = ddp::distribute(model);
    EXPECT_EQ(&wrapper, &ddp::distribute(model));
    EXPECT_TRUE(wrapper.wraps(*model));
    const int64_t rows = ddp::rank() + 1;
    model->forward(torch::randn({rows, 32})).sum().backward();
    auto bias = model[4]->as<torch::nn::Linear>()->bias;
    EXPECT_TRUE(torch::equal(bias.grad(), torch::full({10}, 1.5)))
        << bias.grad();
    EXPECT_EQ(wrapper.stats().synced_backwards, 1);
  });
}

// An optimizer built in a member's initializer: the parameters it is given
// belong to a placed, wrapped model, whichever way the model is held.
TEST(DataParallel, DistributedParametersPlaceWrapAndReturnTheParameters) {
  ddp_test::run_ranks(2, [] {
    struct Net : torch::nn::Module {
      Net() { fc = register_module("fc", torch::nn::Linear(3, 2)); }
      torch::nn::Linear fc{nullptr};
    };
    torch::nn::Linear holder(3, 2);
    auto shared = std::make_shared<Net>();
    Net plain;
    auto holder_params = ddp::distributed_parameters(holder);
    auto shared_params = ddp::distributed_parameters(shared, torch::kCPU);
    auto plain_params = ddp::distributed_parameters(plain);
    ASSERT_EQ(holder_params.size(), 2u);
    EXPECT_TRUE(holder_params[0].is_same(holder->weight));
    EXPECT_TRUE(shared_params[1].is_same(shared->fc->bias));
    EXPECT_TRUE(plain_params[0].is_same(plain.fc->weight));
    EXPECT_TRUE(ddp::distribute(holder).wraps(*holder));
    EXPECT_TRUE(ddp::distribute(shared).wraps(*shared));
    EXPECT_TRUE(ddp::distribute(plain).wraps(plain));
    EXPECT_EQ(holder->weight.device(), ddp::device());
    // Gradients are averaged: rank r contributes r + 1.
    torch::optim::SGD opt(holder_params, 0.1);
    holder->forward(torch::full({1, 3}, ddp::rank() + 1.0)).sum().backward();
    EXPECT_TRUE(
        torch::allclose(holder->weight.grad(), torch::full({2, 3}, 1.5)))
        << holder->weight.grad();
  });
}

// Fails in backward, after the hooks of the layers above it have fired.
struct ThrowInBackward : torch::autograd::Function<ThrowInBackward> {
  static torch::Tensor forward(torch::autograd::AutogradContext*,
                               torch::Tensor x) {
    return x.clone();
  }
  static torch::autograd::variable_list
  backward(torch::autograd::AutogradContext*, torch::autograd::variable_list) {
    throw std::runtime_error("failure inside backward");
  }
};

TEST(DataParallel, FailedBackwardDoesNotBreakTheNextOne) {
  ddp_test::run_ranks(2, [] {
    auto model = small_mlp();
    ddp::DistributedDataParallel model_ddp(model);
    const int64_t rows = ddp::rank() + 1;
    auto x = torch::randn({rows, 32});
    auto h = model[0]->as<torch::nn::Linear>()->forward(x);
    h = ThrowInBackward::apply(h);
    for (size_t i = 1; i < model->size(); ++i) {
      h = model[i]->as<torch::nn::Linear>()
              ? model[i]->as<torch::nn::Linear>()->forward(h)
              : torch::relu(h);
    }
    EXPECT_THROW(h.sum().backward(), std::exception);
    EXPECT_EQ(model_ddp.stats().synced_backwards, 0);
    model->zero_grad();
    model->forward(x).sum().backward();
    EXPECT_EQ(model_ddp.stats().synced_backwards, 1);
    auto bias = model[4]->as<torch::nn::Linear>()->bias;
    EXPECT_TRUE(torch::equal(bias.grad(), torch::full({10}, 1.5)))
        << bias.grad();
  });
}

// Without a launcher the wrapper does nothing and training runs as before.
TEST(DataParallel, SingleProcessIsANoOp) {
  ddp_test::RankOptions options;
  ddp_test::run_ranks(
      1,
      [] {
        ASSERT_FALSE(ddp::is_distributed());
        auto model = make_net(7);
        ddp::DistributedDataParallel model_ddp(model);
        EXPECT_FALSE(model_ddp.is_active());
        EXPECT_EQ(model_ddp.bucket_count(), 0);
        auto opt = make_sgd(*model);
        for (int step = 0; step < 2; ++step) {
          auto [x, y] = global_batch(step, kBatch);
          opt->zero_grad();
          torch::mse_loss(model_ddp(x), y).backward();
          opt->step();
        }
        EXPECT_EQ(model_ddp.stats().collectives(), 0);
        auto ref = make_net(7);
        auto ref_opt = make_sgd(*ref);
        for (int step = 0; step < 2; ++step) {
          auto [x, y] = global_batch(step, kBatch);
          ref_opt->zero_grad();
          torch::mse_loss(ref->forward(x), y).backward();
          ref_opt->step();
        }
        for (const auto& item : ref->named_parameters()) {
          EXPECT_TRUE(
              torch::equal(model->named_parameters()[item.key()], item.value()))
              << item.key();
        }
      },
      options);
}

// The sync check's workload: a Sequential (its parameters are named "0.weight",
// ..., "2.bias") with a BatchNorm (buffers), SGD with momentum, `steps`
// synced backward passes; on rank `skewed_rank`, after the optimizer step of
// step `skew_after`, "2.bias" is changed behind the wrapper's back. Returns
// the message of the error a backward pass threw ("" if none).
std::string train_with_sync_check(ddp::DistributedDataParallelOptions options,
                                  int steps, int skewed_rank, int skew_after) {
  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Linear(6, 8), torch::nn::BatchNorm1d(8),
                            torch::nn::Linear(8, 2));
  ddp::DistributedDataParallel net_ddp(net, options.shared_memory(false));
  torch::optim::SGD opt(net->parameters(),
                        torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 1; step <= steps; ++step) {
    torch::manual_seed(100 * step + ddp::rank());
    auto x = torch::randn({4, 6});
    auto y = torch::randn({4, 2});
    opt.zero_grad();
    try {
      torch::mse_loss(net_ddp(x), y).backward();
    } catch (const std::exception& e) {
      return e.what();
    }
    opt.step();
    if (step == skew_after && ddp::rank() == skewed_rank) {
      torch::NoGradGuard no_grad;
      net->named_parameters()["2.bias"].add_(0.5);
    }
  }
  return "";
}

TEST(SyncCheck, ParameterChangedOnOneRankStopsEveryRankWithinKSteps) {
  ddp_test::run_ranks(3, [] {
    // Changed after step 3's update; checked at steps 2 and 4.
    const std::string error = train_with_sync_check(
        ddp::DistributedDataParallelOptions().check_sync_every(2), 8,
        /*skewed_rank=*/1, /*skew_after=*/3);
    EXPECT_NE(error.find("out of sync at step 4: '2.bias' differs"),
              std::string::npos)
        << error;
    // The ranks' sums, rank 1's apart from the others'.
    EXPECT_NE(error.find("rank 0 "), std::string::npos) << error;
    EXPECT_NE(error.find(", rank 1 "), std::string::npos) << error;
    EXPECT_NE(error.find(", rank 2 "), std::string::npos) << error;
  });
}

TEST(SyncCheck, InSyncTrainingPassesEveryCheck) {
  ddp_test::run_ranks(2, [] {
    auto model = make_net(7);
    ddp::DistributedDataParallel model_ddp(
        model, ddp::DistributedDataParallelOptions().check_sync_every(1));
    auto opt = make_sgd(*model);
    for (int step = 0; step < 4; ++step) {
      auto [x, y] = local_batch(step);
      opt->zero_grad();
      torch::mse_loss(model_ddp(x), y).backward();
      opt->step();
    }
    EXPECT_EQ(model_ddp.stats().sync_checks, 4);
    // The check is no gradient collective.
    EXPECT_EQ(model_ddp.stats().synced_backwards, 4);
    const std::string error = train_with_sync_check(
        ddp::DistributedDataParallelOptions().check_sync_every(1), 5,
        /*skewed_rank=*/-1, /*skew_after=*/0);
    EXPECT_EQ(error, "");
  });
}

TEST(SyncCheck, EnvironmentTurnsItOnAndOff) {
  ddp_test::RankOptions on;
  on.env = {{"DDP_CHECK_SYNC", "1"}};
  ddp_test::run_ranks(
      2,
      [] {
        // The option's default period, DDP_CHECK_SYNC=1: found at the next
        // step.
        const std::string error = train_with_sync_check(
            ddp::DistributedDataParallelOptions(), 4, /*skewed_rank=*/0,
            /*skew_after=*/2);
        EXPECT_NE(error.find("out of sync at step 3: '2.bias'"),
                  std::string::npos)
            << error;
      },
      on);
  ddp_test::RankOptions off;
  off.env = {{"DDP_CHECK_SYNC", "0"}};
  ddp_test::run_ranks(
      2,
      [] {
        // DDP_CHECK_SYNC=0 turns the periodic check off (the check at the
        // wrapper's end stays: test_safety_nets).
        auto model = make_net(7);
        ddp::DistributedDataParallel model_ddp(
            model, ddp::DistributedDataParallelOptions().check_sync_every(1));
        auto opt = make_sgd(*model);
        for (int step = 0; step < 4; ++step) {
          auto [x, y] = local_batch(step);
          opt->zero_grad();
          torch::mse_loss(model_ddp(x), y).backward();
          opt->step();
        }
        EXPECT_EQ(model_ddp.stats().sync_checks, 0);
        EXPECT_EQ(model_ddp.stats().synced_backwards, 4);
      },
      off);
}

TEST(SyncCheck, DefaultPeriodIsAFewHundredSteps) {
  EXPECT_EQ(ddp::DistributedDataParallelOptions().check_sync_every(), 256);
}

} // namespace
