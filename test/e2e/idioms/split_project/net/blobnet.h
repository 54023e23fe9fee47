// A small classifier with batch normalisation.
#pragma once

#include <torch/torch.h>

struct BlobNetImpl : torch::nn::Module {
  BlobNetImpl();
  torch::Tensor forward(torch::Tensor x);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};
TORCH_MODULE(BlobNet);
