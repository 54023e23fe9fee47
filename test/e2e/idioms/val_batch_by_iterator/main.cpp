// Two noisy rings told apart by a small MLP, trained by walking the loader's
// iterator. Every few steps one validation batch is drawn by hand
// (`val_loader->begin()`) and its loss printed; each epoch ends with a full
// validation pass by iterator, and training with a test pass.
// Usage: spot_val [batch_size]
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>

class Rings : public torch::data::datasets::Dataset<Rings> {
public:
  Rings(int64_t n, double noise) {
    labels_ = torch::randint(2, {n}, torch::kLong);
    auto angle = torch::rand({n}) * 2 * M_PI;
    auto radius = 1.0 + labels_.to(torch::kFloat) + noise * torch::randn({n});
    points_ = torch::stack(
        {radius * torch::cos(angle), radius * torch::sin(angle)}, 1);
  }
  torch::data::Example<> get(size_t i) override {
    return {points_[i], labels_[i]};
  }
  torch::optional<size_t> size() const override { return labels_.size(0); }

private:
  torch::Tensor points_, labels_;
};

struct RingNetImpl : torch::nn::Module {
  RingNetImpl()
      : hidden(register_module("hidden", torch::nn::Linear(2, 24))),
        out(register_module("out", torch::nn::Linear(24, 2))) {}
  torch::Tensor forward(torch::Tensor x) {
    return out->forward(torch::tanh(hidden->forward(x)));
  }
  torch::nn::Linear hidden, out;
};
TORCH_MODULE(RingNet);

constexpr int64_t kTrainSize = 384;
constexpr int64_t kValBatch = 40;
constexpr int kValEvery = 4;

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::atoi(argv[1]) : 32;
  torch::manual_seed(5);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);

  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          Rings(kTrainSize, 0.2).map(torch::data::transforms::Stack<>()),
          batch_size);
  auto val_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Rings(120, 0.2).map(torch::data::transforms::Stack<>()), kValBatch);
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Rings(151, 0.2).map(torch::data::transforms::Stack<>()), 64);

  RingNet model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(0.03));

  std::cout << std::fixed << std::setprecision(6);
  int64_t step = 0;
  for (int epoch = 1; epoch <= 3; ++epoch) {
    torch::manual_seed(epoch - 1);
    model->train();
    double train_loss = 0.0;
    int64_t train_correct = 0;
    auto it = train_loader->begin();
    while (it != train_loader->end()) {
      auto &batch = *it;
      auto data = batch.data.to(device);
      auto target = batch.target.to(device);
      optimizer.zero_grad();
      auto output = model->forward(data);
      auto loss = torch::nn::functional::cross_entropy(output, target);
      loss.backward();
      optimizer.step();
      train_loss += loss.item<double>() * data.size(0);
      train_correct += output.argmax(1).eq(target).sum().item<int64_t>();
      ++it;

      if (++step % kValEvery == 0) {
        // A quick look at the first validation batch.
        torch::NoGradGuard no_grad;
        model->eval();
        auto val_it = val_loader->begin();
        auto val_output = model->forward(val_it->data.to(device));
        auto val_target = val_it->target.to(device);
        auto val_loss =
            torch::nn::functional::cross_entropy(val_output, val_target);
        std::cout << "step " << step << " val_batch_loss "
                  << val_loss.item<double>() << " val_batch_correct "
                  << val_output.argmax(1).eq(val_target).sum().item<int64_t>()
                  << '\n';
        model->train();
      }
    }
    std::cout << "epoch " << epoch << " train_loss " << train_loss / kTrainSize
              << " train_correct " << train_correct << '\n';

    torch::NoGradGuard no_grad;
    model->eval();
    int64_t val_correct = 0;
    int64_t val_seen = 0;
    for (auto vit = val_loader->begin(); vit != val_loader->end(); ++vit) {
      auto target = vit->target.to(device);
      auto predicted = model->forward(vit->data.to(device)).argmax(1);
      val_correct += predicted.eq(target).sum().item<int64_t>();
      val_seen += target.size(0);
    }
    std::cout << "epoch " << epoch << " val_correct " << val_correct
              << " val_seen " << val_seen << " val_acc "
              << static_cast<double>(val_correct) / val_seen << '\n';
  }

  torch::NoGradGuard no_grad;
  model->eval();
  int64_t test_correct = 0;
  int64_t test_seen = 0;
  for (auto tit = test_loader->begin(); tit != test_loader->end(); ++tit) {
    auto &batch = *tit;
    auto target = batch.target.to(device);
    test_correct += model->forward(batch.data.to(device))
                        .argmax(1)
                        .eq(target)
                        .sum()
                        .item<int64_t>();
    test_seen += target.size(0);
  }
  std::cout << "test correct " << test_correct << " seen " << test_seen
            << " acc " << static_cast<double>(test_correct) / test_seen << '\n';
}
