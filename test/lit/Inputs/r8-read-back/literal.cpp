// Input of R8-read-back.test: every checkpoint write names a literal.
#include <torch/torch.h>

int main() {
  torch::nn::Linear model(2, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  optimizer.zero_grad();
  model->forward(torch::ones({1, 2})).sum().backward();
  optimizer.step();
  torch::save(model, "final.pt");
  torch::nn::Linear restored(2, 1);
  torch::load(restored, "pretrained.pt");
  torch::load(restored, "final.pt");
  return 0;
}
