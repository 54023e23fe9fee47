// An actor-critic agent trained offline from a replay buffer, written the
// way reinforcement-learning code often is: five networks (an actor, two
// critics, a value network and its target), each a module that builds its
// own Adam over its parameters and places itself on the device in its
// constructor, all held by value in an agent whose update() steps them. The
// target network is never stepped: it follows the value network through
// soft updates under NoGradGuard.
// Usage: rl_agent [batch]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

constexpr int64_t kStateDim = 4;

struct Actor : torch::nn::Module {
  Actor(torch::Device device)
      : fc1(register_module("fc1", torch::nn::Linear(kStateDim, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 1))),
        optimizer(parameters(), torch::optim::AdamOptions(1e-3)) {
    to(device);
  }
  torch::Tensor forward(torch::Tensor state) {
    return torch::tanh(fc2(torch::relu(fc1(state))));
  }
  torch::nn::Linear fc1, fc2;
  torch::optim::Adam optimizer;
};

struct Critic : torch::nn::Module {
  Critic(torch::Device device)
      : fc1(register_module("fc1", torch::nn::Linear(kStateDim + 1, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 1))),
        optimizer(this->parameters(), torch::optim::AdamOptions(2e-3)) {
    this->to(device);
  }
  torch::Tensor forward(torch::Tensor state, torch::Tensor action) {
    return fc2(torch::relu(fc1(torch::cat({state, action}, 1))));
  }
  torch::nn::Linear fc1, fc2;
  torch::optim::Adam optimizer;
};

struct ValueNetwork : torch::nn::Module {
  ValueNetwork(torch::Device device)
      : fc1(register_module("fc1", torch::nn::Linear(kStateDim, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 1))),
        optimizer(parameters(), torch::optim::AdamOptions(2e-3)) {
    to(device);
  }
  torch::Tensor forward(torch::Tensor state) {
    return fc2(torch::relu(fc1(state)));
  }
  torch::nn::Linear fc1, fc2;
  torch::optim::Adam optimizer;
};

struct Losses {
  double value = 0, critic = 0, actor = 0;
};

class Agent {
public:
  explicit Agent(torch::Device device)
      : actor_(device), critic1_(device), critic2_(device), value_(device),
        target_value_(device) {
    soft_update(1.0);
  }

  Losses update(const torch::Tensor &states, const torch::Tensor &actions,
                const torch::Tensor &rewards, const torch::Tensor &next_states,
                const torch::Tensor &dones) {
    Losses losses;
    // The value network regresses onto the smaller critic's estimate.
    auto fresh = actor_.forward(states);
    auto q = torch::min(critic1_.forward(states, fresh),
                        critic2_.forward(states, fresh));
    auto value_target = (q - 0.1 * fresh.pow(2)).detach();
    auto value_loss = torch::mse_loss(value_.forward(states), value_target);
    value_.optimizer.zero_grad();
    value_loss.backward();
    value_.optimizer.step();
    losses.value = value_loss.item<double>();

    // Both critics regress onto the target network's bootstrap.
    torch::Tensor q_target;
    {
      torch::NoGradGuard no_grad;
      q_target = rewards + 0.9 * (1 - dones) * target_value_.forward(next_states);
    }
    losses.critic = (fit(critic1_, states, actions, q_target) +
                     fit(critic2_, states, actions, q_target)) /
                    2;

    // The actor climbs the first critic.
    auto chosen = actor_.forward(states);
    auto actor_loss =
        -critic1_.forward(states, chosen).mean() + 0.1 * chosen.pow(2).mean();
    actor_.optimizer.zero_grad();
    actor_loss.backward();
    actor_.optimizer.step();
    losses.actor = actor_loss.item<double>();

    soft_update(0.05);
    return losses;
  }

  double mean_value(const torch::Tensor &states) {
    torch::NoGradGuard no_grad;
    return target_value_.forward(states).mean().item<double>();
  }

private:
  static double fit(Critic &critic, const torch::Tensor &states,
                    const torch::Tensor &actions, const torch::Tensor &q_target) {
    auto loss = torch::mse_loss(critic.forward(states, actions), q_target);
    critic.optimizer.zero_grad();
    loss.backward();
    critic.optimizer.step();
    return loss.item<double>();
  }

  // target <- tau * value + (1 - tau) * target
  void soft_update(double tau) {
    torch::NoGradGuard no_grad;
    auto source = value_.parameters();
    auto target = target_value_.parameters();
    for (size_t i = 0; i < source.size(); ++i)
      target[i].copy_(tau * source[i] + (1 - tau) * target[i]);
  }

  Actor actor_;
  Critic critic1_, critic2_;
  ValueNetwork value_, target_value_;
};

int main(int argc, char **argv) {
  const int64_t batch = argc > 1 ? std::atol(argv[1]) : 16;
  torch::manual_seed(7);
  torch::Device device =
      torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  // A replay buffer of 256 transitions of a made-up system, computed from
  // their index (no randomness): reward for keeping the state's first
  // coordinate near the action.
  const int64_t size = 256;
  auto index = torch::arange(size, torch::kFloat).unsqueeze(1);
  auto states = torch::cat({torch::sin(index * 0.37), torch::cos(index * 0.21),
                            torch::sin(index * 0.05), torch::cos(index * 0.11)},
                           1)
                    .to(device);
  auto actions = torch::sin(index * 0.13).to(device);
  auto rewards =
      -(states.narrow(1, 0, 1) - actions).pow(2).to(device);
  auto next_states = torch::roll(states, -1, 0);
  auto dones = (torch::fmod(index, 32) == 31).to(torch::kFloat).to(device);

  Agent agent(device);
  const int updates = 60;
  Losses sum;
  for (int update = 1; update <= updates; ++update) {
    // Consecutive windows of the buffer, wrapping around.
    auto rows = torch::fmod(
        torch::arange(update * batch, (update + 1) * batch, torch::kLong),
        size).to(device);
    auto losses = agent.update(states.index_select(0, rows),
                               actions.index_select(0, rows),
                               rewards.index_select(0, rows),
                               next_states.index_select(0, rows),
                               dones.index_select(0, rows));
    sum.value += losses.value;
    sum.critic += losses.critic;
    sum.actor += losses.actor;
    if (update % 20 == 0) {
      std::printf("update %d value_loss %.6f critic_loss %.6f actor_loss %.6f\n",
                  update, sum.value / 20, sum.critic / 20, sum.actor / 20);
      sum = Losses();
    }
  }
  std::printf("final mean_target_value %.6f\n", agent.mean_value(states));
}
