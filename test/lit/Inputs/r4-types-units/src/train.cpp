#include "data.h"

double
train_epoch(torch::nn::Linear &net, torch::optim::SGD &opt,
            torch::data::StatelessDataLoader<
                BlobSet, torch::data::samplers::SequentialSampler> &loader) {
  double sum = 0;
  for (auto &batch : loader) {
    opt.zero_grad();
    auto loss =
        torch::mse_loss(net->forward(batch.data.cuda()), batch.target.cuda());
    loss.backward();
    opt.step();
    sum += loss.item<double>();
  }
  return sum;
}
