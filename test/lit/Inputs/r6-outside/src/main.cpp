// Input of R6-outside.test: placements R6 cannot wrap safely.
#include "../lib/place.h"

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

int main() {
  torch::Device device(torch::kCPU);
  Net library_placed;
  place(library_placed, device);
  Net branch_placed;
  if (torch::cuda::is_available())
    branch_placed->to(device);
  torch::optim::SGD a(library_placed->parameters(), 0.1);
  torch::optim::SGD b(branch_placed->parameters(), 0.1);
  return 0;
}
