// A tutorial-style digit classifier, C++14: a small convolutional network on
// synthetic 12x12 "digits" (one blurred stroke pattern per class plus noise).
// Usage: cxx14_digits [batch_size]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

const int64_t kClasses = 4;
const int64_t kTrainSamples = 512;
const int64_t kTestSamples = 203; // odd on purpose: no even split
const int64_t kEpochs = 3;

struct DigitsImpl : torch::nn::Module {
  DigitsImpl()
      : conv1(torch::nn::Conv2dOptions(1, 6, 3)),
        conv2(torch::nn::Conv2dOptions(6, 8, 3)), fc1(8 * 2 * 2, 32),
        fc2(32, kClasses) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2)); // 6x5x5
    x = torch::relu(torch::max_pool2d(conv2->forward(x), 1)); // 8x3x3
    x = torch::adaptive_avg_pool2d(x, {2, 2});
    x = x.view({-1, 8 * 2 * 2});
    x = torch::relu(fc1->forward(x));
    return torch::log_softmax(fc2->forward(x), /*dim=*/1);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Digits);

// Images of class c: a bright row at 2 + 2c and a bright column at 9 - 2c.
class SyntheticDigits : public torch::data::datasets::Dataset<SyntheticDigits> {
public:
  explicit SyntheticDigits(int64_t count) {
    labels_ = torch::randint(kClasses, {count}, torch::kLong);
    images_ = 0.3 * torch::randn({count, 1, 12, 12});
    auto acc = labels_.accessor<int64_t, 1>();
    for (int64_t i = 0; i < count; ++i) {
      images_[i][0][2 + 2 * acc[i]] += 1.0;
      images_[i][0].select(1, 9 - 2 * acc[i]) += 1.0;
    }
  }

  torch::data::Example<> get(size_t index) override {
    return {images_[index], labels_[index]};
  }

  torch::optional<size_t> size() const override { return labels_.size(0); }

private:
  torch::Tensor images_, labels_;
};

template <typename DataLoader>
void train(size_t epoch, Digits &model, torch::Device device,
           DataLoader &data_loader, torch::optim::Optimizer &optimizer,
           size_t dataset_size) {
  model->train();
  double loss_sum = 0;
  int64_t correct = 0;
  for (auto &batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    optimizer.zero_grad();
    auto output = model->forward(data);
    auto loss = torch::nll_loss(output, targets);
    loss.backward();
    optimizer.step();
    loss_sum += loss.template item<double>() * data.size(0);
    correct += output.argmax(1).eq(targets).sum().template item<int64_t>();
  }
  std::printf("epoch %zu train_loss %.6f train_correct %lld\n", epoch,
              loss_sum / dataset_size, static_cast<long long>(correct));
}

template <typename DataLoader>
void test(size_t epoch, Digits &model, torch::Device device,
          DataLoader &data_loader, size_t dataset_size) {
  torch::NoGradGuard no_grad;
  model->eval();
  double test_loss = 0;
  int32_t correct = 0;
  for (const auto &batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    auto output = model->forward(data);
    test_loss +=
        torch::nll_loss(output, targets, /*weight=*/{}, torch::Reduction::Sum)
            .template item<float>();
    auto pred = output.argmax(1);
    correct += pred.eq(targets).sum().template item<int64_t>();
  }
  test_loss /= dataset_size;
  std::printf("epoch %zu test_loss %.6f test_correct %d test_acc %.6f\n", epoch,
              test_loss, correct, static_cast<double>(correct) / dataset_size);
}

int main(int argc, char *argv[]) {
  const int64_t batch_size = argc > 1 ? std::atoi(argv[1]) : 32;
  torch::manual_seed(7);

  torch::DeviceType device_type;
  if (torch::cuda::is_available()) {
    std::cout << "CUDA available! Training on GPU." << std::endl;
    device_type = torch::kCUDA;
  } else {
    std::cout << "Training on CPU." << std::endl;
    device_type = torch::kCPU;
  }
  torch::Device device(device_type);

  Digits model;
  model->to(device);

  auto train_dataset = SyntheticDigits(kTrainSamples)
                           .map(torch::data::transforms::Normalize<>(0.1, 0.5))
                           .map(torch::data::transforms::Stack<>());
  const size_t train_dataset_size = train_dataset.size().value();
  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          std::move(train_dataset), batch_size);

  auto test_dataset = SyntheticDigits(kTestSamples)
                          .map(torch::data::transforms::Normalize<>(0.1, 0.5))
                          .map(torch::data::transforms::Stack<>());
  const size_t test_dataset_size = test_dataset.size().value();
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          std::move(test_dataset), 64);

  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(0.05).momentum(0.5));

  for (size_t epoch = 1; epoch <= kEpochs; ++epoch) {
    // Reseeded every epoch, so a run resumed at epoch e shuffles as this one.
    torch::manual_seed(epoch - 1);
    train(epoch, model, device, *train_loader, optimizer, train_dataset_size);
    test(epoch, model, device, *test_loader, test_dataset_size);
  }
}
