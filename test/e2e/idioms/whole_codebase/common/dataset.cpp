#include "dataset.h"

ShapesDataset::ShapesDataset(int64_t count) {
  labels_ = torch::randint(kClasses, {count}, torch::kLong);
  features_ = 0.8 * torch::randn({count, kFeatures});
  auto label = labels_.accessor<int64_t, 1>();
  for (int64_t i = 0; i < count; ++i) {
    features_[i][label[i]] += 1.0;
    features_[i][label[i] + 3] += 0.5;
    features_[i][7 - label[i]] -= 0.5;
  }
}

torch::data::Example<> ShapesDataset::get(size_t index) {
  return {features_[index], labels_[index]};
}

torch::optional<size_t> ShapesDataset::size() const { return labels_.size(0); }
