// Input of R13.test: a DQN on its own cart-pole, in several units: the
// seeds of main, of the environment, of the replay buffer and of the agent.
#include "agent.h"
#include "env.h"
#include "replay_buffer.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <random>
#include <string>

// A seed returned by a helper: wrapped where the program seeds with it.
static unsigned make_seed() { return std::random_device{}(); }

int main(int argc, char **argv) {
  std::srand(std::time(nullptr));
  torch::manual_seed(
      std::chrono::high_resolution_clock::now().time_since_epoch().count());
  std::random_device rd;
  std::seed_seq seq{rd(), rd(), rd()};
  std::mt19937 gen(seq);
  std::mt19937 explore(make_seed());
  std::mt19937 replay_gen;
  replay_gen.seed(rd());
  std::mt19937 shuffle_gen{std::random_device()()};
  // The same on every rank: left alone.
  std::mt19937 fixed(42);
  std::mt19937 from_argv(argc > 1 ? std::stoul(argv[1]) : 7u);
  struct Config {
    unsigned seed = 1234;
  } config;
  std::mt19937 from_config(config.seed);

  CartPole env;
  ReplayBuffer buffer(1000);
  Agent agent;
  QNet net, target;
  torch::optim::Adam optimizer(net->parameters(), 1e-3);
  std::uniform_int_distribution<int> coin(0, 1);
  for (int episode = 0; episode < 20; ++episode) {
    // Drawn every episode, in the loop that trains.
    std::mt19937 episode_rng(std::random_device{}());
    auto state = env.reset();
    float total = 0.0f;
    while (true) {
      int action = coin(episode_rng) ? agent.act(state, net) : coin(gen);
      float reward = 0.0f;
      bool done = false;
      auto next = env.step(action, reward, done);
      buffer.push({state, next, action, reward, done});
      total += reward;
      state = next;
      if (buffer.size() >= 32) {
        auto batch = buffer.sample(32);
        std::vector<torch::Tensor> s, n, r, d, a;
        for (auto &t : batch) {
          s.push_back(torch::tensor(t.state));
          n.push_back(torch::tensor(t.next));
          r.push_back(torch::tensor(t.reward));
          d.push_back(torch::tensor(t.done ? 1.0f : 0.0f));
          a.push_back(torch::tensor(static_cast<int64_t>(t.action)));
        }
        auto q = net->forward(torch::stack(s))
                     .gather(1, torch::stack(a).unsqueeze(1))
                     .squeeze(1);
        auto y = torch::stack(r) +
                 0.99 * (1 - torch::stack(d)) *
                     std::get<0>(target->forward(torch::stack(n)).max(1))
                         .detach();
        auto loss = torch::mse_loss(q, y);
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
      }
      if (done)
        break;
    }
    agent.epsilon *= 0.95f;
    std::cout << "episode " << episode << " return " << total << '\n';
  }
  std::cout << explore() << replay_gen() << shuffle_gen() << fixed()
            << from_argv() << from_config() << '\n';
}
