// Two concentric rings of points, told apart by a small classifier. The
// points are computed in closed form (no random draws), in parallel with
// OpenMP when the build enables it.
// Usage: rings [batch_size]
#include <torch/torch.h>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

struct RingsImpl : torch::nn::Module {
  RingsImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(2, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 2));
  }

  torch::Tensor forward(torch::Tensor x) {
    return fc2->forward(torch::relu(fc1->forward(x)));
  }

  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Rings);

// Point i: even ones on the inner ring (label 0), odd ones on the outer
// ring (label 1), the radius wobbling with the angle.
class RingPoints : public torch::data::datasets::Dataset<RingPoints> {
public:
  explicit RingPoints(int64_t n) : points_(n * 2), labels_(n) {
#ifdef USE_OPENMP_HELPERS
#pragma omp parallel for
#endif
    for (int64_t i = 0; i < n; ++i) {
      const double angle = 2.399963 * static_cast<double>(i);
      const double radius =
          (i % 2 == 0 ? 1.0 : 2.0) + 0.25 * std::sin(7.0 * angle + i);
      points_[2 * i] = static_cast<float>(radius * std::cos(angle));
      points_[2 * i + 1] = static_cast<float>(radius * std::sin(angle));
      labels_[i] = i % 2;
    }
  }

  torch::data::Example<> get(size_t i) override {
    auto x = torch::tensor({points_[2 * i], points_[2 * i + 1]});
    return {x, torch::tensor(labels_[i], torch::kLong)};
  }
  torch::optional<size_t> size() const override { return labels_.size(); }

private:
  std::vector<float> points_;
  std::vector<int64_t> labels_;
};

int main(int argc, char **argv) {
  int64_t batch_size = 32;
  if (argc > 1)
    batch_size = std::stoll(argv[1]);
  torch::manual_seed(5);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);

  Rings model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(0.02));

  auto train_set = RingPoints(384).map(torch::data::transforms::Stack<>());
  const auto train_size = train_set.size().value();
  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          std::move(train_set), batch_size);

  std::cout << std::fixed << std::setprecision(6);
  for (int epoch = 0; epoch < 3; ++epoch) {
    torch::manual_seed(epoch);
    double loss_sum = 0.0;
    int64_t correct = 0;
    model->train();
    for (auto &batch : *train_loader) {
      auto data = batch.data.to(device);
      auto target = batch.target.to(device);
      optimizer.zero_grad();
      auto output = model->forward(data);
      auto loss = torch::nn::functional::cross_entropy(output, target);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * data.size(0);
      correct += output.argmax(1).eq(target).sum().item<int64_t>();
    }
    std::cout << "epoch " << epoch + 1 << " train_loss "
              << loss_sum / train_size << " train_correct " << correct
              << '\n';
  }
  return 0;
}
