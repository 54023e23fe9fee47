// Input of R4.test: data loaders written the usual ways, used for training
// (their batches reach backward()) or for evaluation.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#define MAKE_LOADER(ds) torch::data::make_data_loader(ds, 4)

struct Squares : torch::data::datasets::Dataset<Squares> {
  explicit Squares(int64_t n) : n_(n) {}
  torch::data::Example<> get(size_t i) override {
    auto x = torch::full({1}, static_cast<double>(i));
    return {x, x * x};
  }
  c10::optional<size_t> size() const override { return size_t(n_); }
  int64_t n_;
};

struct EveryOther : torch::data::samplers::Sampler<> {
  explicit EveryOther(size_t n) : n_(n) {}
  void reset(c10::optional<size_t> n = c10::nullopt) override {
    n_ = n ? *n : n_;
    i_ = 0;
  }
  c10::optional<std::vector<size_t>> next(size_t batch) override {
    std::vector<size_t> out;
    for (; i_ < n_ && out.size() < batch; i_ += 2)
      out.push_back(i_);
    if (out.empty())
      return c10::nullopt;
    return out;
  }
  void save(torch::serialize::OutputArchive &) const override {}
  void load(torch::serialize::InputArchive &) override {}
  size_t n_, i_ = 0;
};

struct Stream : torch::data::datasets::StatefulDataset<Stream, torch::Tensor> {
  c10::optional<torch::Tensor> get_batch(size_t n) override {
    if (left_-- <= 0)
      return c10::nullopt;
    return torch::ones({static_cast<int64_t>(n)});
  }
  c10::optional<size_t> size() const override { return c10::nullopt; }
  void reset() override { left_ = 2; }
  void save(torch::serialize::OutputArchive &) const override {}
  void load(torch::serialize::InputArchive &) override {}
  int left_ = 2;
};

torch::Tensor weight = torch::ones({1}, torch::requires_grad());

void train_step(const torch::data::Example<> &batch) {
  auto loss = (batch.data * weight - batch.target).pow(2).sum();
  loss.backward();
}

template <typename DataLoader> void train(DataLoader &data_loader) {
  for (auto &batch : data_loader) {
    auto loss = (batch.data * weight).sum();
    loss.backward();
  }
}

template <typename DataLoader> void test(DataLoader &data_loader) {
  torch::NoGradGuard no_grad;
  for (const auto &batch : data_loader)
    (void)(batch.data * weight);
}

// Declared only: where its loader's batches go is not visible.
template <typename DataLoader> void consume(DataLoader &data_loader);

// A loader built in a template: one finding, however many instantiations.
template <typename Dataset> void evaluate(Dataset dataset) {
  auto loader = torch::data::make_data_loader(std::move(dataset), 4);
  for (auto &batch : *loader)
    (void)batch;
}

int main(int argc, char **argv) {
  const std::string path = argc > 1 ? argv[1] : "./data";
  auto train_set = Squares(64).map(torch::data::transforms::Stack<>());
  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          std::move(train_set), /*batch_size=*/8);
  auto test_loader = torch::data::make_data_loader(
      Squares(16).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(4));
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (auto &batch : *train_loader) {
      auto loss = (batch.data * weight).sum();
      loss.backward();
    }
    for (auto &batch : *test_loader)
      (void)(batch.data * weight);
  }

  // A sequential sampler that trains: still even.
  auto ordered = torch::data::make_data_loader<
      torch::data::samplers::SequentialSampler>(
      Squares(32).map(torch::data::transforms::Stack<>()), 8);
  // A sampler object; backward() one call away.
  auto sampled = ::torch::data::make_data_loader(
      Squares(32), torch::data::samplers::RandomSampler(32),
      torch::data::DataLoaderOptions(8));
  for (auto &batch : *ordered)
    train_step(batch);
  for (auto &examples : *sampled)
    for (auto &example : examples)
      train_step(example);

  // Passed to templates that iterate them.
  auto mnist_train = torch::data::make_data_loader(
      torch::data::datasets::MNIST(path).map(
          torch::data::transforms::Stack<>()),
      64);
  auto mnist_test = torch::data::make_data_loader(
      torch::data::datasets::MNIST(path,
                                   torch::data::datasets::MNIST::Mode::kTest)
          .map(torch::data::transforms::Stack<>()),
      1000);
  train(*mnist_train);
  test(*mnist_test);

  // A lambda that trains; a loader reached through a reference.
  auto step = [&](const torch::data::Example<> &batch) { train_step(batch); };
  auto with_lambda = torch::data::make_data_loader(
      Squares(8).map(torch::data::transforms::Stack<>()), 2);
  auto &view = *with_lambda;
  for (auto &batch : view)
    step(batch);

  // Under `using namespace torch`: the qualifier as written is replaced.
  {
    using namespace torch;
    auto short_name = data::make_data_loader(
        Squares(8).map(data::transforms::Stack<>()), 2);
    for (auto &batch : *short_name)
      (void)batch.data.sum();
  }

  evaluate(Squares(8));
  evaluate(Squares(4).map(torch::data::transforms::Stack<>()));

  // Unknown use: even, and reported.
  auto unknown = torch::data::make_data_loader(Squares(8), 2);
  consume(*unknown);

  // Report items, not rewritten.
  auto custom = torch::data::make_data_loader(
      Squares(8), EveryOther(8), torch::data::DataLoaderOptions(2));
  auto stream = torch::data::make_data_loader(Stream(),
                                              torch::data::DataLoaderOptions(4));
#define SEQUENTIAL_LOADER torch::data::StatelessDataLoader<Squares, torch::data::samplers::SequentialSampler>
  std::unique_ptr<SEQUENTIAL_LOADER>
      typed = torch::data::make_data_loader<
          torch::data::samplers::SequentialSampler>(Squares(8), 2);
  auto in_macro = MAKE_LOADER(Squares(8));
  for (auto &batch : *custom)
    (void)batch;
  for (auto &batch : *stream)
    (void)batch;
  for (auto &batch : *typed)
    (void)batch;
  for (auto &batch : *in_macro)
    (void)batch;

  // Already sharded: left alone.
  auto distributed = torch::data::make_data_loader(
      Squares(8), torch::data::samplers::DistributedRandomSampler(8, 2, 0),
      torch::data::DataLoaderOptions(2));
  for (auto &batch : *distributed)
    (void)batch;
  return 0;
}
