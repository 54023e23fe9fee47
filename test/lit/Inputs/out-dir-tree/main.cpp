// Input of out-dir-tree.test: one file to migrate in a tree of other things.
#include <torch/torch.h>

int main() {
  torch::nn::Linear model(3, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::Tensor x = torch::ones({2, 3}).cuda();
  optimizer.zero_grad();
  model->forward(x).sum().backward();
  optimizer.step();
  return 0;
}
