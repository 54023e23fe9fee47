// A regression trained in double precision: the model is placed on the
// device, then converted to double on the next line, and trained from a
// data loader of double tensors.
// Usage: double_after_place [batch]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

struct Curve : torch::data::datasets::Dataset<Curve> {
  explicit Curve(int64_t size) : size_(size) {}
  torch::data::Example<> get(size_t index) override {
    double x = -1.0 + 2.0 * static_cast<double>(index) / size_;
    auto input = torch::tensor({x, x * x, 1.0}, torch::kDouble);
    auto target = torch::tensor({0.5 * x - 0.25 * x * x * x}, torch::kDouble);
    return {input, target};
  }
  torch::optional<size_t> size() const override { return size_; }
  int64_t size_;
};

struct RegressorImpl : torch::nn::Module {
  RegressorImpl() {
    hidden = register_module("hidden", torch::nn::Linear(3, 24));
    out = register_module("out", torch::nn::Linear(24, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    return out(torch::tanh(hidden(x)));
  }
  torch::nn::Linear hidden{nullptr}, out{nullptr};
};
TORCH_MODULE(Regressor);

int main(int argc, char **argv) {
  const int64_t batch = argc > 1 ? std::atol(argv[1]) : 16;
  torch::manual_seed(11);
  torch::Device device =
      torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  Regressor model;
  model->to(device);
  model->to(torch::kDouble);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(0.05).momentum(0.9));

  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Curve(512).map(torch::data::transforms::Stack<>()), batch);
  for (int epoch = 0; epoch < 4; ++epoch) {
    torch::manual_seed(epoch);
    model->train();
    double loss_sum = 0;
    int64_t seen = 0;
    for (auto &example : *loader) {
      auto input = example.data.to(device);
      auto target = example.target.to(device);
      auto loss = torch::mse_loss(model->forward(input), target);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * input.size(0);
      seen += input.size(0);
    }
    std::printf("epoch %d train_loss %.6f train_count %ld\n", epoch + 1,
                loss_sum / seen, static_cast<long>(seen));
  }
}
