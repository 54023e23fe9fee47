// Input of R16-join.test: an agent on its own pole, its updates after every
// environment step, every k steps and at the end of each episode; episodes
// that end on `done`, seeds fixed in the program.
#include <torch/torch.h>

#include <memory>
#include <random>
#include <vector>

struct Pole {
  explicit Pole(std::mt19937 &gen) : gen_(gen) {}
  torch::Tensor reset() {
    std::uniform_real_distribution<float> start(-0.05f, 0.05f);
    angle = start(gen_);
    steps = 0;
    return state();
  }
  torch::Tensor state() const { return torch::full({1, 4}, angle); }
  bool step(int64_t action) {
    std::uniform_real_distribution<float> wind(-0.01f, 0.01f);
    angle += (action == 1 ? 0.01f : -0.01f) + wind(gen_);
    ++steps;
    return steps >= 200 || angle > 0.2f || angle < -0.2f;
  }
  float angle = 0;
  int steps = 0;
  std::mt19937 &gen_;
};

struct Policy : torch::nn::Module {
  Policy() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};

// An update after every environment step.
void every_step(std::shared_ptr<Policy> policy) {
  torch::optim::Adam optimizer(policy->parameters());
  std::mt19937 rng(1234);
  Pole env(rng);
  for (int episode = 0; episode < 10; ++episode) {
    auto state = env.reset();
    bool done = false;
    while (!done) {
      auto probs = torch::softmax(policy->forward(state), -1);
      auto action = torch::multinomial(probs.squeeze(0), 1);
      done = env.step(action.item<int64_t>());
      auto loss = -torch::log(probs[0][action.item<int64_t>()]);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      state = env.state();
    }
  }
}

// An update every 16 environment steps, counted across episodes.
void every_k_steps(std::shared_ptr<Policy> policy) {
  torch::optim::Adam optimizer(policy->parameters());
  std::mt19937 rng(99);
  Pole env(rng);
  std::vector<torch::Tensor> log_probs;
  int64_t total_steps = 0;
  for (int episode = 0; episode < 10; ++episode) {
    auto state = env.reset();
    for (int t = 0; t < 200; ++t) {
      auto probs = torch::softmax(policy->forward(state), -1);
      auto action = torch::multinomial(probs.squeeze(0), 1);
      log_probs.push_back(torch::log(probs[0][action.item<int64_t>()]));
      bool done = env.step(action.item<int64_t>());
      if (++total_steps % 16 == 0) {
        auto loss = -torch::stack(log_probs).sum();
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        log_probs.clear();
      }
      if (done)
        break;
      state = env.state();
    }
  }
}

// One update at the end of each episode.
void end_of_episode(std::shared_ptr<Policy> policy) {
  torch::optim::Adam optimizer(policy->parameters());
  std::mt19937 rng(7);
  Pole env(rng);
  for (int episode = 0; episode < 10; ++episode) {
    std::vector<torch::Tensor> log_probs;
    auto state = env.reset();
    bool done = false;
    while (!done) {
      auto probs = torch::softmax(policy->forward(state), -1);
      auto action = torch::multinomial(probs.squeeze(0), 1);
      log_probs.push_back(torch::log(probs[0][action.item<int64_t>()]));
      done = env.step(action.item<int64_t>());
      state = env.state();
    }
    auto loss = -torch::stack(log_probs).sum();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
}

int main() {
  torch::manual_seed(42);
  auto policy = std::make_shared<Policy>();
  every_step(policy);
  every_k_steps(policy);
  end_of_episode(policy);
  torch::save(policy, "policy.pt");
  return 0;
}
