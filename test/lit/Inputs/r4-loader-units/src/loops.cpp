#include "loops.h"

#include <iostream>

namespace fit {
double epoch(torch::nn::Linear &net, ShuffledLoader &loader,
             torch::optim::Optimizer &optimizer) {
  double sum = 0;
  for (auto &batch : loader) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(net->forward(batch.data), batch.target);
    loss.backward();
    optimizer.step();
    sum += loss.item<double>();
  }
  return sum;
}
} // namespace fit

double Evaluator::mean_error(OrderedLoader &loader) {
  torch::NoGradGuard no_grad;
  double total = 0;
  int64_t seen = 0;
  for (const auto &batch : loader) {
    total += torch::mse_loss(net_->forward(batch.data), batch.target,
                             torch::Reduction::Sum)
                 .item<double>();
    seen += batch.data.size(0);
  }
  return total / static_cast<double>(seen);
}

int64_t count_batches(OrderedLoader &loader) {
  int64_t batches = 0;
  for (auto &batch : loader) {
    (void)batch;
    ++batches;
  }
  return batches;
}

void describe(const char *name, OrderedLoader &loader) {
  (void)loader;
  std::cout << "loader " << name << '\n';
}
