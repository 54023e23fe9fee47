// Input of R6-parts.test: optimizers over disjoint parts of one module (an
// actor-critic's two heads, an encoder trained apart from its decoder), as
// reinforcement-learning programs write them.
#include <torch/torch.h>

#include <vector>

struct NetImpl : torch::nn::Module {
  NetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(4, 8))),
        fc2(register_module("fc2", torch::nn::Linear(8, 2))),
        fc3(register_module("fc3", torch::nn::Linear(2, 1))) {}
  torch::Tensor forward(torch::Tensor x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Net);

// Held by value.
struct Plain : torch::nn::Module {
  Plain()
      : fc1(register_module("fc1", torch::nn::Linear(4, 8))),
        fc2(register_module("fc2", torch::nn::Linear(8, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};

// A network whose parts come from members of its own (no constructor body
// here: its class has none ddpify could edit).
struct Heads : torch::nn::Module {
  torch::nn::Linear actor{register_module("actor", torch::nn::Linear(4, 2))};
  torch::nn::Linear critic{register_module("critic", torch::nn::Linear(4, 1))};
};

// An agent holding its network, placed in its constructor.
struct Agent {
  explicit Agent(torch::Device device) {
    net->to(device);
  }
  Net net;
};

// A trainer whose network and optimizers are all in-class members: no
// statement can come before the optimizers.
struct Trainer {
  torch::Device device{torch::kCPU};
  Heads heads;
  torch::optim::Adam actor_opt{heads.actor->parameters(),
                               torch::optim::AdamOptions(1e-3)};
  torch::optim::Adam critic_opt{heads.critic->parameters(),
                                torch::optim::AdamOptions(1e-3)};
};

void step(torch::optim::Optimizer &a, torch::optim::Optimizer &b,
          torch::Tensor loss) {
  a.zero_grad();
  b.zero_grad();
  loss.backward();
  a.step();
  b.step();
}

// A holder, `network->fc1->parameters()`.
void holder(torch::Device device) {
  Net network;
  network->to(device);
  torch::optim::Adam actor(network->fc1->parameters(),
                           torch::optim::AdamOptions(1e-3));
  torch::optim::Adam critic(network->fc2->parameters(),
                            torch::optim::AdamOptions(1e-3));
  step(actor, critic, network->forward(torch::ones({3, 4}, device)).sum());
}

// By value, `model.fc1->parameters()`.
void by_value(torch::Device device) {
  Plain model;
  model.to(device);
  torch::optim::SGD first(model.fc1->parameters(), 0.1);
  torch::optim::SGD second(model.fc2->parameters(), 0.1);
  step(first, second, model.forward(torch::ones({3, 4}, device)).sum());
}

// Through an agent's member, `agent.net->fc1->parameters()`.
void member(torch::Device device) {
  Agent agent(device);
  torch::optim::Adam actor(agent.net->fc1->parameters(), 1e-3);
  torch::optim::Adam critic(agent.net->fc2->parameters(), 1e-3);
  step(actor, critic, agent.net->forward(torch::ones({3, 4}, device)).sum());
}

// Lists concatenated from two parts, a third part on its own.
void concatenated(torch::Device device) {
  Net net;
  net->to(device);
  auto p = net->fc1->parameters();
  auto q = net->fc2->parameters();
  p.insert(p.end(), q.begin(), q.end());
  torch::optim::Adam body(p, torch::optim::AdamOptions(1e-3));
  torch::optim::Adam head(net->fc3->parameters(),
                          torch::optim::AdamOptions(1e-3));
  step(body, head, net->forward(torch::ones({3, 4}, device)).sum());
}

// Parameter groups in an initializer list.
void groups(torch::Device device) {
  Net net;
  net->to(device);
  torch::optim::Adam both({net->fc1->parameters(), net->fc2->parameters()},
                          torch::optim::AdamOptions(1e-3));
  torch::optim::Adam head(net->fc3->parameters(),
                          torch::optim::AdamOptions(1e-3));
  step(both, head, net->forward(torch::ones({3, 4}, device)).sum());
}

// The whole module and one of its parts: one wrapper.
void whole_and_part(torch::Device device) {
  Net net;
  net->to(device);
  torch::optim::Adam all(net->parameters(), torch::optim::AdamOptions(1e-3));
  torch::optim::Adam fine(net->fc3->parameters(),
                          torch::optim::AdamOptions(1e-4));
  step(all, fine, net->forward(torch::ones({3, 4}, device)).sum());
}

// A parameter whose callers are in other units, no statement placing it:
// the optimizer's list places and wraps the whole network.
void elsewhere(Net &network, torch::Device device) {
  torch::optim::Adam actor(network->fc1->parameters(),
                           torch::optim::AdamOptions(1e-3));
  torch::optim::Adam critic(network->fc2->parameters(),
                            torch::optim::AdamOptions(1e-3));
  step(actor, critic, network->forward(torch::ones({3, 4}, device)).sum());
}

int main() {
  torch::Device device(torch::kCPU);
  holder(device);
  by_value(device);
  member(device);
  concatenated(device);
  groups(device);
  whole_and_part(device);
  Trainer trainer;
  torch::Tensor x = torch::ones({3, 4});
  step(trainer.actor_opt, trainer.critic_opt,
       (trainer.heads.actor(x).sum() + trainer.heads.critic(x).sum()));
  return 0;
}
