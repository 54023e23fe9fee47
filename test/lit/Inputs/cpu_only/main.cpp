// CPU-only code and code already on the process's device: nothing to flag.
#include <torch/torch.h>

#include <iostream>

int main() {
  torch::Device device(torch::kCPU);
  torch::nn::Linear model(4, 2);
  model->to(device);
  auto x = torch::rand({8, 4}).to(device);
  auto y = torch::zeros({8, 2}, torch::TensorOptions().device(torch::kCPU));
  std::cout << "use x.cuda() or torch::kCUDA on a GPU\n";
  std::cout << (model->forward(x) + y).sum().item<float>() << '\n';
  return 0;
}
