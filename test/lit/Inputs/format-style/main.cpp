#include <torch/torch.h>

#include <cstdio>

int main() {
  // Not touched by any edit: stays as written, whatever the style.
  int   untouched   =   1 ;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::printf("epoch %d of a long training run, loss %.6f, accuracy %.6f\n", epoch, 0.5, 0.25);
  }
  auto t = torch::ones({2}).cuda();
  return untouched + static_cast<int>(t.size(0));
}

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
