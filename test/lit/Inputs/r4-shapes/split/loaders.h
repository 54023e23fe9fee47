// Input of R4-types.test: an alias and a prototype in a header, the loader
// made in another file.
#pragma once
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
using TrainLoader =
    torch::data::StatelessDataLoader<Stacked,
                                     torch::data::samplers::RandomSampler>;

std::unique_ptr<TrainLoader> make_train_loader();
