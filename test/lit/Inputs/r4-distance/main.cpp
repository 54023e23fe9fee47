// Input of R4-distance.test: loaders whose batches are counted with
// std::distance (issue 58, point 6).
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <vector>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({2}, static_cast<double>(i)),
            torch::tensor(static_cast<int64_t>(i % 2))};
  }
  torch::optional<size_t> size() const override { return 40; }
};

using torch::data::samplers::RandomSampler;
using torch::data::samplers::SequentialSampler;

// The count in a helper of the program's own.
template <typename Loader> size_t count_batches(Loader &loader) {
  return std::distance(loader.begin(), loader.end());
}

// The count through a reference parameter, in a printf progress line.
template <typename Loader>
void train_epoch(torch::nn::Linear &net, torch::optim::SGD &optimizer,
                 Loader &loader) {
  const auto batches = std::distance(loader.begin(), loader.end());
  int64_t i = 0;
  for (auto &batch : loader) {
    optimizer.zero_grad();
    auto loss =
        torch::cross_entropy_loss(net->forward(batch.data), batch.target);
    loss.backward();
    optimizer.step();
    std::printf("\rbatch %lld/%lld", static_cast<long long>(++i),
                static_cast<long long>(batches));
  }
}

int main() {
  torch::nn::Linear net(2, 2);
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  auto stacked = Points().map(torch::data::transforms::Stack<>());

  // Counted before the epoch loop through the unique_ptr (auto), a cout
  // progress line, the loss sum divided by the count for an epoch mean:
  // even; the sum reduced and divided by every rank's batches.
  auto train = torch::data::make_data_loader<RandomSampler>(stacked, 8);
  auto num_batches = std::distance(train->begin(), train->end());
  for (int epoch = 0; epoch < 2; ++epoch) {
    double epoch_loss = 0;
    int64_t batch_index = 0;
    for (auto &batch : *train) {
      optimizer.zero_grad();
      auto loss =
          torch::cross_entropy_loss(net->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      epoch_loss += loss.item<double>();
      std::cout << "batch " << ++batch_index << "/" << num_batches << '\n';
    }
    std::cout << "epoch mean " << epoch_loss / num_batches << '\n';
  }

  // Counted inside the epoch loop, held by reference (size_t), the count
  // sizing a per-batch tensor and a schedule's steps: even, nothing else.
  auto steps = torch::data::make_data_loader<RandomSampler>(stacked, 8);
  auto &steps_ref = *steps;
  for (int epoch = 0; epoch < 2; ++epoch) {
    const size_t per_epoch = std::distance(steps_ref.begin(), steps_ref.end());
    const size_t total_steps = 2 * per_epoch;
    torch::Tensor losses = torch::zeros({static_cast<int64_t>(per_epoch)});
    size_t step = 0;
    for (auto &batch : steps_ref) {
      double progress = static_cast<double>(epoch * per_epoch + step) /
                        static_cast<double>(total_steps);
      for (auto &group : optimizer.param_groups())
        static_cast<torch::optim::SGDOptions &>(group.options())
            .lr(0.1 * (1.0 - progress));
      optimizer.zero_grad();
      auto loss =
          torch::cross_entropy_loss(net->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      losses[step++] = loss.item<double>();
    }
    std::cout << "last " << losses[per_epoch - 1].item<double>() << '\n';
  }

  // Counted through a helper (int64_t) and in a helper that trains.
  auto helped = torch::data::make_data_loader<RandomSampler>(stacked, 8);
  const int64_t helped_batches = count_batches(*helped);
  std::cout << "batches " << helped_batches << '\n';
  train_epoch(net, optimizer, *helped);

  // Evaluation counted, a correct count divided by it (static_cast):
  // exact; the count reduced and the divisor every rank's batches.
  auto test = torch::data::make_data_loader<SequentialSampler>(stacked, 10);
  const auto test_batches = std::distance(test->begin(), test->end());
  torch::NoGradGuard no_grad;
  double test_loss = 0;
  for (auto &batch : *test)
    test_loss +=
        torch::cross_entropy_loss(net->forward(batch.data), batch.target)
            .item<double>();
  std::cout << "test loss " << test_loss / static_cast<double>(test_batches)
            << '\n';

  // Only counted, never iterated: still even with loader-use-unknown.
  auto counted = torch::data::make_data_loader<SequentialSampler>(stacked, 10);
  std::cout << "counted " << std::distance(counted->begin(), counted->end())
            << '\n';

  // std::distance from one loader's begin() to another's end(): no count,
  // not followed (loader-use-unknown).
  auto left = torch::data::make_data_loader<SequentialSampler>(stacked, 10);
  auto right = torch::data::make_data_loader<SequentialSampler>(stacked, 10);
  for (auto &batch : *right)
    std::cout << batch.data.size(0) << '\n';
  std::cout << std::distance(left->begin(), right->end()) << '\n';
  return 0;
}
