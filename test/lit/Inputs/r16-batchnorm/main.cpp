// A policy with BatchNorm: SyncBatchNorm makes each forward pass a
// collective, so its rollouts cannot differ per rank.
#include <torch/torch.h>

struct Policy : torch::nn::Module {
  Policy() {
    fc = register_module("fc", torch::nn::Linear(4, 2));
    norm = register_module("norm", torch::nn::BatchNorm1d(2));
  }
  torch::Tensor forward(torch::Tensor x) { return norm(fc(x)); }
  torch::nn::Linear fc{nullptr};
  torch::nn::BatchNorm1d norm{nullptr};
};

int main() {
  auto policy = std::make_shared<Policy>();
  torch::optim::SGD optimizer(policy->parameters(), 0.01);
  for (int episode = 0; episode < 20; ++episode) {
    auto states = torch::randn({8, 4});
    auto probs = torch::softmax(policy->forward(states), -1);
    auto actions = torch::multinomial(probs, 1);
    auto loss = -torch::log(probs.gather(1, actions)).mean();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
}
