// Binary classification of points inside/outside a sphere; the training and
// test loops are function templates over the loader type.
// Usage: template_loops [batch_size]
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

struct BallImpl : torch::nn::Module {
  BallImpl() : fc1(4, 32), fc2(32, 32), fc3(32, 2) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(torch::Tensor x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Ball);

struct Sphere : torch::data::datasets::Dataset<Sphere> {
  torch::Tensor x, y;
  explicit Sphere(int64_t n) {
    x = torch::randn({n, 4});
    y = (x.norm(2, 1) < 1.9).to(torch::kLong);
  }
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
};

template <typename Loader>
double train(Ball &net, Loader &loader, torch::optim::Optimizer &optimizer,
             torch::Device device) {
  net->train();
  double loss_sum = 0;
  int64_t batch_idx = 0;
  for (auto &batch : loader) {
    auto data = batch.data.to(device);
    auto target = batch.target.to(device);
    optimizer.zero_grad();
    auto loss = torch::cross_entropy_loss(net->forward(data), target);
    loss.backward();
    torch::nn::utils::clip_grad_value_(net->parameters(), 0.5);
    optimizer.step();
    loss_sum += loss.template item<double>();
    ++batch_idx;
  }
  return loss_sum / batch_idx; // the mean of the batch means
}

template <typename Loader>
void test(Ball &net, Loader &loader, torch::Device device, int epoch) {
  net->eval();
  torch::NoGradGuard no_grad;
  int64_t correct = 0, total = 0;
  double loss_sum = 0;
  for (auto &batch : loader) {
    auto data = batch.data.to(device);
    auto target = batch.target.to(device);
    auto output = net->forward(data);
    loss_sum += torch::nn::functional::cross_entropy(
                    output, target,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(
                        torch::kSum))
                    .template item<double>();
    correct += output.argmax(1).eq(target).sum().template item<int64_t>();
    total += target.size(0);
  }
  std::printf("epoch %d test_loss %.6f test_correct %lld test_total %lld\n",
              epoch, loss_sum / total, static_cast<long long>(correct),
              static_cast<long long>(total));
}

int main(int argc, char **argv) {
  const int64_t batch = argc > 1 ? std::atoi(argv[1]) : 32;
  torch::manual_seed(8);
  auto device = torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0)
                                            : torch::Device(torch::kCPU);

  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          Sphere(512).map(torch::data::transforms::Stack<>()), batch);
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          Sphere(257).map(torch::data::transforms::Stack<>()), 64);

  Ball net;
  net->to(device);
  torch::optim::SGD optimizer(net->parameters(),
                              torch::optim::SGDOptions(0.1).momentum(0.9));

  for (int epoch = 1; epoch <= 3; ++epoch) {
    torch::manual_seed(epoch - 1);
    const double train_loss = train(net, *train_loader, optimizer, device);
    std::printf("epoch %d train_loss %.6f\n", epoch, train_loss);
    test(net, *test_loader, device, epoch);
  }
}
