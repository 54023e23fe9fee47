// A single-GPU DCGAN-style GAN: two models held by shared_ptr, two
// optimizers, two backward passes per step, device chosen through a pointer,
// progress on stdout and checkpoints of both models and optimizers.
//
//   dcgan [EPOCHS] [CHECKPOINT_EVERY]

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

constexpr int64_t kNoiseSize = 16;
constexpr int64_t kBatchSize = 32;

// Real samples: 1x8x8 images of a diagonal stripe of random brightness.
class StripeDataset : public torch::data::datasets::Dataset<StripeDataset> {
public:
  explicit StripeDataset(int64_t size) : size_(size) {}

  torch::data::Example<> get(size_t index) override {
    auto image = torch::full({1, 8, 8}, -1.0);
    const double brightness = 0.5 + 0.5 * ((index * 7919) % 100) / 100.0;
    for (int64_t i = 0; i < 8; ++i) {
      image[0][i][i] = brightness;
    }
    return {image, torch::ones({1})};
  }

  torch::optional<size_t> size() const override { return size_; }

private:
  int64_t size_;
};

struct Generator : torch::nn::Module {
  Generator() {
    net = register_module(
        "net", torch::nn::Sequential(
                   torch::nn::ConvTranspose2d(
                       torch::nn::ConvTranspose2dOptions(kNoiseSize, 32, 4)
                           .bias(false)),
                   torch::nn::BatchNorm2d(32), torch::nn::ReLU(),
                   torch::nn::ConvTranspose2d(
                       torch::nn::ConvTranspose2dOptions(32, 1, 4)
                           .stride(2)
                           .padding(1)
                           .bias(false)),
                   torch::nn::Tanh()));
  }

  torch::Tensor forward(torch::Tensor noise) { return net->forward(noise); }

  torch::nn::Sequential net{nullptr};
};

struct Discriminator : torch::nn::Module {
  Discriminator() {
    net = register_module(
        "net", torch::nn::Sequential(
                   torch::nn::Conv2d(
                       torch::nn::Conv2dOptions(1, 16, 4).stride(2).padding(1)),
                   torch::nn::LeakyReLU(
                       torch::nn::LeakyReLUOptions().negative_slope(0.2)),
                   torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 1, 4)),
                   torch::nn::Flatten(), torch::nn::Sigmoid()));
  }

  torch::Tensor forward(torch::Tensor image) { return net->forward(image); }

  torch::nn::Sequential net{nullptr};
};

int main(int argc, char **argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 5;
  const int checkpoint_every = argc > 2 ? std::atoi(argv[2]) : 5;
  torch::manual_seed(7);

  auto *device = new torch::Device(torch::cuda::is_available() ? torch::kCUDA
                                                               : torch::kCPU);

  auto generator = std::make_shared<Generator>();
  auto discriminator = std::make_shared<Discriminator>();
  generator->to(*device);
  discriminator->to(*device);

  auto data_loader = torch::data::make_data_loader(
      StripeDataset(640).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(kBatchSize).drop_last(true));

  torch::optim::Adam generator_optimizer(
      generator->parameters(),
      torch::optim::AdamOptions(2e-3).betas(std::make_tuple(0.5, 0.999)));
  torch::optim::Adam discriminator_optimizer(
      discriminator->parameters(),
      torch::optim::AdamOptions(2e-3).betas(std::make_tuple(0.5, 0.999)));

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double d_total = 0;
    double g_total = 0;
    int64_t batches = 0;
    for (auto &batch : *data_loader) {
      auto real_images = batch.data.to(*device);

      // Discriminator: real as real, fake as fake; two backward passes.
      discriminator->zero_grad();
      auto real_labels = torch::full({kBatchSize, 1}, 0.9);
      auto d_loss_real = torch::binary_cross_entropy(
          discriminator->forward(real_images), real_labels.to(*device));
      d_loss_real.backward();
      auto noise = torch::randn({kBatchSize, kNoiseSize, 1, 1}).to(*device);
      auto fake_images = generator->forward(noise);
      auto fake_labels = torch::zeros({kBatchSize, 1}).to(*device);
      auto d_loss_fake = torch::binary_cross_entropy(
          discriminator->forward(fake_images.detach()), fake_labels);
      d_loss_fake.backward();
      discriminator_optimizer.step();

      // Generator: make the discriminator call fakes real.
      generator->zero_grad();
      auto g_loss = torch::binary_cross_entropy(
          discriminator->forward(fake_images), torch::ones_like(fake_labels));
      g_loss.backward();
      generator_optimizer.step();

      d_total += (d_loss_real + d_loss_fake).item<double>();
      g_total += g_loss.item<double>();
      ++batches;
    }
    std::printf("[%d/%d] D_loss: %.4f | G_loss: %.4f\n", epoch, epochs,
                d_total / batches, g_total / batches);

    if (epoch % checkpoint_every == 0) {
      torch::save(generator, "generator-checkpoint.pt");
      torch::save(generator_optimizer, "generator-optimizer-checkpoint.pt");
      torch::save(discriminator, "discriminator-checkpoint.pt");
      torch::save(discriminator_optimizer,
                  "discriminator-optimizer-checkpoint.pt");
      std::printf("-> checkpoint at epoch %d\n", epoch);
    }
  }
  delete device;
}
