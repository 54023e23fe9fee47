#pragma once
#include <torch/torch.h>

#include <cstdint>

struct Points : torch::data::datasets::Dataset<Points> {
  explicit Points(int64_t n) : x(torch::randn({n, 3})), y(torch::randn({n, 1})) {}
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
  torch::Tensor x, y;
};
using PointSet =
    torch::data::datasets::MapDataset<Points, torch::data::transforms::Stack<>>;
using ShuffledLoader =
    torch::data::StatelessDataLoader<PointSet,
                                     torch::data::samplers::RandomSampler>;
using OrderedLoader =
    torch::data::StatelessDataLoader<PointSet,
                                     torch::data::samplers::SequentialSampler>;

namespace fit {
// Trains one epoch: the loader's batches reach backward() in loops.cpp.
double epoch(torch::nn::Linear &net, ShuffledLoader &loader,
             torch::optim::Optimizer &optimizer);
} // namespace fit

class Evaluator {
public:
  explicit Evaluator(torch::nn::Linear net) : net_(std::move(net)) {}
  // Only evaluates: no backward() in its body.
  double mean_error(OrderedLoader &loader);

private:
  torch::nn::Linear net_;
};

// Counts batches without training on them.
int64_t count_batches(OrderedLoader &loader);
// Names the loader and never iterates it.
void describe(const char *name, OrderedLoader &loader);
