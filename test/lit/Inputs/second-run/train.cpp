// A single-GPU training program; its compilation database predates ddpify's
// runtime, so it has no include folder holding <ddp/ddp.h>.
#include <torch/torch.h>
#include <iostream>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

int main() {
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  Net net;
  net->to(device);
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  for (int epoch = 0; epoch < 3; ++epoch) {
    optimizer.zero_grad();
    torch::Tensor loss = net->forward(torch::ones({8, 4}).cuda()).sum();
    loss.backward();
    optimizer.step();
    std::cout << "loss " << loss.item<float>() << '\n';
  }
  torch::save(net, "net.pt");
}
