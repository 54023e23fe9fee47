// Rollouts whose training step is an agent's method and whose noise comes
// from engines local to other functions.
#include <torch/torch.h>

#include <random>

struct Net : torch::nn::Module {
  Net() : fc(register_module("fc", torch::nn::Linear(3, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};

class Agent {
public:
  Agent() : optimizer_(net_.parameters(), 1e-3) {}
  torch::Tensor act(torch::Tensor state) {
    torch::NoGradGuard no_grad;
    return net_.forward(state) + torch::randn({1});
  }
  void update(torch::Tensor states, torch::Tensor targets) {
    auto loss = torch::mse_loss(net_.forward(states), targets);
    optimizer_.zero_grad();
    loss.backward();
    optimizer_.step();
  }

private:
  Net net_;
  torch::optim::Adam optimizer_;
};

float wind() {
  static std::mt19937 gusts(std::random_device{}());
  std::normal_distribution<float> strength(0.0f, 0.1f);
  return strength(gusts);
}

float friction() {
  static std::mt19937 surface(77);
  std::uniform_real_distribution<float> grip(0.9f, 1.0f);
  return grip(surface);
}

int main() {
  torch::manual_seed(3);
  Agent agent;
  for (int episode = 0; episode < 5; ++episode) {
    auto state = torch::zeros({1, 3});
    for (int t = 0; t < 20; ++t) {
      auto action = agent.act(state);
      state = state * friction() + action.item<float>() + wind();
      agent.update(state, torch::zeros({1, 1}));
    }
  }
  return 0;
}
