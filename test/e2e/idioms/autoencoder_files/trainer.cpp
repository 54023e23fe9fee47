#include "trainer.h"

#include <algorithm>
#include <vector>

Trainer::Trainer(Encoder encoder, Decoder decoder, Logger &log)
    : encoder_(std::move(encoder)), decoder_(std::move(decoder)), log_(log) {
  // One optimizer over both models: the decoder's parameters appended.
  std::vector<torch::Tensor> params = encoder_->parameters();
  auto decoder_params = decoder_->parameters();
  params.insert(params.end(), decoder_params.begin(), decoder_params.end());
  optimizer_ = std::make_unique<torch::optim::Adam>(
      params, torch::optim::AdamOptions(0.01));
}

double Trainer::epoch(const torch::Tensor &data, int64_t batch) {
  const int64_t n = data.size(0);
  double sum = 0;
  int64_t start = 0;
  while (start < n) {
    const int64_t end = std::min(start + batch, n);
    auto x = data.slice(0, start, end);
    optimizer_->zero_grad();
    auto loss = torch::mse_loss(decoder_->forward(encoder_->forward(x)), x);
    loss.backward();
    optimizer_->step();
    sum += loss.item<double>() * (end - start);
    start += batch;
  }
  return sum / n;
}

double Trainer::evaluate(const torch::Tensor &data) {
  torch::NoGradGuard no_grad;
  auto rebuilt = decoder_->forward(encoder_->forward(data));
  log_.line("evaluated " + std::to_string(data.size(0)) + " rows");
  return torch::mse_loss(rebuilt, data).item<double>();
}
