// Input of R11-unsharded.test: a test loader built without make_data_loader
// (R4 does not shard it), next to a sharded one.
#include <torch/torch.h>

#include <iostream>
#include <memory>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::Tensor x = torch::randn({100, 4}), y = torch::randint(2, {100});
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return 100; }
};
using Stacked =
    torch::data::datasets::MapDataset<Points, torch::data::transforms::Stack<>>;
using Sequential = torch::data::samplers::SequentialSampler;

int main() {
  auto fc = torch::nn::Linear(4, 2);
  torch::optim::SGD opt(fc->parameters(), 0.1);
  auto train = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 10);
  auto test = std::make_unique<
      torch::data::StatelessDataLoader<Stacked, Sequential>>(
      Points().map(torch::data::transforms::Stack<>()), Sequential(100),
      torch::data::DataLoaderOptions(10));
  torch::data::StatelessDataLoader<Stacked, Sequential> direct(
      Points().map(torch::data::transforms::Stack<>()), Sequential(100),
      torch::data::DataLoaderOptions(10));
  double train_loss = 0;
  for (auto &b : *train) {
    opt.zero_grad();
    auto loss = torch::cross_entropy_loss(fc->forward(b.data), b.target);
    loss.backward();
    opt.step();
    train_loss += loss.item<double>();
  }
  int64_t correct = 0, seen = 0;
  for (auto &b : *test)
    correct += fc->forward(b.data).argmax(1).eq(b.target).sum().item<int64_t>();
  for (auto &b : direct)
    seen += b.data.size(0);
  std::cout << "train_loss " << train_loss << " correct " << correct
            << " seen " << seen << '\n';
}
