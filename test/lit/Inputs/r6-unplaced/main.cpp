// Input of R6-unplaced.test: trained models that nothing places on a device
// (CPU-only code, a device made and never used, a factory that placed it),
// and placements and optimizers in different functions.
#include <torch/script.h>
#include <torch/torch.h>

#include <iostream>
#include <memory>

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t hidden = 8) {
    fc = register_module("fc", torch::nn::Linear(4, hidden));
  }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

// A module held by value.
struct Plain : torch::nn::Module {
  explicit Plain(int64_t hidden = 8) {
    fc = register_module("fc", torch::nn::Linear(4, hidden));
  }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};

void step(torch::optim::Optimizer &optimizer, torch::Tensor loss) {
  optimizer.zero_grad();
  loss.backward();
  optimizer.step();
}

// CPU-only: by value, `auto x = Plain(10)`, a bare Linear, a Sequential.
void cpu_only() {
  Plain plain;
  torch::optim::SGD plain_optimizer(plain.parameters(), 0.1);
  auto copied = Plain(10);
  torch::optim::SGD copied_optimizer(copied.parameters(), 0.1);
  torch::nn::Linear linear(4, 2);
  torch::optim::Adam linear_optimizer(linear->parameters());
  torch::nn::Sequential seq;
  seq->push_back(torch::nn::Linear(4, 4));
  seq->push_back(torch::nn::ReLU());
  std::vector<torch::Tensor> params = seq->parameters();
  torch::optim::SGD seq_optimizer(params, 0.1);
  step(seq_optimizer, seq->forward(torch::ones({2, 4})).sum());
}

// A device made and never used; a named bool (the device is chosen, the
// model stays on the CPU).
void device_unused() {
  auto cuda_available = torch::cuda::is_available();
  torch::Device device(cuda_available ? torch::kCUDA : torch::kCPU);
  auto shared = std::make_shared<Plain>();
  torch::optim::SGD optimizer(shared->parameters(), 0.1);
}

// A factory that builds and places the model.
Net create_model(torch::Device device) {
  Net model(16);
  model->to(device);
  return model;
}

void factory() {
  torch::Device device(torch::kCPU);
  auto model = create_model(device);
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(1e-3));
}

// An AnyModule and a raw pointer.
void any_and_raw() {
  torch::nn::AnyModule any(torch::nn::Linear(4, 2));
  torch::optim::SGD any_optimizer(any.ptr()->parameters(), 0.1);
  auto *raw = new Plain();
  torch::optim::SGD raw_optimizer(raw->parameters(), 0.1);
}

// The placement in the caller, the optimizer in the helper.
void train(Net &net, int epochs) {
  torch::optim::Adam optimizer(net->parameters());
  for (int epoch = 0; epoch < epochs; ++epoch)
    step(optimizer, net->forward(torch::ones({2, 4})).sum());
}

void placed_in_caller() {
  torch::Device device(torch::kCPU);
  Net net;
  net->to(device);
  train(net, 2);
}

// Made in the caller, unplaced, trained in a helper by shared_ptr.
void train_shared(std::shared_ptr<Plain> model) {
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  step(optimizer, model->forward(torch::ones({2, 4})).sum());
}

void made_in_caller() {
  auto model = std::make_shared<Plain>();
  std::cout << "training\n";
  train_shared(model);
}

// Three models, one after another.
void three_in_sequence() {
  for (int64_t hidden : {4, 8, 16}) {
    Net model(hidden);
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    step(optimizer, model->forward(torch::ones({2, 4})).sum());
  }
}

// A trainer class whose member model is never placed.
class Trainer {
public:
  Trainer() : optimizer_(model_->parameters(), 0.1) {
    std::cout << "trainer ready\n";
  }
  void fit() { step(optimizer_, model_->forward(torch::ones({2, 4})).sum()); }

private:
  Net model_;
  torch::optim::SGD optimizer_;
};

// A frozen TorchScript backbone with a trainable head: only the head.
void frozen_backbone(const std::string &path) {
  torch::jit::script::Module backbone = torch::jit::load(path);
  backbone.eval();
  torch::nn::Linear head(8, 2);
  torch::optim::SGD optimizer(head->parameters(), 0.1);
}

// A global model: wrapped where its optimizer is built.
Net global_net;
void train_global() {
  torch::optim::SGD optimizer(global_net->parameters(), 0.1);
}

// Evaluation only: never wrapped.
void eval_only() {
  Net net;
  torch::NoGradGuard no_grad;
  net->forward(torch::ones({2, 4}));
}

int main(int argc, char **argv) {
  cpu_only();
  Trainer trainer;
  trainer.fit();
  return 0;
}
