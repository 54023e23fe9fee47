// Fits a small network to a 1-D signal with no data loader: the whole data
// set is in two tensors, shuffled by the program each epoch and cut into
// batches with narrow/slice in an index loop; then fine-tuned over batch
// numbers, over the pieces of split() by position, in a while loop, over a
// shuffled index's pieces by range-for, and on the full set. Both batch loops
// print progress every few batches, decided by their counters.
// Usage: manual_slices [batch_size]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

struct Fit : torch::nn::Module {
  Fit() {
    a = register_module("a", torch::nn::Linear(1, 32));
    b = register_module("b", torch::nn::Linear(32, 32));
    c = register_module("c", torch::nn::Linear(32, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    return c(torch::tanh(b(torch::tanh(a(x)))));
  }
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr};
};

int main(int argc, char **argv) {
  const int64_t batch = argc > 1 ? std::atol(argv[1]) : 32;
  torch::manual_seed(6);
  torch::Device device(torch::kCPU);
  if (torch::cuda::is_available()) {
    device = torch::Device(torch::kCUDA);
  }

  const int64_t n = 448;
  auto inputs = torch::linspace(-3, 3, n).unsqueeze(1);
  auto targets = torch::sin(2 * inputs) * torch::exp(-0.2 * inputs * inputs) +
                 0.05 * torch::randn({n, 1});
  inputs = inputs.to(device);
  targets = targets.to(device);

  auto model = std::make_shared<Fit>();
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(0.01));

  for (int epoch = 1; epoch <= 5; ++epoch) {
    auto order = torch::randperm(
        n, torch::TensorOptions().dtype(torch::kLong).device(device));
    auto x_all = inputs.index_select(0, order);
    auto y_all = targets.index_select(0, order);
    double epoch_loss = 0;
    for (int64_t start = 0; start < n; start += batch) {
      const int64_t size = std::min(batch, n - start);
      auto x = x_all.narrow(0, start, size);
      auto y = y_all.slice(0, start, start + size);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      epoch_loss += loss.item<double>() * size;
      if ((start / batch) % 4 == 0) {
        std::printf("progress epoch %d batch %lld loss %.6f\n", epoch,
                    static_cast<long long>(start / batch), loss.item<double>());
      }
    }
    std::printf("epoch %d train_loss %.6f\n", epoch, epoch_loss / n);
  }
  // Fine-tuning: whole batches numbered one by one, then the pieces of
  // split() walked by position, then a few full-batch steps.
  const int64_t batches = n / batch;
  double running = 0;
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t first = b * batch;
    optimizer.zero_grad();
    auto loss =
        torch::mse_loss(model->forward(inputs.slice(0, first, first + batch)),
                        targets.narrow(0, first, batch));
    loss.backward();
    optimizer.step();
    running += loss.item<double>();
    if (b % 7 == 6) {
      std::cout << "progress fine-tune batch " << b + 1 << " average "
                << running / 7 << std::endl;
      running = 0;
    }
  }
  auto input_pieces = inputs.split(batch);
  auto target_pieces = targets.split(batch);
  for (size_t k = 0; k < input_pieces.size(); k++) {
    optimizer.zero_grad();
    torch::mse_loss(model->forward(input_pieces[k]), target_pieces[k])
        .backward();
    optimizer.step();
  }
  // A while loop that moves its start to each batch's end, the loss
  // weighted by the batch's size.
  double while_loss = 0;
  int64_t from = 0;
  while (from < n) {
    const int64_t to = std::min(from + batch, n);
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(inputs.slice(0, from, to)),
                                targets.slice(0, from, to));
    loss.backward();
    optimizer.step();
    while_loss += loss.item<double>() * (to - from);
    from = to;
  }
  std::printf("while loop loss %.6f\n", while_loss / n);
  // A shuffled index split into batches, walked by range-for.
  for (const auto &picked :
       torch::randperm(
           n, torch::TensorOptions().dtype(torch::kLong).device(device))
           .split(batch)) {
    optimizer.zero_grad();
    torch::mse_loss(model->forward(inputs.index_select(0, picked)),
                    targets.index_select(0, picked))
        .backward();
    optimizer.step();
  }
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    torch::mse_loss(model->forward(inputs), targets).backward();
    optimizer.step();
  }

  torch::NoGradGuard no_grad;
  const double mse =
      torch::mse_loss(model->forward(inputs), targets).item<double>();
  std::printf("final mse %.6f\n", mse);
  return EXIT_SUCCESS;
}
