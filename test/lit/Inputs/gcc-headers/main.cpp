// Input of gcc-headers.test: a header that only the database's compiler
// (a g++) has in its include folders.
#include <torch/torch.h>

#include <gcc_only.h>

int main() {
  torch::nn::Linear model(2, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::Tensor x = torch::ones({2, 2}).cuda();
  return gcc_only_value() + static_cast<int>(x.size(0)) == 2 ? 0 : 1;
}
