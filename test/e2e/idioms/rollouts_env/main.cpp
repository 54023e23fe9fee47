// A pole balanced on a cart, learned by REINFORCE with a baseline: the
// environment's physics and its noise live in a small class that draws from
// a std::mt19937 the program seeds once; the policy samples its actions with
// torch::multinomial. One update per episode, the discounted returns
// normalised over the episode; every 10 episodes the mean return is printed.
// Usage: balance [episodes]
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <random>
#include <vector>

class CartPole {
public:
  explicit CartPole(std::mt19937 &rng) : rng_(rng) {}

  torch::Tensor reset() {
    std::uniform_real_distribution<float> start(-0.05f, 0.05f);
    x_ = start(rng_);
    v_ = start(rng_);
    theta_ = start(rng_);
    omega_ = start(rng_);
    return observe();
  }

  // One step of 0.02 s with a push left (0) or right (1); false once the
  // pole has fallen or the cart left the track.
  bool step(int64_t action) {
    std::normal_distribution<float> wind(0.0f, 0.02f);
    const float force = (action == 1 ? 10.0f : -10.0f) + wind(rng_);
    const float cos_t = std::cos(theta_), sin_t = std::sin(theta_);
    const float temp = (force + 0.05f * omega_ * omega_ * sin_t) / 1.1f;
    const float alpha = (9.8f * sin_t - cos_t * temp) /
                        (0.5f * (4.0f / 3.0f - 0.1f * cos_t * cos_t / 1.1f));
    const float accel = temp - 0.05f * alpha * cos_t / 1.1f;
    x_ += 0.02f * v_;
    v_ += 0.02f * accel;
    theta_ += 0.02f * omega_;
    omega_ += 0.02f * alpha;
    return std::abs(x_) < 2.4f && std::abs(theta_) < 0.21f;
  }

  torch::Tensor observe() const {
    return torch::tensor({x_, v_, theta_, omega_}).unsqueeze(0);
  }

private:
  std::mt19937 &rng_;
  float x_ = 0, v_ = 0, theta_ = 0, omega_ = 0;
};

struct PolicyImpl : torch::nn::Module {
  PolicyImpl()
      : fc1(register_module("fc1", torch::nn::Linear(4, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 2))) {}
  torch::Tensor forward(torch::Tensor x) {
    return torch::log_softmax(fc2(torch::relu(fc1(x))), -1);
  }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Policy);

int main(int argc, char *argv[]) {
  const int episodes = argc > 1 ? std::atoi(argv[1]) : 60;
  torch::manual_seed(11);
  std::mt19937 rng(2024);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  Policy policy;
  policy->to(device);
  torch::optim::Adam optimizer(policy->parameters(),
                               torch::optim::AdamOptions(1e-2));
  CartPole env(rng);
  const float gamma = 0.99f;
  double window_return = 0;
  for (int episode = 1; episode <= episodes; ++episode) {
    auto state = env.reset();
    std::vector<torch::Tensor> log_probs;
    std::vector<float> rewards;
    for (int t = 0; t < 200; ++t) {
      auto log_prob = policy->forward(state.to(device)).squeeze(0);
      const int64_t action =
          torch::multinomial(log_prob.exp(), 1).item<int64_t>();
      log_probs.push_back(log_prob[action]);
      const bool alive = env.step(action);
      rewards.push_back(1.0f);
      if (!alive)
        break;
      state = env.observe();
    }
    std::vector<float> returns(rewards.size());
    float running = 0;
    for (size_t i = rewards.size(); i-- > 0;) {
      running = rewards[i] + gamma * running;
      returns[i] = running;
    }
    auto g = torch::tensor(returns).to(device);
    g = (g - g.mean()) / (g.std(/*unbiased=*/false) + 1e-6);
    auto loss = -(torch::stack(log_probs) * g).sum();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    window_return += static_cast<double>(rewards.size());
    if (episode % 10 == 0) {
      std::cout << "episode " << episode << " mean_return " << std::fixed
                << std::setprecision(2) << window_return / 10 << std::endl;
      window_return = 0;
    }
  }
  return 0;
}
