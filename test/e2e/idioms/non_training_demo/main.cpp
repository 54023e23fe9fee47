// A tour of tensors and autograd: no model is trained, nothing to distribute.
#include <torch/torch.h>

#include <iomanip>
#include <iostream>

int main() {
  torch::manual_seed(0);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  std::cout << std::fixed << std::setprecision(4);

  // Tensor basics.
  auto a = torch::arange(6, torch::kFloat).reshape({2, 3}).to(device);
  auto b = torch::ones({3, 2}, device);
  std::cout << "a @ b =\n" << a.matmul(b) << '\n';
  std::cout << "sum " << a.sum().item<float>() << " mean "
            << a.mean().item<float>() << '\n';

  // Gradients of a scalar function.
  auto x = torch::tensor({1.0, 2.0, 3.0}, torch::requires_grad());
  auto y = (x * x).sum() + (3 * x).prod();
  y.backward();
  std::cout << "dy/dx " << x.grad() << '\n';

  // A Linear layer's gradient, computed but never applied.
  torch::nn::Linear layer(3, 1);
  layer->to(device);
  auto input = torch::randn({4, 3}, device);
  auto out = layer->forward(input).pow(2).mean();
  out.backward();
  std::cout << "weight grad norm " << layer->weight.grad().norm().item<float>()
            << '\n';

  // Results kept for later inspection.
  torch::save(x.grad(), "grad.pt");
  printf("saved grad.pt\n");
  return 0;
}
