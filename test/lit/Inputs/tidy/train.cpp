// A single-GPU trainer with a bit of every hazard, for the ddp-* checks run
// by ddpify lint and by clang-tidy.
#include <torch/torch.h>

#include <iostream>

struct Net : torch::nn::Module {
  Net() {
    fc = register_module("fc", torch::nn::Linear(8, 2));
    norm = register_module("norm", torch::nn::BatchNorm1d(2));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto mask = torch::ones({x.size(0), 2}); // created on the CPU
    return norm(fc(x)) * mask;
  }
  torch::nn::Linear fc{nullptr};
  torch::nn::BatchNorm1d norm{nullptr};
};

int main() {
  torch::Device device(torch::kCUDA, 0);
  auto net = std::make_shared<Net>();
  net->to(device);
  auto data = torch::data::datasets::TensorDataset(torch::randn({64, 8}))
                  .map(torch::data::transforms::Stack<torch::data::TensorExample>());
  auto loader = torch::data::make_data_loader(std::move(data), 16);
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (auto &batch : *loader) {
      auto x = batch.data.cuda();
      auto loss = net->forward(x).pow(2).mean();
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      x.to(torch::kCPU);
      std::cout << "loss " << loss.item<float>() << std::endl;
      if (loss.item<float>() < 0.01f)
        break;
    }
  }
  std::cout << "done" << std::endl; // NOLINT(ddp-unguarded-output)
  torch::save(net, "net.pt");
}
