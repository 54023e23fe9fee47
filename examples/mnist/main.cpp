// A single-GPU MNIST convnet, written the way most LibTorch programs are:
// a module used by value, the stock MNIST reader, a random-sampled training
// loader, a test loader, printf progress and a checkpoint at the end.
//
//   mnist [DATA_DIR] [EPOCHS] [MAX_BATCHES_PER_EPOCH]

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

struct Net : torch::nn::Module {
  Net()
      : conv1(torch::nn::Conv2dOptions(1, 8, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(8, 16, /*kernel_size=*/5)), fc1(256, 64),
        fc2(64, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(
        torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 256});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/0.25, /*train=*/is_training());
    return torch::log_softmax(fc2->forward(x), /*dim=*/1);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};

template <typename DataLoader>
void train(size_t epoch, Net &model, torch::Device device,
           DataLoader &data_loader, torch::optim::Optimizer &optimizer,
           int64_t max_batches) {
  model.train();
  int64_t batch_idx = 0;
  for (auto &batch : data_loader) {
    auto data = batch.data.to(device);
    auto targets = batch.target.to(device);
    optimizer.zero_grad();
    auto output = model.forward(data);
    auto loss = torch::nll_loss(output, targets);
    loss.backward();
    optimizer.step();

    if (batch_idx++ % 10 == 0) {
      std::printf("\rTrain Epoch: %zu [batch %lld] Loss: %.4f\n", epoch,
                  static_cast<long long>(batch_idx),
                  loss.template item<float>());
    }
    if (max_batches > 0 && batch_idx >= max_batches) {
      break;
    }
  }
}

template <typename DataLoader>
void test(Net &model, torch::Device device, DataLoader &data_loader) {
  torch::NoGradGuard no_grad;
  model.eval();
  double test_loss = 0;
  int64_t correct = 0;
  int64_t total = 0;
  for (const auto &batch : data_loader) {
    auto data = batch.data.to(device);
    auto targets = batch.target.to(device);
    auto output = model.forward(data);
    test_loss += torch::nll_loss(output, targets,
                                 /*weight=*/{}, torch::Reduction::Sum)
                     .template item<double>();
    auto pred = output.argmax(1);
    correct += pred.eq(targets).sum().template item<int64_t>();
    total += targets.size(0);
  }
  std::printf("Test set: Average loss: %.4f | Accuracy: %.3f\n",
              test_loss / total, static_cast<double>(correct) / total);
}

int main(int argc, char **argv) {
  const std::string data_dir = argc > 1 ? argv[1] : "./data";
  const size_t epochs = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2;
  const int64_t max_batches = argc > 3 ? std::strtoll(argv[3], nullptr, 10) : 0;

  torch::manual_seed(1);
  torch::DeviceType device_type;
  if (torch::cuda::is_available()) {
    std::printf("CUDA available! Training on GPU.\n");
    device_type = torch::kCUDA;
  } else {
    std::printf("Training on CPU.\n");
    device_type = torch::kCPU;
  }
  torch::Device device(device_type);

  Net model;
  model.to(device);

  auto train_dataset =
      torch::data::datasets::MNIST(data_dir)
          .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
          .map(torch::data::transforms::Stack<>());
  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          std::move(train_dataset), /*batch_size=*/64);

  auto test_dataset =
      torch::data::datasets::MNIST(data_dir,
                                   torch::data::datasets::MNIST::Mode::kTest)
          .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
          .map(torch::data::transforms::Stack<>());
  auto test_loader =
      torch::data::make_data_loader(std::move(test_dataset), 1000);

  torch::optim::SGD optimizer(model.parameters(),
                              torch::optim::SGDOptions(0.01).momentum(0.5));

  for (size_t epoch = 1; epoch <= epochs; ++epoch) {
    train(epoch, model, device, *train_loader, optimizer, max_batches);
    test(model, device, *test_loader);
  }
  torch::save(model.parameters(), "mnist_model.pt");
  std::printf("Saved mnist_model.pt\n");
}
