#include "loops.h"

#include <iostream>

int main() {
  torch::manual_seed(0);
  torch::Device device(torch::kCUDA);
  torch::nn::Linear net(3, 1);
  net->to(device);
  torch::optim::SGD optimizer(net->parameters(), 0.05);

  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          Points(256).map(torch::data::transforms::Stack<>()), 32);
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Points(100).map(torch::data::transforms::Stack<>()), 50);
  auto probe_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Points(40).map(torch::data::transforms::Stack<>()), 8);

  Evaluator evaluator(net);
  for (int epoch = 0; epoch < 3; ++epoch) {
    double loss = fit::epoch(net, *train_loader, optimizer);
    double error = evaluator.mean_error(*test_loader);
    std::cout << "epoch " << epoch << " loss " << loss << " error " << error
              << " batches " << count_batches(*test_loader) << '\n';
  }
  describe("probe", *probe_loader);
  return 0;
}
