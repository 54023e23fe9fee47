// Input of R11-problems.test: one evaluation loop with several accumulations
// R11 does not recognise, next to one it does.
#include <torch/torch.h>

#include <iostream>
#include <map>
#include <vector>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::Tensor x = torch::randn({100, 4}), y = torch::randint(2, {100});
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return 100; }
};

int main() {
  auto fc = torch::nn::Linear(4, 2);
  torch::optim::SGD opt(fc->parameters(), 0.1);
  auto test = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 10);
  int64_t correct = 0;
  std::map<int64_t, int64_t> per_label;
  std::vector<double> losses;
  double worst = 0;
  for (auto &batch : *test) {
    auto out = fc->forward(batch.data);
    correct += out.argmax(1).eq(batch.target).sum().item<int64_t>();
    per_label[batch.target[0].item<int64_t>()] += 1;
    losses.push_back(out.sum().item<double>());
    worst = std::max(worst, out.max().item<double>());
  }
  std::cout << correct << ' ' << per_label.size() << ' ' << losses.size()
            << ' ' << worst << '\n';
}

// Builds an optimizer: the program trains.
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
