// Input of R13.test: an epsilon-greedy agent with a default member
// initialiser seeding its engine, and srand in its constructor.
#pragma once

#include <torch/torch.h>

#include <cstdlib>
#include <ctime>
#include <random>

struct QNetImpl : torch::nn::Module {
  QNetImpl() : fc1(register_module("fc1", torch::nn::Linear(4, 32))),
               fc2(register_module("fc2", torch::nn::Linear(32, 2))) {}
  torch::Tensor forward(torch::Tensor x) {
    return fc2->forward(torch::relu(fc1->forward(x)));
  }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(QNet);

class Agent {
public:
  Agent() { srand(static_cast<unsigned int>(time(nullptr))); }
  int act(const std::vector<float> &state, QNet &net) {
    if (explore_(rng_) < epsilon)
      return rand() % 2;
    auto q = net->forward(torch::tensor(state).unsqueeze(0));
    return static_cast<int>(q.argmax(1).item<int64_t>());
  }
  float epsilon = 1.0f;

private:
  std::mt19937 rng_{std::random_device{}()};
  std::uniform_real_distribution<float> explore_{0.0f, 1.0f};
};
