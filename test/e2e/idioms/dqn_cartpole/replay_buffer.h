// A replay buffer whose sampling engine is seeded in the constructor's
// member initialiser, in a translation unit that trains nothing.
#pragma once

#include <torch/torch.h>

#include <deque>
#include <random>

struct Batch {
  torch::Tensor states, actions, rewards, next_states, dones;
};

class ReplayBuffer {
public:
  explicit ReplayBuffer(size_t capacity);
  void push(torch::Tensor state, int64_t action, float reward,
            torch::Tensor next_state, bool done);
  Batch sample(size_t batch_size);
  size_t size() const { return states_.size(); }

private:
  size_t capacity_;
  std::mt19937 engine_;
  std::deque<torch::Tensor> states_, next_states_;
  std::deque<int64_t> actions_;
  std::deque<float> rewards_, dones_;
};
