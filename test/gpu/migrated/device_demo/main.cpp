// device_demo: trains a small MLP on synthetic regression data, on the GPU
// when there is one, else on the CPU. Written for one GPU, the usual way.
#include <ddp/ddp.h>
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <string>

struct Options {
  int64_t epochs = 10;
  int64_t batch_size = 64;
  int64_t train_samples = 2048;
  double learning_rate = 0.05;
  bool no_cuda = false;
};

struct MLPImpl : torch::nn::Module {
  MLPImpl(int64_t inputs, int64_t hidden, int64_t outputs)
      : fc1(register_module("fc1", torch::nn::Linear(inputs, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", torch::nn::Linear(hidden, outputs))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc1->forward(x));
    x = torch::relu(fc2->forward(x));
    return fc3->forward(x);
  }

  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(MLP);

// y = sin(x . w) plus a little noise, so the loss has somewhere to fall.
std::pair<torch::Tensor, torch::Tensor> make_data(int64_t samples,
                                                  const torch::Tensor &w) {
  auto x = torch::randn({samples, w.size(0)});
  auto y = torch::sin(x.matmul(w)) + 0.05 * torch::randn({samples, 1});
  return {x, y};
}

double evaluate(MLP &model, const torch::Tensor &w, bool use_cuda) {
  torch::NoGradGuard no_grad;
  model->eval();
  auto [x, y] = make_data(512, w);
  torch::Device device = ddp::device();
  if (use_cuda) {
    x = x.to(device);
    y = y.to(device);
  }
  auto loss = torch::mse_loss(model->forward(x), y);
  model->train();
  return loss.item<double>();
}

// Serves predictions from a trained model, on the GPU when there is one.
class Predictor {
public:
  explicit Predictor(MLP model)
      : model_(std::move(model)),
        device_(ddp::device(torch::cuda::is_available() ? torch::kCUDA
                                                        : torch::kCPU)) {
    model_->to(device_);
    model_->eval();
  }

  torch::Tensor predict(const torch::Tensor &x) {
    torch::NoGradGuard no_grad;
    return model_->forward(x.to(device_)).cpu();
  }

private:
  MLP model_;
  torch::Device device_;
};

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  Options options;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--no-cuda")
      options.no_cuda = true;

  torch::manual_seed(1);
  bool use_cuda = !options.no_cuda && torch::cuda::is_available();
  torch::DeviceType device_type;
  if (use_cuda) {
    if (ddp::is_main_process()) {
      std::cout << "CUDA available! Training on GPU." << std::endl;
    }
    device_type = torch::kCUDA;
  } else {
    if (ddp::is_main_process()) std::cout << "Training on CPU." << std::endl;
    device_type = torch::kCPU;
  }
  torch::Device device(ddp::device(device_type));

  MLP model(16, 64, 1);
  model->to(device);
  ddp::DistributedDataParallel model_ddp(model);
  torch::optim::SGD optimizer(
      model->parameters(),
      torch::optim::SGDOptions(options.learning_rate).momentum(0.9));

  auto w = torch::randn({16, 1}) / 4;
  auto [inputs, targets] = make_data(options.train_samples, w);
  inputs = inputs.to(device);
  targets = targets.to(device);

  for (int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    auto order = torch::randperm(
        options.train_samples,
        torch::TensorOptions().device(device).dtype(torch::kLong));
    double epoch_loss = 0;
    int64_t batches = 0;
    for (int64_t start :
         ddp::batch_starts(0, options.train_samples, options.batch_size)) {
      auto index = order.slice(0, start, start + options.batch_size);
      auto x = inputs.index_select(0, index);
      auto y = targets.index_select(0, index);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      epoch_loss += loss.item<double>();
      ++batches;
    }
    epoch_loss = ddp::all_reduce(epoch_loss);
    batches = ddp::all_reduce(batches);
    auto evaluate_value = evaluate(model, w, use_cuda);
    if (ddp::is_main_process()) {
      std::printf("epoch %2lld  train loss %.4f  eval loss %.4f\n",
                  static_cast<long long>(epoch), epoch_loss / batches,
                  evaluate_value);
    }
  }
  if (ddp::is_main_process()) torch::save(model, "device_demo_model.pt");

  Predictor predictor(model);
  auto sample = torch::randn({4, 16});
  auto predict_value = predictor.predict(sample);
  if (ddp::is_main_process()) {
    std::cout << "predictions " << predict_value.flatten() << '\n';
  }
  return 0;
}
