// A cart-pole of the program's own: the start state is drawn at every reset
// from a generator made afresh there, seeded from std::random_device.
#pragma once

#include <torch/torch.h>

struct Transition {
  torch::Tensor observation;
  float reward;
  bool done;
};

class CartPoleEnv {
public:
  torch::Tensor reset();
  Transition step(int64_t action);

private:
  torch::Tensor observe() const;
  float x_ = 0, v_ = 0, theta_ = 0, omega_ = 0;
  int steps_ = 0;
};
