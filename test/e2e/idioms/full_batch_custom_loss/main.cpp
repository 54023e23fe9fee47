// A linear model fitted with a loss of the program's own: the relative
// squared error, normalised by the spread of the whole batch's targets. Not
// a mean over rows: every step takes the whole training set on every rank.
// Usage: relative_fit [batch_size]   (ignored: every step takes all rows)
#include <torch/torch.h>

#include <cstdio>

// Sum of squared errors over the sum of squared deviations of the targets
// from their mean (1 - R^2).
torch::Tensor relative_squared_error(const torch::Tensor &prediction,
                                     const torch::Tensor &target) {
  auto residual = (prediction - target).pow(2).sum();
  auto spread = (target - target.mean()).pow(2).sum();
  return residual / spread;
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  torch::manual_seed(99);
  auto weights = torch::tensor({1.5, -2.0, 0.5, 3.0}).unsqueeze(1);
  auto features = torch::randn({1001, 4});
  auto response = features.mm(weights.to(torch::kFloat)) + 0.7 +
                  0.2 * torch::randn({1001, 1});

  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.5);
  for (int step = 0; step < 80; ++step) {
    optimizer.zero_grad();
    auto loss = relative_squared_error(model->forward(features), response);
    loss.backward();
    optimizer.step();
    if ((step + 1) % 20 == 0)
      std::printf("step %d rse %.6f\n", step + 1, loss.item<double>());
  }
  std::printf("bias %.6f\n", model->bias.item<double>());
  return 0;
}
