// A loader of the same type made in a macro: it stays torch's, so no other
// unit's spelling of its type may change.
#include "data.h"

#define SEQUENTIAL_LOADER(set, batch)                                          \
  torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(     \
      std::move(set), batch)

double evaluate(torch::nn::Linear &net, torch::optim::SGD &opt) {
  auto loader =
      SEQUENTIAL_LOADER(Blobs().map(torch::data::transforms::Stack<>()), 16);
  return train_epoch(net, opt, *loader);
}
