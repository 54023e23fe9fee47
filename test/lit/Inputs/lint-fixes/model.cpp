// Input of lint-export-fixes.test and lint-fix.test: device code only (no
// main, no output), so every edit migrate makes is a lint fix-it.
#include <torch/torch.h>

#define TO_GPU(t) (t).cuda()

struct Net : torch::nn::Module {
  Net() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) {
    auto bias = torch::ones({2}).cuda();
    return fc->forward(x) + bias;
  }
  torch::nn::Linear fc{nullptr};
};

torch::Tensor to_gpu(torch::Tensor t) { return t.cuda(); }

torch::Tensor with_device(torch::Tensor t) {
  torch::Device device(torch::kCUDA);
  auto x = t.to(torch::kCUDA);
  auto y = torch::zeros({2}, torch::kCUDA);
  return x.cuda() + y + TO_GPU(t);
}

void place(Net &net) { net.to(torch::Device("cuda:0")); }
