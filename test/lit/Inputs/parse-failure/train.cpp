// A trained model, and two errors: an undeclared learning rate in the
// optimizer's arguments (its construction becomes an invalid declaration
// with a parenthesised list of arguments that has no type) and a missing ';'.
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
  torch::optim::SGD opt(net->parameters(), learning_rate);
  torch::Tensor loss = net->forward(torch::ones({8, 4})).sum()
  loss.backward();
  opt.step();
}
