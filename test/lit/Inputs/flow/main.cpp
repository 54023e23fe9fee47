// Flow input: loop exits decided by one rank's data (divergent-exit), and
// the exits that are safe.
#include <ddp/ddp.h>
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({4}, static_cast<double>(i)),
            torch::full({1}, static_cast<double>(i % 3))};
  }
  torch::optional<size_t> size() const override { return 32; }
};

float last_loss(const torch::Tensor &loss) { return loss.item<float>(); }

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  const int max_epochs = argc > 1 ? std::atoi(argv[1]) : 3;
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  auto train_loader = ddp::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 8);
  auto test_loader = ddp::make_eval_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 8);

  bool stop = false;
  float current = 1.f;
  while (current > 0.5f) {
    for (auto &batch : *train_loader) {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      if (loss.item<float>() < 1e-3)
        break;
      double value = loss.item<double>();
      if (value > 1e6) {
        std::cerr << "diverged\n";
        return 1;
      }
      if (last_loss(loss) < 1e-4f)
        break;
      if (loss.item<float>() < 1e-2f)
        stop = true;
      current = loss.item<float>();
      // Safe: a value all ranks agree on.
      double global = ddp::all_reduce(loss.item<double>(), ddp::ReduceOp::kMean);
      if (global < 1e-5)
        break;
      torch::Tensor shared = loss.detach().clone();
      ddp::all_reduce(shared);
      if (shared.item<float>() < 1e-5f)
        break;
      switch (static_cast<int>(current)) {
      case 7:
        break;
      default:
        break;
      }
    }
    if (stop)
      break;
  }

  for (int epoch = 1; epoch <= 100; ++epoch) {
    for (auto &batch : *train_loader) {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
    }
    // Safe: sums R11 all-reduces after the validation loop.
    double val_loss = 0;
    for (auto &batch : *test_loader) {
      val_loss += torch::mse_loss(model->forward(batch.data), batch.target)
                      .item<double>();
    }
    if (val_loss < 1e-3)
      break;
    // Safe: counters and command-line values.
    if (epoch >= max_epochs)
      break;
  }

  // Not a training loop: a local threshold is harmless here.
  for (auto &batch : *test_loader) {
    if (model->forward(batch.data).mean().item<float>() > 100.f)
      break;
  }
  return 0;
}

// A running sum R11 all-reduces only after its training loop: an exit inside
// the loop decided by it still diverges.
double running_sum_exit(torch::nn::Linear &model, torch::optim::SGD &optimizer) {
  auto loader =
      ddp::make_data_loader(Points().map(torch::data::transforms::Stack<>()), 8);
  double running = 0;
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
    loss.backward();
    optimizer.step();
    running += loss.item<double>();
    if (running > 1e9)
      break;
  }
  return running;
}
