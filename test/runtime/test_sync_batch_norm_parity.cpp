// ddp::SyncBatchNorm2d on 2 Gloo ranks with uneven local batches against
// PyTorch itself (python3-torch), K steps of forward, backward and SGD on the
// affine parameters. PyTorch 1.13's torch.nn.SyncBatchNorm refuses CPU
// tensors, so the Python reference is BatchNorm2d over the concatenated
// global batch (see parity_sbn/reference.py). Data and results travel
// through raw float32 files (parity_sbn/reference.py documents the format).

#include "multiprocess.h"

#include <ddp/distributed.h>
#include <ddp/sync_batch_norm.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

// This LibTorch's own PyTorch where it has one (test/runtime/CMakeLists.txt).
const char* const kPython = DDP_TEST_PYTHON;
constexpr int64_t kChannels = 4;
constexpr int kSteps = 3;
constexpr double kLr = 0.1;
constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;
const std::vector<int64_t> kCounts{3, 5};
const std::vector<int64_t> kTail{4, 3};

void write_tensor(const std::string& path, const torch::Tensor& tensor) {
  const torch::Tensor t = tensor.detach().to(torch::kFloat).contiguous();
  std::ofstream out(path, std::ios::binary);
  out.write("DDPT", 4);
  const auto ndim = static_cast<uint32_t>(t.dim());
  out.write(reinterpret_cast<const char*>(&ndim), sizeof ndim);
  for (int64_t d : t.sizes()) {
    out.write(reinterpret_cast<const char*>(&d), sizeof d);
  }
  out.write(reinterpret_cast<const char*>(t.data_ptr<float>()),
            static_cast<std::streamsize>(t.numel() * sizeof(float)));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

torch::Tensor read_tensor(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  if (!in || std::string(magic, 4) != "DDPT") {
    ADD_FAILURE() << path << ": missing or not a DDPT file";
    return torch::Tensor();
  }
  uint32_t ndim = 0;
  in.read(reinterpret_cast<char*>(&ndim), sizeof ndim);
  std::vector<int64_t> dims(ndim);
  for (auto& d : dims) {
    in.read(reinterpret_cast<char*>(&d), sizeof d);
  }
  torch::Tensor t = torch::empty(dims, torch::kFloat);
  in.read(reinterpret_cast<char*>(t.data_ptr<float>()),
          static_cast<std::streamsize>(t.numel() * sizeof(float)));
  if (!in) {
    ADD_FAILURE() << path << ": truncated";
    return torch::Tensor();
  }
  return t;
}

void expect_close(const torch::Tensor& a, const torch::Tensor& b,
                  const std::string& what, double tol = 1e-5) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double diff =
      (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
  const double scale = std::max(1.0, b.abs().max().item<double>());
  EXPECT_LE(diff, tol * scale) << what;
}

std::string rank_file(const std::string& name, int rank) {
  return ddp_test::shared_dir() + "/" + name + "_r" + std::to_string(rank) +
         ".t";
}

TEST(SyncBatchNormParity, MatchesPyTorchOverTheGlobalBatch) {
  if (!ddp_test::is_worker() &&
      std::system((std::string(kPython) + " -c 'import torch' > /dev/null 2>&1")
                      .c_str()) != 0) {
    GTEST_SKIP() << kPython << " with torch (python3-torch) is not installed";
  }
  ddp_test::run_ranks(2, [] {
    const int rank = ddp::rank();
    const std::string dir = ddp_test::shared_dir();
    const int64_t total = kCounts[0] + kCounts[1];
    const int64_t offset = rank == 0 ? 0 : kCounts[0];
    std::vector<int64_t> shape{total, kChannels};
    shape.insert(shape.end(), kTail.begin(), kTail.end());

    torch::manual_seed(2024); // the same global data on both ranks
    ddp::SyncBatchNorm2d bn(
        torch::nn::BatchNorm2dOptions(kChannels).eps(kEps).momentum(kMomentum));
    {
      torch::NoGradGuard no_grad;
      bn->weight.uniform_(0.5, 1.5);
      bn->bias.normal_();
    }
    if (rank == 0) {
      std::ofstream meta(dir + "/meta.txt");
      meta << "channels " << kChannels << "\nsteps " << kSteps << "\nlr " << kLr
           << "\neps " << kEps << "\nmomentum " << kMomentum << "\n";
      write_tensor(dir + "/weight0.t", bn->weight);
      write_tensor(dir + "/bias0.t", bn->bias);
    }
    for (int k = 0; k < kSteps; ++k) {
      const torch::Tensor x = torch::randn(shape) * 2 - 1;
      const torch::Tensor g = torch::randn(shape);
      if (rank == 0) {
        write_tensor(dir + "/x" + std::to_string(k) + ".t", x);
        write_tensor(dir + "/g" + std::to_string(k) + ".t", g);
      }
      const torch::Tensor xl =
          x.narrow(0, offset, kCounts[rank]).clone().requires_grad_();
      const torch::Tensor y = bn->forward(xl);
      (y * g.narrow(0, offset, kCounts[rank])).sum().backward();
      write_tensor(rank_file("y" + std::to_string(k), rank), y);
      write_tensor(rank_file("dx" + std::to_string(k), rank), xl.grad());
      // Summed parameter gradients (the loss is a sum over the global batch).
      torch::Tensor gw = bn->weight.grad().clone();
      torch::Tensor gb = bn->bias.grad().clone();
      ddp::all_reduce(gw);
      ddp::all_reduce(gb);
      torch::NoGradGuard no_grad;
      bn->weight.sub_(kLr * gw);
      bn->bias.sub_(kLr * gb);
      bn->weight.mutable_grad().zero_();
      bn->bias.mutable_grad().zero_();
    }
    write_tensor(rank_file("weight", rank), bn->weight);
    write_tensor(rank_file("bias", rank), bn->bias);
    write_tensor(rank_file("running_mean", rank), bn->running_mean);
    write_tensor(rank_file("running_var", rank), bn->running_var);
  });
  if (ddp_test::is_worker() || HasFailure()) {
    return;
  }
  const std::string dir = ddp_test::shared_dir();
  const std::string command = std::string(kPython) + " " +
                              std::string(DDP_TEST_SOURCE_DIR) +
                              "/parity_sbn/reference.py " + dir;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  int64_t offset = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string who = " of rank " + std::to_string(rank);
    for (int k = 0; k < kSteps; ++k) {
      const std::string step = std::to_string(k);
      expect_close(read_tensor(rank_file("y" + step, rank)),
                   read_tensor(dir + "/ref_y" + step + ".t")
                       .narrow(0, offset, kCounts[rank]),
                   "output at step " + step + who);
      expect_close(read_tensor(rank_file("dx" + step, rank)),
                   read_tensor(dir + "/ref_dx" + step + ".t")
                       .narrow(0, offset, kCounts[rank]),
                   "input gradient at step " + step + who);
    }
    for (const char* name : {"weight", "bias", "running_mean", "running_var"}) {
      expect_close(read_tensor(rank_file(name, rank)),
                   read_tensor(dir + "/ref_" + name + ".t"),
                   std::string(name) + " after the steps" + who);
    }
    offset += kCounts[rank];
  }
}

} // namespace
