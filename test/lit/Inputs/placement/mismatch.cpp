// Input of lint-ddp-device-mismatch.test: tensors placed by different means
// meeting in one operation (positives), and the same or unknown placements
// (negatives). Each function is one case.
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

torch::Tensor make_input() { return torch::rand({2, 4}).cuda(); }

torch::Tensor cuda_vs_cpu_factory() {
  auto a = torch::ones({2}).cuda();
  auto b = torch::zeros({2});
  return a + b;
}

torch::Tensor to_device_vs_cpu(torch::Tensor t, torch::Device device) {
  auto a = t.to(device);
  auto b = t.cpu();
  return a * b;
}

torch::Tensor through_locals() {
  auto a = torch::ones({2}).cuda();
  auto b = a;
  auto c = b.relu();
  auto d = torch::ones({2});
  auto e = d.view({2});
  return torch::matmul(c, e);
}

torch::Tensor through_assignment(torch::Tensor t) {
  torch::Tensor a;
  a = t.cuda();
  auto b = torch::randn({2});
  a = a.sigmoid();
  return torch::cat({a, b});
}

torch::Tensor through_helper() {
  auto a = make_input();
  auto b = torch::rand({2, 4});
  return a - b;
}

torch::Tensor through_arithmetic(torch::Tensor t, torch::Device device) {
  auto a = t.to(device) * 2 + 1;
  auto b = torch::ones({2}).mul(3);
  return a + b;
}

torch::Tensor tensor_method() {
  auto x = torch::ones({2, 2}, torch::kCUDA);
  auto y = torch::eye(2);
  return x.mm(y);
}

torch::Tensor module_output(torch::Tensor t, torch::Device device) {
  Net net;
  net->to(device);
  auto out = net->forward(t.to(device));
  auto mask = torch::ones({2});
  return out + mask;
}

torch::Tensor module_input(torch::Device device) {
  Net net;
  net->to(device);
  auto batch = torch::rand({8, 4});
  return net(batch);
}

torch::Tensor two_indices() {
  auto a = torch::zeros({2}, torch::Device("cuda:0"));
  auto b = torch::zeros({2}, torch::Device(torch::kCUDA, 1));
  return a + b;
}

torch::Tensor suppressed(torch::Tensor t) {
  auto a = t.cuda();
  auto b = torch::zeros({2});
  auto c = a + b; // NOLINT(ddp-device-mismatch)
  // NOLINTNEXTLINE(ddp-device-mismatch)
  return a - b;
}

// --- Negatives ---------------------------------------------------------

torch::Tensor same_current_device(torch::Tensor t) {
  auto a = t.cuda();
  auto b = torch::zeros({2}, torch::kCUDA);
  auto c = t.to(torch::kCUDA);
  return a + b + c;
}

torch::Tensor same_device_variable(torch::Tensor t, torch::Device device) {
  auto d = t.to(device);
  auto e = torch::ones({2}, device);
  auto f = torch::ones({2}, d.options());
  return d + e + f;
}

torch::Tensor unknown_parameter(torch::Tensor t, torch::Tensor u) {
  auto a = t.cuda();
  return a + u + t;
}

torch::Tensor different_paths(torch::Tensor t, bool gpu) {
  torch::Tensor a;
  if (gpu)
    a = t.cuda();
  else
    a = t.cpu();
  auto b = torch::zeros({2});
  return a + b;
}

torch::Tensor assigned_in_loop(torch::Tensor t, int n) {
  auto a = torch::zeros({2});
  for (int i = 0; i < n; ++i) {
    auto b = a.cuda();
    a = b;
  }
  return a + t.cuda();
}

torch::Tensor cpu_scalar(torch::Tensor t) {
  auto a = t.cuda();
  auto s = torch::tensor(2.0);
  auto loss = a.sum().cpu();
  return a * s + loss + a;
}

torch::Tensor moved_before_use(torch::Device device) {
  auto a = torch::zeros({2}).to(device);
  auto b = torch::ones({2});
  b = b.to(device);
  return a + b;
}

torch::Tensor two_device_variables(torch::Tensor t, torch::Device d1,
                                   torch::Device d2) {
  return t.to(d1) + t.to(d2);
}

torch::Tensor resolved_device(torch::Tensor t) {
  torch::Device device(torch::kCUDA);
  return t.to(device) + t.cuda();
}

torch::Tensor copy_across(torch::Tensor t) {
  auto a = t.cuda();
  auto b = torch::zeros({2});
  b.copy_(a);
  return a.index({torch::arange(2)});
}

// --- Control flow whose placements disagree or are not followed --------

torch::Tensor odd_control_flow(torch::Tensor t, int k) {
  torch::Tensor a = torch::zeros({2});
  switch (k) {
  case 0:
    a = t.cuda();
    break;
  case 1:
    return a + torch::ones({2});
  default:
    break;
  }
  try {
    a = t.cuda();
  } catch (...) {
    a = torch::zeros({2});
  }
  auto b = a + torch::ones({2});
  auto c = b + torch::zeros({2});
  std::vector<torch::Tensor> list{t.cuda(), torch::zeros({2})};
  for (const auto &x : list)
    c = c + x;
  auto [m, n] = std::make_pair(t.cuda(), torch::zeros({2}));
  auto g = k > 0 ? t.cuda() : t.cpu();
  return c + (m + n) + (g + torch::zeros({2}));
}

torch::Tensor captured_by_reference(torch::Tensor t) {
  auto a = t.cuda();
  auto move = [&a]() { a = a.cpu(); };
  move();
  return a + torch::zeros({2});
}

torch::Tensor recursive_helper(torch::Tensor t, int n) {
  return n > 0 ? recursive_helper(t, n - 1) : t.cuda();
}

torch::Tensor uses_recursive(torch::Tensor t) {
  return recursive_helper(t, 2) + torch::zeros({2});
}

template <typename T> torch::Tensor templated(T t) {
  return t.cuda() + torch::zeros({2});
}
