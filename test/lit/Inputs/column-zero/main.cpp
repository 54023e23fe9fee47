#include <torch/torch.h>
#include <iostream>

struct Net : torch::nn::Module {
Net() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
torch::nn::Linear fc{nullptr};
};

int main() {
torch::Device device(torch::kCUDA);
auto net = std::make_shared<Net>();
net->to(device);
torch::optim::SGD opt(net->parameters(), 0.1);
for (int epoch = 0; epoch < 3; ++epoch) {
opt.zero_grad();
auto x = torch::randn({8, 4}).cuda();
auto loss = net->forward(x).sum();
loss.backward();
opt.step();
std::cout << "epoch " << epoch << " loss " << loss.item<float>() << std::endl;
}
torch::save(net, "net.pt");
}
