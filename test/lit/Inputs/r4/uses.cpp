// Input of R4-uses.test: how a loader's uses decide its sharding.
#include <torch/torch.h>

#include <vector>

using Batch = std::vector<torch::data::Example<>>;

struct Ones : torch::data::datasets::Dataset<Ones> {
  torch::data::Example<> get(size_t) override {
    return {torch::ones({1}), torch::ones({1})};
  }
  c10::optional<size_t> size() const override { return 8; }
};

torch::Tensor w = torch::ones({1}, torch::requires_grad());

// torch::autograd::backward, two calls away from the loop.
void apply(const Batch &batch) {
  torch::autograd::backward({(batch[0].data * w).sum()});
}
void step(const Batch &batch) { apply(batch); }

// A written loader type: respelled as ddp's.
void fixed(torch::data::StatelessDataLoader<
           Ones, torch::data::samplers::RandomSampler> &loader) {
  for (auto &batch : loader)
    (void)batch;
}

struct Trainer {
  template <typename Loader> void fit(Loader &loader) {
    for (auto &batch : loader)
      step(batch);
  }
};

int main() {
  // Reassigned: both calls follow the variable's uses.
  auto loader = torch::data::make_data_loader(Ones(), 2);
  loader = torch::data::make_data_loader(Ones(), 4);
  for (auto &batch : *loader)
    step(batch);

  // Generic lambdas iterating what they are given.
  auto run = [&](auto &l) {
    for (auto &batch : l)
      (batch[0].data * w).sum().backward();
  };
  auto eval = [&](auto &l) {
    for (auto &batch : l)
      (void)batch;
  };
  auto by_lambda = torch::data::make_data_loader(Ones(), 2);
  auto eval_lambda = torch::data::make_data_loader(Ones(), 2);
  run(*by_lambda);
  eval(*eval_lambda);

  // A member function template.
  Trainer trainer;
  auto member = torch::data::make_data_loader(Ones(), 2);
  trainer.fit(*member);

  // One loader that trains and evaluates: even.
  auto both = torch::data::make_data_loader(Ones(), 2);
  for (auto &batch : *both)
    (void)batch;
  for (auto &batch : *both)
    step(batch);

  // A pass by hand (exact); never iterated (not followed).
  auto by_hand = torch::data::make_data_loader(Ones(), 2);
  for (auto it = by_hand->begin(); it != by_hand->end(); ++it)
    (void)*it;
  auto idle = torch::data::make_data_loader(Ones(), 2);

  // Passed where its type is written out.
  auto typed = torch::data::make_data_loader(Ones(), 2);
  fixed(*typed);
  return 0;
}

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
