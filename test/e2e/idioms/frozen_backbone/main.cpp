// Linear probe on a frozen TorchScript feature extractor: only the Linear
// head is trained. `--make-backbone PATH` writes the (random) scripted
// backbone that a real project would have exported from Python.
// Usage: linear_probe --make-backbone backbone.pt
//        linear_probe backbone.pt [batch_size]
#include <torch/script.h>
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <string>

void make_backbone(const std::string &path) {
  torch::manual_seed(100);
  torch::jit::Module backbone("Backbone");
  backbone.register_parameter("w1", torch::randn({10, 24}) * 0.5, false);
  backbone.register_parameter("b1", torch::zeros({24}), false);
  backbone.register_parameter("w2", torch::randn({24, 16}) * 0.3, false);
  backbone.define(R"JIT(
def forward(self, x):
    h = torch.relu(torch.matmul(x, self.w1) + self.b1)
    return torch.tanh(torch.matmul(h, self.w2))
)JIT");
  backbone.save(path);
}

struct Points : torch::data::datasets::Dataset<Points> {
  torch::Tensor x, y;
  Points(int64_t n, const torch::Tensor &centers) {
    y = torch::randint(centers.size(0), {n}, torch::kLong);
    x = centers.index_select(0, y) + 0.6 * torch::randn({n, centers.size(1)});
  }
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
};

int main(int argc, const char *argv[]) {
  if (argc >= 3 && std::string(argv[1]) == "--make-backbone") {
    make_backbone(argv[2]);
    return 0;
  }
  if (argc < 2) {
    std::cerr << "usage: linear_probe BACKBONE.pt [batch_size]\n";
    return 2;
  }
  const int64_t batch_size = argc > 2 ? std::stoll(argv[2]) : 32;
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);

  torch::jit::script::Module backbone;
  try {
    backbone = torch::jit::load(argv[1]);
  } catch (const c10::Error &e) {
    std::cerr << "cannot load the backbone " << argv[1] << '\n';
    return 1;
  }
  backbone.to(device);
  backbone.eval();
  for (auto parameter : backbone.parameters())
    parameter.set_requires_grad(false);

  torch::manual_seed(21);
  auto centers = 1.5 * torch::randn({3, 10});
  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Points(384, centers).map(torch::data::transforms::Stack<>()),
          torch::data::DataLoaderOptions()
              .batch_size(batch_size)
              .drop_last(true));
  Points test_points(151, centers);
  const auto test_size = *test_points.size();
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          std::move(test_points).map(torch::data::transforms::Stack<>()), 40);

  torch::nn::Linear head(16, 3);
  head->to(device);
  torch::optim::SGD optimizer(head->parameters(),
                              torch::optim::SGDOptions(0.5).momentum(0.9));

  auto features = [&](const torch::Tensor &x) {
    torch::NoGradGuard no_grad;
    return backbone.forward({x.to(device)}).toTensor();
  };

  for (int epoch = 1; epoch <= 3; ++epoch) {
    double loss_sum = 0;
    int64_t seen = 0;
    for (auto &batch : *train_loader) {
      auto target = batch.target.to(device);
      auto logits = head->forward(features(batch.data));
      auto loss = torch::cross_entropy_loss(logits, target);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * target.size(0);
      seen += target.size(0);
    }

    torch::NoGradGuard no_grad;
    head->eval();
    int64_t correct = 0;
    for (auto &batch : *test_loader) {
      auto logits = head->forward(features(batch.data));
      correct +=
          logits.argmax(1).eq(batch.target.to(device)).sum().item<int64_t>();
    }
    head->train();
    std::printf(
        "epoch %d train_loss %.6f seen %lld test_correct %lld test_acc %.6f\n",
        epoch, loss_sum / seen, static_cast<long long>(seen),
        static_cast<long long>(correct),
        static_cast<double>(correct) / test_size);
  }
  return 0;
}
