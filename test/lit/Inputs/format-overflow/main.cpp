// Input of format-style.test: edits that push lines past 80 columns or move
// text the next line is aligned to (the default --format-style, overflow).
#include <torch/torch.h>

#include <iomanip>
#include <iostream>

int main(int argc, char** argv) {
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  std::cout << std::fixed << std::setprecision(3);
  for (int epoch = 0; epoch < 2; ++epoch)
    std::cout << "epoch " << epoch << " of the run, on " << device << '\n';
  std::cout << "done after two epochs of a short run" << '\n';
  int   untouched   =   argc ;
  return untouched > 0 && argv ? 0 : 1;
}

void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
