#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <iostream>

struct Ring : torch::data::datasets::Dataset<Ring> {
  torch::data::Example<> get(size_t i) override {
    auto x = torch::full({2}, static_cast<double>(i) / 64.0);
    return {x, x.sum().unsqueeze(0)};
  }
  torch::optional<size_t> size() const override { return 64; }
};

int main() {
  torch::manual_seed(0);
  torch::nn::Linear net(2, 1);
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          Ring().map(torch::data::transforms::Stack<>()), 8);

  int64_t global_step = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    // Only printed: each rank's count of optimizer steps.
    int steps = 0;
    // A divisor of a summed loss: the ranks' total.
    int batches = 0;
    double running = 0;
    // Copied before it divides: the ranks' total.
    int64_t counted = 0;
    double summed = 0;
    // Printed by printf.
    size_t updates = 0;
    // A count under a condition: how many batches qualified, the ranks'
    // total.
    int large = 0;
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(net->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      ++steps;
      batches++;
      running += loss.item<double>();
      counted += 1;
      summed += loss.item<double>();
      updates += 1;
      if (loss.item<double>() > 0.5)
        ++large;
      ++global_step;
    }
    std::cout << "epoch " << epoch << " steps " << steps << '\n';
    std::cout << "mean batch loss " << running / batches << '\n';
    const int64_t n = counted;
    std::cout << "mean " << summed / static_cast<double>(n) << '\n';
    std::printf("updates %zu\n", updates);
    std::cout << "large " << large << '\n';
    // An evaluation's count of batches: all of the ranks' batches.
    int evaluated = 0;
    {
      torch::NoGradGuard no_grad;
      for (auto &batch : *loader) {
        net->forward(batch.data);
        ++evaluated;
      }
    }
    std::cout << "evaluated " << evaluated << " batches\n";
  }
  std::cout << "global steps " << global_step << '\n';
  return 0;
}
