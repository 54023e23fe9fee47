// Input of R13.test: the replay buffer's unit, no training in it.
#include "replay_buffer.h"

#include <algorithm>
#include <chrono>
#include <numeric>

ReplayBuffer::ReplayBuffer(size_t capacity)
    : capacity_(capacity), rng_(std::random_device{}()) {}

void ReplayBuffer::push(Transition t) {
  if (items_.size() == capacity_)
    items_.erase(items_.begin());
  items_.push_back(std::move(t));
}

// A helper of sample(): a clock-seeded shuffle of the indices.
static std::vector<size_t> shuffled_indices(size_t n) {
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::default_random_engine engine(
      std::chrono::system_clock::now().time_since_epoch().count());
  std::shuffle(idx.begin(), idx.end(), engine);
  return idx;
}

std::vector<Transition> ReplayBuffer::sample(size_t n) {
  std::vector<Transition> out;
  std::vector<size_t> idx = shuffled_indices(items_.size());
  std::uniform_int_distribution<size_t> pick(0, items_.size() - 1);
  for (size_t i = 0; i < n; ++i)
    out.push_back(items_[i < idx.size() ? idx[i] : pick(rng_)]);
  return out;
}
