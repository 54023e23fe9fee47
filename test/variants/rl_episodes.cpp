// R12, R13 and R6's reinforcement-learning idiom under rewrites: an agent
// on an environment of its own, exploration through a standard engine
// seeded at run time, episodes that end on `done`, an update from a replay
// memory. Every variant must share its seed (ddp::shared_seed), wrap the
// network once and join after the episode loop.
#include <torch/torch.h>

#include <cstdlib>
#include <ctime>
#include <iostream>
#include <random>
#include <vector>

struct QNetImpl : torch::nn::Module {
  QNetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(4, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(QNet);

//@{ seed
//@| a helper that returns the seed
unsigned make_seed() { return std::random_device{}(); }
//@| a static engine in a function
std::mt19937 &engine() {
  static std::mt19937 gen(std::random_device{}());
  return gen;
}
//@}

int main() {
  torch::manual_seed(0);
//@{ seed
  std::mt19937 gen(std::random_device{}());
//@| a named random_device
  std::random_device rd;
  std::mt19937 gen(rd());
//@| seed() called later
  std::random_device rd;
  std::mt19937 gen;
  gen.seed(rd());
//@| a seed_seq
  std::random_device rd;
  std::seed_seq seq{rd(), rd()};
  std::mt19937 gen(seq);
//@| a helper that returns the seed
  std::mt19937 gen(make_seed());
//@| a static engine in a function
  std::mt19937 &gen = engine();
//@| srand(time(nullptr)) and rand()
  std::srand(std::time(nullptr));
  std::mt19937 gen(static_cast<unsigned>(std::rand()));
//@}
  std::uniform_real_distribution<float> noise(-0.05f, 0.05f);
  std::uniform_real_distribution<float> coin(0.0f, 1.0f);

  QNet net;
  torch::optim::Adam optimizer(net->parameters(), 1e-3);
  std::vector<torch::Tensor> states, targets;
  int total_steps = 0;
  for (int episode = 1; episode <= 20; ++episode) {
    auto state = torch::tensor({noise(gen), noise(gen), noise(gen), noise(gen)});
    bool done = false;
    int steps = 0;
//@{ episode
    while (!done) {
//@| for (;;) with a break on done
    for (;;) {
      if (done)
        break;
//@| a do-while
    do {
//@}
      const int action = coin(gen) < 0.3f
                             ? static_cast<int>(coin(gen) * 2)
                             : net->forward(state).argmax().item<int>();
      state = state + (action == 1 ? 0.1f : -0.1f) + noise(gen);
      done = state.abs().max().item<float>() > 1.0f || ++steps == 50;
      states.push_back(state);
      targets.push_back(torch::full({2}, done ? 0.0f : 1.0f));
      ++total_steps;
//@{ update
      if (states.size() >= 16) {
//@| every 4 steps
      if (states.size() >= 16 && total_steps % 4 == 0) {
//@}
        auto loss = torch::mse_loss(net->forward(torch::stack(states)),
                                    torch::stack(targets));
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        states.clear();
        targets.clear();
      }
//@{ episode
    }
//@| for (;;) with a break on done
    }
//@| a do-while
    } while (!done);
//@}
    if (episode % 5 == 0)
      std::cout << "episode " << episode << " steps " << steps << std::endl;
  }
  return 0;
}
