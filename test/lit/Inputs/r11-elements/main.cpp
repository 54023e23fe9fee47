// Input of R11-elements.test: per-class counts kept in a std::vector, a
// std::array, a C array and a tensor (nested subscripts), over a test loader
// and over the training loader; and element updates R11 must not take for
// sums.
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <vector>

struct Labelled : torch::data::datasets::Dataset<Labelled> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({4}, static_cast<double>(i)),
            torch::tensor(static_cast<int64_t>(i % 3))};
  }
  torch::optional<size_t> size() const override { return 48; }
};

constexpr int kClasses = 3;

int main() {
  torch::nn::Linear model(4, kClasses);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  auto train_loader = torch::data::make_data_loader(
      Labelled().map(torch::data::transforms::Stack<>()), 8);
  auto test_loader = torch::data::make_data_loader(
      Labelled().map(torch::data::transforms::Stack<>()), 8);

  std::vector<double> epoch_loss(2, 0.0);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::array<int64_t, kClasses> seen{};
    for (auto &batch : *train_loader) {
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(
          model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      for (int64_t i = 0; i < batch.target.size(0); ++i)
        ++seen[batch.target[i].item<int64_t>()];
      // Carried over the epochs: not reduced after each one.
      epoch_loss[epoch] += loss.item<double>();
    }
    std::cout << "seen " << seen[0] << ' ' << seen[1] << ' ' << seen[2] << '\n';
  }

  torch::NoGradGuard no_grad;
  std::vector<int64_t> correct(kClasses, 0);
  int64_t total[kClasses] = {0, 0, 0};
  torch::Tensor confusion = torch::zeros({kClasses, kClasses});
  std::vector<double> best(kClasses, 0.0);
  for (const auto &batch : *test_loader) {
    auto prediction = model->forward(batch.data).argmax(1);
    for (int64_t i = 0; i < batch.target.size(0); ++i) {
      int64_t label = batch.target[i].item<int64_t>();
      correct[label] += prediction[i].item<int64_t>() == label ? 1 : 0;
      total[label] = total[label] + 1;
      confusion[label][prediction[i].item<int64_t>()] += 1;
      best[label] = std::max(best[label], batch.data[i][0].item<double>());
    }
  }
  for (int c = 0; c < kClasses; ++c)
    std::cout << "class " << c << ' ' << correct[c] << '/' << total[c] << ' '
              << best[c] << '\n';
  std::cout << confusion << '\n' << epoch_loss[1] << '\n';
  return 0;
}
