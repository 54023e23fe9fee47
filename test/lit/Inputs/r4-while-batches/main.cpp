// Input of R4-while-batches.test: training loops that cut their batches from
// tensors by hand in a while loop, the counter stepped by the body's last
// statement.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

int main() {
  const int64_t n = 256, batch = 32;
  auto x = torch::randn({n, 4});
  auto y = torch::randn({n, 1});
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);

  int64_t pos = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    // The plainest shape: a start stepped by `+=`, a loss summed.
    double epoch_loss = 0;
    int64_t start = 0;
    while (start < n) {
      const int64_t end = std::min(start + batch, n);
      auto loss = torch::mse_loss(model->forward(x.slice(0, start, end)),
                                  y.slice(0, start, end));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      epoch_loss += loss.item<double>() * (end - start);
      start += batch;
    }
    std::printf("epoch %d loss %.6f\n", epoch, epoch_loss / n);

    // A shuffled index, the counter moved to the batch's end.
    auto order = torch::randperm(n);
    size_t i = 0;
    while (i < static_cast<size_t>(n)) {
      size_t stop = std::min(i + static_cast<size_t>(batch), static_cast<size_t>(n));
      auto idx = order.slice(0, i, stop);
      auto loss = torch::mse_loss(model->forward(x.index_select(0, idx)),
                                  y.index_select(0, idx));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      i = stop;
    }

    // Declared outside the epoch loop, reset before the while; whole
    // batches only; progress printed by the counter.
    pos = 0;
    while (pos + batch <= n) {
      auto loss = torch::mse_loss(model->forward(x.narrow(0, pos, batch)),
                                  y.narrow(0, pos, batch));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      if (pos % 128 == 0)
        std::cout << "at " << pos << " loss " << loss.item<float>() << '\n';
      pos = pos + batch;
    }

    // Batch numbers stepped by ++.
    int b = 0;
    while (b < n / batch) {
      auto loss = torch::mse_loss(model->forward(x.narrow(0, b * batch, batch)),
                                  y.narrow(0, b * batch, batch));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      ++b;
    }

    // Left alone: the counter is read after the loop.
    int64_t seen = 0;
    while (seen < n) {
      auto loss = torch::mse_loss(model->forward(x.narrow(0, seen, batch)),
                                  y.narrow(0, seen, batch));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      seen += batch;
    }
    std::cout << "trained on " << seen << " samples\n";

    // Left alone: it stops early.
    int64_t at = 0;
    while (at < n) {
      auto loss = torch::mse_loss(model->forward(x.narrow(0, at, batch)),
                                  y.narrow(0, at, batch));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      if (epoch == 5)
        break;
      at += batch;
    }

    // Left alone: the step is not the body's last statement, so the cuts
    // after it read the next batch's start.
    int64_t from = 0;
    while (from < n) {
      from += batch;
      auto loss = torch::mse_loss(model->forward(x.narrow(0, from - batch, batch)),
                                  y.narrow(0, from - batch, batch));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
    }

    // Left alone silently: it does not train.
    torch::NoGradGuard no_grad;
    int64_t k = 0;
    double error = 0;
    while (k < n) {
      error += torch::mse_loss(model->forward(x.narrow(0, k, batch)),
                               y.narrow(0, k, batch))
                   .item<double>();
      k += batch;
    }
    std::cout << "error " << error << '\n';
  }
}
