#include "data.h"

std::unique_ptr<torch::data::StatelessDataLoader<
    BlobSet, torch::data::samplers::SequentialSampler>>
make_loader(int64_t batch) {
  return torch::data::make_data_loader<
      torch::data::samplers::SequentialSampler>(
      Blobs().map(torch::data::transforms::Stack<>()), batch);
}

Session::Session(int64_t batch) : loader(make_loader(batch)) {}
