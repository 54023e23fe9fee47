// Input of compose.test: printed values that do work (a forward pass, so
// they are computed on every rank before the guard) and hold another rule's
// edit.
#include <torch/torch.h>

#include <iostream>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({4}, static_cast<double>(i)), torch::ones({1})};
  }
  torch::optional<size_t> size() const override { return 64; }
};

int main() {
  const int64_t batch_size = 8;
  torch::nn::Linear net(4, 1);
  torch::optim::SGD optimizer(net->parameters(), 0.01);
  auto loader = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), batch_size);
  torch::Tensor x = torch::ones({2, 4});
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(net->forward(batch.data), batch.target);
    loss.backward();
    optimizer.step();
    // R4's batch size inside the moved value.
    std::cout << "probe " << net->forward(batch.data.view({batch_size, -1})).sum().item<float>() << '\n';
  }
  // R3 inside the moved value.
  std::cout << "sum " << net->forward(x.cuda()).sum().item<float>() << '\n';
  // R2 inside the moved value, and a second one beside it.
  std::cout << net->forward(torch::ones({1, 4}, torch::kCUDA)) << ' ' << net->forward(x.cuda()).mean() << '\n';
  return 0;
}
