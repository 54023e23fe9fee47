// C++20's abbreviated function template, which g++ accepts at -std=c++17
// (with a warning) and clang does not.
#include <torch/torch.h>

void train(auto &model, torch::Device device) {
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = model->forward(torch::ones({8, 4}, device)).sum();
    loss.backward();
    optimizer.step();
  }
}

int main() {
  torch::nn::Linear net(4, 2);
  train(net, torch::Device(torch::kCPU));
}
