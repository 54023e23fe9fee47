// Input of R4-index-batches.test: batches picked through a list of sample
// indices (or of samples) by iterator arithmetic, in the ways programs
// write it.
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <numeric>
#include <random>
#include <vector>

int main() {
  torch::manual_seed(0);
  const int64_t n = 96;
  const int64_t batch = 16;
  auto x = torch::randn({n, 4});
  auto y = x.sum(1, true);
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.05);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 gen(7);

  // A shuffled index list, a batch copied out of it by a range constructor.
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::shuffle(order.begin(), order.end(), gen);
    double epoch_loss = 0;
    for (int64_t i = 0; i < n; i += batch) {
      const int64_t end = std::min(i + batch, n);
      std::vector<int64_t> chunk(order.begin() + i, order.begin() + end);
      auto index = torch::tensor(chunk);
      auto loss = torch::mse_loss(model->forward(x.index_select(0, index)),
                                  y.index_select(0, index));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      epoch_loss += loss.item<double>() * static_cast<double>(end - i);
    }
    std::cout << "epoch " << epoch << " loss " << epoch_loss / n << '\n';
  }

  // Samples in a vector, a batch by std::next, stacked.
  std::vector<torch::data::Example<>> samples;
  for (int64_t i = 0; i < n; ++i)
    samples.push_back({x[i], y[i]});
  for (size_t s = 0; s < samples.size(); s += 8) {
    std::vector<torch::data::Example<>> part(
        std::next(samples.begin(), s),
        std::next(samples.begin(), std::min(s + 8, samples.size())));
    auto stacked = torch::data::transforms::Stack<>().apply_batch(part);
    auto loss = torch::mse_loss(model->forward(stacked.data), stacked.target);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }

  // Whole batches only, taken by assign() from constant iterators.
  for (int64_t i = 0; i + batch <= n; i += batch) {
    std::vector<int64_t> picked;
    picked.assign(order.cbegin() + i, order.cbegin() + i + batch);
    auto index = torch::tensor(picked);
    auto loss = torch::mse_loss(model->forward(x.index_select(0, index)),
                                y.index_select(0, index));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }

  // Left alone: the counter's iterator also reorders the list.
  for (int64_t i = 0; i < n; i += batch) {
    std::sort(order.begin() + i, order.begin() + std::min(i + batch, n));
    std::vector<int64_t> chunk(order.begin() + i,
                               order.begin() + std::min(i + batch, n));
    auto index = torch::tensor(chunk);
    auto loss = torch::mse_loss(model->forward(x.index_select(0, index)),
                                y.index_select(0, index));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  return 0;
}
