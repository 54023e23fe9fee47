// Input of R4-batch-lists.test: training loops that walk batches cut
// beforehand (split, chunk, a vector of pairs or examples).
#include <torch/torch.h>

#include <iostream>
#include <utility>
#include <vector>

using Batch = std::pair<torch::Tensor, torch::Tensor>;

// The program's own batch type.
struct Sample {
  torch::Tensor input, target;
  float weight = 1;
};

// A helper that trains one step: the loop calling it trains.
static double train_step(torch::nn::Linear &model, torch::optim::SGD &optimizer,
                         const torch::Tensor &input,
                         const torch::Tensor &target) {
  optimizer.zero_grad();
  auto loss = torch::mse_loss(model->forward(input), target);
  loss.backward();
  optimizer.step();
  return loss.item<double>();
}

// The list is a parameter.
static void train_epoch(torch::nn::Linear &model, torch::optim::SGD &optimizer,
                        const std::vector<Batch> &batches) {
  for (const auto &batch : batches)
    train_step(model, optimizer, batch.first, batch.second);
}

int main() {
  const int64_t n = 256, batch = 32;
  auto x = torch::randn({n, 4});
  auto y = torch::randn({n, 1});
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);

  std::vector<Batch> batches;
  for (int64_t start = 0; start < n; start += batch)
    batches.emplace_back(x.narrow(0, start, batch), y.narrow(0, start, batch));
  std::vector<torch::data::Example<>> examples;
  for (int64_t start = 0; start < n; start += batch)
    examples.push_back({x.narrow(0, start, batch), y.narrow(0, start, batch)});

  for (int epoch = 0; epoch < 2; ++epoch) {
    // A shuffled index split into batches; the loss sum is a metric.
    double epoch_loss = 0;
    for (const auto &idx : torch::randperm(n).split(batch)) {
      auto loss = torch::mse_loss(model->forward(x.index_select(0, idx)),
                                  y.index_select(0, idx));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      epoch_loss += loss.item<double>();
    }
    std::cout << "epoch " << epoch << " loss " << epoch_loss << std::endl;

    // Pairs by structured binding, a progress counter for the output.
    int seen = 0;
    for (auto &[input, target] : batches) {
      auto loss = torch::mse_loss(model->forward(input), target);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      ++seen;
      if (seen % 4 == 0)
        std::cout << "batch " << seen << " loss " << loss.item<float>() << '\n';
    }

    // Pairs by position in an index loop, and examples with at().
    for (size_t i = 0; i < batches.size(); ++i) {
      const auto &pair = batches[i];
      train_step(model, optimizer, pair.first, pair.second);
    }
    for (size_t e = 0; e < examples.size(); e++)
      train_step(model, optimizer, examples.at(e).data, examples.at(e).target);

    // Examples, trained through a helper.
    for (const auto &example : examples)
      train_step(model, optimizer, example.data, example.target);

    train_epoch(model, optimizer, batches);

    // chunk() of a tensor held in a variable.
    auto pieces = x.chunk(8);
    auto goals = y.chunk(8);
    for (size_t k = 0; k < pieces.size(); ++k)
      train_step(model, optimizer, pieces[k], goals[k]);
  }

  // The program's own struct; a tensor changed in place through a
  // non-const reference (its data is shared by the copy each rank walks).
  std::vector<Sample> samples;
  for (int64_t start = 0; start < n; start += batch)
    samples.push_back({x.narrow(0, start, batch), y.narrow(0, start, batch)});
  for (Sample &sample : samples) {
    train_step(model, optimizer, sample.input * sample.weight, sample.target);
    sample.input.mul_(0.5);
  }

  // Left alone: the batch itself is changed, in the list.
  for (Sample &sample : samples) {
    train_step(model, optimizer, sample.input, sample.target);
    sample.weight *= 0.9f;
  }
  for (auto &[input, target] : batches) {
    train_step(model, optimizer, input, target);
    std::swap(input, target);
  }

  // Left alone: an outer counter picks the target.
  auto inputs = x.split(batch);
  auto targets = y.split(batch);
  size_t k = 0;
  for (const auto &input : inputs) {
    train_step(model, optimizer, input, targets[k]);
    ++k;
  }

  // Left alone: it can stop early.
  for (const auto &input : x.split(batch)) {
    if (input.size(0) < batch)
      break;
    train_step(model, optimizer, input, input.sum(1, true));
  }

  // Left alone: a hidden state goes from one window to the next.
  auto hidden = torch::zeros({1, 1});
  for (const auto &window : x.split(batch)) {
    auto out = model->forward(window) + hidden;
    auto loss = out.pow(2).mean();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    hidden = out.mean().detach().view({1, 1});
  }

  // Left alone: the list grows while it is walked.
  std::vector<torch::Tensor> queue = {x.narrow(0, 0, batch)};
  for (const auto &item : queue) {
    train_step(model, optimizer, item, item.sum(1, true));
    if (queue.size() < 4)
      queue.push_back(item * 2);
  }

  // Left alone: gradient accumulation, one step for all pieces.
  optimizer.zero_grad();
  for (const auto &piece : x.split(batch)) {
    auto loss = model->forward(piece).pow(2).mean();
    loss.backward();
  }
  optimizer.step();

  // Left alone silently: pieces of a loader's batch.
  auto loader = torch::data::make_data_loader(
      torch::data::datasets::TensorDataset(torch::cat({x, y}, 1)),
      torch::data::DataLoaderOptions(batch));
  for (auto &samples : *loader) {
    for (const auto &sample : samples)
      train_step(model, optimizer, sample.data.narrow(0, 0, 4).unsqueeze(0),
                 sample.data.narrow(0, 4, 1).unsqueeze(0));
  }

  // Left alone silently: evaluation does not train.
  torch::NoGradGuard no_grad;
  double total = 0;
  for (const auto &[input, target] : batches)
    total += torch::mse_loss(model->forward(input), target).item<double>();
  std::cout << "eval " << total << std::endl;
}
