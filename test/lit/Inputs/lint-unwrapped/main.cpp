// Input of lint-ddp-unwrapped-model.test: a program that initialises DDP
// but leaves some trained models unwrapped.
#include <ddp/ddp.h>
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  torch::Device device = ddp::device();
  Net wrapped;
  wrapped->to(device);
  ddp::DistributedDataParallel wrapped_ddp(wrapped);
  torch::optim::SGD a(wrapped->parameters(), 0.1);

  Net placed;
  placed->to(device);
  torch::optim::SGD b(placed->parameters(), 0.1);

  Net unplaced;
  torch::optim::SGD c(unplaced->parameters(), 0.1);

  Net suppressed;
  torch::optim::SGD d(suppressed->parameters(), 0.1); // NOLINT(ddp-unwrapped-model)

  Net evaluated;
  evaluated->to(device);
  evaluated->forward(torch::ones({1, 4}));
  return 0;
}
