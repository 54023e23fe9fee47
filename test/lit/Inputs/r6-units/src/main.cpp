#include "net.h"

// Members built in-class with their optimizer, no constructor: the
// parameters reaching the optimizer are placed and wrapped there.
struct Regressor {
  torch::nn::Linear net{4, 1};
  torch::optim::Adam opt{net->parameters(), torch::optim::AdamOptions(1e-3)};
};

// A device member initialised before the optimizer is the device used; one
// declared after it is not yet built there.
struct OnDevice {
  torch::Device device{torch::kCPU};
  Net net;
  torch::optim::SGD opt{net->parameters(), 0.1};
  torch::Device late{torch::kCPU};
};

int main() {
  torch::Device device(torch::kCUDA);
  // Placed by a function of another unit, trained here.
  Net net;
  place(net, device);
  torch::optim::Adam opt(net->parameters(), 1e-3);
  for (int i = 0; i < 4; ++i) {
    opt.zero_grad();
    auto loss = net->forward(torch::ones({2, 4}).to(device)).sum();
    loss.backward();
    opt.step();
  }
  // Placed here, trained by a function of another unit.
  Net other;
  other->to(device);
  train_epoch(other, device);
  Regressor r;
  OnDevice d;
  for (Regressor *each : {&r}) {
    each->opt.zero_grad();
    each->net->forward(torch::ones({2, 4})).sum().backward();
    each->opt.step();
  }
  d.opt.zero_grad();
  d.net->forward(torch::ones({2, 4})).sum().backward();
  d.opt.step();
}
