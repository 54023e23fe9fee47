// Input of R13.test: a unit with no training; whether a seed is drawn per
// batch is known from main's unit.
#include "augment.h"

#include <cstdlib>
#include <ctime>
#include <random>

torch::Tensor augment(const torch::Tensor &x) {
  std::mt19937 gen(std::random_device{}());
  std::normal_distribution<float> noise(0.0f, 0.01f);
  return x + noise(gen);
}

std::vector<float> noise_table(size_t n) {
  srand(time(0));
  std::vector<float> v(n);
  for (auto &e : v)
    e = static_cast<float>(rand()) / static_cast<float>(RAND_MAX);
  return v;
}
