// Input of R4-types.test: loaders held in struct members.
#include <torch/torch.h>

#include <memory>
#include <utility>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::ones({2}) * static_cast<double>(i),
            torch::tensor(static_cast<int64_t>(i % 2))};
  }
  torch::optional<size_t> size() const override { return 64; }
};
using Stacked =
    torch::data::datasets::MapDataset<Points, torch::data::transforms::Stack<>>;

torch::Tensor w = torch::ones({2, 2}, torch::requires_grad());

struct Experiment {
  Experiment()
      : train(torch::data::make_data_loader(
            Points().map(torch::data::transforms::Stack<>()), 8)) {}

  void fit() {
    for (auto &batch : *train)
      batch.data.matmul(w).sum().backward();
  }
  void evaluate() {
    for (auto &batch : *test)
      (void)batch.data.matmul(w);
  }

  std::unique_ptr<torch::data::StatelessDataLoader<
      Stacked, torch::data::samplers::RandomSampler>>
      train;
  // Assigned after construction.
  std::unique_ptr<torch::data::StatelessDataLoader<
      Stacked, torch::data::samplers::SequentialSampler>>
      test;
};

// A member whose type is the loader call's.
struct Evaluation {
  explicit Evaluation(size_t batch_size)
      : loader(torch::data::make_data_loader(
            Points().map(torch::data::transforms::Stack<>()), batch_size)) {}
  decltype(torch::data::make_data_loader(std::declval<Stacked>(),
                                         size_t())) loader;
};

int main() {
  torch::optim::SGD optimizer({w}, 0.1);
  Experiment experiment;
  experiment.test =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Points().map(torch::data::transforms::Stack<>()), 16);
  experiment.fit();
  experiment.evaluate();
  Evaluation evaluation(16);
  for (auto &batch : *evaluation.loader)
    (void)batch.data.matmul(w);
}

void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
