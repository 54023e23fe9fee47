// A DQN in one file on a corridor world: the agent starts at a random cell
// and walks left or right to the goal at the right end; a slip moves it the
// other way. The explorer's generator is seeded from a named
// std::random_device; the slips come from a static engine inside the step
// function. The episode loop breaks on `done`; one update every 4 steps once
// the memory holds a batch. Two optimizers over disjoint parts of the
// network: Adam over the body (fc1 and fc2), SGD over the head.
// Usage: grid_dqn [batch] [episodes]
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <random>
#include <vector>

constexpr int kCells = 8;

struct Network : torch::nn::Module {
  Network()
      : fc1(register_module("fc1", torch::nn::Linear(kCells, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 32))),
        head(register_module("head", torch::nn::Linear(32, 2))) {}
  torch::Tensor forward(torch::Tensor x) {
    return head(torch::relu(fc2(torch::relu(fc1(x)))));
  }
  torch::nn::Linear fc1, fc2, head;
};

torch::Tensor one_hot(int cell) {
  auto x = torch::zeros({kCells});
  x[cell] = 1;
  return x;
}

// Moves from `cell` by `action` (0 left, 1 right); one step in ten slips.
int step(int cell, int action) {
  static std::mt19937 slips(std::random_device{}());
  std::bernoulli_distribution slip(0.1);
  const int move = (action == 1) != slip(slips) ? 1 : -1;
  return std::max(0, std::min(kCells - 1, cell + move));
}

struct Memory {
  std::vector<int> cells, actions, next_cells;
  std::vector<float> rewards, dones;
};

int main(int argc, char **argv) {
  const int batch_size = argc > 1 ? std::atoi(argv[1]) : 32;
  const int episodes = argc > 2 ? std::atoi(argv[2]) : 40;
  std::random_device rd;
  std::mt19937 gen(rd());
  torch::manual_seed(5);
  auto device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  auto network = std::make_shared<Network>();
  network->to(device);
  std::vector<torch::Tensor> body = network->fc1->parameters();
  for (auto &p : network->fc2->parameters())
    body.push_back(p);
  torch::optim::Adam body_optimizer(body, torch::optim::AdamOptions(1e-3));
  torch::optim::SGD head_optimizer(network->head->parameters(),
                                   torch::optim::SGDOptions(1e-2));

  Memory memory;
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<int> start(0, kCells - 2);
  double epsilon = 1.0;
  int steps = 0, window_steps = 0, window_goals = 0;
  for (int episode = 1; episode <= episodes; ++episode) {
    int cell = start(gen);
    for (int t = 0; t < 30; ++t) {
      int action;
      if (coin(gen) < epsilon) {
        action = coin(gen) < 0.5 ? 0 : 1;
      } else {
        torch::NoGradGuard no_grad;
        action =
            network->forward(one_hot(cell).to(device)).argmax().item<int>();
      }
      const int next = step(cell, action);
      const bool done = next == kCells - 1;
      memory.cells.push_back(cell);
      memory.actions.push_back(action);
      memory.next_cells.push_back(next);
      memory.rewards.push_back(done ? 1.0f : -0.01f);
      memory.dones.push_back(done ? 1.0f : 0.0f);
      cell = next;
      ++steps;
      ++window_steps;

      if (steps % 4 == 0 &&
          static_cast<int>(memory.cells.size()) >= batch_size) {
        std::vector<torch::Tensor> s, n;
        std::vector<int64_t> a;
        std::vector<float> r, d;
        std::uniform_int_distribution<size_t> pick(0, memory.cells.size() - 1);
        for (int i = 0; i < batch_size; ++i) {
          const size_t k = pick(gen);
          s.push_back(one_hot(memory.cells[k]));
          n.push_back(one_hot(memory.next_cells[k]));
          a.push_back(memory.actions[k]);
          r.push_back(memory.rewards[k]);
          d.push_back(memory.dones[k]);
        }
        auto q = network->forward(torch::stack(s).to(device))
                     .gather(1, torch::tensor(a).to(device).unsqueeze(1))
                     .squeeze(1);
        torch::Tensor target;
        {
          torch::NoGradGuard no_grad;
          auto next_q =
              std::get<0>(network->forward(torch::stack(n).to(device)).max(1));
          target = torch::tensor(r).to(device) +
                   0.9 * next_q * (1 - torch::tensor(d).to(device));
        }
        auto loss = torch::mse_loss(q, target);
        body_optimizer.zero_grad();
        head_optimizer.zero_grad();
        loss.backward();
        body_optimizer.step();
        head_optimizer.step();
      }
      if (done) {
        ++window_goals;
        break;
      }
    }
    epsilon = std::max(0.1, epsilon - 0.05);
    if (episode % 10 == 0) {
      std::cout << "episode " << episode << " goals " << window_goals
                << " steps " << window_steps << std::endl;
      window_goals = window_steps = 0;
    }
  }
  return 0;
}
