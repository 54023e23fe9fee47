// Input of R4-types.test: more ways to spell torch's loader type.
#include <torch/torch.h>

#include <memory>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::ones({2}) * static_cast<double>(i), torch::ones({1})};
  }
  torch::optional<size_t> size() const override { return 64; }
};

typedef torch::data::StatelessDataLoader<
    Points, torch::data::samplers::SequentialSampler>
    Ordered;
template <typename Sampler>
using LoaderOf = torch::data::StatelessDataLoader<Points, Sampler>;

using namespace torch::data;

// A trailing return type through a typedef.
auto make_ordered() -> std::unique_ptr<Ordered> {
  return torch::data::make_data_loader<
      torch::data::samplers::SequentialSampler>(Points(), 8);
}

// An alias template.
std::unique_ptr<LoaderOf<samplers::RandomSampler>> make_random() {
  return make_data_loader(Points(), 8);
}

// Unqualified, under `using namespace torch::data`.
std::unique_ptr<StatelessDataLoader<Points, samplers::RandomSampler>>
make_short() {
  return make_data_loader(Points(), 4);
}

int main() {
  torch::Tensor w = torch::ones({2, 2}, torch::requires_grad());
  torch::optim::SGD optimizer({w}, 0.1);
  auto ordered = make_ordered();
  auto random = make_random();
  auto short_batches = make_short();
  for (auto &batch : *ordered)
    (void)batch;
  for (auto &batch : *random)
    batch[0].data.sum().backward();
  for (auto &batch : *short_batches)
    batch[0].data.sum().backward();
}
