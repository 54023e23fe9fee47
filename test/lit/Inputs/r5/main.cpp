// Input of R5.test: BatchNorm layers written the usual ways.
#include <torch/torch.h>

#include <typeinfo>
#include <vector>

#define MAKE_BN(c) torch::nn::BatchNorm1d(c)

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(int64_t channels)
      : bn2(torch::nn::BatchNorm2dOptions(channels).momentum(0.2)) {
    conv = register_module("conv", torch::nn::Conv2d(channels, channels, 3));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(channels));
    register_module("bn2", bn2);
  }
  torch::Tensor forward(torch::Tensor x) { return bn2(bn1(conv(x))); }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::BatchNorm2d bn2;
};
TORCH_MODULE(Block);

using namespace torch::nn;

int main() {
  Block block(4);
  torch::nn::Sequential features(torch::nn::Conv2d(3, 4, 3),
                                 torch::nn::BatchNorm2d(4), torch::nn::ReLU());
  torch::nn::Sequential head;
  head->push_back(torch::nn::Linear(4, 8));
  head->push_back(BatchNorm1d(8));
  head->push_back(MAKE_BN(8));
  torch::nn::BatchNorm3d volume(torch::nn::BatchNorm3dOptions(2));
  auto local = torch::nn::BatchNorm1d{3};
  std::vector<torch::nn::BatchNorm2d> layers{torch::nn::BatchNorm2d(2)};
  // Negatives: as<>() checks, the Impl and Options types, typeid.
  for (auto &module : features->modules(/*include_self=*/false))
    if (auto *bn = module->as<torch::nn::BatchNorm2d>())
      bn->reset_running_stats();
  std::shared_ptr<torch::nn::BatchNorm2dImpl> impl = block->bn1.ptr();
  torch::nn::BatchNorm2dOptions options(4);
  bool same = typeid(*block->bn1) == typeid(torch::nn::BatchNorm2dImpl);
  return same && impl && volume && local && layers.size() == 1 ? 0 : 1;
}

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
