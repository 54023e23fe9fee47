// A soft actor-critic on a pendulum of its own, drawing only from torch's
// generator (seeded once, the same on every run). Five networks (an actor,
// two critics, a value network and its target), each owning its Adam, held
// by value in the agent; the temperature is a bare tensor, log_alpha, with an
// Adam of its own. Each update runs the critics' forward twice before their
// backward, the actor's loss reaches the critics' parameters and is
// back-propagated with the graph retained, and the target follows the value
// network by soft updates under NoGradGuard. One update per environment step
// once the buffer holds a batch; the mean return of every episode is printed.
// Usage: sac [batch] [episodes]
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <vector>

constexpr int64_t kStateDim = 3;

struct Actor : torch::nn::Module {
  Actor()
      : fc1(register_module("fc1", torch::nn::Linear(kStateDim, 32))),
        mean(register_module("mean", torch::nn::Linear(32, 1))),
        log_std(register_module("log_std", torch::nn::Linear(32, 1))),
        optimizer(parameters(), torch::optim::AdamOptions(1e-3)) {}

  // A squashed Gaussian action in [-2, 2] and its log-probability.
  std::tuple<torch::Tensor, torch::Tensor> sample(torch::Tensor state) {
    auto h = torch::relu(fc1(state));
    auto mu = mean(h);
    auto std = log_std(h).clamp(-5, 1).exp();
    auto u = mu + std * torch::randn_like(mu);
    auto action = torch::tanh(u);
    auto log_prob =
        (-0.5 * ((u - mu) / std).pow(2) - std.log() - 0.5 * std::log(2 * M_PI) -
         torch::log(1 - action.pow(2) + 1e-6))
            .sum(1, true);
    return {2 * action, log_prob};
  }

  torch::nn::Linear fc1, mean, log_std;
  torch::optim::Adam optimizer;
};

struct Critic : torch::nn::Module {
  Critic()
      : fc1(register_module("fc1", torch::nn::Linear(kStateDim + 1, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 1))),
        optimizer(parameters(), torch::optim::AdamOptions(2e-3)) {}
  torch::Tensor forward(torch::Tensor state, torch::Tensor action) {
    return fc2(torch::relu(fc1(torch::cat({state, action}, 1))));
  }
  torch::nn::Linear fc1, fc2;
  torch::optim::Adam optimizer;
};

struct Value : torch::nn::Module {
  Value()
      : fc1(register_module("fc1", torch::nn::Linear(kStateDim, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 1))),
        optimizer(parameters(), torch::optim::AdamOptions(2e-3)) {}
  torch::Tensor forward(torch::Tensor state) {
    return fc2(torch::relu(fc1(state)));
  }
  torch::nn::Linear fc1, fc2;
  torch::optim::Adam optimizer;
};

class Pendulum {
public:
  torch::Tensor reset() {
    theta_ = (torch::rand({1}).item<float>() * 2 - 1) * M_PI;
    omega_ = torch::rand({1}).item<float>() * 2 - 1;
    return observe();
  }
  float step(float torque) {
    const float cost =
        theta_ * theta_ + 0.1f * omega_ * omega_ + 0.001f * torque * torque;
    omega_ += (3 * 10.0f / 2 * std::sin(theta_) + 3.0f * torque) * 0.05f;
    omega_ = std::max(-8.0f, std::min(8.0f, omega_));
    theta_ = std::remainder(theta_ + omega_ * 0.05f, 2 * M_PI);
    return -cost;
  }
  torch::Tensor observe() const {
    return torch::tensor({std::cos(theta_), std::sin(theta_), omega_});
  }

private:
  float theta_ = 0, omega_ = 0;
};

class Agent {
public:
  Agent(torch::Device device)
      : log_alpha_(torch::zeros({1}, torch::TensorOptions().device(device))
                       .requires_grad_()),
        alpha_optimizer_({log_alpha_}, torch::optim::AdamOptions(3e-3)),
        device_(device) {
    actor_.to(device);
    critic1_.to(device);
    critic2_.to(device);
    value_.to(device);
    target_value_.to(device);
    soft_update(1.0);
  }

