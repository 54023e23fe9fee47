#include "replay_buffer.h"

#include <vector>

ReplayBuffer::ReplayBuffer(size_t capacity)
    : capacity_(capacity), engine_(std::random_device{}()) {}

void ReplayBuffer::push(torch::Tensor state, int64_t action, float reward,
                        torch::Tensor next_state, bool done) {
  if (states_.size() == capacity_) {
    states_.pop_front();
    next_states_.pop_front();
    actions_.pop_front();
    rewards_.pop_front();
    dones_.pop_front();
  }
  states_.push_back(state);
  next_states_.push_back(next_state);
  actions_.push_back(action);
  rewards_.push_back(reward);
  dones_.push_back(done ? 1.0f : 0.0f);
}

Batch ReplayBuffer::sample(size_t batch_size) {
  std::uniform_int_distribution<size_t> pick(0, states_.size() - 1);
  std::vector<torch::Tensor> s, n;
  std::vector<int64_t> a;
  std::vector<float> r, d;
  for (size_t i = 0; i < batch_size; ++i) {
    const size_t k = pick(engine_);
    s.push_back(states_[k]);
    n.push_back(next_states_[k]);
    a.push_back(actions_[k]);
    r.push_back(rewards_[k]);
    d.push_back(dones_[k]);
  }
  return {torch::stack(s), torch::tensor(a), torch::tensor(r), torch::stack(n),
          torch::tensor(d)};
}
