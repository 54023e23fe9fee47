// Optimizers owned by modules whose parameters ddpify cannot trace: built in
// a default member initialiser, and from parameters handed in.
#include <torch/torch.h>

#include <vector>

struct Learner : torch::nn::Module {
  torch::nn::Linear fc{register_module("fc", torch::nn::Linear(4, 1))};
  torch::optim::SGD optimizer{parameters(), 0.1};
};

struct Head : torch::nn::Module {
  explicit Head(std::vector<torch::Tensor> params) : optimizer(params, 0.1) {}
  torch::optim::SGD optimizer;
};

int main() {
  Learner learner;
  learner.optimizer.step();
  torch::nn::Linear body(4, 4);
  Head head(body->parameters());
  head.optimizer.step();
}
