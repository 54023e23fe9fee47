// Usage: fit_units [batch_size]
//
// The loaders are made here and iterated in loops.cpp; a fine-tuning pass
// counts its optimizer steps; a last pass cuts its batches by hand from a
// shuffled list of sample indices.
#include "loops.h"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  torch::manual_seed(3);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  Readings train_set(512), test_set(200);
  const double train_size = static_cast<double>(train_set.size().value());

  torch::nn::Sequential net(torch::nn::Linear(4, 16), torch::nn::Tanh(),
                            torch::nn::Linear(16, 1));
  net->to(device);
  torch::optim::Adam optimizer(net->parameters(),
                               torch::optim::AdamOptions(1e-2));

  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          Readings(train_set).map(torch::data::transforms::Stack<>()),
          batch_size);
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Readings(test_set).map(torch::data::transforms::Stack<>()),
          batch_size);

  std::cout << std::fixed << std::setprecision(6);
  for (int epoch = 1; epoch <= 3; ++epoch) {
    torch::manual_seed(epoch - 1);
    const double sum =
        loops::train_epoch(net, *train_loader, optimizer, device);
    const double mse = loops::mean_squared_error(net, *test_loader, device);
    std::cout << "epoch " << epoch << " train_loss " << sum / train_size
              << " test_mse " << mse << '\n';
  }

  // Fine-tuning at a tenth of the rate, counting the optimizer's steps.
  for (auto &group : optimizer.param_groups())
    static_cast<torch::optim::AdamOptions &>(group.options()).lr(1e-3);
  int64_t steps = 0;
  for (int epoch = 4; epoch <= 5; ++epoch) {
    torch::manual_seed(epoch - 1);
    for (auto &batch : *train_loader) {
      auto inputs = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(net->forward(inputs), targets);
      loss.backward();
      optimizer.step();
      ++steps;
    }
  }
  std::cout << "fine_tune steps " << steps << '\n';

  // A last pass in an order of its own: batches cut by hand from a shuffled
  // list of sample indices.
  torch::manual_seed(7);
  auto permutation = torch::randperm(train_set.x.size(0), torch::kLong);
  std::vector<int64_t> order(permutation.data_ptr<int64_t>(),
                             permutation.data_ptr<int64_t>() +
                                 permutation.numel());
  const int64_t n = static_cast<int64_t>(order.size());
  double pass_loss = 0;
  net->train();
  for (int64_t i = 0; i < n; i += batch_size) {
    std::vector<int64_t> chunk(order.begin() + i,
                               order.begin() + std::min(i + batch_size, n));
    auto index = torch::tensor(chunk);
    auto inputs = train_set.x.index_select(0, index).to(device);
    auto targets = train_set.y.index_select(0, index).to(device);
    optimizer.zero_grad();
    auto loss = torch::mse_loss(net->forward(inputs), targets);
    loss.backward();
    optimizer.step();
    pass_loss += loss.item<double>() * static_cast<double>(chunk.size());
  }
  std::cout << "shuffled_pass train_loss " << pass_loss / n << " test_mse "
            << loops::mean_squared_error(net, *test_loader, device) << '\n';
  torch::save(net, "fit_units.pt");
  return 0;
}
