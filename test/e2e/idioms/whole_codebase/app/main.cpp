// Trains the shape classifier on one GPU (or the CPU), logs every epoch,
// checkpoints every second one. Usage: shapes_train [batch_size]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "checkpoint.h"
#include "dataset.h"
#include "log.h"
#include "model.h"

namespace {

const int kEpochs = 4;

std::string format_line(const char *format, int epoch, double loss,
                        long long correct, double rate) {
  char text[160];
  std::snprintf(text, sizeof text, format, epoch, loss, correct, rate);
  return text;
}

void train_epoch(Classifier &model, auto &loader,
                 torch::optim::Optimizer &optimizer, torch::Device device,
                 size_t dataset_size, int epoch, Logger &log) {
  model->train();
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t batches = 0; // was printed once; clang: set but not used
  for (auto &batch : loader) {
    torch::Tensor data = batch.data.to(device);
    torch::Tensor target = batch.target.to(device);
    optimizer.zero_grad();
    auto output = model->forward(data);
    auto loss = torch::nll_loss(output, target);
    loss.backward();
    optimizer.step();
    loss_sum += loss.item<double>() * data.size(0);
    correct += output.argmax(1).eq(target).sum().item<int64_t>();
    batches += 1;
  }
  log.line(format_line("epoch %d train_loss %.6f train_correct %lld "
                       "train_acc %.6f",
                       epoch, loss_sum / dataset_size, correct,
                       static_cast<double>(correct) / dataset_size));
}

void evaluate(Classifier &model, auto &loader, size_t dataset_size, int epoch,
              Logger &log) {
  torch::NoGradGuard no_grad;
  model->eval();
  double loss_sum = 0;
  int64_t correct = 0;
  for (const auto &batch : loader) {
    torch::Tensor data = batch.data, target = batch.target;
    if (torch::cuda::is_available()) {
      data = data.cuda();
      target = target.cuda();
    }
    auto output = model->forward(data);
    loss_sum +=
        torch::nll_loss(output, target, /*weight=*/{}, torch::Reduction::Sum)
            .item<double>();
    correct += output.argmax(1).eq(target).sum().item<int64_t>();
  }
  log.line(format_line("epoch %d test_loss %.6f test_correct %lld "
                       "test_acc %.6f",
                       epoch, loss_sum / dataset_size, correct,
                       static_cast<double>(correct) / dataset_size));
}

} // namespace

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::atoll(argv[1]) : 32;
  torch::manual_seed(7);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);

  Classifier model(kFeatures, 32, kClasses);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(0.05).momentum(0.9));

  auto train_set = ShapesDataset(512).map(torch::data::transforms::Stack<>());
  const size_t train_size = train_set.size().value();
  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          std::move(train_set), batch_size);
  auto test_set = ShapesDataset(203).map(torch::data::transforms::Stack<>());
  const size_t test_size = test_set.size().value();
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          std::move(test_set), 64);

  Logger log("train_log.txt");
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    // Reseeded every epoch, so a resumed run shuffles as this one did.
    torch::manual_seed(epoch - 1);
    train_epoch(model, *train_loader, optimizer, device, train_size, epoch,
                log);
    evaluate(model, *test_loader, test_size, epoch, log);
    if (epoch % 2 == 0)
      save_checkpoint(model, optimizer, epoch);
  }
  torch::save(model, "classifier.pt");
  std::printf("done\n");
}
