// Five-class classification of noisy prototypes, with training loss and
// accuracy per epoch and a per-class accuracy table on the test set.
// Usage: per_class [batch_size]
#include <torch/torch.h>

#include <array>
#include <iomanip>
#include <iostream>
#include <vector>

constexpr int64_t kClasses = 5;

struct PrototypeNet : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  PrototypeNet() {
    fc1 = register_module("fc1", torch::nn::Linear(12, 40));
    fc2 = register_module("fc2", torch::nn::Linear(40, kClasses));
  }
  torch::Tensor forward(torch::Tensor x) {
    return fc2->forward(torch::relu(fc1->forward(x)));
  }
};

class Prototypes : public torch::data::datasets::Dataset<Prototypes> {
public:
  Prototypes(int64_t n, const torch::Tensor &prototypes, double noise) {
    target_ = torch::randint(kClasses, {n}, torch::kLong);
    data_ = prototypes.index_select(0, target_) + noise * torch::randn({n, 12});
  }
  torch::data::Example<> get(size_t i) override {
    return {data_[i], target_[i]};
  }
  torch::optional<size_t> size() const override { return target_.size(0); }

private:
  torch::Tensor data_, target_;
};

int main(int argc, char **argv) {
  int64_t batch_size = 32;
  if (argc > 1)
    batch_size = std::atoi(argv[1]);
  torch::manual_seed(13);
  torch::Device device = torch::kCPU;
  if (torch::cuda::is_available())
    device = torch::kCUDA;

  auto prototypes = torch::randn({kClasses, 12});
  auto train_set = Prototypes(480, prototypes, 1.1);
  auto test_set = Prototypes(251, prototypes, 1.1);
  const size_t train_size = train_set.size().value();

  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          std::move(train_set).map(torch::data::transforms::Stack<>()),
          torch::data::DataLoaderOptions().batch_size(batch_size).workers(2));
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          std::move(test_set).map(torch::data::transforms::Stack<>()),
          torch::data::DataLoaderOptions().batch_size(50).workers(2));

  auto net = std::make_shared<PrototypeNet>();
  net->to(device);
  torch::optim::Adam optimizer(net->parameters(),
                               torch::optim::AdamOptions(5e-3));

  std::cout << std::fixed << std::setprecision(6);
  for (int epoch = 1; epoch <= 3; ++epoch) {
    double running_loss = 0.0;
    int64_t correct = 0;
    for (auto &batch : *train_loader) {
      auto inputs = batch.data.to(device);
      auto labels = batch.target.to(device);
      optimizer.zero_grad();
      auto outputs = net->forward(inputs);
      auto loss = torch::nn::functional::cross_entropy(outputs, labels);
      loss.backward();
      optimizer.step();
      running_loss += loss.item<double>() * inputs.size(0);
      correct += outputs.argmax(1).eq(labels).sum().item<int64_t>();
    }
    std::cout << "epoch " << epoch << " train_loss "
              << running_loss / train_size << " train_acc "
              << static_cast<double>(correct) / train_size << " train_correct "
              << correct << '\n';
  }

  std::array<int64_t, kClasses> class_correct{};
  std::vector<int64_t> class_total(kClasses, 0);
  net->eval();
  torch::NoGradGuard no_grad;
  for (auto &batch : *test_loader) {
    auto labels = batch.target.to(device);
    auto predicted = net->forward(batch.data.to(device)).argmax(1);
    auto hits = predicted.eq(labels);
    for (int64_t i = 0; i < labels.size(0); ++i) {
      const auto label = labels[i].item<int64_t>();
      class_correct[label] += hits[i].item<bool>() ? 1 : 0;
      class_total[label] += 1;
    }
  }
  for (int64_t c = 0; c < kClasses; ++c) {
    std::cout << "class " << c << " correct " << class_correct[c] << " total "
              << class_total[c] << " acc "
              << static_cast<double>(class_correct[c]) / class_total[c] << '\n';
  }
}
