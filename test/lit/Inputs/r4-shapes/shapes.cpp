// Input of R4-shapes.test: loaders in the shapes public programs build them.
#include <torch/torch.h>

#include <vector>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::ones({2}) * static_cast<double>(i),
            torch::tensor(static_cast<int64_t>(i % 2))};
  }
  torch::optional<size_t> size() const override { return 64; }
};

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(2, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

// A collation of the program's own: stacks the data, keeps the targets.
struct StackPoints
    : torch::data::transforms::Collation<torch::data::Example<>> {
  torch::data::Example<>
  apply_batch(std::vector<torch::data::Example<>> examples) override {
    std::vector<torch::Tensor> data, targets;
    for (auto &example : examples) {
      data.push_back(example.data);
      targets.push_back(example.target);
    }
    return {torch::stack(data), torch::stack(targets)};
  }
};
using Collated = torch::data::datasets::MapDataset<Points, StackPoints>;

template <typename Loader> void test(Net &net, Loader &loader) {
  int64_t correct = 0;
  for (auto &batch : loader)
    correct += net->forward(batch.data)
                   .argmax(1)
                   .eq(batch.target)
                   .sum()
                   .template item<int64_t>();
  std::cout << correct << "\n";
}

// Rebuilt inside a function every epoch.
void train_epoch(Net &net, torch::optim::SGD &optimizer, size_t epoch) {
  auto rebuilt = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 8 + epoch);
  for (auto &batch : *rebuilt) {
    optimizer.zero_grad();
    torch::cross_entropy_loss(net->forward(batch.data), batch.target)
        .backward();
    optimizer.step();
  }
}

int main() {
  Net net;
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  for (size_t epoch = 0; epoch < 2; ++epoch)
    train_epoch(net, optimizer, epoch);

  // A sampler object and the program's own collation, both template
  // arguments written out.
  Collated collated = Points().map(StackPoints());
  auto with_sampler =
      torch::data::make_data_loader<Collated,
                                    torch::data::samplers::RandomSampler>(
          collated, torch::data::samplers::RandomSampler(64),
          torch::data::DataLoaderOptions(8));
  for (auto &batch : *with_sampler) {
    optimizer.zero_grad();
    torch::cross_entropy_loss(net->forward(batch.data), batch.target)
        .backward();
    optimizer.step();
  }

  // A dataset passed by lvalue, evaluated by a function template.
  auto dataset = Points().map(torch::data::transforms::Stack<>());
  auto by_lvalue = torch::data::make_data_loader(dataset, 16);
  test(net, *by_lvalue);

  // Rebuilt on each pass of a loop: shuffled (the same shuffle every pass
  // once migrated: reported) and in order (nothing to report).
  for (int round = 0; round < 2; ++round) {
    auto shuffled = torch::data::make_data_loader(
        Points().map(torch::data::transforms::Stack<>()), 8);
    auto ordered =
        torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
            Points().map(torch::data::transforms::Stack<>()), 8);
    for (auto &batch : *shuffled)
      torch::cross_entropy_loss(net->forward(batch.data), batch.target)
          .backward();
    for (auto &batch : *ordered)
      torch::cross_entropy_loss(net->forward(batch.data), batch.target)
          .backward();
  }
}
