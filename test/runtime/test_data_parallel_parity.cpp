// Parity with PyTorch itself: the same model, initial weights and data
// trained by torch.nn.parallel.DistributedDataParallel (python3-torch, Gloo,
// 2 processes) and by ddp::DistributedDataParallel (2 ranks) must end with the
// same parameters. Weights and data travel through files in the format of
// parity/tensor_file.py.

#include "multiprocess.h"

#include <ddp/data_parallel.h>
#include <ddp/distributed.h>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

namespace {

using TensorMap = std::map<std::string, torch::Tensor>;

constexpr int kWorld = 2;
constexpr int kSteps = 6;
constexpr int64_t kBatch = 4; // per rank
constexpr double kLr = 0.05;
constexpr double kMomentum = 0.9;

// Mirrors ConvNet in parity/ddp_parity.py, names included.
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

void write_tensors(const std::string& path, const TensorMap& tensors) {
  std::ofstream out(path, std::ios::binary);
  auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<char*>(&v), 4); };
  out.write("DDPT", 4);
  u32(static_cast<uint32_t>(tensors.size()));
  for (const auto& [name, tensor] : tensors) {
    auto t = tensor.detach().to(torch::kFloat).contiguous();
    u32(static_cast<uint32_t>(name.size()));
    out.write(name.data(), static_cast<std::streamsize>(name.size()));
    u32(static_cast<uint32_t>(t.dim()));
    for (int64_t s : t.sizes()) {
      out.write(reinterpret_cast<const char*>(&s), 8);
    }
    out.write(static_cast<const char*>(t.data_ptr()),
              static_cast<std::streamsize>(t.nbytes()));
  }
  if (!out) {
    throw std::runtime_error("cannot write " + path);
  }
}

TensorMap read_tensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read " + path);
  }
  auto u32 = [&] {
    uint32_t v = 0;
    in.read(reinterpret_cast<char*>(&v), 4);
    return v;
  };
  char magic[4] = {};
  in.read(magic, 4);
  if (std::string(magic, 4) != "DDPT") {
    throw std::runtime_error(path + ": not a DDPT tensor file");
  }
  TensorMap tensors;
  const uint32_t count = u32();
  for (uint32_t i = 0; i < count && in; ++i) {
    std::string name(u32(), '\0');
    in.read(name.data(), static_cast<std::streamsize>(name.size()));
    std::vector<int64_t> sizes(u32());
    for (auto& s : sizes) {
      in.read(reinterpret_cast<char*>(&s), 8);
    }
    auto t = torch::empty(sizes, torch::kFloat);
    in.read(static_cast<char*>(t.data_ptr()),
            static_cast<std::streamsize>(t.nbytes()));
    tensors[name] = t;
  }
  if (!in) {
    throw std::runtime_error(path + ": truncated");
  }
  return tensors;
}

TensorMap named_parameters(torch::nn::Module& m) {
  TensorMap out;
  for (const auto& item : m.named_parameters()) {
    out[item.key()] = item.value();
  }
  return out;
}

TEST(DataParallelParity, MatchesPyTorchDistributedDataParallel) {
  // The parent writes the inputs; the workers read them from this env var.
  std::string dir;
  if (ddp_test::is_worker()) {
    dir = std::getenv("DDP_PARITY_DIR");
  } else {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "ddp_parity_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
    torch::manual_seed(42);
    ConvNet init;
    write_tensors(dir + "/init.bin", named_parameters(*init));
    for (int step = 0; step < kSteps; ++step) {
      write_tensors(dir + "/batch" + std::to_string(step) + ".bin",
                    {{"x", torch::randn({kWorld * kBatch, 3, 8, 8})},
                     {"y", torch::randn({kWorld * kBatch, 5})}});
    }
  }

  ddp_test::RankOptions options;
  options.env.emplace_back("DDP_PARITY_DIR", dir);
  ddp_test::run_ranks(
      kWorld,
      [&dir] {
        torch::manual_seed(1234 + ddp::rank()); // overwritten by the files
        ConvNet model;
        {
          torch::NoGradGuard no_grad;
          auto init = read_tensors(dir + "/init.bin");
          for (auto& item : model->named_parameters()) {
            item.value().copy_(init.at(item.key()));
          }
        }
        ddp::DistributedDataParallel model_ddp(model);
        torch::optim::SGD opt(
            model->parameters(),
            torch::optim::SGDOptions(kLr).momentum(kMomentum));
        for (int step = 0; step < kSteps; ++step) {
          auto batch =
              read_tensors(dir + "/batch" + std::to_string(step) + ".bin");
          auto x = batch.at("x").narrow(0, ddp::rank() * kBatch, kBatch);
          auto y = batch.at("y").narrow(0, ddp::rank() * kBatch, kBatch);
          opt.zero_grad();
          torch::mse_loss(model->forward(x), y).backward();
          opt.step();
        }
        write_tensors(dir + "/ours_rank" + std::to_string(ddp::rank()) + ".bin",
                      named_parameters(*model));
      },
      options);
  if (ddp_test::is_worker()) {
    return;
  }

  const char* python_env = std::getenv("DDP_TEST_PYTHON");
  const std::string python = python_env ? python_env : DDP_TEST_PYTHON;
  const std::string command =
      python + " " + DDP_TEST_SOURCE_DIR + "/parity/ddp_parity.py --dir " +
      dir + " --port " + std::to_string(ddp_test::free_port()) +
      " --world-size " + std::to_string(kWorld) + " --steps " +
      std::to_string(kSteps) + " --lr " + std::to_string(kLr) + " --momentum " +
      std::to_string(kMomentum) + " > " + dir + "/python.log 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream log_file(dir + "/python.log");
  const std::string log((std::istreambuf_iterator<char>(log_file)),
                        std::istreambuf_iterator<char>());
  ASSERT_EQ(status, 0) << command << "\n" << log;
  // The reference is the PyTorch of the LibTorch under test (1.13 or 2.x).
  const std::string version = "reference torch " +
                              std::to_string(TORCH_VERSION_MAJOR) + "." +
                              std::to_string(TORCH_VERSION_MINOR) + ".";
  EXPECT_NE(log.find(version), std::string::npos) << version << "\n" << log;

  const auto torch_final = read_tensors(dir + "/torch_final_rank0.bin");
  const auto init = read_tensors(dir + "/init.bin");
  ASSERT_EQ(torch_final.size(), 8u);
  for (int rank = 0; rank < kWorld; ++rank) {
    const auto ours =
        read_tensors(dir + "/ours_rank" + std::to_string(rank) + ".bin");
    ASSERT_EQ(ours.size(), torch_final.size());
    for (const auto& [name, expected] : torch_final) {
      ASSERT_TRUE(ours.count(name)) << name;
      const auto& got = ours.at(name);
      ASSERT_EQ(got.sizes(), expected.sizes()) << name;
      // Training moved the weights, so the comparison is not trivial.
      EXPECT_GT((expected - init.at(name)).abs().max().item<double>(), 1e-4)
          << name;
      const double diff = (got - expected).abs().max().item<double>();
      const double scale = expected.abs().max().item<double>();
      EXPECT_LE(diff, 1e-5 * scale)
          << name << " on rank " << rank << ": max difference " << diff;
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

} // namespace
