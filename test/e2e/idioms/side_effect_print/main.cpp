// Regression with a BatchNorm network whose progress lines do work: a
// checkpoint counter incremented inside the print (and used afterwards), and
// a probe loss computed by a forward pass inside the print.
// Usage: side_effects [batch_size]
#include <torch/torch.h>

#include <iomanip>
#include <iostream>
#include <string>

struct RegressorImpl : torch::nn::Module {
  RegressorImpl()
      : body(torch::nn::Linear(8, 32), torch::nn::BatchNorm1d(32),
             torch::nn::ReLU(), torch::nn::Linear(32, 1)) {
    register_module("body", body);
  }
  torch::Tensor forward(torch::Tensor x) { return body->forward(x); }
  torch::nn::Sequential body;
};
TORCH_MODULE(Regressor);

struct Samples : torch::data::datasets::Dataset<Samples> {
  torch::Tensor x, y;
  Samples(int64_t n, const torch::Tensor &w) {
    x = torch::randn({n, 8});
    y = torch::relu(x.matmul(w)) - 0.5 * x.narrow(1, 0, 1) +
        0.1 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
};

// The loss on a fixed probe set, in whatever mode the model is in.
double probe_loss(Regressor &model, const torch::Tensor &x,
                  const torch::Tensor &y) {
  return torch::mse_loss(model->forward(x), y).item<double>();
}

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  torch::manual_seed(4);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);

  auto w = torch::randn({8, 1});
  Samples probe(64, w);
  auto probe_x = probe.x.to(device), probe_y = probe.y.to(device);
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Samples(512, w).map(torch::data::transforms::Stack<>()), batch_size);

  Regressor model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(0.05).momentum(0.9));

  int checkpoint = 0;
  std::cout << std::fixed << std::setprecision(6);
  for (int epoch = 1; epoch <= 4; ++epoch) {
    double loss_sum = 0;
    int64_t batches = 0;
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data.to(device)),
                                  batch.target.to(device));
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      batches++;
    }
    std::cout << "epoch " << epoch << " train_loss " << loss_sum / batches
              << " probe_loss " << probe_loss(model, probe_x, probe_y) << '\n';
    if (epoch % 2 == 0) {
      std::cout << "checkpoint " << ++checkpoint << " after epoch " << epoch
                << std::endl;
      torch::save(model, "regressor-" + std::to_string(checkpoint) + ".pt");
      if (checkpoint ==
          1) { // a slower learning rate after the first checkpoint
        for (auto &group : optimizer.param_groups())
          static_cast<torch::optim::SGDOptions &>(group.options()).lr(0.01);
      }
    }
  }
  std::cout << "checkpoints " << checkpoint << '\n';
}
