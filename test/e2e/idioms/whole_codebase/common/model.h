#pragma once
#include <torch/torch.h>

// Linear, BatchNorm1d, ReLU, Linear: a classifier of feature vectors.
struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl(int64_t features, int64_t hidden, int64_t classes);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn1{nullptr};
};
TORCH_MODULE(Classifier);
