// R11 input: validation loops over torch data loaders, with accumulators of
// several types, and the negatives around them.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <vector>

struct Net : torch::nn::Module {
  Net() : fc(register_module("fc", torch::nn::Linear(4, 3))) {}
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc;
};

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({4}, static_cast<double>(i)),
            torch::tensor(static_cast<int64_t>(i % 3))};
  }
  torch::optional<size_t> size() const override { return 30; }
};

// A template over the loader, instantiated below.
template <typename DataLoader>
double test(Net &model, DataLoader &data_loader) {
  torch::NoGradGuard no_grad;
  model.eval();
  double test_loss = 0;
  int64_t correct = 0;
  for (const auto &batch : data_loader) {
    auto output = model.forward(batch.data);
    test_loss += torch::nn::functional::cross_entropy(output, batch.target)
                     .template item<double>();
    correct += output.argmax(1).eq(batch.target).sum().template item<int64_t>();
  } // end of the test loop
  return test_loss / static_cast<double>(correct + 1);
}

// A training step in a helper: the loop calling it trains.
template <typename Batch>
void step(Net &model, torch::optim::Optimizer &optimizer, const Batch &batch) {
  optimizer.zero_grad();
  auto loss = torch::nn::functional::cross_entropy(model.forward(batch.data),
                                                   batch.target);
  loss.backward();
  optimizer.step();
}

// A member accumulator: reported.
struct Evaluator {
  int64_t correct_ = 0;
  template <typename Loader> void run(Net &model, Loader &loader) {
    for (const auto &batch : loader)
      correct_ += model.forward(batch.data).argmax(1).eq(batch.target).sum().template item<int64_t>();
  }
};

int main() {
  Net model;
  auto train_loader = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 8);
  auto test_loader = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 8);
  torch::optim::SGD optimizer(model.parameters(), 0.1);

  // A training loop (backward) with a running loss: reduced too.
  double train_loss = 0;
  for (auto &batch : *train_loader) {
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model.forward(batch.data),
                                                     batch.target);
    loss.backward();
    optimizer.step();
    train_loss += loss.item<double>();
  }
  // It trains through a helper: the count is reduced.
  int64_t steps = 0;
  for (auto &batch : *train_loader) {
    step(model, optimizer, batch);
    ++steps;
  }
  std::cout << "train loss " << train_loss / steps << '\n';

  std::cout << "test " << test(model, *test_loader) << '\n';

  {
    torch::NoGradGuard no_grad;
    const size_t dataset_size = Points().size().value();
    double loss_sum = 0;
    int64_t correct = 0;
    int batches = 0;
    float weight = 0.f;
    torch::Tensor mass = torch::zeros({3});
    size_t seen = 0;
    double last = 0;
    for (const auto &batch : *test_loader) {
      auto output = model.forward(batch.data);
      double batch_loss =
          torch::nn::functional::cross_entropy(output, batch.target)
              .item<double>();
      batch_loss += 1e-9; // a local of the loop: not a metric
      loss_sum += batch_loss * batch.data.size(0);
      correct = correct + output.argmax(1).eq(batch.target).sum().item<int64_t>();
      ++batches;
      weight += 0.5f;
      mass += output.softmax(1).sum(0);
      seen += batch.data.size(0);
      last = batch_loss;
    }
    std::printf("loss %.4f correct %lld of %zu (%zu seen), %d batches, %.1f\n",
                loss_sum / dataset_size, static_cast<long long>(correct),
                dataset_size, seen, batches, weight);
    std::cout << mass << ' ' << last << '\n';
  }

  // Reset in the epoch loop: reduced after the inner loop.
  double epoch_loss;
  for (int epoch = 0; epoch < 2; ++epoch) {
    epoch_loss = 0;
    for (const auto &batch : *test_loader)
      epoch_loss += model.forward(batch.data).sum().item<double>();
    std::cout << epoch_loss << '\n';
  }

  // Reported: a maximum.
  double best = 0;
  for (const auto &batch : *test_loader) {
    best = std::max(best, model.forward(batch.data).max().item<double>());
  }
  std::cout << best << '\n';

  // Reported: per-batch values in a vector.
  std::vector<double> losses;
  for (const auto &batch : *test_loader) {
    losses.push_back(model.forward(batch.data).mean().item<double>());
  }
  std::cout << losses.size() << '\n';

  // Reported: a sum carried over the epochs.
  int64_t total = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (const auto &batch : *test_loader) {
      total += batch.data.size(0);
    }
  }
  std::cout << total << '\n';

  Evaluator evaluator;
  evaluator.run(model, *test_loader);
  std::cout << evaluator.correct_ << '\n';
  return 0;
}
