// Input of lint-ddp-fixed-batch-shape.test: views spelled with the loader's
// batch size inside loops over the loader.
#include <torch/torch.h>

#include <iostream>

struct Digits : torch::data::datasets::Dataset<Digits> {
  torch::Tensor images = torch::rand({100, 1, 8, 8});
  torch::Tensor labels = torch::randint(10, {100}, torch::kLong);
  torch::data::Example<> get(size_t i) override {
    return {images[i], labels[i]};
  }
  torch::optional<size_t> size() const override { return 100; }
};

constexpr int64_t kBatch = 16;

// Handed the batch's input by the loop below: its view is the batch's.
double evaluate_batch(torch::nn::Linear &fc, const torch::Tensor &images) {
  return fc->forward(images.view({kBatch, 64})).sum().item<double>();
}

int main() {
  const int64_t batch_size = 32;
  auto fc = torch::nn::Linear(64, 10);
  torch::optim::SGD optimizer(fc->parameters(), 0.1);
  auto train_loader = torch::data::make_data_loader(
      Digits().map(torch::data::transforms::Stack<>()), batch_size);
  for (auto &batch : *train_loader) {
    auto x = batch.data.view({batch_size, -1});
    auto logits = fc->forward(x).reshape({batch_size, 10});
    auto loss = torch::cross_entropy_loss(logits, batch.target);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  auto test_loader = torch::data::make_data_loader(
      Digits().map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(50).workers(0));
  for (const auto &batch : *test_loader) {
    auto x = batch.data.view({50, 64});
    auto probs = fc->forward(x).softmax(1);
    auto mask = torch::ones({1, 10}).expand({50, 10});
    // Negatives: 64 is not the batch size, nor is 50 in a later dimension,
    // a view that is already right, NOLINT.
    auto y = batch.data.view({-1, 64});
    auto z = probs.view({10, 50 / 10, -1});
    auto w = batch.data.view({batch.data.size(0), 64});
    auto v = batch.data.view({50, 64}); // NOLINT(ddp-fixed-batch-shape)
    std::cout << (probs * mask).sum().item<float>() << y.size(0) << z.size(0)
              << w.size(0) << v.size(0) << '\n';
  }
  // A lambda and a helper the loop hands the batch's input.
  auto train_step = [&](torch::Tensor data, torch::Tensor target) {
    optimizer.zero_grad();
    auto loss = torch::cross_entropy_loss(
        fc->forward(data.view({kBatch, 64})), target);
    loss.backward();
    optimizer.step();
    return loss.item<double>();
  };
  auto small_loader = torch::data::make_data_loader(
      Digits().map(torch::data::transforms::Stack<>()), kBatch);
  double total = 0;
  for (auto &[images, labels] : *small_loader) {
    total += train_step(images, labels);
    total += evaluate_batch(fc, images);
  }
  std::cout << total << '\n';
}
