// Three-class spiral classification. The model is made with std::make_shared
// and placed in main; the optimizer lives in the training helper.
// Usage: shared_helper [batch_size]
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

struct SpiralNet : torch::nn::Module {
  explicit SpiralNet(int64_t hidden)
      : fc1(register_module("fc1", torch::nn::Linear(2, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", torch::nn::Linear(hidden, 3))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc1(x));
    x = torch::relu(fc2(x));
    return fc3(x);
  }

  torch::nn::Linear fc1, fc2, fc3;
};

class Spirals : public torch::data::datasets::Dataset<Spirals> {
public:
  explicit Spirals(int64_t per_class) {
    auto t = torch::linspace(0.1, 1.0, per_class);
    std::vector<torch::Tensor> xs, ys;
    for (int64_t c = 0; c < 3; ++c) {
      auto angle =
          t * 4.0 + c * 2.0 * M_PI / 3.0 + 0.2 * torch::randn({per_class});
      xs.push_back(
          torch::stack({t * torch::cos(angle), t * torch::sin(angle)}, 1));
      ys.push_back(torch::full({per_class}, c, torch::kLong));
    }
    x_ = torch::cat(xs);
    y_ = torch::cat(ys);
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }

private:
  torch::Tensor x_, y_;
};

torch::Device get_device() {
  return torch::cuda::is_available() ? torch::Device(torch::kCUDA)
                                     : torch::Device(torch::kCPU);
}

void train(std::shared_ptr<SpiralNet> net, Spirals dataset,
           torch::Device device, int64_t batch_size, int epochs) {
  torch::optim::Adam optimizer(net->parameters(),
                               torch::optim::AdamOptions(0.01));
  const auto n = dataset.size().value();
  auto loader = torch::data::make_data_loader(
      dataset.map(torch::data::transforms::Stack<>()), batch_size);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    torch::manual_seed(epoch); // the same shuffle when resumed at this epoch
    double total_loss = 0;
    int64_t correct = 0;
    for (auto &batch : *loader) {
      auto x = batch.data.to(device);
      auto y = batch.target.to(device);
      net->zero_grad();
      auto logits = net->forward(x);
      auto loss = torch::cross_entropy_loss(logits, y);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(net->parameters(), 1.0);
      optimizer.step();
      total_loss += loss.item<double>() * x.size(0);
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
    }
    std::printf("epoch %d train_loss %.6f train_acc %.6f\n", epoch + 1,
                total_loss / n, static_cast<double>(correct) / n);
  }
}

double evaluate(std::shared_ptr<SpiralNet> net, Spirals dataset,
                torch::Device device) {
  net->eval();
  torch::NoGradGuard guard;
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          dataset.map(torch::data::transforms::Stack<>()), 50);
  int64_t correct = 0, seen = 0;
  for (const auto &batch : *loader) {
    auto logits = net->forward(batch.data.to(device));
    correct +=
        logits.argmax(1).eq(batch.target.to(device)).sum().item<int64_t>();
    seen += batch.data.size(0);
  }
  std::printf("test correct %lld seen %lld\n", static_cast<long long>(correct),
              static_cast<long long>(seen));
  return static_cast<double>(correct) / seen;
}

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::atoll(argv[1]) : 32;
  torch::manual_seed(3);
  torch::Device device = get_device();

  Spirals train_set(192), test_set(67);
  auto net = std::make_shared<SpiralNet>(32);
  net->to(device);

  train(net, train_set, device, batch_size, 4);
  const double accuracy = evaluate(net, test_set, device);
  std::printf("final test_acc %.6f\n", accuracy);
}
