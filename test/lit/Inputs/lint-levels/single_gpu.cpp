// A single-GPU program: what migrate rewrites (prints, .cuda(), a CUDA
// device, a loader, a save, BatchNorm) and two hazards (a discarded move, a
// mismatch).
#include <torch/torch.h>

#include <iostream>

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc = register_module("fc", torch::nn::Linear(4, 2));
    bn = register_module("bn", torch::nn::BatchNorm1d(2));
  }
  torch::Tensor forward(torch::Tensor x) { return bn(fc(x)); }
  torch::nn::Linear fc{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};
TORCH_MODULE(Net);

int main() {
  torch::Device device(torch::kCUDA);
  Net net;
  net->to(device);
  torch::optim::SGD opt(net->parameters(), 0.1);
  auto data = torch::randn({64, 4});
  auto labels = torch::randn({64, 2});
  auto dataset = torch::data::datasets::TensorDataset({data, labels})
                     .map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader(std::move(dataset), 8);
  std::cout << "training" << std::endl;
  for (auto &batch : *loader) {
    batch.data.to(device);
    auto x = batch.data.cuda();
    auto out = net->forward(x);
    auto loss = torch::mse_loss(out, torch::zeros({8, 2}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    std::cout << "loss " << loss.item<float>() << std::endl;
  }
  std::cout << "done" << std::endl;
  torch::save(net, "net.pt");
}
