// Input of R4-hand-batches.test: training loops that cut their batches from
// tensors by hand.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

using torch::indexing::Slice;

int main() {
  const int64_t n = 256, batch = 32;
  auto x = torch::randn({n, 4});
  auto y = torch::randn({n, 1});
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);

  for (int epoch = 0; epoch < 2; ++epoch) {
    // narrow with a size from std::min; the loss sum is a metric.
    double epoch_loss = 0;
    for (int64_t start = 0; start < n; start += batch) {
      const int64_t size = std::min(batch, n - start);
      auto loss = torch::mse_loss(model->forward(x.narrow(0, start, size)),
                                  y.narrow(0, start, size));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      epoch_loss += loss.item<double>() * size;
    }
    std::printf("epoch %d loss %.6f\n", epoch, epoch_loss / n);

    // A shuffled index tensor cut into batches.
    auto order = torch::randperm(n);
    for (int i = 0; i < n; i += batch) {
      auto idx = order.slice(0, i, i + batch);
      auto loss = torch::mse_loss(model->forward(x.index_select(0, idx)),
                                  y.index_select(0, idx));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
    }

    // Tensor indexing with a Slice.
    for (size_t b = 0; b < static_cast<size_t>(n); b += batch) {
      auto loss = torch::mse_loss(model->forward(x.index({Slice(b, b + batch)})),
                                  y.index({Slice(b, b + batch)}));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
    }

    // A batch number stepped by one, its bounds in a local integer.
    const int64_t batches = n / batch;
    for (int b = 0; b < batches; b++) {
      const int64_t first = b * batch;
      auto loss = torch::mse_loss(model->forward(x.slice(0, first, first + batch)),
                                  y.slice(0, b * batch, (b + 1) * batch));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
    }

    // Whole batches only.
    for (int64_t i = 0; i + batch <= n; i = i + batch) {
      auto loss = torch::mse_loss(model->forward(x.narrow(0, i, batch)),
                                  y.narrow(0, i, batch));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
    }

    // The pieces of split(), walked by position.
    auto xs = x.split(batch), ys = y.split(batch);
    for (size_t k = 0; k != xs.size(); ++k) {
      auto loss = torch::mse_loss(model->forward(xs[k]), ys.at(k));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
    }
  }

  // One sample at a time.
  for (int64_t i = 0; i < n; ++i) {
    auto loss = torch::mse_loss(model->forward(x[i]), y.select(0, i));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }

  // Left alone: a window that grows with the counter (no batch starts at it).
  for (int stage = 1; stage <= 4; ++stage) {
    auto loss = torch::mse_loss(model->forward(x.narrow(0, 0, stage * 64)),
                                y.slice(0, 0, stage * 64));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }

  // Left alone: a hidden state goes from one window to the next.
  auto hidden = torch::zeros({1, 1});
  for (int64_t t = 0; t < n; t += batch) {
    auto out = model->forward(x.narrow(0, t, batch)) + hidden;
    auto loss = torch::mse_loss(out, y.narrow(0, t, batch));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    hidden = out.mean().detach().view({1, 1});
  }

  // Left alone: it can stop early.
  for (int64_t start = 0; start < n; start += batch) {
    auto loss = torch::mse_loss(model->forward(x.narrow(0, start, batch)),
                                y.narrow(0, start, batch));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    if (start > 128)
      break;
  }
  // The counter also decides what is printed: sharded, the main process
  // prints for its own batches.
  for (int64_t start = 0; start < n; start += batch) {
    auto loss = torch::mse_loss(model->forward(x.slice(0, start, start + batch)),
                                y.slice(0, start, start + batch));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    if (start % 64 == 0)
      std::cout << "at " << start << '\n';
  }
  // A running loss printed and reset every few batches, progress by
  // batch number through printf and a stream of the program's.
  std::ostream &log = std::cout;
  float running_loss = 0;
  for (int b = 0; b < n / batch; b++) {
    auto loss = torch::mse_loss(model->forward(x.slice(0, b * batch, (b + 1) * batch)),
                                y.slice(0, b * batch, (b + 1) * batch));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    running_loss += loss.item<float>();
    if ((b + 1) % 4 == 0) {
      std::printf("[batch %d] loss %.4f\n", b + 1, running_loss / 4);
      running_loss = 0.0f;
    }
    log << "batch " << b << "/" << n / batch << " " << loss.item<float>() << std::endl;
  }
  // Left alone: what the counter decides does work (a forward pass for the
  // output, a change of the learning rate).
  for (int64_t start = 0; start < n; start += batch) {
    auto loss = torch::mse_loss(model->forward(x.slice(0, start, start + batch)),
                                y.slice(0, start, start + batch));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    if (start % 64 == 0)
      std::cout << model->forward(x.slice(0, 0, 1)) << '\n';
  }
  for (int64_t start = 0; start < n; start += batch) {
    auto loss = torch::mse_loss(model->forward(x.slice(0, start, start + batch)),
                                y.slice(0, start, start + batch));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    if (start % 128 == 0) {
      std::cout << "decay at " << start << '\n';
      for (auto &group : optimizer.param_groups())
        static_cast<torch::optim::SGDOptions &>(group.options()).lr(0.005);
    }
  }
  // Left alone: the figure printed under the counter is read after the loop.
  double since_print = 0;
  for (int64_t start = 0; start < n; start += batch) {
    auto loss = torch::mse_loss(model->forward(x.slice(0, start, start + batch)),
                                y.slice(0, start, start + batch));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    since_print += loss.item<double>();
    if (start % 64 == 0) {
      std::cout << since_print << '\n';
      since_print = 0;
    }
  }
  std::cout << "last " << since_print << '\n';
  // A full batch: R15's, not R4's.
  for (int step = 0; step < 3; ++step) {
    auto loss = torch::mse_loss(model->forward(x), y);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  // Left alone: it does not train (every rank evaluates all of it).
  double total = 0;
  for (int64_t start = 0; start < n; start += batch)
    total += model->forward(x.narrow(0, start, batch)).sum().item<double>();
  std::printf("total %.3f\n", total);
  return 0;
}
