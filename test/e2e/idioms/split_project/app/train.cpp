// Trains BlobNet on three Gaussian blobs; prints the probe accuracy with a
// forward pass inside the print.
// Usage: blobs [batch_size]
#include "blobnet.h"

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <string>

struct Blobs : torch::data::datasets::Dataset<Blobs> {
  torch::Tensor x, y;
  explicit Blobs(int64_t n) {
    y = torch::arange(n) % 3;
    auto centres = torch::tensor({{-2.0, 0.0}, {2.0, 0.0}, {0.0, 2.5}});
    x = centres.index_select(0, y) + 0.6 * torch::randn({n, 2});
  }
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  torch::manual_seed(3);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Blobs(384).map(torch::data::transforms::Stack<>()), batch_size);
  Blobs probe(60);
  BlobNet net;
  net->to(device);
  torch::optim::Adam optimizer(net->parameters(), 0.01);
  for (int epoch = 1; epoch <= 4; ++epoch) {
    net->train();
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = torch::nll_loss(
          torch::log_softmax(net->forward(batch.data.to(device)), 1),
          batch.target.to(device));
      loss.backward();
      optimizer.step();
    }
    net->eval();
    std::cout << "epoch " << epoch << " probe_correct "
              << net->forward(probe.x.cuda())
                     .argmax(1)
                     .eq(probe.y.cuda())
                     .sum()
                     .item<int64_t>()
              << '\n';
  }
  return 0;
}