  torch::Tensor act(torch::Tensor state) {
    torch::NoGradGuard no_grad;
    return std::get<0>(actor_.sample(state.unsqueeze(0).to(device_)));
  }

  double update(const torch::Tensor &states, const torch::Tensor &actions,
                const torch::Tensor &rewards,
                const torch::Tensor &next_states) {
    auto alpha = log_alpha_.exp().detach();
    auto [fresh, log_prob] = actor_.sample(states);
    auto q1_fresh = critic1_.forward(states, fresh);
    auto q2_fresh = critic2_.forward(states, fresh);
    auto q1 = critic1_.forward(states, actions);
    auto q2 = critic2_.forward(states, actions);
    auto min_q = torch::min(q1_fresh, q2_fresh);

    auto value_loss = torch::mse_loss(value_.forward(states),
                                      (min_q - alpha * log_prob).detach());
    value_.optimizer.zero_grad();
    value_loss.backward();
    value_.optimizer.step();

    auto actor_loss = (alpha * log_prob - min_q).mean();
    actor_.optimizer.zero_grad();
    actor_loss.backward({}, /*retain_graph=*/true);
    actor_.optimizer.step();

    auto alpha_loss = -(log_alpha_ * (log_prob + 1.0).detach()).mean();
    alpha_optimizer_.zero_grad();
    alpha_loss.backward();
    alpha_optimizer_.step();

    torch::Tensor q_target;
    {
      torch::NoGradGuard no_grad;
      q_target = rewards + 0.95 * target_value_.forward(next_states);
    }
    auto critic_loss =
        torch::mse_loss(q1, q_target) + torch::mse_loss(q2, q_target);
    critic1_.optimizer.zero_grad();
    critic2_.optimizer.zero_grad();
    critic_loss.backward();
    critic1_.optimizer.step();
    critic2_.optimizer.step();

    soft_update(0.02);
    return critic_loss.item<double>();
  }

  double alpha() const { return log_alpha_.exp().item<double>(); }

private:
  void soft_update(double tau) {
    torch::NoGradGuard no_grad;
    auto source = value_.parameters();
    auto target = target_value_.parameters();
    for (size_t i = 0; i < source.size(); ++i)
      target[i].mul_(1 - tau).add_(source[i], tau);
  }

  Actor actor_;
  Critic critic1_, critic2_;
  Value value_, target_value_;
  torch::Tensor log_alpha_;
  torch::optim::Adam alpha_optimizer_;
  torch::Device device_;
};

int main(int argc, char *argv[]) {
  const int64_t batch_size = argc > 1 ? std::atoll(argv[1]) : 32;
  const int episodes = argc > 2 ? std::atoi(argv[2]) : 6;
  torch::manual_seed(7);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  Agent agent(device);
  Pendulum env;
  std::vector<torch::Tensor> states, actions, rewards, next_states;
  for (int episode = 1; episode <= episodes; ++episode) {
    auto state = env.reset();
    double episode_return = 0, critic_loss = 0;
    int updates = 0;
    for (int t = 0; t < 40; ++t) {
      auto action = agent.act(state).cpu().view({1});
      const float reward = env.step(action.item<float>());
      auto next_state = env.observe();
      states.push_back(state);
      actions.push_back(action);
      rewards.push_back(torch::tensor({reward}));
      next_states.push_back(next_state);
      state = next_state;
      episode_return += reward;
      if (static_cast<int64_t>(states.size()) < batch_size)
        continue;
      auto pick = torch::randint(static_cast<int64_t>(states.size()),
                                 {batch_size}, torch::kLong);
      auto stacked = [&](std::vector<torch::Tensor> &items) {
        return torch::stack(items).index_select(0, pick).to(device);
      };
      critic_loss += agent.update(stacked(states), stacked(actions),
                                  stacked(rewards), stacked(next_states));
      ++updates;
    }
    std::printf("episode %d return %.4f critic_loss %.6f alpha %.6f\n", episode,
                episode_return, updates ? critic_loss / updates : 0.0,
                agent.alpha());
  }
  return 0;
}
