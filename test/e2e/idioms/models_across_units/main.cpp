// Usage: ensemble [batch_size]
#include "models.h"

#include <iomanip>
#include <iostream>

// A scale and shift fitted on the ensemble's mean prediction; model and
// optimizer are in-class (no constructor), the model placed by its user.
struct Calibration {
  torch::nn::Linear affine{1, 1};
  torch::optim::SGD optimizer{affine->parameters(),
                              torch::optim::SGDOptions(0.1)};
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  const int epochs = 3;
  torch::manual_seed(11);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  Readings train_set(512), test_set(128);
  const double n = static_cast<double>(train_set.size().value());
  std::cout << std::fixed << std::setprecision(6);

  // 1. Placed in placement.cpp, trained here.
  Mlp first(16);
  place_model(first, device);
  torch::optim::Adam first_opt(first->parameters(),
                               torch::optim::AdamOptions(5e-3));
  // One sequential loader for every model trained here.
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Readings(train_set).map(torch::data::transforms::Stack<>()),
          torch::data::DataLoaderOptions(batch_size));
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double sum = 0;
    for (auto &batch : *loader) {
      auto x = batch.data.to(device), y = batch.target.to(device);
      first_opt.zero_grad();
      auto loss = torch::mse_loss(first->forward(x), y);
      loss.backward();
      first_opt.step();
      sum += loss.item<double>() * x.size(0);
    }
    std::cout << "first " << epoch << " train_loss " << sum / n << '\n';
  }

  // 2. Placed here, trained in trainer.cpp. Each model starts from its own
  // seed, whatever the passes before it drew.
  torch::manual_seed(12);
  Mlp second(24);
  second->to(device);
  auto shuffled = make_train_loader(train_set, batch_size);
  fit(second, *shuffled, n, epochs, device, "second");

  // 3. A trainer holding its model by raw pointer.
  torch::manual_seed(13);
  PointerTrainer third(device, 0.05);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double sum = 0;
    for (auto &batch : *loader)
      sum += third.step(batch.data, batch.target);
    std::cout << "third " << epoch << " train_loss " << sum / n << '\n';
  }

  // 4. Calibrate the ensemble's mean on the training set.
  torch::manual_seed(14);
  Calibration calibration;
  calibration.affine->to(device);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double sum = 0;
    for (auto &batch : *loader) {
      auto x = batch.data.to(device), y = batch.target.to(device);
      torch::Tensor mean;
      {
        torch::NoGradGuard no_grad;
        mean = (first->forward(x) + second->forward(x) + third.predict(x)) / 3;
      }
      calibration.optimizer.zero_grad();
      auto loss = torch::mse_loss(calibration.affine->forward(mean), y);
      loss.backward();
      calibration.optimizer.step();
      sum += loss.item<double>() * x.size(0);
    }
    std::cout << "calibration " << epoch << " train_loss " << sum / n << '\n';
  }

  torch::NoGradGuard no_grad;
  auto x = test_set.x.to(device), y = test_set.y.to(device);
  auto mean = (first->forward(x) + second->forward(x) + third.predict(x)) / 3;
  std::cout
      << "test ensemble_mse " << torch::mse_loss(mean, y).item<double>()
      << " calibrated_mse "
      << torch::mse_loss(calibration.affine->forward(mean), y).item<double>()
      << '\n';
}
