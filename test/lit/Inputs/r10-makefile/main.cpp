// R10-makefile.test: a single-GPU program built by a plain Makefile.
#include <torch/torch.h>

#include <cstdio>

int main() {
  torch::manual_seed(0);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  torch::nn::Linear model(4, 1);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto x = torch::randn({16, 4}, device), y = x.sum(1, true);
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
  std::printf("trained\n");
}
