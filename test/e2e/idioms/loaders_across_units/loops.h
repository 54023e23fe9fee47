#pragma once
#include <torch/torch.h>

#include <cstdint>

// Readings of a noisy sensor: 4 inputs, 1 output, drawn from the default
// generator when constructed.
struct Readings : torch::data::datasets::Dataset<Readings> {
  explicit Readings(int64_t n);
  torch::data::Example<> get(size_t index) override {
    return {x[index], y[index]};
  }
  torch::optional<size_t> size() const override { return x.size(0); }
  torch::Tensor x, y;
};

using ReadingBatches =
    torch::data::datasets::MapDataset<Readings,
                                      torch::data::transforms::Stack<>>;
using TrainLoader =
    torch::data::StatelessDataLoader<ReadingBatches,
                                     torch::data::samplers::RandomSampler>;
using EvalLoader =
    torch::data::StatelessDataLoader<ReadingBatches,
                                     torch::data::samplers::SequentialSampler>;

namespace loops {
// One pass over the loader; returns the summed loss of its samples.
double train_epoch(torch::nn::Sequential &net, TrainLoader &loader,
                   torch::optim::Optimizer &optimizer, torch::Device device);
// The mean squared error over every sample of the loader.
double mean_squared_error(torch::nn::Sequential &net, EvalLoader &loader,
                          torch::Device device);
} // namespace loops
