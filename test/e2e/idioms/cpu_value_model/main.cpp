// Regression of a noisy quadratic surface with a two-layer perceptron, on the
// CPU only: the model is a plain torch::nn::Module held by value.
// Usage: cpu_value_model [batch_size]
#include <torch/torch.h>

#include <iomanip>
#include <iostream>
#include <string>

struct Net : torch::nn::Module {
  Net() {
    hidden = register_module("hidden", torch::nn::Linear(6, 24));
    out = register_module("out", torch::nn::Linear(24, 1));
  }

  torch::Tensor forward(torch::Tensor x) {
    return out->forward(torch::tanh(hidden->forward(x)));
  }

  torch::nn::Linear hidden{nullptr}, out{nullptr};
};

struct Surface : torch::data::datasets::Dataset<Surface> {
  torch::Tensor inputs, values;

  Surface(int64_t n, const torch::Tensor &coefficients) {
    inputs = torch::rand({n, 6}) * 2 - 1;
    values = (inputs * inputs).matmul(coefficients) +
             0.3 * inputs.sum(1, true) + 0.02 * torch::randn({n, 1});
  }

  torch::data::Example<> get(size_t i) override {
    return {inputs[i], values[i]};
  }
  c10::optional<size_t> size() const override { return inputs.size(0); }
};

int main(int argc, char **argv) {
  int64_t batch_size = 32;
  if (argc > 1)
    batch_size = std::stoll(argv[1]);
  torch::manual_seed(11);

  const auto coefficients = torch::randn({6, 1});
  Surface train_set(640, coefficients);
  Surface test_set(160, coefficients);

  Net net;
  torch::optim::SGD optimizer(net.parameters(),
                              torch::optim::SGDOptions(0.05).momentum(0.5));

  // The data set is passed by lvalue (a copy), sampled in order.
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          train_set.map(torch::data::transforms::Stack<>()),
          torch::data::DataLoaderOptions().batch_size(batch_size).workers(0));
  const auto dataset_size = train_set.size().value();

  std::cout << std::fixed << std::setprecision(6);
  for (int epoch = 1; epoch <= 4; ++epoch) {
    double running_loss = 0.0;
    for (auto &batch : *loader) {
      net.zero_grad();
      auto prediction = net.forward(batch.data);
      auto loss = torch::mse_loss(prediction, batch.target);
      loss.backward();
      optimizer.step();
      running_loss += loss.item<double>() * batch.data.size(0);
    }
    std::cout << "epoch " << epoch << " train_loss "
              << running_loss / dataset_size << '\n';
  }

  // The held-out set in one piece, no loader.
  torch::NoGradGuard no_grad;
  auto test_loss =
      torch::mse_loss(net.forward(test_set.inputs), test_set.values);
  std::cout << "final test_loss " << test_loss.item<double>() << '\n';
  return 0;
}
