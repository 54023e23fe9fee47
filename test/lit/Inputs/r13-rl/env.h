// Input of R13.test: a cart-pole of the program's own, in its own unit.
#pragma once

#include <random>
#include <vector>

class CartPole {
public:
  CartPole();
  std::vector<float> reset();
  std::vector<float> step(int action, float &reward, bool &done);

private:
  std::vector<float> state_;
  int steps_ = 0;
};

// Sensor noise, from a generator made once, at the first call.
float sensor_noise();
