// Optimizers of every kind --shard-optimizer meets: sharded where declared
// (a local, `auto` = a temporary, a member), and left as they are where a
// sharded state would not compile or would change the program.
#include <torch/torch.h>

#include <memory>
#include <vector>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

// Takes any optimizer: a sharded one too.
void train_step(Net &net, torch::optim::Optimizer &optimizer) {
  optimizer.zero_grad();
  auto loss = net->forward(torch::ones({8, 4})).sum();
  loss.backward();
  optimizer.step();
}

// Takes its own class: the optimizer handed to it stays unsharded.
void decay(torch::optim::SGD &optimizer) {
  auto &options =
      static_cast<torch::optim::SGDOptions &>(optimizer.param_groups()[0].options());
  options.lr(options.lr() * 0.5);
}

struct Trainer {
  Trainer()
      : optimizer(net->parameters(), torch::optim::AdamWOptions(1e-3)) {
    net->to(torch::kCPU);
  }
  void epoch() { train_step(net, optimizer); }
  Net net;
  torch::optim::AdamW optimizer;
};

int main() {
  torch::Device device(torch::kCPU);
  Net model;
  model->to(device);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  train_step(model, adam);

  Net second;
  second->to(device);
  auto sgd = torch::optim::SGD(second->parameters(),
                               torch::optim::SGDOptions(0.1).momentum(0.9));
  train_step(second, sgd);

  Net third;
  third->to(device);
  torch::optim::RMSprop saved(third->parameters(),
                              torch::optim::RMSpropOptions(0.01));
  train_step(third, saved);
  torch::save(saved, "rmsprop.pt");

  Net fourth;
  fourth->to(device);
  torch::optim::SGD decayed(fourth->parameters(), torch::optim::SGDOptions(0.1));
  train_step(fourth, decayed);
  decay(decayed);

  Net fifth;
  fifth->to(device);
  auto made = std::make_unique<torch::optim::Adam>(
      fifth->parameters(), torch::optim::AdamOptions(1e-3));
  train_step(fifth, *made);

  torch::Tensor w = torch::zeros({4}, torch::requires_grad());
  std::vector<torch::Tensor> raw = {w};
  torch::optim::SGD raw_sgd(raw, torch::optim::SGDOptions(0.1));
  raw_sgd.zero_grad();
  (w * 2).sum().backward();
  raw_sgd.step();

  Trainer trainer;
  trainer.epoch();
}
