#include "loaders.h"

int main() {
  torch::Tensor w = torch::ones({2, 2}, torch::requires_grad());
  torch::optim::SGD optimizer({w}, 0.1);
  std::unique_ptr<TrainLoader> train = make_train_loader();
  for (auto &batch : *train)
    batch.data.matmul(w).sum().backward();
}
