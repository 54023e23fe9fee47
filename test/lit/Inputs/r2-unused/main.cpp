// Input of R2-unused-locals.test: device choices through locals that only
// the choice reads, in a program built with -Wall -Werror.
#include <torch/torch.h>

#include <iostream>

int main() {
  // A named availability flag read by the ternary alone.
  auto cuda_available = torch::cuda::is_available();
  torch::Device device(cuda_available ? torch::kCUDA : torch::kCPU);

  // The DeviceType chosen by an if/else, as LibTorch's MNIST example does.
  torch::DeviceType device_type;
  if (torch::cuda::is_available()) {
    device_type = torch::kCUDA;
  } else {
    device_type = torch::kCPU;
  }
  torch::Device other(device_type);

  // A flag also printed: still read, nothing added.
  const bool has_cuda = torch::cuda::is_available();
  torch::Device third(has_cuda ? torch::kCUDA : torch::kCPU);
  torch::nn::Linear model(4, 1);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  optimizer.zero_grad();
  model->forward(torch::ones({2, 4}, other)).sum().backward();
  optimizer.step();
  std::cout << has_cuda << third << '\n';
}
