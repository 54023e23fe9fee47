// Fits a small classifier to synthetic sensor readings. The run's settings
// live in one global options object, filled (and announced) by its
// constructor before main runs: the data folder from READINGS_DIR, the
// epochs and the learning rate from the environment, each with a default.
// Usage: global_options [batch_size]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

struct Options {
  std::string data_dir = "./readings";
  int epochs = 3;
  double learning_rate = 0.05;

  Options() {
    if (const char *dir = std::getenv("READINGS_DIR")) {
      data_dir = dir;
    }
    if (const char *epochs_text = std::getenv("READINGS_EPOCHS")) {
      epochs = std::atoi(epochs_text);
    }
    // Where a user would be asked for the folder, the default is announced.
    std::cout << "data folder (READINGS_DIR): " << data_dir << '\n';
    std::printf("epochs %d learning_rate %.6f\n", epochs, learning_rate);
  }
};

Options options;

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl()
      : hidden(register_module("hidden", torch::nn::Linear(6, 24))),
        out(register_module("out", torch::nn::Linear(24, 3))) {}
  torch::Tensor forward(torch::Tensor x) {
    return out(torch::relu(hidden(x)));
  }
  torch::nn::Linear hidden, out;
};
TORCH_MODULE(Classifier);

struct Readings : torch::data::datasets::Dataset<Readings> {
  torch::Tensor features, labels;
  explicit Readings(int64_t n) {
    features = torch::randn({n, 6});
    labels = (features.narrow(1, 0, 2).sum(1) > 0.5).to(torch::kLong) +
             (features.narrow(1, 2, 2).sum(1) > 0.5).to(torch::kLong);
  }
  torch::data::Example<> get(size_t i) override {
    return {features[i], labels[i]};
  }
  torch::optional<size_t> size() const override { return features.size(0); }
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoi(argv[1]) : 32;
  torch::manual_seed(11);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  Readings train_set(640), test_set(200);
  const auto test_count = test_set.size().value();
  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          std::move(train_set).map(torch::data::transforms::Stack<>()),
          batch_size);
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          std::move(test_set).map(torch::data::transforms::Stack<>()), 50);

  Classifier model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(options.learning_rate));

  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    torch::manual_seed(epoch);
    model->train();
    for (auto &batch : *train_loader) {
      auto data = batch.data.to(device), target = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::cross_entropy_loss(model->forward(data), target);
      loss.backward();
      optimizer.step();
    }
    model->eval();
    torch::NoGradGuard no_grad;
    int64_t correct = 0;
    for (auto &batch : *test_loader) {
      auto data = batch.data.to(device), target = batch.target.to(device);
      correct += model->forward(data).argmax(1).eq(target).sum().item<int64_t>();
    }
    std::printf("epoch %d test_correct %lld test_acc %.6f\n", epoch + 1,
                static_cast<long long>(correct),
                static_cast<double>(correct) / test_count);
  }
  std::cout << "done\n";
}
