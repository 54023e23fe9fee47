#include "models.h"

std::unique_ptr<ReadingLoader> make_train_loader(const Readings &data,
                                                 int64_t batch_size) {
  return torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Readings(data).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions(batch_size));
}

void place_model(Mlp &model, const torch::Device &device) { model->to(device); }

PointerTrainer::PointerTrainer(torch::Device device, double lr)
    : device_(device) {
  model_ = new MlpImpl(12);
  model_->to(device_);
  optimizer_ = new torch::optim::SGD(model_->parameters(), lr);
}

PointerTrainer::~PointerTrainer() {
  delete optimizer_;
  delete model_;
}

double PointerTrainer::step(const torch::Tensor &x, const torch::Tensor &y) {
  optimizer_->zero_grad();
  auto loss = torch::mse_loss(model_->forward(x.to(device_)), y.to(device_));
  loss.backward();
  optimizer_->step();
  return loss.item<double>() * x.size(0);
}

torch::Tensor PointerTrainer::predict(const torch::Tensor &x) {
  return model_->forward(x.to(device_));
}
