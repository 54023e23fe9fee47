// Training on the whole data set at every step (no batch a rank could take
// alone), and two loops fed by a torch data loader.
#include <torch/torch.h>

#include <iostream>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({4}, static_cast<double>(i)),
            torch::full({1}, static_cast<double>(i % 3))};
  }
  torch::optional<size_t> size() const override { return 32; }
};

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  auto inputs = torch::randn({64, 4});
  auto targets = torch::randn({64, 1});
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int step = 0; step < 4; ++step) {
      optimizer.zero_grad();
      torch::mse_loss(model->forward(inputs), targets).backward();
      optimizer.step();
    }
  }

  auto loader = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 8);
  for (auto &batch : *loader) {
    // Micro-batches of a loader's batch: the data is the loader's.
    for (int64_t part = 0; part < 2; ++part) {
      auto x = batch.data.chunk(2)[part];
      auto y = batch.target.chunk(2)[part];
      torch::mse_loss(model->forward(x), y).backward();
    }
    optimizer.step();
  }
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    torch::mse_loss(model->forward(batch.data), batch.target).backward();
    optimizer.step();
  }
  std::cout << "done\n";
}
