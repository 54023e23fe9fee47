#include <torch/torch.h>

int main() { return torch::ones({2}).cuda().defined() ? 0 : 1; }

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
