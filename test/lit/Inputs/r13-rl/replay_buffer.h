// Input of R13.test: a replay buffer whose engine is seeded in its
// constructor, in its own unit.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

struct Transition {
  std::vector<float> state, next;
  int action;
  float reward;
  bool done;
};

class ReplayBuffer {
public:
  explicit ReplayBuffer(size_t capacity);
  void push(Transition t);
  std::vector<Transition> sample(size_t n);
  size_t size() const { return items_.size(); }

private:
  size_t capacity_;
  std::vector<Transition> items_;
  std::mt19937 rng_;
};
