// A small GAN on a two-dimensional ring of eight Gaussians. The generator is a
// TORCH_MODULE holder with BatchNorm; the discriminator is a Sequential with
// BatchNorm. Two Adams; the discriminator takes two backward passes (real,
// fake) before its step.
// Usage: gan [batch_size]
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <iostream>

constexpr int64_t kNoise = 8;

struct GeneratorImpl : torch::nn::Module {
  GeneratorImpl() : fc1(kNoise, 32), bn1(32), fc2(32, 32), bn2(32), fc3(32, 2) {
    register_module("fc1", fc1);
    register_module("bn1", bn1);
    register_module("fc2", fc2);
    register_module("bn2", bn2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(torch::Tensor z) {
    z = torch::relu(bn1(fc1(z)));
    z = torch::relu(bn2(fc2(z)));
    return fc3(z);
  }
  torch::nn::Linear fc1;
  torch::nn::BatchNorm1d bn1;
  torch::nn::Linear fc2;
  torch::nn::BatchNorm1d bn2;
  torch::nn::Linear fc3;
};
TORCH_MODULE(Generator);

struct Ring : torch::data::datasets::Dataset<Ring> {
  torch::Tensor points;
  explicit Ring(int64_t n) {
    auto mode = torch::randint(8, {n}).to(torch::kFloat) * (2 * M_PI / 8);
    points = torch::stack({torch::cos(mode), torch::sin(mode)}, 1) * 2.0 +
             0.05 * torch::randn({n, 2});
  }
  torch::data::Example<> get(size_t i) override {
    return {points[i], torch::ones({1})};
  }
  torch::optional<size_t> size() const override { return points.size(0); }
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::atoi(argv[1]) : 64;
  torch::manual_seed(2);
  torch::Device device(torch::kCPU);
  if (torch::cuda::is_available())
    device = torch::Device(torch::kCUDA);

  Generator generator;
  generator->to(device);
  torch::nn::Sequential discriminator(
      torch::nn::Linear(2, 32), torch::nn::BatchNorm1d(32),
      torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
      torch::nn::Linear(32, 1), torch::nn::Sigmoid());
  discriminator->to(device);

  torch::optim::Adam g_opt(generator->parameters(),
                           torch::optim::AdamOptions(2e-3).betas({0.5, 0.999}));
  torch::optim::Adam d_opt(discriminator->parameters(),
                           torch::optim::AdamOptions(2e-3).betas({0.5, 0.999}));

  auto loader = torch::data::make_data_loader(
      Ring(1024).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(batch_size).drop_last(true));

  for (int64_t epoch = 1; epoch <= 3; ++epoch) {
    double d_sum = 0, g_sum = 0;
    int64_t batches = 0;
    for (torch::data::Example<> &batch : *loader) {
      auto real = batch.data.to(device);
      const auto n = real.size(0);

      discriminator->zero_grad();
      auto real_loss = torch::binary_cross_entropy(
          discriminator->forward(real), torch::full({n, 1}, 0.9, device));
      real_loss.backward();
      auto fake = generator->forward(torch::randn({n, kNoise}, device));
      auto fake_loss = torch::binary_cross_entropy(
          discriminator->forward(fake.detach()), torch::zeros({n, 1}, device));
      fake_loss.backward();
      d_opt.step();

      generator->zero_grad();
      auto g_loss = torch::binary_cross_entropy(discriminator->forward(fake),
                                                torch::ones({n, 1}, device));
      g_loss.backward();
      g_opt.step();

      d_sum += (real_loss + fake_loss).item<double>();
      g_sum += g_loss.item<double>();
      ++batches;
    }
    std::printf("epoch %lld d_loss %.6f g_loss %.6f\n",
                static_cast<long long>(epoch), d_sum / batches,
                g_sum / batches);
  }

  generator->eval();
  torch::NoGradGuard no_grad;
  auto samples = generator->forward(torch::randn({256, kNoise}, device));
  auto radius = samples.norm(2, 1).mean().item<double>();
  std::printf("final sample_radius %.6f\n", radius);
}
