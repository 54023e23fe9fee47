#include "models.h"

#include <iostream>

void fit(Mlp &model,
         torch::data::StatelessDataLoader<
             ReadingSet, torch::data::samplers::RandomSampler> &loader,
         double samples, int epochs, const torch::Device &device,
         const std::string &tag) {
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(0.05).momentum(0.5));
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    torch::manual_seed(epoch - 1);
    double sum = 0;
    for (auto &batch : loader) {
      auto x = batch.data.to(device), y = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      sum += loss.item<double>() * x.size(0);
    }
    std::cout << tag << ' ' << epoch << " train_loss " << sum / samples << '\n';
  }
}
