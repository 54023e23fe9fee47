#include "blobnet.h"

BlobNetImpl::BlobNetImpl() {
  fc1 = register_module("fc1", torch::nn::Linear(2, 16));
  bn = register_module("bn", torch::nn::BatchNorm1d(16));
  fc2 = register_module("fc2", torch::nn::Linear(16, 3));
}

torch::Tensor BlobNetImpl::forward(torch::Tensor x) {
  return fc2(torch::relu(bn(fc1(x))));
}
