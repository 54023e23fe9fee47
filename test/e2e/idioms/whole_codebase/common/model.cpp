#include "model.h"

ClassifierImpl::ClassifierImpl(int64_t features, int64_t hidden,
                               int64_t classes) {
  fc1 = register_module("fc1", torch::nn::Linear(features, hidden));
  bn1 = register_module("bn1", torch::nn::BatchNorm1d(hidden));
  fc2 = register_module("fc2", torch::nn::Linear(hidden, classes));
}

torch::Tensor ClassifierImpl::forward(torch::Tensor x) {
  x = torch::relu(bn1->forward(fc1->forward(x)));
  return torch::log_softmax(fc2->forward(x), /*dim=*/1);
}
