// An ensemble of regressors whose models are made, placed and trained in
// different units and classes: a model placed by a helper of placement.cpp and
// trained in main.cpp; one trained by a helper of trainer.cpp over a loader
// that placement.cpp makes (its type written out in this header); a trainer
// holding its model by raw pointer; a calibration head built in-class with
// its optimizer (no constructor), trained where it was made.
#pragma once
#include <torch/torch.h>

struct Readings : torch::data::datasets::Dataset<Readings> {
  torch::Tensor x, y;
  explicit Readings(int64_t n) {
    x = torch::randn({n, 6});
    y = x.narrow(1, 0, 3).sum(1, true) - torch::cos(x.narrow(1, 3, 1)) +
        0.05 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
};

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(int64_t hidden)
      : in(register_module("in", torch::nn::Linear(6, hidden))),
        out(register_module("out", torch::nn::Linear(hidden, 1))) {}
  torch::Tensor forward(const torch::Tensor &x) {
    return out->forward(torch::tanh(in->forward(x)));
  }
  torch::nn::Linear in, out;
};
TORCH_MODULE(Mlp);

using ReadingSet =
    torch::data::datasets::MapDataset<Readings,
                                      torch::data::transforms::Stack<>>;
using ReadingLoader =
    torch::data::StatelessDataLoader<ReadingSet,
                                     torch::data::samplers::RandomSampler>;

/// A shuffling loader over a copy of `data` (placement.cpp).
std::unique_ptr<ReadingLoader> make_train_loader(const Readings &data,
                                                 int64_t batch_size);
/// Moves the model to the device (placement.cpp).
void place_model(Mlp &model, const torch::Device &device);
/// Trains the model for `epochs` epochs with its own SGD over `loader`
/// (trainer.cpp); prints one line per epoch under `tag`.
void fit(Mlp &model, ReadingLoader &loader, double samples, int epochs,
         const torch::Device &device, const std::string &tag);

/// Holds its model by raw pointer, made and placed in the constructor.
class PointerTrainer {
public:
  PointerTrainer(torch::Device device, double lr);
  ~PointerTrainer();
  PointerTrainer(const PointerTrainer &) = delete;
  PointerTrainer &operator=(const PointerTrainer &) = delete;
  /// One optimizer step; returns the batch's summed squared error.
  double step(const torch::Tensor &x, const torch::Tensor &y);
  torch::Tensor predict(const torch::Tensor &x);

private:
  torch::Device device_;
  MlpImpl *model_;
  torch::optim::SGD *optimizer_;
};
