// Input of R3-shared.test: several `.cuda()` / `.to(kCUDA)` in functions
// that have no torch::Device of their own.
#include <torch/torch.h>

#include <iostream>
#include <string>

struct Net : torch::nn::Module {
  Net() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};

void train(Net &net, torch::optim::Optimizer &opt) {
  for (int i = 0; i < 3; ++i) {
    auto x = torch::randn({8, 4}).cuda();
    auto y = torch::randn({8, 2}).to(torch::kCUDA);
    opt.zero_grad();
    torch::mse_loss(net.forward(x), y).backward();
    opt.step();
  }
}

// One use: it says ddp::device() itself.
torch::Tensor single(torch::Tensor t) { return t.cuda(); }

// On one line: no statement of its own to declare the device before.
torch::Tensor pair(torch::Tensor a, torch::Tensor b) { return a.cuda() + b.cuda(); }

// `device` is taken (a string here): the variable gets another name.
void named(torch::Tensor a, torch::Tensor b) {
  std::string device = "gpu";
  std::cout << device << (a.cuda() + b.cuda()).sum().item<float>() << '\n';
}

// Inside a lambda the local is not captured: ddp::device() there.
void in_lambda(torch::Tensor a) {
  auto up = [](torch::Tensor t) { return t.cuda(); };
  auto b = up(a).cuda();
  auto c = a.cuda();
  (void)b;
  (void)c;
}

int main() {
  auto net = std::make_shared<Net>();
  net->to(torch::kCUDA);
  torch::optim::SGD opt(net->parameters(), 0.1);
  train(*net, opt);
  auto probe = torch::ones({1, 4}).cuda();
  std::cout << probe.sum().item<float>() << std::endl;
}
