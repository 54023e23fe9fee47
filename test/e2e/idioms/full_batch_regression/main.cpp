// Fits a smooth surface of six inputs with a small MLP, the whole training
// set at every step (6001 rows: no batches), Adam, the loss every 20 epochs
// and the test errors at the end.
// Usage: surface_fit [batch_size]   (ignored: every step takes all rows)
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

struct SurfaceNetImpl : torch::nn::Module {
  SurfaceNetImpl(int64_t inputs, int64_t hidden)
      : in(register_module("in", torch::nn::Linear(inputs, hidden))),
        mid(register_module("mid", torch::nn::Linear(hidden, hidden))),
        out(register_module("out", torch::nn::Linear(hidden, 1))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::tanh(in(x));
    x = torch::tanh(mid(x));
    return out(x);
  }
  torch::nn::Linear in, mid, out;
};
TORCH_MODULE(SurfaceNet);

// y = sin(2 x0) + x1 x2 - 0.5 x3^2 + 0.3 x4 - 0.2 x5, with a little noise.
std::pair<torch::Tensor, torch::Tensor> make_surface(int64_t rows) {
  auto x = torch::rand({rows, 6}) * 2 - 1;
  auto y = torch::sin(2 * x.select(1, 0)) + x.select(1, 1) * x.select(1, 2) -
           0.5 * x.select(1, 3).pow(2) + 0.3 * x.select(1, 4) -
           0.2 * x.select(1, 5);
  y = y + 0.05 * torch::randn({rows});
  return {x, y.unsqueeze(1)};
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  torch::manual_seed(2024);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);

  auto [x_train, y_train] = make_surface(6001);
  auto [x_test, y_test] = make_surface(1500);
  torch::Tensor inputs = x_train.to(device);
  torch::Tensor targets = y_train.to(device);
  torch::Tensor test_inputs = x_test.to(device);
  torch::Tensor test_targets = y_test.to(device);

  SurfaceNet net(6, 32);
  net->to(device);
  torch::optim::Adam optimizer(net->parameters(),
                               torch::optim::AdamOptions(0.01));

  const int epochs = 120;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    optimizer.zero_grad();
    torch::Tensor prediction = net->forward(inputs);
    torch::Tensor loss = torch::mse_loss(prediction, targets);
    loss.backward();
    optimizer.step();
    if (epoch % 20 == 0)
      std::printf("epoch %d train_mse %.6f\n", epoch, loss.item<double>());
  }

  torch::NoGradGuard no_grad;
  torch::Tensor test_prediction = net->forward(test_inputs);
  const double test_mse =
      torch::mse_loss(test_prediction, test_targets).item<double>();
  const double test_mae =
      torch::l1_loss(test_prediction, test_targets).item<double>();
  std::printf("test mse %.6f mae %.6f\n", test_mse, test_mae);
  return 0;
}
