#include "cartpole.h"

#include <cmath>
#include <random>

torch::Tensor CartPoleEnv::reset() {
  std::random_device rd;
  std::mt19937 gen(rd());
  std::uniform_real_distribution<float> start(-0.05f, 0.05f);
  x_ = start(gen);
  v_ = start(gen);
  theta_ = start(gen);
  omega_ = start(gen);
  steps_ = 0;
  return observe();
}

Transition CartPoleEnv::step(int64_t action) {
  const float force = action == 1 ? 10.0f : -10.0f;
  const float cos_t = std::cos(theta_), sin_t = std::sin(theta_);
  const float temp = (force + 0.05f * omega_ * omega_ * sin_t) / 1.1f;
  const float alpha = (9.8f * sin_t - cos_t * temp) /
                      (0.5f * (4.0f / 3.0f - 0.1f * cos_t * cos_t / 1.1f));
  const float accel = temp - 0.05f * alpha * cos_t / 1.1f;
  x_ += 0.02f * v_;
  v_ += 0.02f * accel;
  theta_ += 0.02f * omega_;
  omega_ += 0.02f * alpha;
  ++steps_;
  const bool fallen = std::abs(x_) > 2.4f || std::abs(theta_) > 0.21f;
  return {observe(), fallen ? 0.0f : 1.0f, fallen || steps_ >= 100};
}

torch::Tensor CartPoleEnv::observe() const {
  return torch::tensor({x_, v_, theta_, omega_});
}
