// Built with g++ -Wall -Wextra -Werror: g++ does not warn about `total`
// (set but never read), clang does.
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

int main() {
  torch::Device device(torch::kCPU);
  Net net;
  net->to(device);
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  int total = 0;
  for (int step = 0; step < 3; ++step) {
    total += step;
    optimizer.zero_grad();
    torch::Tensor loss = net->forward(torch::ones({8, 4}, device)).sum();
    loss.backward();
    optimizer.step();
  }
  // Narrowing inside braces: an error in clang, a warning in g++.
  double rate = 0.5;
  float rates[] = {rate};
  (void)rates;
}
