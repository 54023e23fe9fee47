#include "loaders.h"

std::unique_ptr<TrainLoader> make_train_loader() {
  return torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 8);
}
