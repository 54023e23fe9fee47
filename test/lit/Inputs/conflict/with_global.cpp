#include <torch/torch.h>

torch::Device gpu(torch::kCUDA);

#include "helper.h"

int main() { return place(torch::ones({1})).defined() ? 0 : 1; }

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
