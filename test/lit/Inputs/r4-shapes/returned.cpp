// Input of R4-types.test: loaders returned from functions whose return types
// are written out, through an alias, and held by variables of written types.
#include <torch/torch.h>

#include <memory>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::ones({2}) * static_cast<double>(i),
            torch::tensor(static_cast<int64_t>(i % 2))};
  }
  torch::optional<size_t> size() const override { return 64; }
};
using Stacked =
    torch::data::datasets::MapDataset<Points, torch::data::transforms::Stack<>>;

// One alias for the training and the evaluation loader.
using Loader =
    torch::data::StatelessDataLoader<Stacked,
                                     torch::data::samplers::SequentialSampler>;

// Declared first, defined later.
std::unique_ptr<Loader> make_loader(size_t batch_size);

std::unique_ptr<torch::data::StatelessDataLoader<
    torch::data::datasets::MapDataset<Points, torch::data::transforms::Stack<>>,
    torch::data::samplers::RandomSampler>>
make_train_loader(size_t batch_size) {
  return torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Points().map(torch::data::transforms::Stack<>()), batch_size);
}

std::unique_ptr<Loader> make_loader(size_t batch_size) {
  return torch::data::make_data_loader<
      torch::data::samplers::SequentialSampler>(
      Points().map(torch::data::transforms::Stack<>()), batch_size);
}

// Through a local variable; evaluation only, over the same alias.
std::unique_ptr<Loader> make_test_loader() {
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Points().map(torch::data::transforms::Stack<>()), 16);
  return loader;
}

// A function template, its return type deduced.
template <typename Dataset> auto make_any_loader(Dataset dataset) {
  return torch::data::make_data_loader(std::move(dataset), 8);
}

// A global assigned a loader: not followed, but its written type is
// respelled.
std::unique_ptr<torch::data::StatelessDataLoader<
    Stacked, torch::data::samplers::RandomSampler>>
    global_loader;

torch::Tensor w = torch::ones({2, 2}, torch::requires_grad());

void evaluate(Loader &loader) {
  for (auto &batch : loader)
    (void)batch.data.matmul(w);
}

int main() {
  torch::optim::SGD optimizer({w}, 0.1);
  auto train_loader = make_train_loader(8);
  std::unique_ptr<Loader> ordered = make_loader(8);
  std::unique_ptr<Loader> test_loader = make_test_loader();
  for (auto &batch : *train_loader)
    batch.data.matmul(w).sum().backward();
  for (auto &batch : *ordered)
    batch.data.matmul(w).sum().backward();
  Loader &test_ref = *test_loader;
  evaluate(test_ref);
  auto any = make_any_loader(Points().map(torch::data::transforms::Stack<>()));
  for (auto &batch : *any)
    (void)batch;
  global_loader = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 4);
}

void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
