// Linear regression that stops on a loss threshold (inside the batch loop and
// after it), logs through an std::ostream& helper and a logger holding a
// stream, keeps the best model in a checkpoint and reads it back at the end
// to report its test loss.
// Usage: early_stop [batch_size]
#include <torch/torch.h>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <string>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::Tensor x, y;
  Points(int64_t n, const torch::Tensor &w) {
    x = torch::randn({n, 4});
    y = x.matmul(w) + 0.5 + 0.05 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
};

// The program's own log line, written to whatever stream it is given.
void log_epoch(std::ostream &os, int epoch, int64_t steps, double test_loss) {
  os << "epoch " << epoch << " steps " << steps << " test_loss " << std::fixed
     << std::setprecision(6) << test_loss << '\n';
}

class Logger {
public:
  explicit Logger(std::ostream &out) : out_(out) {}
  void line(const std::string &text) { out_ << text << '\n'; }

private:
  std::ostream &out_;
};

template <typename Loader>
double test_loss(torch::nn::Linear &model, Loader &loader) {
  torch::NoGradGuard no_grad;
  double sum = 0;
  int64_t count = 0;
  for (auto &batch : loader) {
    sum += torch::mse_loss(model->forward(batch.data), batch.target,
                           torch::Reduction::Sum)
               .template item<double>();
    count += batch.data.size(0);
  }
  return sum / count;
}

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  const float target = 0.004f;
  torch::manual_seed(1);
  auto w = torch::randn({4, 1});
  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          Points(512, w).map(torch::data::transforms::Stack<>()), batch_size);
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Points(100, w).map(torch::data::transforms::Stack<>()), 25);

  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.05);
  Logger logger(std::cout);
  std::printf("training to a loss of %.4f\n", target);

  double best = 1e9;
  int64_t steps = 0;
  float last_loss = 1e9f;
  for (int epoch = 0; epoch < 20; ++epoch) {
    torch::manual_seed(epoch);
    for (auto &batch : *train_loader) {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      ++steps;
      last_loss = loss.item<float>();
      if (last_loss < target)
        break;
    }
    const double loss = test_loss(model, *test_loader);
    log_epoch(std::cout, epoch, steps, loss);
    if (loss < best) {
      best = loss;
      torch::save(model, "best.pt");
      logger.line("saved best.pt");
    }
    if (last_loss < target)
      break;
  }

  // Every process reads the best model back.
  torch::nn::Linear restored(4, 1);
  torch::load(restored, "best.pt");
  std::cout << "restored test_loss " << std::fixed << std::setprecision(6)
            << test_loss(restored, *test_loader) << '\n';
  return 0;
}
