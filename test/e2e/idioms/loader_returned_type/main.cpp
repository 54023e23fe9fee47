// Classifies points of four overlapping clusters. The loaders are built by
// functions whose return types are written out in full.
// Usage: returned_loader [batch_size]
#include <torch/torch.h>

#include <iomanip>
#include <iostream>
#include <memory>

class Clusters : public torch::data::datasets::Dataset<Clusters> {
public:
  Clusters(int64_t n, const torch::Tensor &centers) {
    labels_ = torch::randint(centers.size(0), {n}, torch::kLong);
    points_ = centers.index_select(0, labels_) + torch::randn({n, 3});
  }
  torch::data::Example<> get(size_t index) override {
    return {points_[index], labels_[index]};
  }
  torch::optional<size_t> size() const override { return labels_.size(0); }

private:
  torch::Tensor points_, labels_;
};

using StackedClusters =
    torch::data::datasets::MapDataset<Clusters,
                                      torch::data::transforms::Stack<>>;
using TestLoader =
    torch::data::StatelessDataLoader<StackedClusters,
                                     torch::data::samplers::SequentialSampler>;

std::unique_ptr<torch::data::StatelessDataLoader<
    torch::data::datasets::MapDataset<Clusters,
                                      torch::data::transforms::Stack<>>,
    torch::data::samplers::RandomSampler>>
make_train_loader(Clusters dataset, size_t batch_size) {
  return torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(dataset).map(torch::data::transforms::Stack<>()), batch_size);
}

std::unique_ptr<TestLoader> make_test_loader(Clusters dataset) {
  return torch::data::make_data_loader<
      torch::data::samplers::SequentialSampler>(
      std::move(dataset).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(100));
}

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl() {
    layers = register_module("layers",
                             torch::nn::Sequential(torch::nn::Linear(3, 32),
                                                   torch::nn::ReLU(),
                                                   torch::nn::Linear(32, 4)));
  }
  torch::Tensor forward(torch::Tensor x) { return layers->forward(x); }
  torch::nn::Sequential layers{nullptr};
};
TORCH_MODULE(Classifier);

int main(int argc, char **argv) {
  const size_t batch_size = argc > 1 ? std::stoul(argv[1]) : 32;
  torch::manual_seed(17);
  const torch::Device device =
      torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  auto centers = 1.2 * torch::randn({4, 3});
  Clusters train_set(640, centers), test_set(333, centers);
  const auto train_size = train_set.size().value();
  const auto test_size = test_set.size().value();
  auto train_loader = make_train_loader(train_set, batch_size);
  std::unique_ptr<TestLoader> test_loader = make_test_loader(test_set);

  Classifier model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  std::cout << std::fixed << std::setprecision(6);

  for (int epoch = 0; epoch < 3; ++epoch) {
    torch::manual_seed(epoch); // reproducible shuffles, epoch by epoch
    double running_loss = 0;
    int64_t correct = 0;
    for (auto &batch : *train_loader) {
      auto data = batch.data.to(device);
      auto target = batch.target.to(device);
      optimizer.zero_grad();
      auto output = model->forward(data);
      auto loss = torch::cross_entropy_loss(output, target);
      loss.backward();
      optimizer.step();
      running_loss += loss.item<double>() * data.size(0);
      correct += output.argmax(1).eq(target).sum().item<int64_t>();
    }

    model->eval();
    int64_t test_correct = 0;
    {
      torch::NoGradGuard no_grad;
      for (auto &batch : *test_loader) {
        auto output = model->forward(batch.data.to(device));
        test_correct +=
            output.argmax(1).eq(batch.target.to(device)).sum().item<int64_t>();
      }
    }
    model->train();
    std::cout << "epoch " << epoch + 1 << " train_loss "
              << running_loss / train_size << " train_acc "
              << static_cast<double>(correct) / train_size << " test_correct "
              << test_correct << " test_acc "
              << static_cast<double>(test_correct) / test_size << std::endl;
  }
}
