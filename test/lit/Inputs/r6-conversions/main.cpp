// Input of R6-conversions.test: trained models converted or reloaded after
// their placement, before training.
#include <torch/torch.h>

#include <string>

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

void load_weights(Net &net, const std::string &path) { torch::load(net, path); }

void train(Net &net, torch::optim::Optimizer &optimizer) {
  for (int step = 0; step < 2; ++step) {
    optimizer.zero_grad();
    net->forward(torch::ones({1, 4}, torch::kDouble)).sum().backward();
    optimizer.step();
  }
}

// A dtype change on the next line, and one after the optimizer is built.
void to_double(torch::Device device) {
  Net model;
  model->to(device);
  model->to(torch::kDouble);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  train(model, optimizer);

  Net later;
  later->to(device);
  torch::optim::SGD later_optimizer(later->parameters(), 0.1);
  later->to(torch::kDouble); // after the optimizer, before training
  train(later, later_optimizer);
}

// A checkpoint loaded in a branch; a loader helper of the program.
void resumed(torch::Device device, bool resume, const std::string &path) {
  Net model;
  model->to(device);
  if (resume) {
    torch::load(model, path);
  }
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  train(model, optimizer);

  Net helped;
  helped->to(device);
  load_weights(helped, path);
  torch::optim::SGD helped_optimizer(helped->parameters(), 0.1);
  train(helped, helped_optimizer);
}

// Placed in either branch, converted after both: wrapped once, after all.
void branches(bool cuda) {
  Net model;
  if (cuda) {
    model->to(torch::Device(torch::kCUDA));
  } else {
    model->to(torch::Device(torch::kCPU));
  }
  model->to(torch::kDouble);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  train(model, optimizer);
}

// Moved to the CPU after training: not a conversion before training.
void after_training(torch::Device device) {
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  train(model, optimizer);
  model->to(torch::Device(torch::kCPU));
}

// A branch that trains: the wrap stays in it, after its conversion.
void trained_in_branch(torch::Device device, bool run) {
  Net model;
  if (run) {
    model->to(device);
    model->to(torch::kDouble);
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    train(model, optimizer);
  }
}

// A member placed and converted in a constructor.
struct Trainer {
  Trainer(torch::Device device)
      : device_(device), optimizer_(model_->parameters(), 0.1) {
    model_->to(device_);
    model_->to(torch::kDouble);
  }
  void run() { train(model_, optimizer_); }
  Net model_;
  torch::Device device_;
  torch::optim::SGD optimizer_;
};

int main() {
  torch::Device device(torch::kCPU);
  to_double(device);
  resumed(device, false, "net.pt");
  branches(false);
  after_training(device);
  trained_in_branch(device, true);
  Trainer trainer(device);
  trainer.run();
}
