// Input of R1.test: main with the usual parameters, other names.
#include <torch/torch.h>

#include <iostream>

int helper(int argc) { return argc; }

int main(int count, char *values[]) {
  torch::Tensor x = torch::ones({2});
  std::cerr << "args " << helper(count) << values[0] << '\n';
  return 0;
}

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
