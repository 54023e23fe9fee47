// Input of R13.test: seeds drawn at run time, in the places programs draw
// them, and seeds that must stay each process's own.
#include "augment.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <numeric>
#include <random>
#include <vector>

// Seeded at start-up, before ddp::init: seeded again in main right after it.
static std::mt19937 global_rng(std::random_device{}());

// A dataset that augments each sample with its own generator: per sample,
// not shared.
struct Noisy : torch::data::datasets::Dataset<Noisy> {
  explicit Noisy(torch::Tensor x) : x_(std::move(x)) {}
  torch::data::Example<> get(size_t i) override {
    std::mt19937 gen(std::random_device{}());
    std::normal_distribution<float> noise(0.0f, 0.01f);
    return {x_[i] + noise(gen), x_[i]};
  }
  torch::optional<size_t> size() const override { return x_.size(0); }
  torch::Tensor x_;
};

// A helper called once per epoch, outside the loop over batches: every rank
// draws it alike, shared.
std::vector<float> jitter(size_t n) {
  std::default_random_engine engine(static_cast<unsigned>(time(nullptr)));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto &e : v)
    e = u(engine);
  return v;
}

// A helper that makes the data, called once by main: every rank makes the
// same data.
torch::Tensor make_points(int64_t n) {
  std::mt19937 gen(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n) * 4);
  for (auto &v : values)
    v = normal(gen);
  return torch::tensor(values).view({n, 4});
}

// A dataset that makes its samples in its constructor, constructed once by
// main: shared. Its get() draws nothing.
struct Synthetic : torch::data::datasets::Dataset<Synthetic> {
  explicit Synthetic(int64_t n) : x_(torch::empty({n, 4})) {
    std::default_random_engine engine(static_cast<unsigned>(time(nullptr)));
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (int64_t i = 0; i < n; ++i)
      x_[i].fill_(u(engine));
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], x_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }
  torch::Tensor x_;
};

// A trainer whose constructor seeds the generator it shuffles with.
class Trainer {
public:
  explicit Trainer(int64_t n) : rng_(std::random_device{}()), order_(n) {
    std::iota(order_.begin(), order_.end(), 0);
  }
  void epoch(torch::nn::Linear &model, torch::optim::SGD &opt,
             const torch::Tensor &x, const torch::Tensor &y) {
    std::shuffle(order_.begin(), order_.end(), rng_);
    auto perm = torch::tensor(order_);
    for (int64_t i = 0; i < x.size(0); i += 16) {
      auto idx = perm.slice(0, i, i + 16);
      opt.zero_grad();
      torch::mse_loss(model->forward(x.index_select(0, idx)),
                      y.index_select(0, idx))
          .backward();
      opt.step();
    }
  }

private:
  std::mt19937 rng_;
  std::vector<int64_t> order_;
};

int main() {
  torch::manual_seed(static_cast<uint64_t>(std::time(nullptr)));
  std::srand(static_cast<unsigned>(time(0)));
  std::random_device rd;
  const auto seed = rd();
  std::mt19937 gen(seed);
  std::mt19937_64 wide;
  wide.seed(std::chrono::steady_clock::now().time_since_epoch().count());
  // A fixed seed is the same on every rank: left alone.
  std::mt19937 fixed(42);

  const int64_t n = 64;
  auto x = make_points(n);
  Synthetic synthetic(16);
  auto y = torch::randn({n, 1});
  torch::nn::Linear model(4, 1);
  torch::optim::SGD opt(model->parameters(), 0.01);
  Trainer trainer(n);
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  for (int epoch = 0; epoch < 2; ++epoch) {
    trainer.epoch(model, opt, x, y);
    std::cout << jitter(3).size() << '\n';
    std::shuffle(idx.begin(), idx.end(), std::mt19937(std::random_device{}()));
    std::shuffle(idx.begin(), idx.end(), gen);
    auto perm = torch::from_blob(idx.data(), {n}, torch::kLong).clone();
    for (int64_t i = 0; i < n; i += 16) {
      // Seeded per batch: each rank's own, not a collective per batch.
      std::mt19937 dropout_rng(std::random_device{}());
      auto b = perm.slice(0, i, i + 16);
      opt.zero_grad();
      torch::mse_loss(model->forward(x.index_select(0, b)),
                      y.index_select(0, b))
          .backward();
      opt.step();
    }
  }
  std::cout << fixed() << wide() << global_rng() << synthetic.size().value()
            << '\n';
  Noisy data(x);
  std::cout << data.get(0).data.sum().item<float>() << '\n';
  std::cout << noise_table(4).size() << '\n';
  // A loop over a loader: the helper it calls per batch draws each rank's own.
  auto loader = torch::data::make_data_loader(
      Synthetic(32).map(torch::data::transforms::Stack<>()), 8);
  for (auto &batch : *loader) {
    opt.zero_grad();
    torch::mse_loss(model->forward(augment(batch.data)), batch.target)
        .backward();
    opt.step();
  }
}
