// Three concentric noisy rings classified by an MLP with BatchNorm1d, the
// whole training split (2001 rows, an odd count) at every step, SGD with
// momentum; training accuracy every 10 epochs and the held-out split's
// accuracy at the end.
// Usage: rings_bn [batch_size]   (ignored: every step takes all rows)
#include <torch/torch.h>

#include <cmath>
#include <iomanip>
#include <iostream>

constexpr int64_t kClasses = 3;

struct RingNet : torch::nn::Module {
  RingNet() {
    // No bias before a BatchNorm: it would subtract it again (its gradient
    // is zero but for rounding, which Adam or momentum turn into steps).
    fc1 = register_module(
        "fc1", torch::nn::Linear(torch::nn::LinearOptions(2, 48).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm1d(48));
    fc2 = register_module(
        "fc2", torch::nn::Linear(torch::nn::LinearOptions(48, 48).bias(false)));
    bn2 = register_module("bn2", torch::nn::BatchNorm1d(48));
    head = register_module("head", torch::nn::Linear(48, kClasses));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(bn1->forward(fc1->forward(x)));
    x = torch::relu(bn2->forward(fc2->forward(x)));
    return head->forward(x);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, head{nullptr};
  torch::nn::BatchNorm1d bn1{nullptr}, bn2{nullptr};
};

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  torch::manual_seed(7);
  torch::Device device = torch::kCPU;
  if (torch::cuda::is_available())
    device = torch::kCUDA;

  // Rings of radius 1, 2 and 3; the last 600 points are held out.
  const int64_t total = 2601, n_train = 2001;
  auto labels = torch::randint(kClasses, {total}, torch::kLong);
  auto angle = torch::rand({total}) * 2 * M_PI;
  auto radius = labels.to(torch::kFloat) + 1 + 0.3 * torch::randn({total});
  auto points =
      torch::stack({radius * torch::cos(angle), radius * torch::sin(angle)}, 1);
  auto x_train = points.slice(0, 0, n_train).to(device);
  auto y_train = labels.slice(0, 0, n_train).to(device);
  auto x_held = points.slice(0, n_train).to(device);
  auto y_held = labels.slice(0, n_train).to(device);

  auto model = std::make_shared<RingNet>();
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::nn::CrossEntropyLoss criterion;

  for (int epoch = 1; epoch <= 60; ++epoch) {
    model->train();
    optimizer.zero_grad();
    auto logits = model->forward(x_train);
    auto loss = criterion(logits, y_train);
    loss.backward();
    optimizer.step();
    if (epoch % 10 == 0) {
      const int64_t correct =
          logits.argmax(1).eq(y_train).sum().item<int64_t>();
      std::cout << "epoch " << epoch << " loss " << std::fixed
                << std::setprecision(6) << loss.item<float>()
                << " train_correct " << correct << '\n';
    }
  }

  model->eval();
  torch::NoGradGuard no_grad;
  auto held_logits = model->forward(x_held);
  auto held_loss = criterion(held_logits, y_held);
  auto held_correct = held_logits.argmax(1).eq(y_held).sum().item<int64_t>();
  std::cout << "held_out loss " << std::fixed << std::setprecision(6)
            << held_loss.item<float>() << " correct " << held_correct << " acc "
            << static_cast<double>(held_correct) / y_held.size(0) << '\n';
  return 0;
}
