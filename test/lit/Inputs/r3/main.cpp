// Input of R3.test: .cuda() and .to(<CUDA device>) on tensors and modules.
#include <torch/torch.h>

#include <iostream>

#define TO_GPU(t) (t).cuda()

struct Net : torch::nn::Module {
  Net() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) {
    auto bias = torch::ones({2}).cuda();
    return fc->forward(x) + bias;
  }
  torch::nn::Linear fc{nullptr};
};

torch::Tensor no_device_in_scope(torch::Tensor t) { return t.cuda(); }

torch::Tensor device_parameter(torch::Tensor t, const torch::Device &target) {
  return t.to(torch::kCUDA);
}

int main() {
  torch::Device cpu(torch::kCPU);
  auto early = torch::rand({2, 4}).cuda();
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  auto x = torch::rand({8, 4}).cuda();
  auto y = x.to(torch::kCUDA);
  auto z = x.to(torch::kCUDA, torch::kFloat);
  auto w = x.to(torch::Device(torch::kCUDA, 0));
  auto v = x.to(torch::Device("cuda:0"));
  auto sum = x.cuda().sum();

  Net net;
  net.to(torch::kCUDA);
  auto model = std::make_shared<Net>();
  model->to(torch::Device("cuda:0"));
  torch::nn::Linear linear(4, 2);
  linear->to(torch::kCUDA);

  auto by_reference = [&](torch::Tensor t) { return t.cuda(); };
  auto no_capture = [](torch::Tensor t) { return t.cuda(); };

  // Negatives: already placed, CPU, strings, macros.
  auto placed = x.to(device);
  auto on_cpu = x.to(torch::kCPU);
  std::cout << "call x.cuda() or x.to(torch::kCUDA) to move\n";
  auto in_macro = TO_GPU(x);

  std::cout << early.sum().item<float>() << y.sum().item<float>()
            << z.sum().item<float>() << w.sum().item<float>()
            << v.sum().item<float>() << sum.item<float>()
            << by_reference(x).sum().item<float>()
            << no_capture(x).sum().item<float>()
            << placed.sum().item<float>() << on_cpu.sum().item<float>()
            << in_macro.sum().item<float>()
            << no_device_in_scope(x).sum().item<float>()
            << device_parameter(x, device).sum().item<float>() << '\n';
  return 0;
}

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
