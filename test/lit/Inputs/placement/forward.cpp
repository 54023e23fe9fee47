// Input of lint-ddp-cpu-factory-in-forward.test: tensor factories without a
// device inside a module's forward (positives, with and without a fix-it)
// and the forms that are fine (negatives).
#include <torch/torch.h>

#include <vector>

struct Positives : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    auto noise = torch::randn({4});
    auto mask = torch::ones({4}, torch::kFloat);
    auto steps = torch::arange(4);
    return x + noise * mask + steps;
  }
};

struct ConstRefInput : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor &input) {
    return input + torch::zeros({input.size(0), 4});
  }
};

struct NoTensorParameter : torch::nn::Module {
  torch::Tensor forward(std::vector<torch::Tensor> xs) {
    return torch::stack(xs) + torch::eye(2);
  }
};

struct Negatives : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    auto a = torch::zeros({4}, x.options());
    auto b = torch::ones({4}, torch::TensorOptions().device(x.device()));
    auto c = torch::rand({4}).to(x.device());
    auto d = torch::zeros_like(x);
    auto e = torch::tensor(0.5);
    auto f = torch::empty({4}, torch::dtype(torch::kFloat).device(x.device()));
    return x + a + b + c + d + e + f;
  }
  torch::Tensor helper(torch::Tensor x) { return x + torch::zeros({4}); }
};

struct NotAModule {
  torch::Tensor forward(torch::Tensor x) { return x + torch::zeros({4}); }
};

struct Suppressed : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    auto a = torch::zeros({4}); // NOLINT(ddp-cpu-factory-in-forward)
    // NOLINTNEXTLINE(ddp-cpu-factory-in-forward)
    auto b = torch::ones({4});
    return x + a + b;
  }
};

int main() {
  Positives p;
  ConstRefInput c;
  NoTensorParameter n;
  Negatives g;
  NotAModule m;
  Suppressed s;
  auto x = torch::ones({4});
  return (p.forward(x) + c.forward(x.view({1, 4})) + n.forward({x, x}) +
          g.forward(x) + m.forward(x) + s.forward(x))
                 .numel() > 0
             ? 0
             : 1;
}
