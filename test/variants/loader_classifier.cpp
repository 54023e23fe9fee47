// R4, R6, R7 and R11's idiom under rewrites: a classifier trained from a
// torch data loader, its epoch loss and accuracy accumulated over batches
// and printed, a checkpoint saved at the end. Every variant must shard the
// loader, wrap the model once, reduce the metrics and guard the output.
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <memory>

//@{ names
//@| namespace alias
namespace nn = torch::nn;
//@| using namespace torch
using namespace torch;
//@}

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl()
      : fc1(register_module("fc1", torch::nn::Linear(8, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 3))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Classifier);

//@{ placement
//@| the epoch in a helper function
template <typename Loader>
void run_epoch(Classifier &model, Loader &loader,
               torch::optim::Optimizer &optimizer, torch::Device device,
               int epoch) {
  double total_loss = 0;
  int64_t correct = 0, seen = 0;
  for (auto &batch : loader) {
    torch::Tensor data = batch.data.to(device);
    torch::Tensor target = batch.target.to(device);
    optimizer.zero_grad();
    auto output = model->forward(data);
    auto loss = torch::cross_entropy_loss(output, target);
    loss.backward();
    optimizer.step();
    total_loss += loss.item<double>() * data.size(0);
    correct += output.argmax(1).eq(target).sum().item<int64_t>();
    seen += data.size(0);
  }
  std::printf("epoch %d loss %.6f accuracy %.6f\n", epoch, total_loss / seen,
              static_cast<double>(correct) / seen);
}
//@}

int main() {
  torch::manual_seed(0);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  auto x = torch::randn({512, 8});
  auto y = x.narrow(1, 0, 3).argmax(1);
  struct Pairs : torch::data::datasets::Dataset<Pairs> {
    torch::Tensor x, y;
    Pairs(torch::Tensor x, torch::Tensor y) : x(x), y(y) {}
    torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
    torch::optional<size_t> size() const override { return x.size(0); }
  };
  auto train_loader = torch::data::make_data_loader(
      Pairs(x, y).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(32));

//@{ model
  Classifier model;
//@| a shared_ptr of the module
  auto model = std::make_shared<ClassifierImpl>();
//@}
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(0.1).momentum(0.9));

  for (int epoch = 1; epoch <= 3; ++epoch) {
//@{ placement
    double total_loss = 0;
    int64_t correct = 0, seen = 0;
    for (auto &batch : *train_loader) {
      auto data = batch.data.to(device), target = batch.target.to(device);
      optimizer.zero_grad();
      auto output = model->forward(data);
      auto loss = torch::cross_entropy_loss(output, target);
      loss.backward();
      optimizer.step();
      total_loss += loss.item<double>() * data.size(0);
      correct += output.argmax(1).eq(target).sum().item<int64_t>();
      seen += data.size(0);
    }
    std::printf("epoch %d loss %.6f accuracy %.6f\n", epoch, total_loss / seen,
                static_cast<double>(correct) / seen);
//@| the epoch in a helper function
    run_epoch(model, *train_loader, optimizer, device, epoch);
//@| an iterator loop
    double total_loss = 0;
    int64_t correct = 0, seen = 0;
    for (auto it = train_loader->begin(); it != train_loader->end(); ++it) {
      auto data = it->data.to(device), target = it->target.to(device);
      optimizer.zero_grad();
      auto output = model->forward(data);
      auto loss = torch::cross_entropy_loss(output, target);
      loss.backward();
      optimizer.step();
      total_loss += loss.item<double>() * data.size(0);
      correct += output.argmax(1).eq(target).sum().item<int64_t>();
      seen += data.size(0);
    }
    std::printf("epoch %d loss %.6f accuracy %.6f\n", epoch, total_loss / seen,
                static_cast<double>(correct) / seen);
//@| an early continue on an empty batch
    double total_loss = 0;
    int64_t correct = 0, seen = 0;
    for (auto &batch : *train_loader) {
      if (batch.data.size(0) == 0)
        continue;
      auto data = batch.data.to(device), target = batch.target.to(device);
      optimizer.zero_grad();
      auto output = model->forward(data);
      auto loss = torch::cross_entropy_loss(output, target);
      loss.backward();
      optimizer.step();
      total_loss += loss.item<double>() * data.size(0);
      correct += output.argmax(1).eq(target).sum().item<int64_t>();
      seen += data.size(0);
    }
    std::printf("epoch %d loss %.6f accuracy %.6f\n", epoch, total_loss / seen,
                static_cast<double>(correct) / seen);
//@| a lambda !open
    auto train_epoch = [&]() {
      double total_loss = 0;
      int64_t correct = 0, seen = 0;
      for (auto &batch : *train_loader) {
        auto data = batch.data.to(device), target = batch.target.to(device);
        optimizer.zero_grad();
        auto output = model->forward(data);
        auto loss = torch::cross_entropy_loss(output, target);
        loss.backward();
        optimizer.step();
        total_loss += loss.item<double>() * data.size(0);
        correct += output.argmax(1).eq(target).sum().item<int64_t>();
        seen += data.size(0);
      }
      std::printf("epoch %d loss %.6f accuracy %.6f\n", epoch,
                  total_loss / seen, static_cast<double>(correct) / seen);
    };
    train_epoch();
//@| std::cout
    double total_loss = 0;
    int64_t correct = 0, seen = 0;
    for (auto &batch : *train_loader) {
      auto data = batch.data.to(device), target = batch.target.to(device);
      optimizer.zero_grad();
      auto output = model->forward(data);
      auto loss = torch::cross_entropy_loss(output, target);
      loss.backward();
      optimizer.step();
      total_loss += loss.item<double>() * data.size(0);
      correct += output.argmax(1).eq(target).sum().item<int64_t>();
      seen += data.size(0);
    }
    std::cout << "epoch " << epoch << " loss " << total_loss / seen
              << " accuracy " << static_cast<double>(correct) / seen
              << std::endl;
//@}
  }
  torch::save(model, "classifier.pt");
  return 0;
}
