// A single-GPU ResNet-style classifier: TORCH_MODULE blocks with BatchNorm
// members registered in their constructors, a model held through its module
// holder, a synthetic image dataset, and a validation loop that sums the loss
// and counts correct predictions, printing the ratios after the loop.
//
//   resnet [EPOCHS]

#include <torch/torch.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>

// Images of 3x16x16 whose class decides which colour channel is brightest on
// average (a faint signal, so accuracy stays below 1).
class ColourDataset : public torch::data::datasets::Dataset<ColourDataset> {
public:
  ColourDataset(int64_t size, uint64_t seed) : size_(size) {
    auto generator = at::detail::createCPUGenerator(seed);
    labels_ = torch::randint(0, 3, {size}, generator, torch::kLong);
    images_ = torch::randn({size, 3, 16, 16}, generator);
    for (int64_t i = 0; i < size; ++i) {
      images_[i][labels_[i].item<int64_t>()] += 0.1;
    }
  }

  torch::data::Example<> get(size_t index) override {
    return {images_[index], labels_[index]};
  }

  torch::optional<size_t> size() const override { return size_; }

private:
  int64_t size_;
  torch::Tensor images_;
  torch::Tensor labels_;
};

struct ResidualBlockImpl : torch::nn::Module {
  ResidualBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride) {
    conv1 = register_module(
        "conv1",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, out_channels, 3)
                              .stride(stride)
                              .padding(1)
                              .bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(out_channels));
    conv2 = register_module(
        "conv2", torch::nn::Conv2d(
                     torch::nn::Conv2dOptions(out_channels, out_channels, 3)
                         .padding(1)
                         .bias(false)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(out_channels));
    if (stride != 1 || in_channels != out_channels) {
      shortcut = register_module(
          "shortcut", torch::nn::Sequential(
                          torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                                in_channels, out_channels, 1)
                                                .stride(stride)
                                                .bias(false)),
                          torch::nn::BatchNorm2d(out_channels)));
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    auto out = torch::relu(bn1(conv1(x)));
    out = bn2(conv2(out));
    out += shortcut ? shortcut->forward(x) : x;
    return torch::relu(out);
  }

  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Conv2d conv2{nullptr};
  torch::nn::BatchNorm2d bn2{nullptr};
  torch::nn::Sequential shortcut{nullptr};
};
TORCH_MODULE(ResidualBlock);

struct ResNetImpl : torch::nn::Module {
  explicit ResNetImpl(int64_t num_classes) {
    stem = register_module(
        "stem", torch::nn::Conv2d(
                    torch::nn::Conv2dOptions(3, 16, 3).padding(1).bias(false)));
    stem_bn = register_module("stem_bn", torch::nn::BatchNorm2d(16));
    layer1 = register_module("layer1", ResidualBlock(16, 16, 1));
    layer2 = register_module("layer2", ResidualBlock(16, 32, 2));
    fc = register_module("fc", torch::nn::Linear(32, num_classes));
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(stem_bn(stem(x)));
    x = layer2(layer1(x));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc(x);
  }

  torch::nn::Conv2d stem{nullptr};
  torch::nn::BatchNorm2d stem_bn{nullptr};
  ResidualBlock layer1{nullptr};
  ResidualBlock layer2{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet);

int main(int argc, char **argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 3;
  torch::manual_seed(0);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);

  ResNet model(3);
  model->to(device);

  auto train_loader = torch::data::make_data_loader(
      ColourDataset(512, 1).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(32));
  auto val_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          ColourDataset(200, 2).map(torch::data::transforms::Stack<>()),
          torch::data::DataLoaderOptions().batch_size(50));

  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(0.05).momentum(0.9));

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model->train();
    double epoch_loss = 0;
    int64_t batches = 0;
    for (auto &batch : *train_loader) {
      auto images = batch.data.to(device);
      auto labels = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::cross_entropy_loss(model->forward(images), labels);
      loss.backward();
      optimizer.step();
      epoch_loss += loss.item<double>();
      ++batches;
    }
    std::cout << "epoch " << epoch << " train loss " << std::fixed
              << std::setprecision(4) << epoch_loss / batches << std::endl;

    model->eval();
    torch::NoGradGuard no_grad;
    double val_loss = 0;
    int64_t correct = 0;
    int64_t seen = 0;
    for (auto &batch : *val_loader) {
      auto images = batch.data.to(device);
      auto labels = batch.target.to(device);
      auto logits = model->forward(images);
      val_loss +=
          torch::nn::functional::cross_entropy(
              logits, labels,
              torch::nn::functional::CrossEntropyFuncOptions().reduction(
                  torch::kSum))
              .item<double>();
      correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
      seen += labels.size(0);
    }
    std::cout << "epoch " << epoch << " val loss " << val_loss / seen
              << " accuracy " << static_cast<double>(correct) / seen
              << std::endl;
  }
  torch::save(model, "resnet.pt");
}
