// An autoencoder trained by a class of its own file: an encoder and a
// decoder whose parameters one optimizer gathers into one vector, batches
// cut by hand in a while loop, metrics through a logger handed std::cout.
#pragma once
#include "logger.h"

#include <torch/torch.h>

struct EncoderImpl : torch::nn::Module {
  EncoderImpl()
      : fc1(register_module("fc1", torch::nn::Linear(8, 16))),
        fc2(register_module("fc2", torch::nn::Linear(16, 3))) {}
  torch::Tensor forward(const torch::Tensor &x) {
    return fc2->forward(torch::tanh(fc1->forward(x)));
  }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Encoder);

struct DecoderImpl : torch::nn::Module {
  DecoderImpl()
      : fc1(register_module("fc1", torch::nn::Linear(3, 16))),
        fc2(register_module("fc2", torch::nn::Linear(16, 8))) {}
  torch::Tensor forward(const torch::Tensor &z) {
    return fc2->forward(torch::tanh(fc1->forward(z)));
  }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Decoder);

class Trainer {
public:
  Trainer(Encoder encoder, Decoder decoder, Logger &log);
  /// One pass over the data in batches of `batch`; returns the mean loss.
  double epoch(const torch::Tensor &data, int64_t batch);
  double evaluate(const torch::Tensor &data);

private:
  Encoder encoder_;
  Decoder decoder_;
  Logger &log_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
};
