// A network that builds its optimizer in a method, not its constructor:
// ddpify cannot tell where its instances are ready to wrap.
#include <torch/torch.h>

#include <memory>

struct Policy : torch::nn::Module {
  Policy() { fc = register_module("fc", torch::nn::Linear(4, 1)); }
  void build_optimizer() {
    optimizer = std::make_unique<torch::optim::Adam>(parameters());
  }
  torch::nn::Linear fc{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer;
};

int main() {
  Policy policy;
  policy.build_optimizer();
  policy.optimizer->step();
}
