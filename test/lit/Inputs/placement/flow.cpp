// Input of lint-ddp-device-mismatch-flow.test: placements followed through
// control flow on the CFG. Each function is one case.
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(3, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

// --- Positives -------------------------------------------------------------

// After a first mismatch the result is still on a CUDA device.
torch::Tensor chain_after_mismatch(torch::Device device) {
  auto w = torch::ones({10}).to(device);
  auto b = torch::zeros({10}).cuda();
  auto wb = w + b;
  return wb + torch::zeros({10});
}

// Both branches place it on a CUDA device, not the same one.
torch::Tensor branches_both_cuda(torch::Tensor t, torch::Device device,
                                 bool fast) {
  torch::Tensor x;
  if (fast)
    x = t.cuda();
  else
    x = t.to(device);
  return x * torch::ones({3});
}

// A loop that keeps the tensor where it is: the fixed point is CUDA.
float loop_keeps_placement(torch::Tensor t, int steps) {
  auto x = t.cuda();
  float total = 0;
  for (int i = 0; i < steps; ++i) {
    x = x * 0.5;
    x = torch::relu(x);
    total += x.sum().item<float>();
  }
  auto y = x - torch::rand({3});
  return total + y.sum().item<float>();
}

// Inside a training loop, with values carried from before it.
float training_loop(torch::Device device, int steps) {
  Net net;
  net->to(device);
  auto target = torch::zeros({4, 2});
  float last = 0;
  for (int s = 0; s < steps; ++s) {
    auto x = torch::randn({4, 3}).to(device);
    auto out = net->forward(x);
    auto loss = torch::mse_loss(out, target);
    last = loss.item<float>();
  }
  return last;
}

// A do-while body runs at least once.
torch::Tensor do_while_runs_once(torch::Tensor t, int k) {
  torch::Tensor b = t;
  do {
    b = b.cuda();
  } while (k-- > 0);
  return b + torch::zeros({2});
}

// goto is control flow like any other.
torch::Tensor with_goto(torch::Tensor t, bool skip) {
  auto a = t.cuda();
  if (skip)
    goto done;
  a = a * 2;
done:
  return a + torch::zeros({2});
}

// Every case of the switch places it on a CUDA device.
torch::Tensor switch_all_cuda(torch::Tensor t, int k, torch::Device device) {
  torch::Tensor a;
  switch (k) {
  case 0:
    a = t.cuda();
    break;
  case 1:
    a = t.to(device);
    break;
  default:
    a = t.to(torch::Device(torch::kCUDA, 1));
    break;
  }
  return a + torch::zeros({2});
}

// --- Negatives -------------------------------------------------------------

// A loop that may move it to the CPU on some iteration.
torch::Tensor loop_may_move(torch::Tensor t, int n) {
  auto x = t.cuda();
  for (int i = 0; i < n; ++i)
    if (i % 2)
      x = x.cpu();
  return x + torch::zeros({2});
}

// Some CUDA device against the process's device: they may be one.
torch::Tensor some_cuda_and_process_device(torch::Tensor t,
                                           torch::Device device, bool f) {
  auto a = f ? t.cuda() : t.to(device);
  return a + t.to(device);
}

// Carried around a loop on the CPU first, then on CUDA: not certain.
void loop_carried(torch::Tensor t, int n) {
  auto acc = torch::zeros({3});
  auto cpu = torch::ones({3});
  while (n-- > 0) {
    acc = acc + cpu;
    acc = acc.cuda();
  }
}

// A switch with no default: one path keeps the CPU tensor.
torch::Tensor switch_without_default(torch::Tensor t, int k) {
  auto a = torch::zeros({2});
  switch (k) {
  case 0:
    a = t.cuda();
    break;
  case 1:
    a = t.cuda();
    break;
  }
  return a + torch::zeros({2}).cuda();
}

// An exception may leave the try block before the move.
torch::Tensor try_may_throw(torch::Tensor t) {
  auto a = torch::zeros({2});
  try {
    a = a.cuda();
  } catch (const std::exception &) {
  }
  return a + torch::ones({2});
}

// Unreachable code is not reported.
torch::Tensor after_return(torch::Tensor t) {
  auto a = t.cuda();
  return a;
  return a + torch::zeros({2});
}
