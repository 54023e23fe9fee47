// Input of lint-options.test: one finding of each existing check.
#include <torch/torch.h>

int main() {
  torch::Device device(torch::kCUDA);
  auto x = torch::ones({2}).cuda();
  auto y = x.to(device);
  return y.numel() == 2 ? 0 : 1;
}
