// Input of lint-ddp-fixed-batch-shape.test: a program already migrated (its
// loaders ddp's, ddp::init and the wrapper in place) whose loops still view
// their batches with the loader's batch size.
#include <ddp/ddp.h>
#include <torch/torch.h>

#include <iostream>

struct Digits : torch::data::datasets::Dataset<Digits> {
  torch::Tensor images = torch::rand({100, 1, 8, 8});
  torch::Tensor labels = torch::randint(10, {100}, torch::kLong);
  torch::data::Example<> get(size_t i) override {
    return {images[i], labels[i]};
  }
  torch::optional<size_t> size() const override { return 100; }
};

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  const int64_t batch_size = 32;
  auto fc = torch::nn::Linear(64, 10);
  fc->to(ddp::device());
  ddp::DistributedDataParallel fc_ddp(fc);
  torch::optim::SGD optimizer(fc->parameters(), 0.1);
  // ddp's overloads default a ShardOptions after the options.
  auto train_loader =
      ddp::make_data_loader<torch::data::samplers::RandomSampler>(
          Digits().map(torch::data::transforms::Stack<>()), batch_size);
  for (auto &batch : *train_loader) {
    auto x = batch.data.view({batch_size, -1});
    auto loss = torch::cross_entropy_loss(fc->forward(x), batch.target);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  auto test_loader = ddp::make_eval_data_loader(
      Digits().map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(50));
  for (const auto &batch : *test_loader) {
    auto x = batch.data.view({50, 64});
    // Negative: already the batch's own size.
    auto y = batch.data.view({batch.data.size(0), 64});
    if (ddp::is_main_process())
      std::cout << fc->forward(x).sum().item<float>() << y.size(0) << '\n';
  }
  // A sampler object and the mode written out: the sampler's 100 is not the
  // batch size (negative), the options' 25 is.
  auto exact_loader = ddp::make_data_loader(
      Digits().map(torch::data::transforms::Stack<>()),
      torch::data::samplers::SequentialSampler(100),
      torch::data::DataLoaderOptions(25), ddp::Shard::kExact);
  for (auto &batch : *exact_loader) {
    auto x = batch.data.view({25, 64});
    auto z = batch.data.view({100, -1});
    if (ddp::is_main_process())
      std::cout << x.size(0) << z.size(0) << '\n';
  }
  // Passes by iterator: the batch's size through the iterator. Negative: a
  // walk that may stop early is no pass.
  for (auto it = test_loader->begin(); it != test_loader->end(); ++it) {
    auto &batch = *it;
    auto x = batch.data.view({50, 64});
    if (ddp::is_main_process())
      std::cout << x.size(0) << '\n';
  }
  auto walk = train_loader->begin();
  while (walk != train_loader->end()) {
    auto x = walk->data.reshape({batch_size, 64});
    ++walk;
    if (x.size(0) > 0 && ddp::is_main_process())
      std::cout << x.size(0) << '\n';
  }
  for (auto it = test_loader->begin(); it != test_loader->end(); ++it) {
    auto x = it->data.view({50, 64});
    if (x.size(0) > 1)
      break;
  }
}
