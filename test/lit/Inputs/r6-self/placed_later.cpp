// Networks owning their optimizer, placed after they are built: by the
// agent's constructor that holds them (Actor, Critic), by main (Scorer,
// through a holder and a pointer); one class with an instance nobody places
// (Twin): its wrap stays in its constructor.
#include <torch/torch.h>

#include <memory>

struct Actor : torch::nn::Module {
  Actor() : fc(register_module("fc", torch::nn::Linear(4, 1))),
            optimizer(parameters(), 1e-3) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
  torch::optim::Adam optimizer;
};

struct Critic : torch::nn::Module {
  Critic() : fc(register_module("fc", torch::nn::Linear(5, 1))),
             optimizer(parameters(), 1e-3) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
  torch::optim::Adam optimizer;
};

struct ScorerImpl : torch::nn::Module {
  ScorerImpl() : fc(register_module("fc", torch::nn::Linear(4, 1))),
                 optimizer(parameters(), 1e-2) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
  torch::optim::SGD optimizer;
};
TORCH_MODULE(Scorer);

struct Twin : torch::nn::Module {
  Twin() : fc(register_module("fc", torch::nn::Linear(4, 1))),
           optimizer(parameters(), 1e-3) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
  torch::optim::Adam optimizer;
};

class Agent {
public:
  explicit Agent(torch::Device device) {
    actor_.to(device);
    critic1_.to(device);
    critic2_.to(device);
    critic2_.to(torch::kFloat);
    twin_a_.to(device);
  }
  void update(torch::Tensor s) {
    for (auto *net : {static_cast<torch::nn::Module *>(&actor_)}) {
      (void)net;
    }
    auto a = actor_.forward(s);
    auto loss = a.mean() + critic1_.forward(torch::cat({s, a}, 1)).mean() +
                critic2_.forward(torch::cat({s, a}, 1)).mean() +
                twin_a_.forward(s).mean() + twin_b_.forward(s).mean();
    actor_.optimizer.zero_grad();
    critic1_.optimizer.zero_grad();
    critic2_.optimizer.zero_grad();
    twin_a_.optimizer.zero_grad();
    twin_b_.optimizer.zero_grad();
    loss.backward();
    actor_.optimizer.step();
    critic1_.optimizer.step();
    critic2_.optimizer.step();
    twin_a_.optimizer.step();
    twin_b_.optimizer.step();
  }

private:
  Actor actor_;
  Critic critic1_, critic2_;
  Twin twin_a_, twin_b_;
};

int main() {
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  Agent agent(device);
  Scorer scorer;
  scorer->to(device);
  auto shared = std::make_shared<ScorerImpl>();
  shared->to(device);
  for (int step = 0; step < 10; ++step) {
    auto s = torch::randn({8, 4}, device);
    agent.update(s);
    auto loss = scorer->forward(s).mean() + shared->forward(s).mean();
    scorer->optimizer.zero_grad();
    shared->optimizer.zero_grad();
    loss.backward();
    scorer->optimizer.step();
    shared->optimizer.step();
  }
  return 0;
}
