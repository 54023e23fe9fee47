// Compares three regressors on one data set, trained one after another: a
// linear baseline (a bare Linear), a small perceptron held by value, and a
// wider Sequential. Each model has its own optimizer.
// Usage: three_models [batch_size]
#include <torch/torch.h>

#include <iomanip>
#include <iostream>
#include <string>

struct Perceptron : torch::nn::Module {
  explicit Perceptron(int64_t hidden)
      : l1(register_module("l1", torch::nn::Linear(5, hidden))),
        l2(register_module("l2", torch::nn::Linear(hidden, 1))) {}
  torch::Tensor forward(const torch::Tensor &x) {
    return l2->forward(torch::relu(l1->forward(x)));
  }
  torch::nn::Linear l1, l2;
};

struct Readings : torch::data::datasets::Dataset<Readings> {
  torch::Tensor x, y;
  explicit Readings(int64_t n) {
    x = torch::randn({n, 5});
    y = torch::sin(x.narrow(1, 0, 1) * 1.5) + x.narrow(1, 1, 2).prod(1, true) +
        0.05 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoi(argv[1]) : 32;
  const int epochs = 3;
  torch::manual_seed(5);
  auto cuda_available = torch::cuda::is_available();
  torch::Device device(cuda_available ? torch::kCUDA : torch::kCPU);

  Readings train_set(768), test_set(256);
  const double n = static_cast<double>(train_set.size().value());
  auto test_x = test_set.x.to(device), test_y = test_set.y.to(device);
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          std::move(train_set).map(torch::data::transforms::Stack<>()),
          torch::data::DataLoaderOptions(batch_size));
  std::cout << std::fixed << std::setprecision(6);

  // 1. The linear baseline.
  torch::nn::Linear linear(5, 1);
  linear->to(device);
  torch::optim::SGD linear_opt(linear->parameters(), 0.05);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double sum = 0;
    for (auto &batch : *loader) {
      auto x = batch.data.to(device), y = batch.target.to(device);
      linear_opt.zero_grad();
      auto loss = torch::mse_loss(linear(x), y);
      loss.backward();
      linear_opt.step();
      sum += loss.item<double>() * x.size(0);
    }
    std::cout << "linear " << epoch << " train_loss " << sum / n << '\n';
  }

  // 2. The perceptron, with its learning rate halved after each epoch.
  auto perceptron = Perceptron(16);
  perceptron.to(device);
  torch::optim::SGD perceptron_opt(perceptron.parameters(),
                                   torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double sum = 0;
    for (auto &batch : *loader) {
      auto x = batch.data.to(device), y = batch.target.to(device);
      perceptron_opt.zero_grad();
      auto loss = torch::mse_loss(perceptron.forward(x), y);
      loss.backward();
      perceptron_opt.step();
      sum += loss.item<double>() * x.size(0);
    }
    std::cout << "perceptron " << epoch << " train_loss " << sum / n << '\n';
    for (auto &group : perceptron_opt.param_groups()) {
      auto &options = static_cast<torch::optim::SGDOptions &>(group.options());
      options.lr(options.lr() * 0.5);
    }
  }

  // 3. A wider network as a local Sequential.
  torch::nn::Sequential wide(torch::nn::Linear(5, 64), torch::nn::Tanh(),
                             torch::nn::Linear(64, 64), torch::nn::Tanh(),
                             torch::nn::Linear(64, 1));
  wide->to(device);
  torch::optim::Adam wide_opt(wide->parameters(),
                              torch::optim::AdamOptions(3e-3));
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double sum = 0;
    for (auto &batch : *loader) {
      auto x = batch.data.to(device), y = batch.target.to(device);
      wide_opt.zero_grad();
      auto loss = torch::mse_loss(wide->forward(x), y);
      loss.backward();
      wide_opt.step();
      sum += loss.item<double>() * x.size(0);
    }
    std::cout << "wide " << epoch << " train_loss " << sum / n << '\n';
  }

  torch::NoGradGuard no_grad;
  std::cout
      << "test linear_mse "
      << torch::mse_loss(linear(test_x), test_y).item<double>()
      << " perceptron_mse "
      << torch::mse_loss(perceptron.forward(test_x), test_y).item<double>()
      << " wide_mse "
      << torch::mse_loss(wide->forward(test_x), test_y).item<double>() << '\n';
}
