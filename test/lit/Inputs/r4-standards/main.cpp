// Input of R4-standards.test: a tutorial-style training and test loader,
// parsed at every C++ standard (before C++17 the loader's initialiser goes
// through an elidable move constructor).
#include <torch/torch.h>
#include <iostream>
struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);
struct Data : torch::data::datasets::Dataset<Data> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}) * (double)i, torch::tensor((int64_t)(i % 2))}; }
  torch::optional<size_t> size() const override { return 64; }
};
int main() {
  Net net;
  torch::optim::SGD opt(net->parameters(), 0.1);
  auto train = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(Data().map(torch::data::transforms::Stack<>()), 8);
  auto test = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(Data().map(torch::data::transforms::Stack<>()), 8);
  for (auto& batch : *train) {
    opt.zero_grad();
    auto loss = torch::nll_loss(torch::log_softmax(net->forward(batch.data), 1), batch.target);
    loss.backward();
    opt.step();
  }
  int64_t correct = 0;
  for (const auto& batch : *test) {
    correct += net->forward(batch.data).argmax(1).eq(batch.target).sum().item<int64_t>();
  }
  std::cout << correct << "\n";
}
