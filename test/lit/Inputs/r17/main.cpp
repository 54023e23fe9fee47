// Input of R17.test: tensors trained by an optimizer of their own, outside
// any module (a soft actor-critic's temperature), beside optimizers over
// modules' parameters that R6 wraps.
#include <torch/torch.h>

#include <memory>
#include <vector>

struct PolicyImpl : torch::nn::Module {
  PolicyImpl() : fc(register_module("fc", torch::nn::Linear(4, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Policy);

// A module with a registered parameter: trained as the module's.
struct ScaleImpl : torch::nn::Module {
  ScaleImpl() {
    scale = register_parameter("scale", torch::ones({1}, torch::requires_grad()));
  }
  torch::Tensor scale;
};
TORCH_MODULE(Scale);

// The temperature a member, its optimizer a member built in the
// constructor's initialiser list.
class Sac {
public:
  explicit Sac(torch::Device device)
      : log_alpha_(torch::zeros(
            {1}, torch::TensorOptions().device(device).requires_grad(true))),
        alpha_optimizer_({log_alpha_}, torch::optim::AdamOptions(3e-4)) {}

  void update(torch::Tensor log_prob) {
    torch::Tensor loss = -(log_alpha_ * (log_prob + 1.0).detach()).mean();
    alpha_optimizer_.zero_grad();
    loss.backward();
    alpha_optimizer_.step();
  }

private:
  torch::Tensor log_alpha_;
  torch::optim::Adam alpha_optimizer_;
};

// The temperature initialised in the class body, its optimizer made with
// std::make_unique in the constructor.
class Temperature {
public:
  Temperature() {
    optimizer_ = std::make_unique<torch::optim::Adam>(
        std::vector<torch::Tensor>{log_alpha_},
        torch::optim::AdamOptions(3e-4));
  }
  void update(torch::Tensor log_prob) {
    optimizer_->zero_grad();
    (-(log_alpha_ * log_prob.detach()).mean()).backward();
    optimizer_->step();
  }

private:
  torch::Tensor log_alpha_ = torch::zeros({1}, torch::requires_grad());
  std::unique_ptr<torch::optim::Adam> optimizer_;
};

void train(torch::Device device) {
  Policy policy;
  policy->to(device);
  torch::optim::Adam policy_opt(policy->parameters(),
                                torch::optim::AdamOptions(3e-4));

  torch::Tensor log_alpha = torch::zeros({1}, torch::requires_grad());
  torch::optim::Adam alpha_opt({log_alpha}, torch::optim::AdamOptions(3e-4));

  auto log_beta = torch::zeros({1}).requires_grad_();
  torch::Tensor log_gamma = torch::zeros({1});
  log_gamma.set_requires_grad(true);
  torch::optim::SGD pair_opt({log_beta, log_gamma}, 0.01);

  torch::Tensor fixed = torch::zeros({1});
  torch::optim::SGD fixed_opt({fixed}, 0.01);

  torch::optim::SGD weight_opt({policy->fc->weight}, 0.01);

  Scale scale;
  scale->to(device);
  torch::optim::SGD scale_opt({scale->scale}, 0.01);

  for (int step = 0; step < 3; ++step) {
    torch::Tensor x = torch::ones({2, 4}, device);
    torch::Tensor loss = policy->forward(x).sum() * log_alpha.exp() +
                         log_beta.exp().sum() + log_gamma.exp().sum() +
                         scale->scale.sum();
    policy_opt.zero_grad();
    alpha_opt.zero_grad();
    pair_opt.zero_grad();
    scale_opt.zero_grad();
    loss.backward();
    policy_opt.step();
    alpha_opt.step();
    pair_opt.step();
    fixed_opt.step();
    weight_opt.step();
    scale_opt.step();
  }
}

int main() {
  torch::Device device(torch::kCPU);
  train(device);
  Sac sac(device);
  sac.update(torch::ones({1}));
  Temperature temperature;
  temperature.update(torch::ones({1}));
  return 0;
}
