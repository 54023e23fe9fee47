// A double DQN on a cart-pole of its own: std::srand(std::time(nullptr)) for
// the epsilon-greedy exploration through rand(), a replay buffer in its own
// translation unit, one update after every environment step once the buffer
// holds a batch, the target network copied from the online one every 50
// updates, episodes that end on `done`. Every 10 episodes the mean return.
// Usage: dqn [batch] [episodes]
#include "cartpole.h"
#include "replay_buffer.h"

#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <iostream>

struct QNetImpl : torch::nn::Module {
  QNetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(4, 64))),
        fc2(register_module("fc2", torch::nn::Linear(64, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(QNet);

void copy_parameters(QNet &from, QNet &to) {
  torch::NoGradGuard no_grad;
  auto source = from->parameters();
  auto target = to->parameters();
  for (size_t i = 0; i < source.size(); ++i)
    target[i].copy_(source[i]);
}

int main(int argc, char **argv) {
  const size_t batch_size = argc > 1 ? std::atoi(argv[1]) : 32;
  const int episodes = argc > 2 ? std::atoi(argv[2]) : 30;
  std::srand(std::time(nullptr));
  torch::manual_seed(3);
  torch::Device device = torch::kCUDA;
  if (!torch::cuda::is_available())
    device = torch::kCPU;

  QNet online, target;
  online->to(device);
  target->to(device);
  copy_parameters(online, target);
  torch::optim::Adam optimizer(online->parameters(), 1e-3);
  ReplayBuffer buffer(5000);
  CartPoleEnv env;

  double epsilon = 1.0, window = 0;
  int updates = 0;
  for (int episode = 1; episode <= episodes; ++episode) {
    auto state = env.reset();
    bool done = false;
    float total = 0;
    while (!done) {
      int64_t action;
      if (static_cast<double>(std::rand()) / RAND_MAX < epsilon) {
        action = std::rand() % 2;
      } else {
        torch::NoGradGuard no_grad;
        action = online->forward(state.unsqueeze(0).to(device))
                     .argmax(1)
                     .item<int64_t>();
      }
      auto result = env.step(action);
      buffer.push(state, action, result.reward, result.observation,
                  result.done);
      state = result.observation;
      total += result.reward;
      done = result.done;
      if (buffer.size() < batch_size)
        continue;

      Batch batch = buffer.sample(batch_size);
      auto states = batch.states.to(device);
      auto next_states = batch.next_states.to(device);
      auto q = online->forward(states)
                   .gather(1, batch.actions.to(device).unsqueeze(1))
                   .squeeze(1);
      torch::Tensor expected;
      {
        torch::NoGradGuard no_grad;
        auto best = online->forward(next_states).argmax(1, true);
        auto next_q = target->forward(next_states).gather(1, best).squeeze(1);
        expected = batch.rewards.to(device) +
                   0.99 * next_q * (1 - batch.dones.to(device));
      }
      auto loss = torch::smooth_l1_loss(q, expected);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      if (++updates % 50 == 0)
        copy_parameters(online, target);
    }
    epsilon = std::max(0.05, epsilon * 0.9);
    window += total;
    if (episode % 10 == 0) {
      std::cout << "episode " << episode << " mean_return " << std::fixed
                << std::setprecision(2) << window / 10 << std::endl;
      window = 0;
    }
  }
  return 0;
}
