#pragma once
#include <torch/torch.h>

struct Blobs : torch::data::datasets::Dataset<Blobs> {
  torch::Tensor x = torch::randn({64, 4}), y = torch::randn({64, 1});
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return 64; }
};
using BlobSet =
    torch::data::datasets::MapDataset<Blobs, torch::data::transforms::Stack<>>;

std::unique_ptr<torch::data::StatelessDataLoader<
    BlobSet, torch::data::samplers::SequentialSampler>>
make_loader(int64_t batch);

double
train_epoch(torch::nn::Linear &net, torch::optim::SGD &opt,
            torch::data::StatelessDataLoader<
                BlobSet, torch::data::samplers::SequentialSampler> &loader);

struct Session {
  explicit Session(int64_t batch);
  std::unique_ptr<torch::data::StatelessDataLoader<
      BlobSet, torch::data::samplers::SequentialSampler>>
      loader;
};
