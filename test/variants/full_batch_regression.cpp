// R15's idiom under rewrites: a regression fed the whole training set at
// every step (no loader), its loss printed every 10 epochs, a test set
// evaluated after training. Every variant must be sharded by rows, its
// printed figures global, its evaluation as the base's.
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <tuple>
#include <utility>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc1(register_module("fc1", torch::nn::Linear(4, 16))),
              fc2(register_module("fc2", torch::nn::Linear(16, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

std::pair<torch::Tensor, torch::Tensor> make_data(int64_t rows) {
  auto x = torch::rand({rows, 4}) * 2 - 1;
  return {x, x.sum(1, true).sin()};
}

struct Data {
  torch::Tensor x, y;
};
Data make_struct(int64_t rows) {
  auto [x, y] = make_data(rows);
  return {x, y};
}

//@{ placement
//@| the loop in a helper function
void fit(Net &net, torch::optim::Adam &optimizer, torch::Tensor inputs,
         torch::Tensor targets, int epochs) {
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(net->forward(inputs), targets);
    loss.backward();
    optimizer.step();
    if (epoch % 10 == 0)
      std::printf("epoch %d train_mse %.6f\n", epoch, loss.item<double>());
  }
}
//@}

int main() {
  torch::manual_seed(1);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
//@{ data
  auto [x_train, y_train] = make_data(1000);
  torch::Tensor inputs = x_train.to(device);
  torch::Tensor targets = y_train.to(device);
//@| auto
  auto [x_train, y_train] = make_data(1000);
  auto inputs = x_train.to(device);
  auto targets = y_train.to(device);
//@| pair .first/.second
  auto train = make_data(1000);
  torch::Tensor inputs = train.first.to(device);
  torch::Tensor targets = train.second.to(device);
//@| std::tie
  torch::Tensor inputs, targets;
  std::tie(inputs, targets) = make_data(1000);
  inputs = inputs.to(device);
  targets = targets.to(device);
//@| a struct returned by a helper
  Data train = make_struct(1000);
  torch::Tensor inputs = train.x.to(device);
  torch::Tensor targets = train.y.to(device);
//@| declared then assigned
  auto train = make_data(1000);
  torch::Tensor inputs;
  torch::Tensor targets;
  inputs = train.first.to(device);
  targets = train.second.to(device);
//@| a structured binding used directly
  auto [inputs, targets] = make_data(1000);
  inputs = inputs.to(device);
  targets = targets.to(device);
//@}
  auto [x_test, y_test] = make_data(200);
  torch::Tensor test_inputs = x_test.to(device);
  torch::Tensor test_targets = y_test.to(device);

  Net net;
  net->to(device);
  torch::optim::Adam optimizer(net->parameters(),
                               torch::optim::AdamOptions(0.01));
  const int epochs = 40;
//@{ placement
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(net->forward(inputs), targets);
    loss.backward();
    optimizer.step();
    if (epoch % 10 == 0)
      std::printf("epoch %d train_mse %.6f\n", epoch, loss.item<double>());
  }
//@| the loop in a helper function
  fit(net, optimizer, inputs, targets, epochs);
//@}
//@{ after
//@| a final loss on the training set
  {
    torch::NoGradGuard no_grad;
    std::printf("final train_mse %.6f\n",
                torch::mse_loss(net->forward(inputs), targets).item<double>());
  }
//@}

  torch::NoGradGuard no_grad;
  auto prediction = net->forward(test_inputs);
  const double test_mse = torch::mse_loss(prediction, test_targets).item<double>();
//@{ print
  std::printf("test mse %.6f\n", test_mse);
//@| std::cout
  std::cout << "test mse " << test_mse << std::endl;
//@}
  return 0;
}
