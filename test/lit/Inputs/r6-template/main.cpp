// Input of R6-template.test: an optimizer whose arguments depend on a
// template parameter (its initialiser is a ParenListExpr with no type).
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

template <class T> void train(Net& net, T lr) {
  torch::optim::SGD opt(net->parameters(), lr);
  opt.step();
}
int main() { Net net; torch::Device device(torch::kCPU); net->to(device); train(net, 0.1); }
