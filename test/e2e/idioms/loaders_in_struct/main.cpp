// Classifies points of three concentric rings. The training loader is held
// in a struct member, its type written out, and made in the constructor; the
// test loader is rebuilt every epoch inside the evaluation function, over a
// dataset passed by lvalue.
// Usage: struct_loaders [batch_size]
#include <torch/torch.h>

#include <cstdio>
#include <memory>

class Rings : public torch::data::datasets::Dataset<Rings> {
public:
  explicit Rings(int64_t n) {
    labels_ = torch::randint(3, {n}, torch::kLong);
    auto angle = 6.2831853 * torch::rand({n});
    auto radius = labels_.to(torch::kFloat) + 0.5 + 0.3 * torch::randn({n});
    points_ = torch::stack(
        {radius * torch::cos(angle), radius * torch::sin(angle)}, 1);
  }
  torch::data::Example<> get(size_t index) override {
    return {points_[index], labels_[index]};
  }
  torch::optional<size_t> size() const override { return labels_.size(0); }

private:
  torch::Tensor points_, labels_;
};

using StackedRings =
    torch::data::datasets::MapDataset<Rings, torch::data::transforms::Stack<>>;

struct Data {
  Data(int64_t train_size, int64_t test_size, size_t batch_size)
      : test_set(Rings(test_size).map(torch::data::transforms::Stack<>())),
        train(
            torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
                Rings(train_size).map(torch::data::transforms::Stack<>()),
                batch_size)) {}

  StackedRings test_set;
  std::unique_ptr<torch::data::StatelessDataLoader<
      StackedRings, torch::data::samplers::RandomSampler>>
      train;
};

struct RingNetImpl : torch::nn::Module {
  RingNetImpl() : fc1(2, 32), fc2(32, 3) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(RingNet);

void evaluate(RingNet &net, const StackedRings &test_set, torch::Device device,
              int epoch) {
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          test_set, 40);
  net->eval();
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  for (auto &batch : *test_loader) {
    auto output = net->forward(batch.data.to(device));
    correct +=
        output.argmax(1).eq(batch.target.to(device)).sum().item<int64_t>();
  }
  net->train();
  std::printf("epoch %d test_correct %lld test_acc %.6f\n", epoch,
              static_cast<long long>(correct),
              static_cast<double>(correct) / test_set.size().value());
}

int main(int argc, char **argv) {
  const size_t batch_size = argc > 1 ? std::stoul(argv[1]) : 32;
  torch::manual_seed(5);
  const torch::Device device =
      torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  Data data(480, 301, batch_size);
  RingNet net;
  net->to(device);
  torch::optim::SGD optimizer(net->parameters(),
                              torch::optim::SGDOptions(0.2).momentum(0.9));

  for (int epoch = 1; epoch <= 3; ++epoch) {
    torch::manual_seed(epoch - 1); // reproducible shuffles, epoch by epoch
    double loss_sum = 0;
    int64_t correct = 0;
    for (auto &batch : *data.train) {
      auto input = batch.data.to(device);
      auto target = batch.target.to(device);
      optimizer.zero_grad();
      auto output = net->forward(input);
      auto loss = torch::cross_entropy_loss(output, target);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * input.size(0);
      correct += output.argmax(1).eq(target).sum().item<int64_t>();
    }
    std::printf("epoch %d train_loss %.6f train_correct %lld\n", epoch,
                loss_sum / 480, static_cast<long long>(correct));
    evaluate(net, data.test_set, device, epoch);
  }
}
