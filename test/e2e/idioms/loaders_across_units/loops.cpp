#include "loops.h"

Readings::Readings(int64_t n) : x(torch::randn({n, 4})) {
  auto weights = torch::tensor({0.5, -1.0, 2.0, 0.25}).view({4, 1});
  y = torch::tanh(x.matmul(weights)) + 0.05 * torch::randn({n, 1});
}

namespace loops {

double train_epoch(torch::nn::Sequential &net, TrainLoader &loader,
                   torch::optim::Optimizer &optimizer, torch::Device device) {
  net->train();
  double sum = 0;
  for (auto &batch : loader) {
    auto inputs = batch.data.to(device);
    auto targets = batch.target.to(device);
    optimizer.zero_grad();
    auto loss = torch::mse_loss(net->forward(inputs), targets);
    loss.backward();
    optimizer.step();
    sum += loss.item<double>() * static_cast<double>(inputs.size(0));
  }
  return sum;
}

double mean_squared_error(torch::nn::Sequential &net, EvalLoader &loader,
                          torch::Device device) {
  torch::NoGradGuard no_grad;
  net->eval();
  double total = 0;
  int64_t seen = 0;
  for (const auto &batch : loader) {
    auto outputs = net->forward(batch.data.to(device));
    total +=
        torch::mse_loss(outputs, batch.target.to(device), torch::Reduction::Sum)
            .item<double>();
    seen += batch.data.size(0);
  }
  return total / static_cast<double>(seen);
}

} // namespace loops
