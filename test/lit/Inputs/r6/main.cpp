// Input of R6.test: trained models written the usual ways, one scenario per
// function.
#include <ddp/ddp.h>
#include <torch/torch.h>

#include <memory>

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

// A module held by value, a shared_ptr or a raw pointer.
struct Plain : torch::nn::Module {
  Plain() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};

#define PLACE(m, d) m->to(d)

// By value, shared_ptr (optimizer through make_unique), raw pointer
// (parameters through a local vector).
void forms(torch::Device device) {
  Plain plain;
  plain.to(device);
  torch::optim::Adam plain_optimizer(plain.parameters());

  auto shared = std::make_shared<Plain>();
  shared->to(device); // trailing comment stays
  auto shared_optimizer = std::make_unique<torch::optim::SGD>(
      shared->parameters(), torch::optim::SGDOptions(0.1));

  auto *raw = new Plain();
  raw->to(device);
  std::vector<torch::Tensor> raw_params = raw->parameters();
  torch::optim::SGD raw_optimizer(raw_params, 0.1);
}

// Sequential built inline and with push_back; a CUDA placement R3 rewrites.
void sequentials(torch::Device device) {
  torch::nn::Sequential seq(torch::nn::Linear(4, 4), torch::nn::ReLU());
  seq->to(device);
  torch::nn::Sequential head;
  head->push_back(torch::nn::Linear(4, 2));
  head->to(torch::kCUDA);
  torch::optim::SGD optimizer({seq->parameters()}, 0.1);
  optimizer.add_param_group(
      torch::optim::OptimizerParamGroup(head->parameters()));
}

// A GAN: two models, two optimizers; both placed on one line.
void gan(torch::Device device) {
  Net generator;
  Net discriminator;
  generator->to(device); discriminator->to(device);
  torch::optim::Adam g_optimizer(generator->parameters());
  torch::optim::Adam d_optimizer(discriminator->parameters());
}

// Placed in a trainer's constructor: wrapped for as long as the process runs.
class Trainer {
public:
  Trainer(Net model, torch::Device device)
      : model_(std::move(model)), device_(device),
        optimizer_(model_->parameters(), 0.1) {
    model_->to(device_);
  }

private:
  Net model_;
  torch::Device device_;
  torch::optim::SGD optimizer_;
};

// Placed in a helper function.
void setup(Net &m, torch::Device d) {
  m->to(d);
}

void helped(torch::Device device) {
  Net model;
  setup(model, device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
}

// One helper for a model placed by it and one placed before: both get
// ddp::distribute (two wrappers on one module would be an error at run time).
void two_through_helper(torch::Device device) {
  Net first;
  Net second;
  first->to(device);
  setup(first, device);
  setup(second, device);
  torch::optim::SGD first_optimizer(first->parameters(), 0.1);
  torch::optim::SGD second_optimizer(second->parameters(), 0.1);
}

// Handed to a class that places it in its constructor.
class Mover {
public:
  Mover(Net model, torch::Device device) : model_(model) {
    model_->to(device);
  }

private:
  Net model_;
};

void moved(torch::Device device) {
  Net model;
  Mover mover(model, device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
}

// Given to an evaluation class that places it again after training: only the
// training placement is wrapped; a model that reaches such a class only after
// its training loop is not placed for training (reported).
class Server {
public:
  Server(Net model, torch::Device device) : model_(model) {
    model_->to(device);
    model_->eval();
  }

private:
  Net model_;
};

void served(torch::Device device) {
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  Net late;
  torch::optim::SGD late_optimizer(late->parameters(), 0.1);
  for (int epoch = 0; epoch < 2; ++epoch)
    optimizer.step();
  Server server(model, device);
  Server late_server(late, device);
}

// Placed in a nested block (the wrap must outlive it), a name already taken.
void nested(torch::Device device, bool move) {
  Net net;
  int other_ddp = 0;
  if (move) {
    net->to(device);
  }
  Net other;
  other->to(device);
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  torch::optim::SGD other_optimizer(other->parameters(), 0.1);
}

// Not wrapped: an evaluation-only model, a frozen teacher, a dtype change.
void negatives(torch::Device device) {
  Net evaluated;
  evaluated->to(device);
  evaluated->eval();
  Net teacher;
  teacher->to(device);
  Net student;
  student->to(torch::kDouble);
  torch::nn::utils::clip_grad_norm_(teacher->parameters(), 1.0);
}

// Already wrapped by hand: left alone.
void wrapped(torch::Device device) {
  Net by_hand;
  by_hand->to(device);
  ddp::DistributedDataParallel by_hand_ddp(by_hand);
  Net distributed;
  distributed->to(device);
  ddp::distribute(distributed);
  torch::optim::SGD optimizer(by_hand->parameters(), 0.1);
  torch::optim::SGD other(distributed->parameters(), 0.1);
}

// Reported: placed in a loop, in a macro, never placed.
void reported(torch::Device device) {
  Net looped;
  for (int i = 0; i < 2; ++i) {
    looped->to(device);
  }
  Net macro_placed;
  PLACE(macro_placed, device);
  Net unplaced;
  torch::optim::SGD a(looped->parameters(), 0.1);
  torch::optim::SGD b(macro_placed->parameters(), 0.1);
  torch::optim::SGD c(unplaced->parameters(), 0.1);
}

int main(int argc, char **argv) {
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  forms(device);
  sequentials(device);
  gan(device);
  Trainer trainer(Net(), device);
  helped(device);
  two_through_helper(device);
  moved(device);
  served(device);
  nested(device, true);
  negatives(device);
  wrapped(device);
  reported(device);
  return 0;
}
