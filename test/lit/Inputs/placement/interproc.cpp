// Input of lint-ddp-device-mismatch-flow.test: placements passed into the
// program's own helpers (a helper is analysed as called, per call).
#include <torch/torch.h>

#include <vector>

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(3, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

// --- Positives -------------------------------------------------------------

// The model and the batch come from the caller, the target is made here.
void train_step(Net &net, torch::Tensor x) {
  auto out = net->forward(x);
  auto loss = torch::mse_loss(out, torch::zeros({4, 2}));
  loss.backward();
}

void run_training(torch::Device device) {
  Net net;
  net->to(device);
  auto x = torch::randn({4, 3}).to(device);
  train_step(net, x);
}

// The device comes from the caller: the batch moved with it meets a CPU
// tensor.
float train_epoch(Net net, torch::Device device,
                  const std::vector<torch::Tensor> &batches) {
  float total = 0;
  for (const auto &b : batches) {
    auto x = b.to(device);
    auto out = net(x);
    auto shift = out + torch::ones({4, 2});
    total += shift.sum().item<float>();
  }
  return total;
}

float run_epochs(const std::vector<torch::Tensor> &batches) {
  Net net;
  torch::Device device(torch::kCUDA, 0);
  net->to(device);
  return train_epoch(net, device, batches);
}

// A tensor returned through a helper that was given it.
torch::Tensor identity(torch::Tensor t) { return t; }

torch::Tensor through_identity(torch::Tensor t) {
  auto g = identity(t.cuda());
  return g + torch::zeros({3});
}

// --- Negatives -------------------------------------------------------------

// Called with CPU tensors only: no mismatch in this context.
torch::Tensor add_cpu_bias(torch::Tensor x) { return x + torch::zeros({3}); }

torch::Tensor cpu_caller() { return add_cpu_bias(torch::ones({3})); }

// Called with nothing known: nothing claimed.
torch::Tensor unknown_caller(torch::Tensor t) { return add_cpu_bias(t); }
