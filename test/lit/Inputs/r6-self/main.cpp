// Input of R6-self.test: networks that own their optimizer, as
// reinforcement-learning agents write them, held by value in an agent.
#include <ddp/ddp.h>
#include <torch/torch.h>

#include <memory>

// The optimizer a member initialised from parameters(), placed in the body.
struct Actor : torch::nn::Module {
  Actor(int64_t in, torch::Device device)
      : fc(register_module("fc", torch::nn::Linear(in, 1))),
        optimizer(parameters(), torch::optim::AdamOptions(1e-3)) {
    to(device);
  }
  torch::Tensor forward(torch::Tensor x) { return torch::tanh(fc(x)); }
  torch::nn::Linear fc;
  torch::optim::Adam optimizer;
};

// The optimizer made in the body through this->parameters(), converted
// after its placement.
struct Critic : torch::nn::Module {
  Critic(int64_t in, torch::Device device) {
    fc = register_module("fc", torch::nn::Linear(in, 1));
    optimizer = std::make_unique<torch::optim::Adam>(
        this->parameters(), torch::optim::AdamOptions(1e-3));
    this->to(device);
    this->to(torch::kDouble);
  }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer;
};

// One class for the value network and its target, which is only copied
// into under NoGradGuard.
struct Value : torch::nn::Module {
  Value(int64_t in, torch::Device device)
      : fc(register_module("fc", torch::nn::Linear(in, 1))),
        optimizer(parameters(), torch::optim::AdamOptions(1e-3)) {
    to(device);
  }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
  torch::optim::Adam optimizer;
};

// A class template owning its optimizer.
template <int64_t In> struct Scorer : torch::nn::Module {
  Scorer() : fc(register_module("fc", torch::nn::Linear(In, 1))),
             optimizer(parameters(), 0.1) {}
  torch::nn::Linear fc;
  torch::optim::SGD optimizer;
};

// Already wrapped by hand: left alone.
struct Wrapped : torch::nn::Module {
  Wrapped() : fc(register_module("fc", torch::nn::Linear(4, 1))),
              optimizer(parameters(), 0.1) {
    ddp::distribute(*this);
  }
  torch::nn::Linear fc;
  torch::optim::SGD optimizer;
};

// No optimizer of its own: trained from outside, wrapped where it is.
struct Plain : torch::nn::Module {
  Plain() { fc = register_module("fc", torch::nn::Linear(4, 1)); }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};

struct Agent {
  explicit Agent(torch::Device device)
      : actor(4, device), critic(4, device), value(4, device),
        target(4, device) {}
  void update(torch::Tensor states) {
    auto actor_loss = actor.forward(states).pow(2).mean();
    actor.optimizer.zero_grad();
    actor_loss.backward();
    actor.optimizer.step();
    auto critic_loss = critic.forward(states.to(torch::kDouble)).pow(2).mean();
    critic.optimizer->zero_grad();
    critic_loss.backward();
    critic.optimizer->step();
    auto value_loss = (value.forward(states) - target.forward(states).detach())
                          .pow(2)
                          .mean();
    value.optimizer.zero_grad();
    value_loss.backward();
    value.optimizer.step();
    torch::NoGradGuard no_grad;
    auto from = value.parameters();
    auto to = target.parameters();
    for (size_t i = 0; i < from.size(); ++i)
      to[i].copy_(0.99 * to[i] + 0.01 * from[i]);
  }
  Actor actor;
  Critic critic;
  Value value;
  Value target;
};

int main() {
  torch::Device device(torch::kCPU);
  Agent agent(device);
  Scorer<4> scorer;
  Wrapped wrapped;
  for (int step = 0; step < 2; ++step) {
    agent.update(torch::ones({2, 4}));
    scorer.optimizer.step();
    wrapped.optimizer.step();
  }
  Plain plain;
  plain.to(device);
  torch::optim::SGD plain_optimizer(plain.parameters(), 0.1);
  plain_optimizer.step();
}
