// Input of non-training.test: a tensor and autograd demo that trains
// nothing (a backward pass, no optimizer), with CUDA code and output that a
// training program would get rewritten.
#include <torch/torch.h>

#include <iostream>

torch::Tensor square_sum(const torch::Tensor &x) { return (x * x).sum(); }

int main() {
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  torch::Tensor a = torch::rand({2, 3}).to(device);
  torch::Tensor b = torch::ones({2, 3}, torch::requires_grad());
  auto y = square_sum(b * 2);
  y.backward();
  std::cout << "a:\n" << a << "\ngrad:\n" << b.grad() << std::endl;
  torch::nn::Linear layer(3, 1);
  torch::NoGradGuard no_grad;
  std::cout << layer->forward(a.cpu()) << '\n';
  return 0;
}
