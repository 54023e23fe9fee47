// Input of R13.test: the environment's unit trains nothing; its seeds are
// drawn at every reset and at the first step, the same on every rank.
#include "env.h"

#include <chrono>
#include <cstdlib>
#include <ctime>

CartPole::CartPole() : state_(4, 0.0f) {
  srand((unsigned)time(NULL));
}

std::vector<float> CartPole::reset() {
  // A generator made afresh at every reset, seeded from a named device.
  std::random_device rd;
  std::mt19937 gen(rd());
  std::uniform_real_distribution<float> start(-0.05f, 0.05f);
  for (auto &s : state_)
    s = start(gen);
  steps_ = 0;
  return state_;
}

float sensor_noise() {
  static std::mt19937 gen(std::random_device{}());
  std::normal_distribution<float> noise(0.0f, 0.01f);
  return noise(gen);
}

std::vector<float> CartPole::step(int action, float &reward, bool &done) {
  state_[1] += (action == 1 ? 0.1f : -0.1f) + sensor_noise();
  state_[0] += state_[1];
  reward = 1.0f;
  done = ++steps_ >= 50 || state_[0] > 2.4f || state_[0] < -2.4f;
  return state_;
}
